"""The steady-state benchmark's arithmetic (bench/steady_state.py): marginal cost as the
difference of a small and a large read, the best of rounds, records per workload, the
sustained rate from Spark's progress."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from steady_state import (  # noqa: E402
    PHASES,
    Sample,
    best_sample,
    limited,
    marginal,
    records_for,
    sustained_rate,
    trigger_phases,
)


class _Reader:
    """What ``limited`` calls of a DataStreamReader: ``option``."""

    def __init__(self) -> None:
        self.options: dict[str, str] = {}

    def option(self, key: str, value: str) -> _Reader:
        self.options[key] = value
        return self


def test_a_trigger_limit_of_zero_leaves_the_read_one_trigger():
    """--max-offsets-per-trigger 0 is issue 27's set-up: no maxOffsetsPerTrigger at all."""
    assert limited(_Reader(), SimpleNamespace(max_offsets_per_trigger=0)).options == {}
    assert limited(_Reader(), SimpleNamespace(max_offsets_per_trigger=250_000)).options == {
        "maxOffsetsPerTrigger": "250000"}


def test_marginal_is_the_difference_of_the_two_reads():
    m = marginal(Sample(100_000, 3.0, 2.0, 0.5), Sample(500_000, 5.0, 6.0, 0.9))
    assert m.records == 400_000
    assert m.rate == pytest.approx(200_000)
    assert m.cpu_per_million == pytest.approx(10.0)
    assert m.cores_busy == pytest.approx(2.0)
    assert m.broker_per_million == pytest.approx(1.0)


def test_marginal_splits_the_cpu_into_jvm_and_python():
    m = marginal(Sample(100_000, 3.0, 2.0, 0.5, 1.5, 0.5), Sample(500_000, 5.0, 6.0, 0.9, 3.5, 2.5))
    assert m.jvm_per_million == pytest.approx(5.0)
    assert m.python_per_million == pytest.approx(5.0)


def test_marginal_counts_the_whole_machine_over_the_same_wall():
    m = marginal(Sample(100_000, 3.0, 2.0, 0.5, machine_cpu=4.0), Sample(500_000, 5.0, 6.0, 0.9, machine_cpu=7.8))
    assert m.machine_busy == pytest.approx(1.9)


def test_best_sample_takes_the_machine_of_its_fastest_round():
    best = best_sample([Sample(10, 3.0, 1.0, 0.2, machine_cpu=5.0), Sample(10, 2.0, 4.0, 0.1, machine_cpu=3.9)])
    assert (best.wall, best.machine_cpu) == (2.0, 3.9)


def test_marginal_needs_the_large_read_to_be_larger():
    with pytest.raises(ValueError):
        marginal(Sample(5, 1.0, 1.0), Sample(5, 2.0, 2.0))


def test_best_sample_takes_least_wall_and_least_cpu_each_on_its_own():
    best = best_sample([Sample(10, 3.0, 1.0, 0.2), Sample(10, 2.0, 4.0, 0.1), Sample(10, 5.0, 2.0, 0.3)])
    assert best == Sample(10, 2.0, 1.0, 0.1)


def test_best_sample_keeps_the_split_of_the_round_of_least_cpu():
    best = best_sample([Sample(10, 3.0, 1.0, 0.2, 0.7, 0.3), Sample(10, 2.0, 4.0, 0.1, 1.0, 3.0)])
    assert (best.cpu, best.jvm_cpu, best.python_cpu) == (1.0, 0.7, 0.3)


def test_best_sample_refuses_mixed_sizes_and_nothing():
    with pytest.raises(ValueError):
        best_sample([Sample(10, 1.0, 1.0), Sample(11, 1.0, 1.0)])
    with pytest.raises(ValueError):
        best_sample([])


def test_records_for_keeps_the_bytes_of_n_at_100_bytes_with_a_floor():
    assert records_for(100, 400_000) == 400_000
    assert records_for(1000, 400_000) == 40_000
    assert records_for(10_000, 400_000) == 20_000


def test_sustained_rate_leaves_out_the_first_batch_with_data():
    progress = [
        {"numInputRows": 0, "timestamp": "2026-11-27T21:00:00.000Z", "durationMs": {"triggerExecution": 50}},
        {"numInputRows": 1000, "timestamp": "2026-11-27T21:00:01.000Z", "durationMs": {"triggerExecution": 9000}},
        {"numInputRows": 500, "timestamp": "2026-11-27T21:00:10.000Z", "durationMs": {"triggerExecution": 1000}},
        {"numInputRows": 700, "timestamp": "2026-11-27T21:00:11.000Z", "durationMs": {"triggerExecution": 1500}},
    ]
    records, busy, batches, wall = sustained_rate(progress)
    assert (records, busy, batches) == (1200, 2.5, 2)
    assert wall == pytest.approx(2.5)  # back to back: the wall is the batches' own time
    assert sustained_rate(progress[:2]) == (0, 0.0, 0, 0.0)


def test_sustained_wall_rate_counts_the_idle_rest_of_each_interval():
    """Batches shorter than the 1 s interval: the stream keeps the interval's pace, not the batches'."""
    progress = [{"numInputRows": 250_000, "timestamp": f"2026-11-27T21:00:0{i}.000Z",
                 "durationMs": {"triggerExecution": 500}} for i in range(4)]
    records, busy, batches, wall = sustained_rate(progress)
    assert (records, batches) == (750_000, 3)
    assert busy == pytest.approx(1.5)
    assert wall == pytest.approx(2.5)  # from 21:00:01 to the end of the batch begun at 21:00:03


def test_trigger_phases_average_the_triggers_with_data_and_keep_the_rest_apart():
    progress = [
        {"numInputRows": 100, "durationMs": {"latestOffset": 10, "walCommit": 40, "queryPlanning": 5,
                                             "addBatch": 300, "commitOffsets": 45, "triggerExecution": 410}},
        {"numInputRows": 100, "durationMs": {"latestOffset": 20, "walCommit": 50, "queryPlanning": 5,
                                             "addBatch": 500, "commitOffsets": 35, "triggerExecution": 630}},
        {"numInputRows": 0, "durationMs": {"latestOffset": 900, "triggerExecution": 900}},  # the last, empty
    ]
    phases = dict(trigger_phases(progress))
    assert list(phases) == [*PHASES, "other", "trigger"]
    assert phases["latestOffset"] == pytest.approx(15)
    assert phases["addBatch"] == pytest.approx(400)
    assert phases["trigger"] == pytest.approx(520)
    assert phases["other"] == pytest.approx(520 - 15 - 45 - 5 - 400 - 40)
    assert trigger_phases(progress[2:]) == ()


def test_best_sample_keeps_the_phases_of_its_fastest_round():
    slow = Sample(10, 3.0, 1.0, 0.2, phases=(("addBatch", 300.0),))
    fast = Sample(10, 2.0, 4.0, 0.1, phases=(("addBatch", 200.0),))
    assert best_sample([slow, fast]).phases == (("addBatch", 200.0),)
