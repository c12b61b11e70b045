"""The Java client's default strategy: contiguous ranges per topic."""

from __future__ import annotations

from collections.abc import Mapping

from assignment._common import consumer_racks, member_order_key, use_rack_aware
from assignment._index import topic_partitions
from assignment.base import Assignor
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    Subscription,
    TopicPartition,
)


class _TopicState:
    """Per-topic quota bookkeeping, as Java's RangeAssignor.TopicAssignmentState."""

    __slots__ = ("topic", "consumers", "racks", "partition_racks", "unassigned",
                 "assigned", "per_consumer", "extra", "rack_aware", "n")

    def __init__(self, topic: str, n: int, consumers: list[str], racks: Mapping[str, str],
                 cluster: ClusterMetadata) -> None:
        self.topic = topic
        self.n = n
        self.consumers = consumers
        self.racks = {c: racks.get(c) for c in consumers}
        self.unassigned: dict[int, None] = {}
        self.assigned = dict.fromkeys(consumers, 0)
        self.per_consumer = n // len(consumers) if consumers else 0
        self.extra = n % len(consumers) if consumers else 0
        member_racks = {r for r in self.racks.values() if r}
        if member_racks:
            tps = [TopicPartition(topic, p) for p in range(n)]
            self.partition_racks = {
                tp.partition: cluster.partition_racks.get(tp, frozenset()) for tp in tps
            }
            self.rack_aware = use_rack_aware(member_racks, cluster.partition_racks, tps)
        else:
            self.partition_racks = {}
            self.rack_aware = False

    def racks_match(self, consumer: str, p: int) -> bool:
        rack = self.racks[consumer]
        return rack is None or rack in self.partition_racks.get(p, ())

    def max_assignable(self, consumer: str) -> int:
        return max(0, self.per_consumer + (1 if self.extra > 0 else 0) - self.assigned[consumer])

    def take(self, consumer: str, parts: list[int], out: dict[str, list[TopicPartition]]) -> None:
        out[consumer].extend(TopicPartition(self.topic, p) for p in parts)
        self.assigned[consumer] += len(parts)
        if self.assigned[consumer] > self.per_consumer:
            self.extra -= 1
        for p in parts:
            del self.unassigned[p]


class RangeAssignor(Assignor):
    """Per topic, partitions in numeric order split into ranges over sorted members.

    Members are ordered by ``group.instance.id`` when set, else member id; the
    first ``n % members`` get one extra partition. Example, C0 and C1 on t0 and
    t1 with 3 partitions each::

        C0: t0-0, t0-1, t1-0, t1-1
        C1: t0-2, t1-2

    With racks (KIP-881), partitions whose replicas live in a member's rack are
    handed out first within the same per-topic quotas, and topics with the same
    subscribers and partition count stay co-partitioned.
    """

    name = "range"

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        racks = consumer_racks(subscriptions)
        per_topic: dict[str, list[Subscription]] = {}
        for sub in subscriptions.values():
            for t in dict.fromkeys(sub.topics):
                per_topic.setdefault(t, []).append(sub)
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        states = []
        for topic in sorted(per_topic):
            n = cluster.partitions_per_topic.get(topic, 0)
            if n <= 0:
                continue
            members = [s.member_id for s in sorted(per_topic[topic], key=member_order_key)]
            states.append(_TopicState(topic, n, members, racks, cluster))

        rack_aware = any(s.rack_aware for s in states)
        if not rack_aware:
            # Plain Java range: member i gets [per*i + min(i, extra), +per (+1 if i < extra)).
            for st in states:
                tps = topic_partitions(st.topic, st.n)
                start = 0
                for i, consumer in enumerate(st.consumers):
                    length = st.per_consumer + (1 if i < st.extra else 0)
                    out[consumer].extend(tps[start : start + length])
                    start += length
            return {m: MemberAssignment(tuple(parts)) for m, parts in out.items()}
        for st in states:
            st.unassigned = dict.fromkeys(range(st.n))
        if rack_aware:
            self._assign_with_rack_matching(states, out)
        for st in states:
            self._assign_ranges(st, None, out)
        return {m: MemberAssignment.of(parts) for m, parts in out.items()}

    @staticmethod
    def _assign_ranges(st: _TopicState, rack_match: bool | None,
                       out: dict[str, list[TopicPartition]]) -> None:
        for consumer in st.consumers:
            if not st.unassigned:
                break
            limit = st.max_assignable(consumer)
            if limit == 0:
                continue
            parts: list[int] = []
            for p in st.unassigned:
                if len(parts) >= limit:
                    break
                if rack_match is None or st.racks_match(consumer, p):
                    parts.append(p)
            if parts:
                st.take(consumer, parts, out)

    def _assign_with_rack_matching(self, states: list[_TopicState],
                                   out: dict[str, list[TopicPartition]]) -> None:
        groups: dict[tuple, list[_TopicState]] = {}
        for st in states:
            key = tuple(st.racks.items())
            groups.setdefault(key, []).append(st)
        for group in groups.values():
            by_count: dict[int, list[_TopicState]] = {}
            for st in group:
                # Java groups by the size of the partition-rack map: 0 when no member has a rack
                by_count.setdefault(len(st.partition_racks), []).append(st)
            for n, copart in by_count.items():
                if len(copart) > 1:
                    if n == 0:
                        continue
                    self._assign_copartitioned(copart[0].consumers, n, copart, out)
                elif copart[0].rack_aware:
                    self._assign_ranges(copart[0], True, out)

    @staticmethod
    def _assign_copartitioned(consumers: list[str], n: int, states: list[_TopicState],
                              out: dict[str, list[TopicPartition]]) -> None:
        remaining = list(consumers)
        for p in range(n):
            match = next(
                (c for c in remaining
                 if all(st.racks_match(c, p) and st.max_assignable(c) > 0 for st in states)),
                None,
            )
            if match is None:
                continue
            for st in states:
                st.take(match, [p], out)
            if not any(st.max_assignable(match) > 0 for st in states):
                remaining.remove(match)
                if not remaining:
                    break
