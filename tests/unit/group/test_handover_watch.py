"""The KIP-848 member's wait for a batched assignment (Kafka >= 4.3, KIP-1263): pure parts."""

from __future__ import annotations

from spark_groupsource.group.handover_watch import join_grace_s, parse_assignment_interval


def test_join_grace_adds_the_broker_reported_assignment_interval():
    assert join_grace_s(10.0, None) == 10.0  # Kafka 4.0: no batching reported
    assert join_grace_s(10.0, 0) == 10.0
    assert join_grace_s(10.0, 14000) == 24.0
    assert parse_assignment_interval({"consumer.assignment.interval.ms": type("E", (), {"value": "1000"})()}) == 1000
    assert parse_assignment_interval({"consumer.assignment.interval.ms": "abc"}) is None
    assert parse_assignment_interval({}) is None
