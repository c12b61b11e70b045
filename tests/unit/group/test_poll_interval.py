"""kafka.max.poll.interval.ms for a streaming query's member: when to leave, when to rejoin
(``group.poll_interval``, pure: the tests pass the clock)."""

from __future__ import annotations

from assignment.model import TopicPartition
from spark_groupsource.group.poll_interval import PollWatch, leave_warning, poll_timeout_expired

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_expired_only_with_a_batch_in_flight_past_the_interval():
    assert poll_timeout_expired(None, 0.0, 100.0, 10.0) is None  # nothing in flight: an idle trigger
    assert poll_timeout_expired(0.0, 0.0, 10.0, 10.0) is None  # not past it
    assert poll_timeout_expired(0.0, 0.0, 10.5, 10.0) == 10.5
    assert poll_timeout_expired(0.0, 5.0, 12.0, 10.0) is None  # the query planned since (a retry)
    assert poll_timeout_expired(5.0, None, 16.0, 10.0) == 11.0


def test_a_backfill_never_leaves_the_watch_is_armed_by_the_first_plan():
    w = PollWatch(10.0)
    w.planned(0.0, {T0})  # a coordinated backfill's batch: no polled() ever
    assert w.overdue(1000.0) is None


def test_leaves_once_for_the_overdue_batch_and_rejoins_at_the_next_plan():
    w = PollWatch(10.0)
    planned = {'{"end": 1}': None}
    assert w.polled(0.0, planned) is False
    w.planned(0.1, {T0, T1})
    assert w.overdue(10.0) is None
    late = w.overdue(10.2)
    assert late is not None and late.partitions == {T0, T1} and late.running_s > 10.0
    assert w.batch_name() == '{"end": 1}'
    w.left(10.2)
    assert w.away and w.overdue(50.0) is None  # left already: not again
    assert w.polled(60.0) is True  # the query is back: rejoin
    assert not w.away and w.polled(60.1) is False
    w.completed(60.0)
    assert w.overdue(200.0) is None  # nothing in flight


def test_a_completed_batch_and_a_plan_restart_the_clock():
    w = PollWatch(10.0)
    w.polled(0.0)
    w.planned(0.0, {T0})
    w.completed(9.0)
    w.polled(9.0)
    w.planned(9.0, {T0})
    assert w.overdue(18.0) is None and w.overdue(19.5) is not None


def test_the_warning_names_the_batch_the_partitions_how_long_and_the_option():
    w = PollWatch(8.0)
    w.polled(0.0, {'{"t":{"0":[0,15]}}': None})
    w.planned(0.0, {T1, T0})
    text = leave_warning("g", w.overdue(9.0), w.batch_name(), 8000, "classic")
    for part in ('{"t":{"0":[0,15]}}', "t-0, t-1", "9.0s", "kafka.max.poll.interval.ms=8000", "LeaveGroup",
                 "Raise kafka.max.poll.interval.ms"):
        assert part in text, (part, text)
    assert "epoch -1" in leave_warning("g", w.overdue(9.0), "x", 8000, "consumer")
