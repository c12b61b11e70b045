"""Admission control: the read limits Spark carries and the minOffsetsPerTrigger gate."""

from __future__ import annotations

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from spark_groupsource.planning.admission import (
    Limits,
    MinRowsGate,
    available_records,
    default_read_limit,
    limits_for,
)


def test_default_read_limit() -> None:
    assert default_read_limit(None, None) == ReadAllAvailable()
    assert default_read_limit(10, None) == ReadMaxRows(10)
    assert default_read_limit(None, 5) == ReadMinRows(5)
    # no composite limit for Python sources: the max travels, the min comes from the options
    assert default_read_limit(10, 5) == ReadMaxRows(10)


def test_limits_round_trip_through_spark() -> None:
    for max_o, min_o in [(None, None), (10, None), (None, 5), (10, 5)]:
        assert limits_for(default_read_limit(max_o, min_o), min_o) == Limits(max_o, min_o)


def test_read_all_available_overrides_both() -> None:
    # trigger(once=True) passes ReadAllAvailable whatever the default was
    assert limits_for(ReadAllAvailable(), 5) == Limits()
    assert limits_for(None, 5) == Limits()


def test_available_records() -> None:
    assert available_records({"a": 10, "b": 5}, {"a": 15, "b": 5}) == 5
    assert available_records({"a": 10, "b": 5}, {"a": 12, "b": 9}) == 6
    assert available_records({"a": 10}, {"a": 7}) == 0  # a position past the end counts 0
    assert available_records({"a": 10}, {}) == 0


def test_gate_first_batch_is_never_held() -> None:
    assert MinRowsGate(60_000).admit(1, 100, now_ms=1_000)


def test_gate_holds_until_enough_records() -> None:
    gate = MinRowsGate(60_000)
    assert gate.admit(1, 100, now_ms=0)
    assert not gate.admit(99, 100, now_ms=1_000)
    assert gate.admit(100, 100, now_ms=2_000)
    assert gate.last_start_ms == 2_000
    assert not gate.admit(50, 100, now_ms=61_999)  # 59.999 s since the batch at 2 s


def test_gate_starts_a_small_batch_when_the_delay_has_passed() -> None:
    gate = MinRowsGate(15 * 60_000)
    assert gate.admit(1, 100, now_ms=0)
    assert not gate.admit(3, 100, now_ms=15 * 60_000 - 1)
    assert gate.admit(3, 100, now_ms=15 * 60_000)  # >= the delay, as Spark's delayBatch
    assert not gate.admit(3, 100, now_ms=15 * 60_000 + 1)  # the clock restarted at that batch


def test_gate_zero_delay_never_holds() -> None:
    gate = MinRowsGate(0)
    assert all(gate.admit(1, 100, now_ms=t) for t in range(5))
