"""minOffsetsPerTrigger / maxTriggerDelay against real brokers: a batch waits for enough
records, or for the delay since the previous batch, as Spark's Kafka source does."""

from __future__ import annotations

import time
from datetime import datetime

from test_stream_support import (
    QUERY_TIMEOUT_S,
    assert_exactly,
    produce,
    stop,
    stream,
    table_name,
    to_memory,
    wait_rows,
)

from helpers import wait_until


def _started(progress: dict) -> float:
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def _batches(q, rows: int) -> list:
    """The progress of the batches with data, once it accounts for ``rows`` rows: Spark posts a
    batch's progress after its rows are visible in the memory sink (a clean-clone CI run read it
    in between and saw [20, 1] of [20, 1, 2])."""
    def settled() -> list | None:
        batches = [p for p in q.recentProgress if p["numInputRows"]]
        return batches if sum(p["numInputRows"] for p in batches) >= rows else None

    return wait_until(settled, timeout=30, message=f"progress of {rows} rows ({q.recentProgress})")


def test_min_offsets_per_trigger_holds_a_batch_until_enough_records(spark, broker, new_topic, unique_name, tmp_path):
    delay_s = 120  # far longer than the test: every start below is decided by the count
    topic, group, name = new_topic(2), unique_name("g"), table_name(unique_name)
    records = produce(broker.bootstrap, topic, 20, 2)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest",
                         minOffsetsPerTrigger="10", maxTriggerDelay=f"{delay_s}s"),
                  name, str(tmp_path / "ck"))
    try:
        wait_rows(spark, name, 20, query=q)  # the first batch of a run is never held
        records += produce(broker.bootstrap, topic, 4, 2, start=20)
        time.sleep(3)
        assert spark.table(name).count() == 20, "4 records < minOffsetsPerTrigger started a batch"
        records += produce(broker.bootstrap, topic, 6, 2, start=24)  # 10 waiting now
        wait_rows(spark, name, 30, query=q)
        assert q.exception() is None
        batches = _batches(q, 30)
    finally:
        stop(q)
    assert [p["numInputRows"] for p in batches] == [20, 10]
    assert _started(batches[1]) - _started(batches[0]) < delay_s
    assert_exactly(spark, name, records)


def test_max_trigger_delay_starts_a_small_batch(spark, broker, new_topic, unique_name, tmp_path):
    delay_s = 5
    topic, group, name = new_topic(2), unique_name("g"), table_name(unique_name)
    records = produce(broker.bootstrap, topic, 20, 2)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest",
                         minOffsetsPerTrigger="1000", maxTriggerDelay=f"{delay_s}s"),
                  name, str(tmp_path / "ck"))
    try:
        wait_rows(spark, name, 20, query=q)
        records += produce(broker.bootstrap, topic, 3, 2, start=20)  # never 1000: only the delay starts it
        wait_rows(spark, name, 23, query=q)
        assert q.exception() is None
        batches = _batches(q, 23)
    finally:
        stop(q)
    sizes = [p["numInputRows"] for p in batches]
    # the 3 come in one batch, or in two when the delay had already run out while they landed
    # (one partition's record seen before the other's); each batch waited for the delay
    assert sizes[0] == 20 and sum(sizes[1:]) == 3, sizes
    for prev, nxt in zip(batches, batches[1:], strict=False):
        waited = _started(nxt) - _started(prev)
        assert waited >= delay_s - 1, f"a batch of {nxt['numInputRows']} started {waited:.1f}s after the previous one"
    assert_exactly(spark, name, records)


def test_available_now_is_not_held_by_min_offsets(spark, broker, new_topic, unique_name, tmp_path):
    """Trigger.AvailableNow must end at its snapshot, so the minimum does not hold it back
    (PySpark's ReadMinRows leaves this case to the source)."""
    topic, group, name = new_topic(2), unique_name("g"), table_name(unique_name)
    records = produce(broker.bootstrap, topic, 6, 2)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest", minOffsetsPerTrigger="4",
                         maxOffsetsPerTrigger="4", maxTriggerDelay="1h"),
                  name, str(tmp_path / "ck"), available_now=True)
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not finish"
        assert q.exception() is None
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    finally:
        stop(q)
    assert sizes == [4, 2]  # the last 2 (< minOffsetsPerTrigger) are read, not left behind
    assert_exactly(spark, name, records)
