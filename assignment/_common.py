"""Small rules shared by several assignors (kept identical to the Java client's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assignment.model import ClusterMetadata, Subscription, TopicPartition


def member_order_key(sub: Subscription) -> tuple[int, str]:
    """Java's MemberInfo order: static members (by instance id) first, then by member id.

    Ordering by ``group.instance.id`` keeps range/round-robin stable across
    restarts of static members, whose member ids change on every join.
    """
    if sub.group_instance_id is not None:
        return (0, sub.group_instance_id)
    return (1, sub.member_id)


def consumer_racks(subscriptions: Mapping[str, Subscription]) -> dict[str, str]:
    """Members that reported a non-empty rack (v3+ subscriptions)."""
    return {m: s.rack_id for m, s in subscriptions.items() if s.rack_id}


def use_rack_aware(
    member_racks: Iterable[str],
    partition_racks: Mapping[TopicPartition, frozenset[str]],
    partitions: Iterable[TopicPartition],
) -> bool:
    """KIP-881: only when racks overlap and some partition lives on a subset of the racks.

    If every partition has a replica in every rack, rack matching gains nothing
    and would only cost stickiness and balance.
    """
    mracks = set(member_racks)
    if not mracks:
        return False
    per_partition = [partition_racks.get(tp, frozenset()) for tp in partitions]
    all_racks: set[str] = set().union(*per_partition) if per_partition else set()
    if mracks.isdisjoint(all_racks):
        return False
    return not all(r == all_racks for r in per_partition)


def subscribed_topics(
    cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
) -> list[str]:
    """Sorted topics some member subscribes to and that exist in the cluster."""
    topics = set()
    for s in subscriptions.values():
        topics.update(s.topics)
    return sorted(t for t in topics if cluster.partitions_per_topic.get(t, 0) > 0)
