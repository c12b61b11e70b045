"""Bookkeeping of partitions left out of micro-batches while the cluster cannot answer for them."""

from __future__ import annotations

from assignment.model import TopicPartition
from spark_groupsource.planning.outage import Unavailability

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_timed_from_its_first_miss_and_ends_when_answered() -> None:
    clock = Clock()
    u = Unavailability(bound_s=10, clock=clock)
    u.update({A: "timed out"}, [B])
    clock.now += 6
    u.update({A: "leader not available"}, [B])
    assert u.overdue() == {}
    assert u.away()[A].misses == 2 and u.away()[A].reason == "leader not available"
    clock.now += 5
    assert set(u.overdue()) == {A} and u.age_s(A) == 11
    u.update({}, [A])
    assert u.overdue() == {} and u.away() == {}
    clock.now += 1
    u.update({A: "again"}, [])
    assert u.age_s(A) == 0  # a new stretch starts its own clock


def test_partitions_no_longer_owned_are_not_waited_for() -> None:
    clock = Clock()
    u = Unavailability(bound_s=1, clock=clock)
    u.update({A: "x", B: "y"}, [])
    clock.now += 5
    u.forget([B])
    assert set(u.overdue()) == {B}
    assert u.partitions_left_out == 2
