"""Round-robin over all partitions of all topics, as the Java client's RoundRobinAssignor."""

from __future__ import annotations

from collections.abc import Mapping

from assignment._common import member_order_key, subscribed_topics
from assignment.base import Assignor
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    Subscription,
    TopicPartition,
)


class RoundRobinAssignor(Assignor):
    """Lay out every partition (topics sorted), deal them to members in a circle.

    A member not subscribed to a partition's topic is skipped. Members are
    ordered by ``group.instance.id`` when set, else member id. Example, C0 and
    C1 on t0 and t1 with 3 partitions each::

        C0: t0-0, t0-2, t1-1
        C1: t0-1, t1-0, t1-2
    """

    name = "roundrobin"

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        members = [s.member_id for s in sorted(subscriptions.values(), key=member_order_key)]
        if not members:
            return {}
        topic_sets = {m: frozenset(subscriptions[m].topics) for m in members}
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        nmem = len(members)
        pos = 0
        for topic in subscribed_topics(cluster, subscriptions):
            n = cluster.partitions_per_topic[topic]
            ok = [topic in topic_sets[m] for m in members]
            if all(ok):
                # Everyone can take it: deal in one pass without the skip loop.
                for p in range(n):
                    out[members[pos]].append(TopicPartition(topic, p))
                    pos += 1
                    if pos == nmem:
                        pos = 0
                continue
            for p in range(n):
                while not ok[pos]:
                    pos = (pos + 1) % nmem
                out[members[pos]].append(TopicPartition(topic, p))
                pos = (pos + 1) % nmem
        return {m: MemberAssignment(tuple(parts)) for m, parts in out.items()}
