"""The one narrow interface between the group membership and its users: the
membership's protocol (classic or KIP-848) and its client library can change without them.

The stream planner, the commit hook and coordinated backfills see group membership only
through :class:`Membership`: join (``start``) and leave (``close``); a :class:`Snapshot` of owned
partitions with acquisition serials, the generation, rebalancing and revoking state; commits
with a fencing-aware :class:`CommitResult`; committed offsets; the drain hand-shake
(``batch_planned`` / ``batch_completed``); the query's liveness (``polled``). No client library type crosses it.

:class:`OwnershipBook` holds the decisions behind it that need no client: acquisition
serials, what is being revoked, what is in flight, which offsets are kept for a retry. The
classic-protocol member (``membership.GroupMembership``) and the in-memory one
(``memory_member.InMemoryMembership``, for unit tests) share it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from assignment.model import TopicPartition
from spark_groupsource.errors import MembershipError, SecurityError


@dataclass(frozen=True)
class Snapshot:
    """What the planner may rely on right now."""

    generation: int
    member_id: str
    protocol: str | None
    # partition -> acquisition serial (changes each time we newly acquire it)
    owned: Mapping[TopicPartition, int]
    # partitions whose offsets this member may commit (redundant: primaries only)
    committable: frozenset[TopicPartition]
    rebalancing: bool
    revoking: frozenset[TopicPartition]
    # the generation whose assignment ``owned`` comes from: behind ``generation`` once a new
    # JoinGroup is answered and until its assignment arrives (-1: not known; use ``generation``)
    assigned_generation: int = -1

    @property
    def owned_generation(self) -> int:
        return self.assigned_generation if self.assigned_generation >= 0 else self.generation


@dataclass(frozen=True)
class CommitResult:
    committed: frozenset[TopicPartition] = frozenset()
    lost: frozenset[TopicPartition] = frozenset()  # fenced: ownership gone, not retried
    failed: frozenset[TopicPartition] = frozenset()  # other errors: retried with the next batch
    skipped: frozenset[TopicPartition] = frozenset()  # not ours (any more) or not primary
    error: str | None = None


@dataclass(frozen=True)
class MembershipStatus:
    """What the member has reached, and since when (``time.time()`` seconds; None: never).

    Wall time is right here: these are reports for people and dashboards, converted from the
    members' monotonic bookkeeping when asked; no bound or timeout is computed from them."""

    cluster_reached_at: float | None
    coordinator_found_at: float | None  # last time a coordinator became known and connected
    coordinator_missing_since: float | None  # None while a coordinator is known
    assigned_at: float | None  # first completed join (SyncGroup applied)
    stable: bool


@dataclass
class Counters:
    commits: int = 0
    commit_failures: int = 0
    fenced_commits: int = 0
    partitions_lost: int = 0
    rebalances: int = 0
    drain_timeouts: int = 0
    # joins where our configured assignor did not decide (KIP-848 group hosting us)
    broker_assigned_joins: int = 0
    # left the group: a micro-batch in flight longer than kafka.max.poll.interval.ms
    poll_timeouts: int = 0
    # seconds spent in revoke barriers (waiting for the in-flight batch to complete and commit)
    revoke_barrier_s: float = 0.0
    # rebalances as this member lived them (its first join included): from the moment it
    # learnt one began until it held its new assignment (observe_rebalance); monotonic seconds
    rebalance_episodes: int = 0
    rebalance_s: float = 0.0
    last_rebalance_s: float | None = None
    rebalancing_since: float | None = None

    def observe_rebalance(self, rebalancing: bool, now: float) -> None:
        """Fed by the member's loop (and its revoke callback): starts an episode at the first
        sign of a rebalance, ends it at the first turn without one. Per loop turn, not per record."""
        if rebalancing:
            if self.rebalancing_since is None:
                self.rebalancing_since = now
            return
        if self.rebalancing_since is not None:
            took = max(0.0, now - self.rebalancing_since)
            self.rebalancing_since = None
            self.rebalance_episodes += 1
            self.rebalance_s += took
            self.last_rebalance_s = took


class Membership(Protocol):
    """What the planner, the commit hook and backfills may use."""

    counters: Counters

    @property
    def cooperative(self) -> bool: ...

    def start(self) -> None: ...

    def close(self) -> None: ...

    def raise_if_failed(self) -> None: ...

    def snapshot(self) -> Snapshot: ...

    def wait_for_assignment(self, timeout_s: float) -> bool: ...

    def describe(self) -> str: ...

    def status(self) -> MembershipStatus: ...

    def may_plan(self, snap: Snapshot | None = None) -> bool: ...

    def batch_planned(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int]) -> bool: ...

    def batch_completed(self) -> None: ...

    def polled(self, batches: Mapping[str, object] | None = None) -> None:
        """The query planned (Spark's latestOffset): the liveness ``kafka.max.poll.interval.ms``
        bounds (``poll_interval.PollWatch``); a member that left for it rejoins now."""

    def commit(self, offsets: Mapping[TopicPartition, int],
               serials: Mapping[TopicPartition, int] | None = None) -> CommitResult: ...

    def flush_pending(self) -> CommitResult | None: ...

    def pending(self) -> dict[TopicPartition, int]: ...

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]: ...

    def coordinator_silence_s(self) -> float | None:
        """Seconds since the group's coordinator last answered this member (None: not yet)."""


class OwnershipBook:
    """Owned partitions and their acquisition serials, the revocation drain, kept offsets.

    Thread-safe (one condition variable); pure: no client, no I/O.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._owned: dict[TopicPartition, int] = {}
        self._serial = itertools.count(1)
        self._revoking: set[TopicPartition] = set()
        self._inflight: frozenset[TopicPartition] = frozenset()
        # offsets whose commit failed for a non-fencing reason: partition -> (offset, serial)
        self._pending: dict[TopicPartition, tuple[int, int | None]] = {}
        #: told of every change of ownership: (event, partitions, monotonic time) with event
        #: "acquired" (the time taken before the partitions count as ours), "revoked" or "lost"
        #: (taken after they no longer do): a member's history (group/history.py)
        self.observer: Callable[[str, list[TopicPartition], float], None] | None = None

    # ---- ownership ----------------------------------------------------------------------
    def owned(self) -> dict[TopicPartition, int]:
        with self.cond:
            return dict(self._owned)

    def revoking(self) -> frozenset[TopicPartition]:
        with self.cond:
            return frozenset(self._revoking)

    def acquire(self, added: Iterable[TopicPartition]) -> None:
        """A partition newly ours gets a new serial; one we kept keeps its serial."""
        mono = time.monotonic()
        new = []
        with self.cond:
            for tp in added:
                if tp not in self._owned:
                    self._owned[tp] = next(self._serial)
                    new.append(tp)
        self._observe("acquired", new, mono)

    def _observe(self, event: str, partitions: list[TopicPartition], mono: float | None = None) -> None:
        if self.observer is not None:
            self.observer(event, partitions, time.monotonic() if mono is None else mono)

    def begin_revoke(self, revoked: Iterable[TopicPartition]) -> None:
        with self.cond:
            self._revoking |= set(revoked)

    def drain_state(self, revoked: set[TopicPartition]) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """(revoked partitions in the running batch, revoked partitions with kept offsets)."""
        with self.cond:
            return set(self._inflight & revoked), set(self._pending) & revoked

    def finish_revoke(self, revoked: Iterable[TopicPartition]) -> None:
        gone = []
        with self.cond:
            for tp in revoked:
                if self._owned.pop(tp, None) is not None:
                    gone.append(tp)
                self._pending.pop(tp, None)
                self._revoking.discard(tp)
        if gone:
            self._observe("revoked", gone)

    def lose(self, lost: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Drop partitions at once (session expired, fenced); returns those that were owned."""
        with self.cond:
            lost = set(lost)
            gone = [tp for tp in lost if self._owned.pop(tp, None) is not None]
            for tp in lost:
                self._pending.pop(tp, None)
            self._revoking -= lost
        if gone:
            self._observe("lost", gone)
        return gone

    # ---- the drain hand-shake -------------------------------------------------------------
    def batch_planned(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int]) -> bool:
        """Record the batch about to run; False (nothing recorded) when any of its partitions
        is being revoked or is no longer ours since the planner looked: a revocation can
        begin and end while the planner reads offsets, when no batch is in flight to hold it
        (measured on Kafka: an eager member planned a batch over the partitions it had just
        handed to a joiner). Given serials (partition -> acquisition serial at planning), a
        partition lost and acquired again meanwhile counts as no longer ours too."""
        serials = dict(partitions) if isinstance(partitions, Mapping) else None
        parts = frozenset(partitions)
        with self.cond:
            if self._revoking & parts or not parts <= self._owned.keys():
                return False
            if serials is not None and any(self._owned[tp] != s for tp, s in serials.items()):
                return False
            self._inflight = parts
            return True

    def batch_completed(self) -> None:
        with self.cond:
            self._inflight = frozenset()
            self.cond.notify_all()

    # ---- commits ------------------------------------------------------------------------
    def to_commit(
        self, offsets: Mapping[TopicPartition, int], serials: Mapping[TopicPartition, int] | None,
        committable: frozenset[TopicPartition], owned: Mapping[TopicPartition, int],
    ) -> tuple[dict[TopicPartition, int], set[TopicPartition], dict[TopicPartition, tuple[int, int | None]]]:
        """Kept offsets plus new ones, split into (ours to send, skipped, everything considered).

        A partition is sent only while committable and, when a serial is given, still held
        under the acquisition the offset was planned under (never a stale position)."""
        with self.cond:
            todo = dict(self._pending)
        for tp, off in offsets.items():
            todo[tp] = (off, None if serials is None else serials.get(tp, -1))
        mine, skipped = {}, set()
        for tp, (off, serial) in todo.items():
            if tp in committable and (serial is None or owned.get(tp) == serial):
                mine[tp] = off
            else:
                skipped.add(tp)
        return mine, skipped, todo

    def settle(self, done: Iterable[TopicPartition]) -> None:
        with self.cond:
            for tp in done:
                self._pending.pop(tp, None)
            self.cond.notify_all()

    def keep(self, failed: Iterable[TopicPartition], todo: Mapping[TopicPartition, tuple[int, int | None]],
             drop: Iterable[TopicPartition] = ()) -> None:
        """Keep failed offsets for a later try (only while the partition is still ours)."""
        with self.cond:
            for tp in drop:
                self._pending.pop(tp, None)
            for tp in failed:
                if tp in self._owned:
                    self._pending[tp] = todo[tp]
            self.cond.notify_all()

    def pending(self) -> dict[TopicPartition, int]:
        with self.cond:
            return {tp: off for tp, (off, _) in self._pending.items()}

    def has_pending(self) -> bool:
        with self.cond:
            return bool(self._pending)


def raise_failure(error: BaseException | None, group_id: str) -> None:
    """Raise a member's recorded failure for the planner: as it is when it is already a
    :class:`MembershipError`, else wrapped in one that names the group."""
    if isinstance(error, (MembershipError, SecurityError)):
        raise error
    if error is not None:
        raise MembershipError(f"group {group_id!r}: {error}") from error
