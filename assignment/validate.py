"""The leader's last check before SyncGroup: never hand out an assignment that breaks the group.

With client-side assignment the coordinator cannot validate anything, so a
buggy (user) assignor would silently double-read or drop partitions; this check
turns that into an error naming the assignor and the partition.
"""

from __future__ import annotations

from collections.abc import Mapping

from assignment.errors import InvalidAssignmentError
from assignment.model import ClusterMetadata, MemberAssignment, Subscription, TopicPartition


def validate_assignment(
    assignor_name: str,
    cluster: ClusterMetadata,
    subscriptions: Mapping[str, Subscription],
    assignment: Mapping[str, MemberAssignment],
    replicas: int = 1,
    cooperative: bool = False,
) -> None:
    """Each subscribed, existing partition to exactly ``replicas`` distinct subscribed members.

    Fewer when fewer members subscribe to its topic: ``min(replicas, subscribers)``.

    ``cooperative`` (KIP-429): a partition revoked from its current owner is held
    back for one round, so it may go to nobody, but only if a member reported
    owning it and loses it now.
    """
    holders: dict[TopicPartition, list[str]] = {}
    for member, ma in assignment.items():
        sub = subscriptions.get(member)
        if sub is None:
            raise InvalidAssignmentError(
                assignor_name, f"member {member!r} is not in the group's subscriptions"
            )
        topics = set(sub.topics)
        seen: set[TopicPartition] = set()
        for tp in ma.partitions:
            if not cluster.has_partition(tp):
                raise InvalidAssignmentError(
                    assignor_name, f"partition {tp} given to member {member!r} does not exist"
                )
            if tp.topic not in topics:
                raise InvalidAssignmentError(
                    assignor_name,
                    f"partition {tp} given to member {member!r}, which is not subscribed to "
                    f"{tp.topic!r}",
                )
            if tp in seen:
                raise InvalidAssignmentError(
                    assignor_name, f"partition {tp} given twice to member {member!r}"
                )
            seen.add(tp)
            holders.setdefault(tp, []).append(member)

    subscribers: dict[str, int] = {}
    withheld: set[TopicPartition] = set()
    for member, sub in subscriptions.items():
        for t in set(sub.topics):
            subscribers[t] = subscribers.get(t, 0) + 1
        if cooperative:
            kept = set(assignment[member].partitions) if member in assignment else set()
            withheld.update(tp for tp in sub.owned_partitions if tp not in kept)
    for topic in sorted(subscribers):
        want = min(replicas, subscribers[topic])
        for tp in cluster.partitions_for(topic):
            got = holders.get(tp, [])
            if not got and tp in withheld:
                continue
            if len(got) != want:
                who = ", ".join(sorted(got)) or "no member"
                raise InvalidAssignmentError(
                    assignor_name,
                    f"partition {tp} is assigned to {len(got)} member(s) ({who}), "
                    f"expected {want}",
                )
