"""Where groupkafka differs from Spark's own Kafka source on purpose, asserted as differences,
and the option checks of Spark's suites where both readers must refuse the same options
(docs/conformance.md, "Intended differences").
"""

from __future__ import annotations

import json
import re

import pytest
from conformance.harness import (
    QUERY_TIMEOUT_S,
    SKIP_WITHOUT_SPARK_SOURCE,
    StreamPair,
    assert_both_fail,
    assert_same,
    collect,
    failure_of,
    read_both,
    require_spark_source,
    values,
)
from conformance.kafka_ops import create_topic, send

from helpers import bounded_process_all

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
        bounded_process_all(q, QUERY_TIMEOUT_S, f"{reader}: the query")
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


def test_auto_offset_reset_is_taken(spark, kafka_broker, unique_name, tmp_path):
    """KafkaMicroBatchSourceSuite "unsupported kafka configs": Spark's source refuses
    ``kafka.auto.offset.reset`` (use startingOffsets); groupkafka takes it: it says where a
    partition without a committed offset in the group starts (startingOffsets=group, the
    default). Asserted by what is read: groupkafka with ``kafka.auto.offset.reset=X`` in a fresh
    group reads what Spark's source reads with ``startingOffsets=X``, records already there and
    written after the start; ``none`` fails the query naming the option."""
    require_spark_source(spark)
    bs, topic = kafka_broker.bootstrap, unique_name("reset")
    err = failure_of(lambda: _load(spark, "kafka", bs, {"subscribe": topic, "kafka.auto.offset.reset": "earliest"},
                                   True))
    assert err and "not supported" in err.lower(), err
    create_topic(bs, topic, 3)
    send(bs, topic, ["1", "2", "3", "4", "5", "6"], spread=3)
    before = {"earliest": [str(i) for i in range(1, 7)], "latest": []}
    for reset, already in before.items():
        with StreamPair(spark, bs, tmp_path / reset, {"subscribe": topic},
                        kafka_options={"startingOffsets": reset},
                        gk_options={"kafka.auto.offset.reset": reset}) as pair:
            pair.start().process_all()
            pair.catch_up()
            pair.assert_same(f"{reset}: the records already there", expect_values=already)
            send(bs, topic, [f"{reset}-{i}" for i in range(3)], spread=3)
            pair.catch_up()
            pair.assert_same(f"{reset}: and the records written after the start",
                             expect_values=already + [f"{reset}-{i}" for i in range(3)])
    with StreamPair(spark, bs, tmp_path / "none", {"subscribe": topic}, readers=("groupkafka",),
                    gk_options={"kafka.auto.offset.reset": "none"}) as pair:
        pair.start()
        err = pair.failures_of()["groupkafka"]
    assert err and "kafka.auto.offset.reset" in err, f"groupkafka with kafka.auto.offset.reset=none: {err}"


def test_bad_options_refused_by_both(spark, kafka_broker, unique_name):
    """KafkaMicroBatchSourceSuite "bad source options" and KafkaRelationSuite "bad batch query
    options", on a topic that exists (so that no case passes for a missing topic): each set is
    refused by both readers, at load() or when the query starts (groupkafka refuses an option
    wrong only for the other mode at the start: docs/options.md). Spark's source with the
    message its own test expects, groupkafka with an OptionError naming the option."""
    require_spark_source(spark)
    bs, t = kafka_broker.bootstrap, unique_name("badopts")
    create_topic(bs, t, 1)
    send(bs, t, ["1"], partition=0)
    # (options, Spark's message (its test's, all its parts; Spark 4 says "startingOffsets for
    # t-0" where its older test says "starting offset for t-0"), groupkafka's)
    stream_bad = [
        ({"subscribe": t, "endingOffsets": "latest"}, "Ending offset not valid in streaming queries",
         "option 'endingOffsets'"),
        ({"subscribe": t, "endingOffsetsByTimestamp": json.dumps({t: {"0": 1000}})},
         "Ending timestamp not valid in streaming queries", "option 'endingOffsetsByTimestamp'"),
        ({}, "options must be specified.*subscribe.*subscribePattern", "option 'subscribe'.*subscribePattern"),
        ({"subscribe": t, "subscribePattern": f"{t}.*"}, "only one.*options can be specified",
         "option 'subscribe'.*exactly one"),
        ({"subscribe": ""}, "no topics to subscribe", "option 'subscribe'"),
        ({"subscribePattern": ""}, "pattern to subscribe is empty", "option 'subscribePattern'"),
        ({"subscribe": t, "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
         r"value of minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(15\)",
         r"option 'minOffsetsPerTrigger'.*minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(15\)"),
    ]
    batch_bad = [
        ({"subscribe": t, "startingOffsets": "latest"}, "starting offset can't be latest for batch queries",
         "option 'startingOffsets'.*latest"),
        ({"subscribe": t, "startingOffsets": json.dumps({t: {"0": -1}})},
         rf"starting ?offsets? for {re.escape(t)}-0 can't be latest for batch queries", "option 'startingOffsets'.*-1"),
        ({"subscribe": t, "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries",
         "option 'endingOffsets'.*earliest"),
        ({"subscribe": t, "endingOffsets": json.dumps({t: {"0": -2}})},
         rf"ending ?offsets? for {re.escape(t)}-0 can't be earliest for batch queries", "option 'endingOffsets'.*-2"),
    ]
    wrong = []
    for stream, cases in ((True, stream_bad), (False, batch_bad)):
        for opts, spark_says, gk_says in cases:
            fails = {}
            for reader in ("kafka", "groupkafka"):
                extra = {"kafka.group.id": "g"} if reader == "groupkafka" else {}
                fails[reader] = failure_of(lambda r=reader, o={**opts, **extra}, s=stream: _run(spark, r, bs, o, s))
            try:
                assert_both_fail(fails, {"kafka": spark_says, "groupkafka": gk_says},
                                 f"{'stream' if stream else 'batch'} {opts}")
            except AssertionError as exc:
                wrong.append(str(exc))
    assert not wrong, "\n".join(wrong)
