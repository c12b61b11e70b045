"""An in-memory implementation of the membership seam, for unit tests of its users.

The test plays the group coordinator: it assigns, starts and ends rebalances, revokes, fences
or refuses commits; the planner under test sees only the ``seam.Membership`` interface.
Ownership, serials, the drain and kept offsets go through the same ``OwnershipBook`` as the
classic-protocol member, so what is tested here is what runs against a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assignment.model import TopicPartition
from spark_groupsource.errors import MembershipError
from spark_groupsource.group.seam import (
    CommitResult,
    Counters,
    MembershipStatus,
    OwnershipBook,
    Snapshot,
)


class InMemoryMembership:
    """One member of a group whose coordinator is the test."""

    def __init__(self, group_id: str = "g", *, cooperative: bool = False):
        self.group_id = group_id
        self.counters = Counters()
        self._cooperative = cooperative
        self._refuse_error = "REBALANCE_IN_PROGRESS"
        self._book = OwnershipBook()
        self.generation = -1
        self.assigned_generation = -1
        self._joined_ahead = False  # a JoinGroup answered, its assignment not here yet
        self.rebalancing = False
        self.started = self.closed = False
        self.error: MembershipError | None = None
        # the group's committed offsets (what the coordinator stores)
        self.offsets: dict[TopicPartition, int] = {}
        self.committable: set[TopicPartition] | None = None  # None: everything owned
        self._fence_next = False
        self._refuse = 0

    # ---- the test's side: the coordinator -------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Complete a rebalance: a new generation; newly owned partitions get new serials."""
        if not self._joined_ahead:
            self.generation += 1
        self._joined_ahead = False
        self.assigned_generation = self.generation
        self._book.acquire(partitions)
        self.rebalancing = False

    def begin_rebalance(self) -> None:
        self.rebalancing = True

    def join_answered(self) -> None:
        """The new generation's JoinGroup is answered; its assignment comes with ``assign``."""
        self.generation += 1
        self.rebalancing = self._joined_ahead = True

    def revoke(self, partitions: Iterable[TopicPartition]) -> None:
        """Start giving partitions up; they go once no running batch reads them."""
        self.rebalancing = True
        self._book.begin_revoke(partitions)
        self._finish_drained()

    def give_up_revocation(self) -> None:
        """The drain's bound ran out: revoked partitions go, kept offsets unsent (as the member
        does when its commit keeps meeting the rebalance)."""
        self._book.finish_revoke(self._book.revoking())
        self.counters.rebalances += 1

    def lose(self, partitions: Iterable[TopicPartition]) -> None:
        self.counters.partitions_lost += len(self._book.lose(partitions))

    def drop_out(self) -> None:
        """The member falls out of the group (session expired, a join failed): every partition
        is lost and it holds no generation until the next ``assign`` (kafka-python's
        reset_generation: UNJOINED, which is not REBALANCING)."""
        self.lose(self._book.owned())
        self.generation = self.assigned_generation = -1
        self._joined_ahead = self.rebalancing = False

    def fence_next_commit(self) -> None:
        self._fence_next = True

    def refuse_next_commits(self, n: int = 1, error: str = "REBALANCE_IN_PROGRESS") -> None:
        """The next ``n`` commits are refused with ``error`` (e.g. COORDINATOR_NOT_AVAILABLE)."""
        self._refuse = n
        self._refuse_error = error

    def fail(self, error: MembershipError) -> None:
        self.error = error

    def _finish_drained(self) -> None:
        revoking = set(self._book.revoking())
        busy, unsent = self._book.drain_state(revoking)
        done = revoking - busy - unsent
        if done:
            self._book.finish_revoke(done)
            self.counters.rebalances += 1

    # ---- the seam -------------------------------------------------------------------------
    @property
    def cooperative(self) -> bool:
        return self._cooperative

    def start(self) -> None:
        self.started = True

    def close(self) -> None:
        self.closed = True

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    def snapshot(self) -> Snapshot:
        self.raise_if_failed()
        owned, revoking = self._book.owned(), self._book.revoking()
        committable = frozenset(owned) if self.committable is None else frozenset(self.committable) & frozenset(owned)
        return Snapshot(self.generation, "member-1", "range" if not self._cooperative else "cooperative-sticky",
                        owned, committable, self.rebalancing or bool(revoking), revoking,
                        self.assigned_generation)

    def wait_for_assignment(self, timeout_s: float) -> bool:
        self.raise_if_failed()
        return self.generation >= 0

    def describe(self) -> str:
        return f"group {self.group_id!r} (in memory): generation={self.generation} rebalancing={self.rebalancing}"

    def status(self) -> MembershipStatus:
        return MembershipStatus(0.0, 0.0, None, 0.0 if self.generation >= 0 else None, not self.rebalancing)

    def may_plan(self, snap: Snapshot | None = None) -> bool:
        return True if self._cooperative else not (snap or self.snapshot()).rebalancing

    def batch_planned(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int]) -> bool:
        return self._book.batch_planned(partitions)

    def batch_completed(self) -> None:
        self._book.batch_completed()
        self._finish_drained()

    def polled(self, batches: Mapping[str, object] | None = None) -> None:
        """No liveness bound in memory (the unit tests of the planner drive the group)."""

    def commit(self, offsets: Mapping[TopicPartition, int],
               serials: Mapping[TopicPartition, int] | None = None) -> CommitResult:
        snap = self.snapshot()
        mine, skipped, todo = self._book.to_commit(offsets, serials, snap.committable, snap.owned)
        self._book.settle(skipped)
        if not mine:
            return CommitResult(skipped=frozenset(skipped))
        if self._fence_next:
            self._fence_next = False
            self.counters.fenced_commits += 1
            self._book.settle(mine)
            self.lose(mine)
            return CommitResult(lost=frozenset(mine), skipped=frozenset(skipped), error="ILLEGAL_GENERATION")
        if self._refuse or (self.rebalancing and not self._cooperative and not self._book.revoking()):
            error = self._refuse_error if self._refuse else "REBALANCE_IN_PROGRESS"
            self._refuse = max(0, self._refuse - 1)
            self.counters.commit_failures += 1
            self._book.keep(mine, todo)
            return CommitResult(failed=frozenset(mine), skipped=frozenset(skipped), error=error)
        self.offsets.update(mine)
        self._book.settle(mine)
        self.counters.commits += 1
        return CommitResult(committed=frozenset(mine), skipped=frozenset(skipped))

    def flush_pending(self) -> CommitResult | None:
        if not self._book.has_pending() or self.rebalancing:
            return None
        return self.commit({})

    def pending(self) -> dict[TopicPartition, int]:
        return self._book.pending()

    def coordinator_silence_s(self) -> float | None:
        return None

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.offsets.get(tp) for tp in partitions}
