"""Lag from streaming progress captured from real queries (tests/unit/data/progress_*.json:
a groupkafka query with maxOffsetsPerTrigger=8 over 2 partitions of 15 records each, and the
same source in a union with Spark's rate source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

from spark_groupsource.lag import PartitionLag, lag_from_progress

DATA = Path(__file__).parent / "data"


def _load(name: str):
    return json.loads((DATA / name).read_text())


def test_lag_per_partition_and_total_from_captured_progress() -> None:
    first, second = _load("progress_max_offsets.json")
    (lag,) = lag_from_progress(first)
    assert lag.index == 0 and "PythonMicroBatchStream" in lag.description
    assert lag.partitions == (PartitionLag("orders", 0, 4, 15), PartitionLag("orders", 1, 4, 15))
    assert [p.lag for p in lag.partitions] == [11, 11] and lag.total == 22
    (lag,) = lag_from_progress(second)
    assert lag.total == 14  # 30 records, 16 read after two batches of 8


def test_every_progress_form_gives_the_same_answer() -> None:
    raw = _load("progress_max_offsets.json")[0]
    want = lag_from_progress(raw)
    assert lag_from_progress(json.dumps(raw)) == want
    assert lag_from_progress(StreamingQueryProgress.fromJson(raw)) == want
    assert lag_from_progress(StreamingQueryProgress.fromJson(raw).json) == want
    # offsets encoded twice (as some PySpark paths hand them over) decode the same
    twice = {**raw, "sources": [{**s, "endOffset": json.dumps(s["endOffset"]),
                                 "latestOffset": json.dumps(s["latestOffset"])} for s in raw["sources"]]}
    assert lag_from_progress(twice) == want


def test_other_sources_are_skipped() -> None:
    progress = _load("progress_union_with_rate.json")
    assert len(progress["sources"]) == 2
    (lag,) = lag_from_progress(progress)
    assert lag.index == 0 and lag.total == 22


def test_no_latest_offset_means_unknown_not_zero() -> None:
    # a batch replayed after a restart has no latestOffset (observed: "latestOffset": null)
    raw = _load("progress_max_offsets.json")[1]
    raw["sources"][0]["latestOffset"] = None
    (lag,) = lag_from_progress(raw)
    assert not lag.known and lag.total is None and lag.partitions == ()


def test_no_progress_yet() -> None:
    assert lag_from_progress(None) == []
    with pytest.raises(TypeError, match="streaming query progress"):
        lag_from_progress(42)


def test_a_partition_past_latest_counts_zero() -> None:
    assert PartitionLag("t", 0, consumed=10, latest=7).lag == 0
