"""A batch DataFrame's plan is made once per ``load()`` in PySpark 4.3, not once per action.

PySpark caches a Python data source's read plan (the reader's ``partitions()`` and its pickled
``read``) on the ``PythonDataSourceV2`` provider that ``load()`` creates, and every later scan of
that DataFrame reuses it (docs/batch-and-backfill.md, "One plan per load()"). So ``latest`` (and
``endingTimestamp``) is resolved at a DataFrame's first action and stays fixed for every further
action on it; Spark's own Kafka source (a V1 relation that resolves offsets in ``buildScan``)
resolves ``latest`` again for every query planned from it (KafkaRelationSuite, "explicit
earliest to latest offsets"). A fresh ``spark.read...load()`` late-binds in both.

This pins what PySpark does. If it fails because the second action saw the new records, PySpark
now plans a Python reader per action: groupkafka then late-binds like Spark's source with no
change of ours (each planning worker builds a fresh reader), and the doc section must change.
"""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from helpers import produce_keyed

N, M = 10, 6


def _reader(spark, fmt, bootstrap, topic):
    return (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")  # the end stays the default: latest
    )


def _offsets(df):
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_latest_is_resolved_once_per_load(spark, kafka_broker, unique_name):
    """N records, one action, M more: every later action on the same DataFrame still reads the
    N (a new plan: count, a projection, a filter, cache), a fresh load() reads N + M."""
    topic = unique_name("perload")
    kafka_broker.create_topic(topic, 2)
    produce_keyed(kafka_broker.bootstrap, topic, N, partitions=2)
    df = _reader(spark, "groupkafka", kafka_broker.bootstrap, topic).load()
    first = _offsets(df)
    assert len(first) == N

    produce_keyed(kafka_broker.bootstrap, topic, M, partitions=2, start=N)
    assert df.count() == N, (
        "the second action on one batch DataFrame saw records written after its first: PySpark "
        "now plans a Python reader per action; update docs/batch-and-backfill.md"
    )
    assert _offsets(df) == first
    assert df.filter(F.col("offset") >= 0).count() == N
    cached = df.cache()
    try:
        assert cached.count() == N
    finally:
        cached.unpersist()

    again = _reader(spark, "groupkafka", kafka_broker.bootstrap, topic).load()
    assert again.count() == N + M
    assert len(_offsets(again)) == N + M


def test_spark_kafka_source_late_binds_per_action(spark, kafka_broker, unique_name):
    """The same scenario on Spark's own format("kafka"), when the session has its jars: the
    second action on the same DataFrame reads N + M (the behaviour groupkafka cannot have)."""
    topic = unique_name("perload-spark")
    kafka_broker.create_topic(topic, 2)
    produce_keyed(kafka_broker.bootstrap, topic, N, partitions=2)
    try:
        df = _reader(spark, "kafka", kafka_broker.bootstrap, topic).load()
    except AnalysisException as exc:
        if "KAFKA_DATA_SOURCE_NOT_ENABLED" not in str(exc):
            raise
        pytest.skip(f"Spark's own Kafka source is not on this session's class path: {exc}")
    assert df.count() == N
    produce_keyed(kafka_broker.bootstrap, topic, M, partitions=2, start=N)
    assert df.count() == N + M
    assert len(_offsets(df)) == N + M
