"""Redundant partitioning: every partition read by N members, exactly one of them primary.

Search indexers and similar consumers want N live copies of each partition.
Only the primary replica commits offsets (the commit path asks
``primary_partitions``); the others follow. The primary set travels in the
assignment's user data, and each member sends its previous primaries back in
its subscription user data so primaries stay put across rebalances.

User data layout (both directions), version 0::

    version int16, primaries [topic string, partitions [int32]]
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping

from assignment.base import Assignor
from assignment.errors import AssignorConfigError, InvalidAssignmentError, ProtocolDecodeError
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    Subscription,
    TopicPartition,
)
from assignment.protocol import decode_versioned_partitions, encode_versioned_partitions

USER_DATA_VERSION = 0
REPLICAS_OPTION = "redundant.replicas"

log = logging.getLogger(__name__)


def encode_primaries(partitions: frozenset[TopicPartition] | tuple[TopicPartition, ...]) -> bytes:
    return encode_versioned_partitions(USER_DATA_VERSION, partitions)


def decode_primaries(data: bytes | None, member_id: str | None = None) -> frozenset[TopicPartition]:
    if not data:
        return frozenset()
    _, parts = decode_versioned_partitions(data, "redundant assignor user data", member_id)
    return frozenset(parts)


def primary_partitions(assignment: MemberAssignment) -> frozenset[TopicPartition]:
    """The partitions this member may commit: its primaries, within what it was assigned."""
    return decode_primaries(assignment.user_data) & frozenset(assignment.partitions)


class RedundantAssignor(Assignor):
    """Each partition to ``redundant.replicas`` distinct members (default 2).

    While fewer members subscribe to a topic than that (a rolling restart), its
    partitions get one replica per subscriber, with a warning and a count in
    ``degraded_assignments``; the next rebalance with the members back restores
    full redundancy.

    Replica counts and primary counts are each balanced over the members of a
    topic's subscriber set; replicas and primaries a member held before are kept
    when that does not break balance. Example, t with 2 partitions, C0..C2, N=2::

        C0: t-0*, t-1     C1: t-0, t-1*     C2: (one of them, balanced)

    (``*`` marks the primary).
    """

    name = "redundant"

    def __init__(self, replicas: int = 2) -> None:
        if replicas < 1:
            raise AssignorConfigError(REPLICAS_OPTION, f"must be >= 1, got {replicas}")
        self.replicas = replicas
        self._primaries: frozenset[TopicPartition] = frozenset()
        #: rounds this leader assigned fewer replicas than configured (members missing)
        self.degraded_assignments = 0
        #: topic -> replicas per partition in the last round, for topics below ``replicas``
        self.last_shortfall: dict[str, int] = {}

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> RedundantAssignor:
        raw = options.get(REPLICAS_OPTION, "2")
        try:
            n = int(str(raw).strip())
        except ValueError:
            raise AssignorConfigError(
                REPLICAS_OPTION, f"expected a positive integer, e.g. '2', got {raw!r}"
            ) from None
        return cls(n)

    def subscription_user_data(self, topics: tuple[str, ...]) -> bytes | None:
        return encode_primaries(self._primaries)

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:
        self._primaries = primary_partitions(assignment)

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        n_rep = self.replicas
        subscribers: dict[str, list[str]] = {}
        for m in sorted(subscriptions):
            for t in dict.fromkeys(subscriptions[m].topics):
                if cluster.partitions_per_topic.get(t, 0) > 0:
                    subscribers.setdefault(t, []).append(m)
        short = {t: len(ms) for t, ms in sorted(subscribers.items()) if len(ms) < n_rep}
        self.last_shortfall = short
        if short:
            # A rolling restart must not take the group down: serve what is alive now.
            self.degraded_assignments += 1
            log.warning(
                "%s=%d but fewer members subscribe to %d topic(s) (%s); assigning that many "
                "replicas until members return (degraded assignment #%d)",
                REPLICAS_OPTION, n_rep, len(short),
                ", ".join(f"{t}: {n}" for t, n in list(short.items())[:5]),
                self.degraded_assignments,
            )
        prev_primary: dict[TopicPartition, str] = {}
        holders: dict[TopicPartition, list[str]] = {}
        for m in sorted(subscriptions):
            sub = subscriptions[m]
            for tp in dict.fromkeys(sub.owned_partitions):
                holders.setdefault(tp, []).append(m)
            try:
                prim = decode_primaries(sub.user_data, m)
            except ProtocolDecodeError:
                prim = frozenset()
            for tp in sorted(prim):
                prev_primary.setdefault(tp, m)

        load = dict.fromkeys(subscriptions, 0)
        pload = dict.fromkeys(subscriptions, 0)
        replicas: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        primaries: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        groups: dict[tuple[str, ...], list[str]] = {}
        for t, ms in sorted(subscribers.items()):
            groups.setdefault(tuple(ms), []).append(t)
        for members, topics in groups.items():
            tps = [tp for t in topics for tp in
                   (TopicPartition(t, p) for p in range(cluster.partitions_per_topic[t]))]
            self._assign_group(list(members), tps, min(n_rep, len(members)), holders,
                               prev_primary, load, pload, replicas, primaries)
        return {
            m: MemberAssignment.of(replicas[m], encode_primaries(tuple(primaries[m])))
            for m in subscriptions
        }

    def _assign_group(self, members, tps, n_rep, holders, prev_primary, load, pload, replicas,
                      primaries) -> None:
        size = len(members)
        total = n_rep * len(tps)
        max_q = -(-total // size)
        glocal = dict.fromkeys(members, 0)
        member_set = set(members)
        chosen: dict[TopicPartition, list[str]] = {}
        # 1. keep previous replicas up to the balanced quota
        for tp in tps:
            keep = []
            for m in holders.get(tp, ()):
                if m in member_set and len(keep) < n_rep and glocal[m] < max_q:
                    keep.append(m)
                    glocal[m] += 1
            chosen[tp] = keep
        # 2. fill the rest onto the least-loaded members not already holding the partition
        heap = [(glocal[m], load[m], m) for m in members]
        heapq.heapify(heap)
        for tp in tps:
            have = chosen[tp]
            skipped = []
            while len(have) < n_rep:
                c, lg, m = heapq.heappop(heap)
                if c != glocal[m]:
                    continue
                if m in have:
                    skipped.append((c, lg, m))
                    continue
                have.append(m)
                glocal[m] += 1
                heapq.heappush(heap, (glocal[m], lg, m))
            for item in skipped:
                heapq.heappush(heap, item)
        self._even_out(members, tps, chosen, glocal)
        # 3. primaries: previous primary if still a replica and under quota, else least primaries
        pmax = -(-len(tps) // size)
        plocal = dict.fromkeys(members, 0)
        primary: dict[TopicPartition, str] = {}
        for tp in tps:
            pm = prev_primary.get(tp)
            if pm is not None and pm in chosen[tp] and plocal[pm] < pmax:
                primary[tp] = pm
                plocal[pm] += 1
        for tp in tps:
            if tp not in primary:
                pm = min(chosen[tp], key=lambda m: (plocal[m], pload[m], m))
                primary[tp] = pm
                plocal[pm] += 1
        self._even_out_primaries(tps, chosen, primary, plocal)
        for tp in tps:
            for m in chosen[tp]:
                replicas[m].append(tp)
            primaries[primary[tp]].append(tp)
        for m in members:
            load[m] += glocal[m]
            pload[m] += plocal[m]

    @staticmethod
    def _even_out(members, tps, chosen, glocal) -> None:
        """Move replicas from the fullest to the emptiest member until counts differ by <= 1."""
        while True:
            hi = max(members, key=lambda m: (glocal[m], m))
            lo = min(members, key=lambda m: (glocal[m], m))
            if glocal[hi] <= glocal[lo] + 1:
                return
            for tp in reversed(tps):
                have = chosen[tp]
                if hi in have and lo not in have:
                    have[have.index(hi)] = lo
                    glocal[hi] -= 1
                    glocal[lo] += 1
                    break
            else:  # cannot happen: lo holds fewer partitions than hi
                raise InvalidAssignmentError("redundant", f"cannot balance {hi} and {lo}")

    @staticmethod
    def _even_out_primaries(tps, chosen, primary, plocal) -> None:
        """Shift primaries between replicas of a partition while that evens counts out."""
        improved = True
        while improved:
            improved = False
            for tp in tps:
                cur = primary[tp]
                best = min(chosen[tp], key=lambda m: (plocal[m], m))
                if plocal[best] + 1 < plocal[cur]:
                    primary[tp] = best
                    plocal[cur] -= 1
                    plocal[best] += 1
                    improved = True
