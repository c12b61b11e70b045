"""spark.read.format("groupkafka") against both dev brokers: offsets, timestamps, splitting,
bad ranges and real data loss."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from chispa import assert_df_equality
from confluent_kafka import Producer
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from helpers import produce_keyed, recreate_topic
from spark_groupsource.backfill import BackfillPlan

COLUMNS = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("ts", LongType()),
    ]
)
BASE_TS = 1_700_000_000_000


def produce(bootstrap, topic, n, partitions, **kw):
    """produce_keyed, ending with one single-record batch per partition.

    The Tansu snapshot reports a partition's end offset as the last batch's base offset + 1,
    so a multi-record last batch hides records from "latest"; a one-record last batch keeps
    the end right (records and their order are the same as one produce_keyed call).
    """
    first = produce_keyed(bootstrap, topic, n - partitions, partitions=partitions, **kw)
    last = produce_keyed(bootstrap, topic, partitions, partitions=partitions, start=n - partitions, **kw)
    return first + last


def read(spark, bootstrap, topic, **options):
    reader = (
        spark.read.format("groupkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def project(df):
    return df.select("key", "value", "topic", "partition", "offset", F.expr("unix_millis(timestamp)").alias("ts"))


def expected(spark, records):
    rows = [(r.key, r.value, r.topic, r.partition, r.offset, r.timestamp) for r in records]
    return spark.createDataFrame(rows, COLUMNS)


def assert_rows(spark, df, records):
    assert_df_equality(project(df), expected(spark, records), ignore_row_order=True, ignore_nullable=True)


def test_reads_earliest_to_latest_by_default(spark, broker, new_topic):
    topic = new_topic(3)
    records = produce(broker.bootstrap, topic, 30, 3, base_timestamp_ms=BASE_TS)
    df = read(spark, broker.bootstrap, topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert_rows(spark, df, records)


def test_json_offsets(spark, broker, new_topic):
    topic = new_topic(2)
    records = produce(broker.bootstrap, topic, 40, 2, base_timestamp_ms=BASE_TS)
    df = read(
        spark, broker.bootstrap, topic,
        startingOffsets=json.dumps({topic: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 12, "1": -1}}),
    )
    want = [r for r in records if (r.partition == 0 and 3 <= r.offset < 12) or r.partition == 1]
    assert_rows(spark, df, want)


def test_timestamps(spark, broker, new_topic):
    topic = new_topic(2)
    records = produce(broker.bootstrap, topic, 40, 2, base_timestamp_ms=BASE_TS)
    df = read(spark, broker.bootstrap, topic, startingTimestamp=str(BASE_TS + 10), endingTimestamp=str(BASE_TS + 31))
    assert_rows(spark, df, [r for r in records if BASE_TS + 10 <= r.timestamp < BASE_TS + 31])
    per_partition = read(
        spark, broker.bootstrap, topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 30, "1": BASE_TS}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 99, "1": BASE_TS + 5}}),
    )
    want = [r for r in records if (r.partition == 0 and r.timestamp >= BASE_TS + 30) or (r.partition == 1 and r.timestamp < BASE_TS + 5)]
    assert_rows(spark, per_partition, want)
    # Past the end: error by default, the end offset with the latest strategy.
    late = {"startingTimestamp": str(BASE_TS + 1000)}
    with pytest.raises(Exception, match="startingTimestamp"):
        read(spark, broker.bootstrap, topic, **late).count()
    assert read(spark, broker.bootstrap, topic, startingOffsetsByTimestampStrategy="latest", **late).count() == 0


def test_large_ranges_split_into_contiguous_tasks(spark, broker, new_topic):
    topic = new_topic(1)
    records = produce(broker.bootstrap, topic, 100, 1, base_timestamp_ms=BASE_TS)
    df = read(spark, broker.bootstrap, topic, maxRecordsPerPartition="30")
    assert df.rdd.getNumPartitions() == 4
    assert_rows(spark, df, records)
    spans = (
        df.groupBy(F.spark_partition_id().alias("task"))
        .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"), F.count("*").alias("n"))
        .orderBy("lo")
        .collect()
    )
    assert [(s.lo, s.hi, s.n) for s in spans] == [(0, 24, 25), (25, 49, 25), (50, 74, 25), (75, 99, 25)]
    by_min = read(spark, broker.bootstrap, topic, minPartitions="6")
    assert by_min.rdd.getNumPartitions() == 6
    assert_rows(spark, by_min, records)


def test_max_partitions_packs_whole_ranges_into_fewer_tasks(spark, broker, new_topic):
    topic = new_topic(5)
    records = produce(broker.bootstrap, topic, 100, 5, base_timestamp_ms=BASE_TS)
    assert read(spark, broker.bootstrap, topic, smallRangesPerTask="1").rdd.getNumPartitions() == 5
    df = read(spark, broker.bootstrap, topic, maxPartitions="2")
    assert df.rdd.getNumPartitions() == 2
    assert_rows(spark, df, records)
    # whole ranges: each partition is read by exactly one task
    seen = df.select("partition", F.spark_partition_id().alias("task")).collect()
    task_of: dict[int, set[int]] = {}
    for row in seen:
        task_of.setdefault(row.partition, set()).add(row.task)
    assert sorted((p, len(t)) for p, t in task_of.items()) == [(p, 1) for p in range(5)]
    # splitting first, then packing: 5 x 20 records cut at 10 -> 10 pieces, packed into 3 tasks
    both = read(spark, broker.bootstrap, topic, maxRecordsPerPartition="10", maxPartitions="3")
    assert both.rdd.getNumPartitions() == 3
    assert_rows(spark, both, records)


def test_small_ranges_share_tasks_by_default(spark, broker, new_topic):
    """Ranges of fewer than 10,000 records share a task, sixteen at most (smallRangesPerTask):
    20 partitions of 5 records read in 2 tasks, each partition by exactly one task, every
    record once; with smallRangesPerTask=1 a task per partition."""
    topic = new_topic(20)
    records = produce(broker.bootstrap, topic, 100, 20, base_timestamp_ms=BASE_TS)
    df = read(spark, broker.bootstrap, topic)
    assert df.rdd.getNumPartitions() == 2
    assert_rows(spark, df, records)
    task_of: dict[int, set[int]] = {}
    for row in df.select("partition", F.spark_partition_id().alias("task")).collect():
        task_of.setdefault(row.partition, set()).add(row.task)
    assert sorted((p, tuple(t)) for p, t in task_of.items()) == [(p, (0 if p < 16 else 1,)) for p in range(20)]
    one_each = read(spark, broker.bootstrap, topic, smallRangesPerTask="1")
    assert one_each.rdd.getNumPartitions() == 20
    assert_rows(spark, one_each, records)


def test_ranges_of_a_few_thousand_records_share_tasks(spark, kafka_broker, unique_name):
    """Ranges under 10,000 records share a task up to 10,000 in all (on Kafka): 5 partitions of
    2,500 records read in 2 tasks (four ranges, then one), every record once."""
    topic = unique_name("fewk")
    kafka_broker.create_topic(topic, 5)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20, "log_level": 3})
    for i in range(12_500):
        producer.produce(topic, value=b"v%d" % i, partition=i % 5)
        producer.poll(0)
    assert producer.flush(60) == 0
    df = read(spark, kafka_broker.bootstrap, topic)
    assert df.rdd.getNumPartitions() == 2
    rows = df.select("partition", "offset", F.spark_partition_id().alias("task")).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(5) for o in range(2500)]
    assert sorted(Counter(r.task for r in rows).values()) == [2500, 10_000]


def test_bad_range_fails_before_reading(spark, broker, new_topic):
    topic = new_topic(1)
    produce(broker.bootstrap, topic, 5, 1)
    with pytest.raises(Exception, match="option 'endingOffsets'.*before its start"):
        read(
            spark, broker.bootstrap, topic,
            startingOffsets=json.dumps({topic: {"0": 4}}), endingOffsets=json.dumps({topic: {"0": 2}}),
        ).collect()
    with pytest.raises(Exception, match="option 'startingOffsets'.*not valid for a batch"):
        read(spark, broker.bootstrap, topic, startingOffsets="latest").collect()


def test_data_loss_when_the_topic_was_recreated(spark, broker, unique_name):
    """Real loss of a topic deleted and re-created behind a resolved plan: the topic is deleted
    on the session's broker (every record gone) and re-created with fewer records; the plan
    resolved before the loss names offsets beyond the new end. (Records deleted below the log
    start, DeleteRecords as retention moves it, are test_conformance_dataloss.py's cases, on
    Apache Kafka.)"""
    if broker.backend == "external":
        pytest.skip("needs an embedded broker whose topics it may delete")
    topic = unique_name("loss")
    broker.create_topic(topic, 2)
    produce(broker.bootstrap, topic, 20, 2)
    plan = BackfillPlan.resolve({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    assert plan.records == 20
    recreate_topic(broker, topic, 2)
    survivors = produce(broker.bootstrap, topic, 4, 2)
    opts = {**plan.read_options(), "kafka.bootstrap.servers": broker.bootstrap}
    with pytest.raises(Exception, match=f"data loss in {topic}-0.*beyond the end offset 2"):
        spark.read.format("groupkafka").options(**opts).load().collect()
    lenient = spark.read.format("groupkafka").options(**opts, failOnDataLoss="false").load()
    assert_rows(spark, lenient, survivors)
