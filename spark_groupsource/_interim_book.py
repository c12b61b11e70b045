"""INTERIM, delete at merge: the KIP-848 member's bookkeeping until ``group_seam`` lands.

The ``membership`` branch (issue #11) moves the classic member's pure bookkeeping (acquisition
serials, revocation drain, in-flight batch, kept offsets) into ``group_seam.OwnershipBook``.
That branch is not on main yet, and on main the logic lives inside ``GroupMembership``, so
``consumer_member`` needs this class with exactly ``OwnershipBook``'s methods. At merge:
delete this file and import ``OwnershipBook`` from ``spark_groupsource.group_seam`` in
``consumer_member.py`` (one line).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping

from assignment.model import TopicPartition

_Kept = dict[TopicPartition, tuple[int, int | None]]


class OwnershipBook:
    """Owned partitions with serials, the drain, kept offsets. Thread-safe, no I/O."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._owned: dict[TopicPartition, int] = {}
        self._serial = itertools.count(1)
        self._revoking: set[TopicPartition] = set()
        self._inflight: frozenset[TopicPartition] = frozenset()
        self._pending: _Kept = {}

    def owned(self) -> dict[TopicPartition, int]:
        with self.cond:
            return dict(self._owned)

    def revoking(self) -> frozenset[TopicPartition]:
        with self.cond:
            return frozenset(self._revoking)

    def acquire(self, added: Iterable[TopicPartition]) -> None:
        with self.cond:
            for tp in added:
                self._owned.setdefault(tp, next(self._serial))

    def begin_revoke(self, revoked: Iterable[TopicPartition]) -> None:
        with self.cond:
            self._revoking |= set(revoked)

    def drain_state(self, revoked: set[TopicPartition]) -> tuple[set[TopicPartition], set[TopicPartition]]:
        with self.cond:
            return set(self._inflight & revoked), set(self._pending) & revoked

    def finish_revoke(self, revoked: Iterable[TopicPartition]) -> None:
        with self.cond:
            for tp in revoked:
                self._owned.pop(tp, None)
                self._pending.pop(tp, None)
                self._revoking.discard(tp)

    def lose(self, lost: Iterable[TopicPartition]) -> list[TopicPartition]:
        with self.cond:
            lost = set(lost)
            gone = [tp for tp in lost if self._owned.pop(tp, None) is not None]
            for tp in lost:
                self._pending.pop(tp, None)
            self._revoking -= lost
            return gone

    def batch_planned(self, partitions: Iterable[TopicPartition]) -> bool:
        parts = frozenset(partitions)
        with self.cond:
            if self._revoking & parts:
                return False
            self._inflight = parts
            return True

    def batch_completed(self) -> None:
        with self.cond:
            self._inflight = frozenset()
            self.cond.notify_all()

    def to_commit(
        self, offsets: Mapping[TopicPartition, int], serials: Mapping[TopicPartition, int] | None,
        committable: frozenset[TopicPartition], owned: Mapping[TopicPartition, int],
    ) -> tuple[dict[TopicPartition, int], set[TopicPartition], _Kept]:
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
