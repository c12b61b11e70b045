"""``subscribePattern`` through Spark: a topic created while the query runs is picked up."""

from __future__ import annotations

from test_stream_support import (
    assert_exactly,
    broker_options,
    process_all,
    produce,
    stop,
    table_name,
    to_memory,
    wait_rows,
)


def test_pattern_query_picks_up_a_new_matching_topic(spark, broker, unique_name, tmp_path):
    """The pattern matches whole topic names (as Spark's Kafka source): ``p_.*`` picks up
    ``p_b`` created later, never ``xp_c``; the new topic is read from its start
    (``kafka.auto.offset.reset=earliest``) once the leader's metadata watch sees it."""
    prefix = unique_name("pat").replace("-", "_")
    first, later, other = f"{prefix}_a", f"{prefix}_b", f"x{prefix}_c"
    broker.create_topic(first, 2)
    name = table_name(unique_name)
    reader = spark.readStream.format("groupkafka").options(
        **{
            "kafka.bootstrap.servers": broker.bootstrap,
            "kafka.group.id": unique_name("g"),
            "subscribePattern": f"{prefix}_.*",
            "kafka.auto.offset.reset": "earliest",
            "kafka.metadata.max.age.ms": "1000",
            **broker_options(broker),
        }
    )
    records = produce(broker.bootstrap, first, 10, 2)
    q = to_memory(reader.load(), name, str(tmp_path / "ck"))
    try:
        process_all(q)
        assert_exactly(spark, name, records)
        broker.create_topic(later, 3)
        broker.create_topic(other, 1)
        records += produce(broker.bootstrap, later, 9, 3)
        produce(broker.bootstrap, other, 4, 1)
        wait_rows(spark, name, len(records), query=q)
        process_all(q)
        assert_exactly(spark, name, records)
        assert q.exception() is None
    finally:
        stop(q)
