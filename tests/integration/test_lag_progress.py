"""The lag helper on a real query's progress: records behind latest per partition and in
total, from the end offsets and reportLatestOffset."""

from __future__ import annotations

from itertools import accumulate

from test_stream_support import QUERY_TIMEOUT_S, produce, stop, stream, table_name, to_memory

from spark_groupsource.lag import lag_from_progress


def test_lag_from_a_rate_limited_query(spark, broker, new_topic, unique_name, tmp_path):
    topic, group, name = new_topic(2), unique_name("g"), table_name(unique_name)
    produce(broker.bootstrap, topic, 30, 2)  # 15 per partition
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest", maxOffsetsPerTrigger="8"),
                  name, str(tmp_path / "ck"), available_now=True)
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not finish"
        assert q.exception() is None
        batches = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        stop(q)
    assert [p["numInputRows"] for p in batches] == [8, 8, 8, 6]
    read = list(accumulate(p["numInputRows"] for p in batches))
    for progress, done in zip(batches, read, strict=True):
        (lag,) = lag_from_progress(progress)
        assert lag.known and lag.total == 30 - done
        assert {(p.topic, p.partition) for p in lag.partitions} == {(topic, 0), (topic, 1)}
        assert all(p.latest == 15 for p in lag.partitions)
        assert sum(p.consumed for p in lag.partitions) == done
