"""The Python source floor of bench/throughput.py (bench/_floor_source.py): it must read exactly
the rows it plans, in the Kafka sources' Arrow schema, or its figures bound nothing."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from _floor_source import FloorStreamReader  # noqa: E402

from spark_groupsource.schema import arrow_schema  # noqa: E402


def _reader(rows: int, partitions: int = 8, value_size: int = 100, max_rows: int = 250_000) -> FloorStreamReader:
    return FloorStreamReader({"rows": str(rows), "partitions": str(partitions), "valueSize": str(value_size),
                              "maxOffsetsPerTrigger": str(max_rows)})


def _at(n: int, partitions: int = 8) -> dict:
    return _reader(0, partitions)._offset(n)


def _read_all(r: FloorStreamReader, start, end) -> list:
    return [b for p in r.partitions(start, end) for b in r.read(p)]


def test_plans_max_offsets_per_trigger_until_every_row():
    r = _reader(1_000_003, max_rows=250_000)
    start, ends = r.initialOffset(), []
    r.prepareForTriggerAvailableNow()
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        ends.append(sum(end["o"]))
        start = end
    assert ends == [250_000, 500_000, 750_000, 1_000_000, 1_000_003]
    assert r.latestOffset(_at(0), ReadAllAvailable()) == _at(1_000_003)
    assert r.latestOffset(_at(0), ReadMaxRows(10)) == _at(10)


def test_reads_exactly_the_planned_rows_in_the_kafka_schema():
    r = _reader(100_000, partitions=8, value_size=1000)
    parts = r.partitions(_at(25_000), _at(60_001))
    assert len(parts) == 8 and sum(p.rows for p in parts) == 35_001
    batches = _read_all(r, _at(25_000), _at(60_001))
    assert sum(b.num_rows for b in batches) == 35_001
    assert all(b.schema == arrow_schema(False) for b in batches)
    assert all(len(v) == 1000 for v in batches[0].column("value").to_pylist()[:3])


def test_fewer_rows_than_partitions_plans_no_empty_task():
    r = _reader(100, partitions=8)
    parts = r.partitions(_at(0), _at(3))
    assert [p.rows for p in parts] == [1, 1, 1]


def test_a_rate_makes_rows_appear_over_time_from_the_end():
    r = FloorStreamReader({"rate": "1000", "partitions": "1000"})
    start = r.initialOffset()
    assert len(start["o"]) == 1000
    time.sleep(0.05)
    end = r.latestOffset(start, None)
    assert sum(end["o"]) > sum(start["o"])
    assert sum(p.rows for p in r.partitions(start, end)) == sum(end["o"]) - sum(start["o"])
