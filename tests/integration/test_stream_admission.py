"""minOffsetsPerTrigger / maxTriggerDelay against real brokers: a batch waits for enough
records, or for the delay since the previous batch, as Spark's Kafka source does."""

from __future__ import annotations

import time
from datetime import datetime

from test_stream_support import (
    assert_exactly,
    produce,
    stop,
    stream,
    table_name,
    to_memory,
    wait_rows,
)

DELAY_S = 15


def _started(progress: dict) -> float:
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(spark, broker, new_topic, unique_name, tmp_path):
    topic, group, name = new_topic(2), unique_name("g"), table_name(unique_name)
    records = produce(broker.bootstrap, topic, 20, 2)
    q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest",
                         minOffsetsPerTrigger="10", maxTriggerDelay=f"{DELAY_S}s"),
                  name, str(tmp_path / "ck"))
    try:
        wait_rows(spark, name, 20, query=q)  # the first batch of a run is never held
        records += produce(broker.bootstrap, topic, 4, 2, start=20)
        time.sleep(3)
        assert spark.table(name).count() == 20, "4 records < minOffsetsPerTrigger started a batch"
        records += produce(broker.bootstrap, topic, 6, 2, start=24)  # 10 waiting now
        wait_rows(spark, name, 30, timeout=DELAY_S * 2, query=q)
        records += produce(broker.bootstrap, topic, 3, 2, start=30)  # never 10: the delay starts it
        wait_rows(spark, name, 33, timeout=DELAY_S * 4, query=q)
        assert q.exception() is None
        batches = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        stop(q)
    assert [p["numInputRows"] for p in batches] == [20, 10, 3]
    first, enough, late = (_started(p) for p in batches)
    assert enough - first < DELAY_S, "the batch of 10 waited for the delay instead of starting"
    assert late - enough >= DELAY_S - 1, f"the batch of 3 started {late - enough:.1f}s after the previous one"
    assert_exactly(spark, name, records)
