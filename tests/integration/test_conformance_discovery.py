"""Conformance with Spark's own Kafka source: partitions and topics that appear while a query
runs or is stopped, and batch reads that late-bind ``latest`` (issue 52's cases 1 and 4).

Every test runs the scenario of a Spark test (named in its docstring) on both readers at once on
the main Kafka and passes only where they deliver the same records: docs/conformance.md.
"""

from __future__ import annotations

import json

import pytest
from conformance.harness import (
    MODES,
    SKIP_WITHOUT_SPARK_SOURCE,
    SPARK_OPTIONS_EXTENDED,
    StreamPair,
    assert_same,
    batch_frames,
    collect,
    options_for,
    values,
)
from conformance.kafka_ops import add_partitions, create_topic, delete_topic, send

pytestmark = [SKIP_WITHOUT_SPARK_SOURCE, pytest.mark.kafka39, SPARK_OPTIONS_EXTENDED]  # also on Kafka 3.9.1 (make test-compat)

BOTH = pytest.mark.parametrize("mode", MODES)
#: With default options groupkafka sees a new partition or topic at its member's next metadata
#: refresh (10 s unless kafka.metadata.max.age.ms says: config/client_configs.py
#: MEMBER_METADATA_MAX_AGE_MS; Java's 5 minutes made these cases wait past Spark's 30 s).
LATE_DISCOVERY = BOTH

#: What Spark's KafkaSourceSuiteBase sets on every stream of testFromLatestOffsets & co.
LATEST_SPARK_OPTIONS = {"startingOffsets": "latest", "kafka.metadata.max.age.ms": "1", "failOnDataLoss": "false"}


@LATE_DISCOVERY
def test_subscribe_from_latest_with_added_partitions(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite (KafkaSourceSuiteBase) "subscribing topic by name from latest
    offsets (failOnDataLoss: false)", testFromLatestOffsets with addPartitions: a stream from
    latest; records while it runs, while it is stopped, then the topic grows from 5 to 10
    partitions and records go into old and new partitions: all must be read. Also "(de)serialization
    of initial offsets" (stop and start before any record)."""
    bs, topic = kafka_broker.bootstrap, unique_name("latest")
    create_topic(bs, topic, 5)
    send(bs, topic, ["-1"])
    opts = options_for(mode, {"subscribe": topic}, LATEST_SPARK_OPTIONS)
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()  # makeSureGetOffsetCalled
        pair.restart().process_all()  # (de)serialization of initial offsets
        send(bs, topic, ["1", "2", "3"], spread=5)
        pair.catch_up()
        pair.assert_same("first records", expect_values=["1", "2", "3"])
        pair.restart().process_all()
        pair.assert_same("after a restart")
        pair.stop()
        send(bs, topic, ["4", "5", "6"], spread=5)  # while stopped
        pair.start()
        pair.catch_up()
        pair.assert_same("written while stopped", expect_values=[str(i) for i in range(1, 7)])
        send(bs, topic, ["7", "8"], spread=5)
        pair.catch_up()
        add_partitions(bs, topic, 10)
        # 9..16: five into the new partitions 5-9, three into old ones
        send(bs, topic, [str(i) for i in range(9, 17)], partitions=[5, 6, 7, 8, 9, 0, 1, 2])
        pair.catch_up()
        pair.assert_same("after the topic grew to 10 partitions", expect_values=[str(i) for i in range(1, 17)])


@BOTH
def test_partitions_added_while_stopped(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite (KafkaSourceSuiteBase) testFromLatestOffsets' "Add data when
    stream is stopped" step with its "Add partitions" step while stopped: the restart from the
    checkpoint must read the records written into the partitions added meanwhile."""
    bs, topic = kafka_broker.bootstrap, unique_name("stopped")
    create_topic(bs, topic, 5)
    opts = options_for(mode, {"subscribe": topic}, LATEST_SPARK_OPTIONS)
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        send(bs, topic, ["1", "2", "3"], spread=5)
        pair.catch_up()
        pair.stop()
        add_partitions(bs, topic, 8)
        send(bs, topic, ["4", "5", "6", "7"], partitions=[5, 6, 7, 0])
        pair.start()
        pair.catch_up()
        pair.assert_same("partitions added while stopped", expect_values=[str(i) for i in range(1, 8)])


@LATE_DISCOVERY
def test_pattern_picks_up_new_topic(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaSourceStressSuite "stress test with multiple topics and partitions", its "Add a new
    topic" action (subscribePattern, from latest): records written right after a matching topic
    is created must be read."""
    bs, prefix = kafka_broker.bootstrap, unique_name("stress")
    first = f"{prefix}-a"
    create_topic(bs, first, 2)
    send(bs, first, ["101", "102"], spread=2)
    opts = options_for(mode, {"subscribePattern": f"{prefix}-.*"},
                       {"kafka.metadata.max.age.ms": "1", "failOnDataLoss": "false",
                        "kafka.request.timeout.ms": "3000"})
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        send(bs, first, ["1", "2"], spread=2)
        pair.catch_up()
        second = f"{prefix}-b"
        create_topic(bs, second, 3)
        send(bs, second, ["3", "4", "5"], spread=3)
        pair.catch_up()
        pair.assert_same("a new topic matching the pattern", expect_values=["1", "2", "3", "4", "5"])


@LATE_DISCOVERY
def test_pattern_with_topic_deletions(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite "subscribing topic by pattern with topic deletions": the one
    matching topic is deleted and another matching topic created; its records must be read
    (failOnDataLoss=false, which the Spark test sets and this scenario needs in both modes:
    a deleted topic is data loss to both readers)."""
    bs, prefix = kafka_broker.bootstrap, unique_name("pattern")
    topic, topic2 = f"{prefix}-seems", f"{prefix}-bad"
    create_topic(bs, topic, 5)
    send(bs, topic, ["-1"])
    opts = options_for(mode, {"subscribePattern": f"{prefix}-.*", "failOnDataLoss": "false"},
                       {"kafka.metadata.max.age.ms": "1", "kafka.request.timeout.ms": "3000"})
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        send(bs, topic, ["1", "2", "3"], spread=5)
        pair.catch_up()
        pair.assert_same("before the deletion", expect_values=["1", "2", "3"])
        pair.process_all()  # AddKafkaData: no Spark job runs while the topic goes
        delete_topic(bs, topic)
        create_topic(bs, topic2, 5)
        send(bs, topic2, ["4", "5", "6"], spread=5)
        pair.catch_up()
        pair.assert_same("after the deletion", expect_values=[str(i) for i in range(1, 7)])


def _late_binding(spark, bs, opts, first_values, write_more, want_values):
    """One DataFrame per reader collected, more records, collected again; then a fresh load().
    Spark's source late-binds on the same DataFrame; groupkafka keeps the first plan (PySpark
    plans a Python data source's read once per load(): docs/batch-and-backfill.md, "One plan per
    load()"), an intended difference; a fresh load() reads the same on both."""
    frames = batch_frames(spark, bs, opts)
    first = {r: collect(df) for r, df in frames.items()}
    assert values(first["kafka"]) == sorted(first_values)
    assert_same(first, "first collect")
    write_more()
    again = {r: collect(df) for r, df in frames.items()}
    assert values(again["kafka"]) == sorted(want_values), "Spark's source late-binds latest"
    assert sorted(again["groupkafka"], key=lambda r: r.where) == sorted(first["groupkafka"], key=lambda r: r.where), (
        "groupkafka's DataFrame read other records on its second action: PySpark now plans per action; "
        "update docs/conformance.md and docs/batch-and-backfill.md")
    fresh = {r: collect(df) for r, df in batch_frames(spark, bs, opts).items()}
    assert_same(fresh, "a fresh load() after the new records")
    assert values(fresh["kafka"]) == sorted(want_values)


@BOTH
def test_batch_latest_late_binds(spark, kafka_broker, unique_name, mode):
    """KafkaRelationSuite "explicit earliest to latest offsets": "latest should late bind to the
    current (latest) offset in the df": one DataFrame collected twice, records written between.
    Intended difference (see :func:`_late_binding`)."""
    bs, topic = kafka_broker.bootstrap, unique_name("relation")
    create_topic(bs, topic, 3)
    send(bs, topic, [str(i) for i in range(10)], partition=0)
    send(bs, topic, [str(i) for i in range(10, 20)], partition=1)
    send(bs, topic, ["20"], partition=2)
    opts = options_for(mode, {"subscribe": topic}, {"startingOffsets": "earliest", "endingOffsets": "latest"})
    _late_binding(spark, bs, opts, [str(i) for i in range(21)],
                  lambda: send(bs, topic, [str(i) for i in range(21, 30)], partition=2),
                  [str(i) for i in range(30)])


def test_batch_explicit_offsets_late_bind(spark, kafka_broker, unique_name):
    """KafkaRelationSuite "explicit offsets": JSON starting/ending offsets; the partition ending
    at an explicit offset stays, the ones ending at -1 (latest) late-bind on the next collect on
    Spark's source (intended difference, see :func:`_late_binding`). Only meaningful with its
    explicit offsets: one mode."""
    bs, topic = kafka_broker.bootstrap, unique_name("explicit")
    create_topic(bs, topic, 3)
    send(bs, topic, [str(i) for i in range(10)], partition=0)
    send(bs, topic, [str(i) for i in range(10, 20)], partition=1)
    send(bs, topic, ["20"], partition=2)
    opts = {"subscribe": topic,
            "startingOffsets": json.dumps({topic: {"0": -2, "1": -2, "2": 0}}),
            "endingOffsets": json.dumps({topic: {"0": -1, "1": -1, "2": 1}})}

    def more():
        send(bs, topic, [str(i) for i in range(31, 40)], partition=2)  # past partition 2's fixed end
        send(bs, topic, [str(i) for i in range(21, 31)], partition=1)  # partition 1 ends at latest

    _late_binding(spark, bs, opts, [str(i) for i in range(21)], more, [str(i) for i in range(31)])


def test_partitions_added_before_the_first_batch(spark, kafka_broker, unique_name, tmp_path):
    """The stress port's finding, made deterministic (KafkaSourceStressSuite's stop right after
    makeSureGetOffsetCalled, then "Add partitions" and data while stopped): a query from latest
    starts and stops before any record arrives; the topic grows from 2 to 4 partitions and
    records go into the new ones; after the restart Spark's source reads them (its initial
    offsets are in its checkpoint from the first start); groupkafka too (batch 0, which Spark
    logs even when it reads nothing, carries the partition counts the query began with)."""
    bs, topic = kafka_broker.bootstrap, unique_name("first")
    create_topic(bs, topic, 2)
    send(bs, topic, ["-1"], partition=0)
    with StreamPair(spark, bs, tmp_path, {"subscribe": topic, "startingOffsets": "latest"}) as pair:
        pair.start().process_all()
        pair.stop()
        add_partitions(bs, topic, 4)
        send(bs, topic, ["1", "2"], partitions=[2, 3])
        pair.start()
        pair.catch_up()
        pair.assert_same("partitions added before the first batch", expect_values=["1", "2"])
