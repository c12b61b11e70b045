"""One streaming query over a group: every record exactly once, committed offsets = processed."""

from __future__ import annotations

from test_stream_support import (
    QUERY_TIMEOUT_S,
    assert_exactly,
    ends,
    process_all,
    produce,
    stop,
    stream,
    table_name,
    to_memory,
    wait_committed,
)

from helpers import committed_offsets


def test_available_now_reads_everything_once_and_commits(spark, broker, new_topic, unique_name, tmp_path):
    topic, group, name = new_topic(4), unique_name("g"), table_name(unique_name)
    records = produce(broker.bootstrap, topic, 60, 4)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest"), name,
                  str(tmp_path / "ck"), available_now=True)
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not finish"
        assert q.exception() is None
        assert_exactly(spark, name, records)
        assert committed_offsets(broker.bootstrap, group, topic, 4) == ends(records) == {p: 15 for p in range(4)}
    finally:
        stop(q)


def test_processing_time_reads_new_records_exactly_once(spark, broker, new_topic, unique_name, tmp_path):
    topic, group, name = new_topic(3), unique_name("g"), table_name(unique_name)
    first = produce(broker.bootstrap, topic, 30, 3)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest"), name, str(tmp_path / "ck"))
    try:
        process_all(q)
        assert_exactly(spark, name, first)
        second = produce(broker.bootstrap, topic, 45, 3, start=30)
        process_all(q)
        assert_exactly(spark, name, first + second)
        # the last batch is committed once the next latestOffset call confirms it completed
        wait_committed(broker, group, topic, ends(first + second))
        assert q.exception() is None
    finally:
        stop(q)


def test_packed_tasks_read_every_partition_exactly_once(spark, broker, new_topic, unique_name, tmp_path):
    """maxPartitions=2 over 5 partitions: a micro-batch's ranges are packed into 2 tasks (one
    reads three partitions one after the other); nothing lost or doubled, the commits land."""
    topic, group, name = new_topic(5), unique_name("g"), table_name(unique_name)
    first = produce(broker.bootstrap, topic, 50, 5)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest", maxPartitions="2",
                         maxOffsetsPerTrigger="35"), name, str(tmp_path / "ck"))
    try:
        process_all(q)
        second = produce(broker.bootstrap, topic, 25, 5, start=50)
        process_all(q)
        assert_exactly(spark, name, first + second)
        wait_committed(broker, group, topic, ends(first + second))
        with_data = [p for p in q.recentProgress if p["numInputRows"]]
        assert len(with_data) >= 3  # maxOffsetsPerTrigger cut the backlog into several batches
        assert q.exception() is None
    finally:
        stop(q)
