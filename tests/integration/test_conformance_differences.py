"""Where groupkafka differs from Spark's own Kafka source on purpose, asserted as differences,
and the option checks of Spark's suites where both readers must refuse the same options
(docs/conformance.md, "Intended differences").
"""

from __future__ import annotations

import json

import pytest
from conformance.harness import (
    SKIP_WITHOUT_SPARK_SOURCE,
    StreamPair,
    assert_same,
    collect,
    failure_of,
    read_both,
    require_spark_source,
    values,
)
from conformance.kafka_ops import create_topic, send

pytestmark = [SKIP_WITHOUT_SPARK_SOURCE, pytest.mark.kafka39]  # also on Kafka 3.9.1 (make test-compat)

def _load(spark, reader, bs, opts, stream):
    src = spark.readStream if stream else spark.read
    return src.format(reader).options(**{"kafka.bootstrap.servers": bs, **opts}).load()


def _run(spark, reader, bs, opts, stream):
    """load(), and for a batch read collect it, for a stream start a query (to a noop sink) and
    process what is there: an option wrong for one mode only is refused when the query starts
    (a Python data source cannot tell the modes apart at load(): docs/options.md)."""
    df = _load(spark, reader, bs, opts, stream)
    if not stream:
        df.collect()
        return
    q = df.writeStream.format("noop").start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()


def test_assign_is_refused(spark, kafka_broker, unique_name, tmp_path):
    """KafkaMicroBatchSourceSuite "assign from earliest offsets (failOnDataLoss: true)": Spark's
    source reads the partitions named by ``assign``; groupkafka refuses ``assign`` at load() (the
    group decides which partitions a member reads), naming the option, for streams and batch
    reads. With ``subscribe`` instead, both read the same records."""
    require_spark_source(spark)
    bs, topic = kafka_broker.bootstrap, unique_name("assign")
    create_topic(bs, topic, 5)
    send(bs, topic, ["1", "2", "3"], spread=5)
    assign = {"assign": json.dumps({topic: [0, 1, 2, 3, 4]}), "startingOffsets": "earliest"}
    assert values(collect(_load(spark, "kafka", bs, assign, False))) == ["1", "2", "3"]
    for stream in (False, True):
        err = failure_of(lambda s=stream: _load(spark, "groupkafka", bs, {**assign, "kafka.group.id": "g"}, s))
        assert err and "assign" in err, f"groupkafka accepted assign (stream={stream}): {err}"
    with StreamPair(spark, bs, tmp_path, {"subscribe": topic, "startingOffsets": "earliest"}) as pair:
        pair.start({"availableNow": True}).await_end()
        pair.assert_same("subscribe instead of assign", expect_values=["1", "2", "3"])


def test_stream_needs_a_group_id(spark, kafka_broker, unique_name):
    """KafkaMicroBatchSourceSuite "allow group.id override": Spark's source takes
    ``kafka.group.id`` optionally (it makes one up otherwise); groupkafka's driver joins that
    group, so a stream without it fails when the query starts (load() cannot tell a stream from
    a batch read: docs/options.md), naming the option. Batch reads need none on either reader."""
    require_spark_source(spark)
    bs, topic = kafka_broker.bootstrap, unique_name("nogroup")
    create_topic(bs, topic, 1)
    send(bs, topic, ["1"], partition=0)
    assert failure_of(lambda: _run(spark, "kafka", bs, {"subscribe": topic}, True)) is None
    err = failure_of(lambda: _run(spark, "groupkafka", bs, {"subscribe": topic}, True))
    assert err and "kafka.group.id" in err, err
    got = read_both(spark, bs, {"subscribe": topic})
    assert_same(got, "batch without a group id")


def test_auto_offset_reset_is_taken(spark, kafka_broker, unique_name):
    """KafkaMicroBatchSourceSuite "unsupported kafka configs": Spark's source refuses
    ``kafka.auto.offset.reset`` (use startingOffsets); groupkafka takes it: it says where a
    partition without a committed offset in the group starts."""
    require_spark_source(spark)
    bs = kafka_broker.bootstrap
    opts = {"subscribe": "t", "kafka.auto.offset.reset": "earliest", "kafka.group.id": "g"}
    err = failure_of(lambda: _load(spark, "kafka", bs, opts, True))
    assert err and "not supported" in err.lower(), err
    assert failure_of(lambda: _load(spark, "groupkafka", bs, opts, True)) is None


def test_bad_options_refused_by_both(spark, kafka_broker):
    """KafkaMicroBatchSourceSuite "bad source options" and KafkaRelationSuite "bad batch query
    options": each set is refused by both readers, at load() or when the query starts
    (groupkafka refuses an option wrong only for the other mode at the start: docs/options.md;
    its messages are its own)."""
    require_spark_source(spark)
    bs = kafka_broker.bootstrap
    stream_bad = [
        {"subscribe": "t", "endingOffsets": "latest"},
        {"subscribe": "t", "endingOffsetsByTimestamp": json.dumps({"t": {"0": 1000}})},
        {},
        {"subscribe": "t", "subscribePattern": "t.*"},
        {"subscribe": ""},
        {"subscribePattern": ""},
        {"subscribe": "t", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
    ]
    batch_bad = [
        {"subscribe": "t", "startingOffsets": "latest"},
        {"subscribe": "t", "startingOffsets": json.dumps({"t": {"0": -1}})},
        {"subscribe": "t", "endingOffsets": "earliest"},
        {"subscribe": "t", "endingOffsets": json.dumps({"t": {"0": -2}})},
    ]
    accepted = []
    for stream, cases in ((True, stream_bad), (False, batch_bad)):
        for opts in cases:
            for reader in ("kafka", "groupkafka"):
                extra = {"kafka.group.id": "g"} if reader == "groupkafka" else {}
                if failure_of(lambda r=reader, o={**opts, **extra}, s=stream: _run(spark, r, bs, o, s)) is None:
                    accepted.append((reader, "stream" if stream else "batch", opts))
    assert not accepted, f"accepted by a reader: {accepted}"
