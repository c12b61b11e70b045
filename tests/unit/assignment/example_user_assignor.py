"""A user assignor loaded by dotted path in the registry tests."""

from assignment.base import Assignor
from assignment.model import MemberAssignment


class EverythingToFirst(Assignor):
    name = "everything-to-first"

    def assign(self, cluster, subscriptions):
        members = sorted(subscriptions)
        out = {m: MemberAssignment(()) for m in members}
        if members:
            parts = [tp for t in sorted({t for s in subscriptions.values() for t in s.topics})
                     for tp in cluster.partitions_for(t)]
            out[members[0]] = MemberAssignment.of(parts)
        return out


class Broken(Assignor):
    """Gives partition 0 of every topic to two members."""

    name = "broken"

    def assign(self, cluster, subscriptions):
        members = sorted(subscriptions)
        parts = [tp for t in sorted(cluster.partitions_per_topic) for tp in cluster.partitions_for(t)]
        return {m: MemberAssignment.of(parts) for m in members}


class NotAnAssignor:
    pass
