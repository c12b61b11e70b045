"""``kafka.max.poll.interval.ms`` for a streaming query's member, as the Java consumer means it.

The Java consumer leaves its group when the application has not called ``poll()`` within
``max.poll.interval.ms`` (its heartbeat thread: ``maybeLeaveGroup("consumer poll timeout has
expired")``), so that another member takes its partitions. Our member heartbeats from its own
thread whatever the query does; the query's ``poll()`` is Spark's ``latestOffset`` call reaching
``StreamDriver.plan``, told to the member with ``polled()``, and a micro-batch in flight is what
the query is busy with. So: when a micro-batch has been in flight for longer than the interval
with no plan and no completed batch since, the member leaves the group (its partitions are dropped
from planning first, so the late batch's commit is refused), and it rejoins at the next plan.

:class:`PollWatch` is the decision, pure (the caller passes the clock, the members do the I/O).
It is armed by the first ``polled()``: a coordinated backfill, which never calls it, holds its
members for as long as its batch job runs, as before. A member with no batch in flight never
leaves (a trigger interval longer than ``max.poll.interval.ms`` reads nothing meanwhile, and
holds nothing up that it would read).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignment.model import TopicPartition


def poll_timeout_expired(inflight_since: float | None, last_call: float | None, now: float,
                         interval_s: float) -> float | None:
    """How long the query has been away (seconds) when that is longer than ``interval_s`` with a
    batch in flight since ``inflight_since``; None otherwise. ``last_call``: the last plan or
    batch completion (None: never)."""
    if inflight_since is None:
        return None
    quiet = now - max(inflight_since, last_call if last_call is not None else inflight_since)
    return quiet if quiet > interval_s else None


@dataclass(frozen=True)
class Overdue:
    """The batch in flight for longer than the interval, for the leave and its warning."""

    partitions: frozenset[TopicPartition]
    running_s: float  # since it was planned
    quiet_s: float  # since the last plan or batch completion


class PollWatch:
    """When to leave for ``max.poll.interval.ms``, and when to rejoin (thread-safe, no I/O)."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._armed = False
        self._last: float | None = None
        self._inflight: frozenset[TopicPartition] = frozenset()
        self._inflight_since: float | None = None
        self._left_at: float | None = None
        self._batches: Mapping[str, object] | None = None
        self.leaves = 0

    def polled(self, now: float, batches: Mapping[str, object] | None = None) -> bool:
        """The query planned (``latestOffset``); True when the member left for the interval and
        must rejoin now. ``batches``: the planner's batches in flight by end offsets, read only
        to name the one overdue."""
        with self._lock:
            self._armed = True
            self._last = now
            if batches is not None:
                self._batches = batches
            if self._left_at is None:
                return False
            self._left_at = None
            return True

    def planned(self, now: float, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._inflight = frozenset(partitions)
            self._inflight_since = now

    def completed(self, now: float) -> None:
        with self._lock:
            self._inflight, self._inflight_since = frozenset(), None
            self._last = now

    @property
    def away(self) -> bool:
        """Left for the interval and the query has not planned since."""
        with self._lock:
            return self._left_at is not None

    def overdue(self, now: float) -> Overdue | None:
        """The batch to leave for, once armed and not left already."""
        with self._lock:
            if not self._armed or self._left_at is not None:
                return None
            quiet = poll_timeout_expired(self._inflight_since, self._last, now, self.interval_s)
            if quiet is None:
                return None
            return Overdue(self._inflight, now - self._inflight_since, quiet)

    def left(self, now: float) -> None:
        with self._lock:
            self._left_at = now
            self.leaves += 1

    def batch_name(self) -> str:
        """The end offsets of the batch planned last (the one in flight), or "unknown"."""
        try:
            batches = self._batches
            return str(next(reversed(batches))) if batches else "unknown"
        except Exception:  # noqa: BLE001 - only a name for a warning (the dict may be changing)
            return "unknown"


def leave_warning(group_id: str, overdue: Overdue, batch: str, interval_ms: int, protocol: str) -> str:
    """The WARNING a member logs when it leaves for the interval."""
    parts = ", ".join(sorted(map(str, overdue.partitions))) or "none"
    how = "LeaveGroup" if protocol == "classic" else "a heartbeat with member epoch -1"
    return (
        f"group {group_id}: the micro-batch ending at {batch} (partitions {parts}) has run for "
        f"{overdue.running_s:.1f}s, and the query has not planned for {overdue.quiet_s:.1f}s, longer than "
        f"kafka.max.poll.interval.ms={interval_ms}: this member leaves the group ({how}) so that other "
        "members take its partitions, as the Java consumer does when poll() is not called in time. "
        "The batch's commit will be refused (at most this batch is read twice); the member rejoins when "
        "the query plans again. Raise kafka.max.poll.interval.ms if micro-batches legitimately take longer."
    )
