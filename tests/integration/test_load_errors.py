"""Bad options fail at ``load()`` in a real Spark session, with our OptionError as the last
line of the Python traceback Spark shows (not PySpark's own UnboundLocalError), for
streaming and batch; what is wrong only for the other mode fails when the query starts."""

from __future__ import annotations

import pytest

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.group.id": "g", "subscribe": "t"}


def _last_python_line(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip() and not ln.strip().startswith("SQLSTATE")]
    return lines[-1]


def _reader(spark, mode: str):
    return (spark.readStream if mode == "stream" else spark.read).format("groupkafka")


@pytest.mark.parametrize("mode", ["stream", "batch"])
@pytest.mark.parametrize(
    ("options", "option", "text"),
    [
        ({"startingOffset": "earliest"}, "startingoffset", "did you mean startingOffsets?"),
        ({"assignor": "nope"}, "assignor", "nope"),
        ({"startingOffsets": '{"t":{"0":'}, "startingOffsets", "expected"),
        ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger", "positive integer"),
        ({"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "3"}, "minOffsetsPerTrigger",
         "The value of minOffsetPerTrigger(9) is higher than the maxOffsetsPerTrigger(3)."),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay", "E.g. 50s, 100ms, or 250us"),
        # security options one of the two Kafka clients cannot honour (issue 17)
        ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER"}, "kafka.sasl.mechanism",
         "GSSAPI and OAUTHBEARER are not supported"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/nonexistent/ts.jks"},
         "kafka.ssl.truststore.location", "cannot read '/nonexistent/ts.jks' on the driver"),
        ({"kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                    'username="u" password="s3cret-never-shown";'},
         "kafka.sasl.jaas.config", "SASL settings need kafka.security.protocol=SASL_SSL"),
    ],
)
def test_bad_option_fails_at_load(spark, mode, options, option, text):
    reader = _reader(spark, mode).options(**BASE, **options)
    with pytest.raises(Exception) as info:  # noqa: B017 - PySpark wraps it; the message is checked
        reader.load()
    message = str(info.value)
    last = _last_python_line(message)
    assert last.startswith(f"spark_groupsource.errors.OptionError: option '{option}'"), message[-2000:]
    assert text in last
    assert "UnboundLocalError" not in message
    assert "s3cret-never-shown" not in message


def test_stream_only_wrong_for_streams_fails_at_start_with_our_error(spark, tmp_path):
    df = _reader(spark, "stream").options(**BASE, endingOffsets="latest").load()  # valid for spark.read
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        with pytest.raises(Exception) as info:  # noqa: B017
            q.awaitTermination(120)
    finally:
        q.stop()
    message = str(info.value)
    assert "spark_groupsource.errors.OptionError: option 'endingOffsets': only applies to batch queries" in message
    assert "UnboundLocalError" not in message


def test_batch_only_wrong_for_batch_fails_before_reading(spark):
    df = _reader(spark, "batch").options(**BASE, startingOffsets="latest").load()  # valid for a stream
    with pytest.raises(Exception) as info:  # noqa: B017
        df.collect()
    message = str(info.value)
    assert "spark_groupsource.errors.OptionError: option 'startingOffsets'" in message
    assert "UnboundLocalError" not in message
