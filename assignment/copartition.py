"""Co-partitioning: partition i of every topic goes to the same member (joins, KIP-28)."""

from __future__ import annotations

from collections.abc import Mapping

from assignment._common import member_order_key
from assignment.base import Assignor
from assignment.errors import AssignorConfigError
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    Subscription,
    TopicPartition,
)


class CoPartitionAssignor(Assignor):
    """Slots ``0..n-1`` (slot i = partition i of each topic) are dealt to members.

    Topics with the same subscribers are co-partitioned together, so they must
    have the same partition count. Slots are balanced (counts differ by at most
    one) and stay with the member that owned them when quotas allow. Example,
    t0 and t1 with 3 partitions, C0 and C1::

        C0: t0-0, t1-0, t0-1, t1-1     C1: t0-2, t1-2
    """

    name = "copartition"

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        groups: dict[tuple[str, ...], list[str]] = {}
        subscribers: dict[str, list[str]] = {}
        for m, sub in subscriptions.items():
            for t in dict.fromkeys(sub.topics):
                if cluster.partitions_per_topic.get(t, 0) > 0:
                    subscribers.setdefault(t, []).append(m)
        for t, ms in sorted(subscribers.items()):
            key = tuple(s.member_id for s in sorted((subscriptions[m] for m in ms), key=member_order_key))
            groups.setdefault(key, []).append(t)

        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        load = dict.fromkeys(subscriptions, 0)
        for members, topics in groups.items():
            counts = {t: cluster.partitions_per_topic[t] for t in topics}
            if len(set(counts.values())) > 1:
                detail = ", ".join(f"{t}={n}" for t, n in sorted(counts.items()))
                raise AssignorConfigError(
                    "copartition",
                    f"co-partitioned topics need equal partition counts, got {detail}",
                )
            n = counts[topics[0]]
            slot_owner = self._slots(n, list(members), topics, subscriptions, load)
            for slot, m in enumerate(slot_owner):
                out[m].extend(TopicPartition(t, slot) for t in topics)
        return {m: MemberAssignment.of(parts) for m, parts in out.items()}

    @staticmethod
    def _slots(n: int, members: list[str], topics: list[str],
               subscriptions: Mapping[str, Subscription], load: dict[str, int]) -> list[str]:
        min_q, extra = divmod(n, len(members))
        topic_set = set(topics)
        # previous owner of a slot: the member that owned most of its partitions
        votes: dict[int, dict[str, int]] = {}
        for m in members:
            for tp in subscriptions[m].owned_partitions:
                if tp.topic in topic_set and tp.partition < n:
                    v = votes.setdefault(tp.partition, {})
                    v[m] = v.get(m, 0) + 1
        owner: list[str | None] = [None] * n
        have = dict.fromkeys(members, 0)
        over = 0
        for slot in range(n):
            for m, _ in sorted(votes.get(slot, {}).items(), key=lambda kv: (-kv[1], kv[0])):
                if have[m] < min_q or (have[m] == min_q and over < extra):
                    if have[m] == min_q:
                        over += 1
                    owner[slot] = m
                    have[m] += 1
                    break
        for slot in range(n):
            if owner[slot] is not None:
                continue
            cands = [m for m in members if have[m] < min_q]
            if not cands:
                cands = [m for m in members if have[m] == min_q and over < extra]
                over += 1
            m = min(cands, key=lambda c: (have[c], load[c], members.index(c)))
            owner[slot] = m
            have[m] += 1
        for m in members:
            load[m] += have[m]
        return [o for o in owner if o is not None]
