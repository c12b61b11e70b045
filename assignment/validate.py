"""The leader's last check before SyncGroup: never hand out an assignment that breaks the group.

With client-side assignment the coordinator cannot validate anything, so a
buggy (user) assignor would silently double-read or drop partitions; this check
turns that into an error naming the assignor and the partition.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from itertools import compress, repeat
from operator import not_

from assignment._compact import IndexedPartitions
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
    back for one round, so it may go to nobody, but only if it has a current owner
    (see :func:`_holdable`) who loses it now.
    """
    if replicas == 1 and _validate_indexed(assignor_name, cluster, subscriptions, assignment,
                                           cooperative):
        return
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
    for sub in subscriptions.values():
        for t in set(sub.topics):
            subscribers[t] = subscribers.get(t, 0) + 1
    withheld = _holdable(subscriptions) if cooperative else set()
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


def _validate_indexed(
    assignor_name: str,
    cluster: ClusterMetadata,
    subscriptions: Mapping[str, Subscription],
    assignment: Mapping[str, MemberAssignment],
    cooperative: bool,
) -> bool:
    """The same rules on partition numbers, for assignments in one PartitionSpace.

    Returns False when the fast path does not apply (then the general check
    runs); raises InvalidAssignmentError where the general check would. The loops
    over partitions are C loops (map, set), so a million partitions cost
    milliseconds, not seconds.
    """
    space = None
    for ma in assignment.values():
        parts = ma.partitions
        if not isinstance(parts, IndexedPartitions) or (space is not None and parts.space is not space):
            return False
        space = parts.space
    subscribed: set[str] = set()
    for sub in subscriptions.values():
        subscribed.update(sub.topics)
    ppt = cluster.partitions_per_topic
    if space is None or any(ppt.get(t) != n for t, n in zip(space.topics, space.counts, strict=True)):
        return False
    if any(ppt.get(t, 0) > 0 and not space.has_topic(t) for t in subscribed):
        return False  # a subscribed topic the assignor did not see: let the general check name it
    tid = {t: k for k, t in enumerate(space.topics)}
    allowed_by_topics: dict[tuple[str, ...], frozenset[int]] = {}
    marks = bytearray(space.total)  # 1 where some member got the partition
    mark = marks.__setitem__
    n_given = 0
    for member, ma in assignment.items():
        sub = subscriptions.get(member)
        if sub is None:
            raise InvalidAssignmentError(
                assignor_name, f"member {member!r} is not in the group's subscriptions")
        idx = ma.partitions.idx  # type: ignore[attr-defined]
        allowed = allowed_by_topics.get(sub.topics)
        if allowed is None:
            allowed = allowed_by_topics[sub.topics] = frozenset(
                tid[t] for t in sub.topics if t in tid)
        present = set(space.topics_of(idx))
        if not present <= allowed:
            k = min(present - allowed)
            tp = next(space.partition(i) for i in idx if space.partition(i).topic == space.topics[k])
            raise InvalidAssignmentError(
                assignor_name,
                f"partition {tp} given to member {member!r}, which is not subscribed to {tp.topic!r}")
        deque(map(mark, idx, repeat(1)), maxlen=0)
        n_given += len(idx)
    n_marked = marks.count(1)
    if n_marked != n_given:
        holders: dict[int, list[str]] = {}
        for member, ma in assignment.items():
            for i in ma.partitions.idx:  # type: ignore[attr-defined]
                holders.setdefault(i, []).append(member)
        i = min(i for i, h in holders.items() if len(h) > 1)
        who = ", ".join(sorted(holders[i]))
        raise InvalidAssignmentError(
            assignor_name,
            f"partition {space.partition(i)} is assigned to {len(holders[i])} member(s) ({who}), "
            "expected 1")
    ranges = [space.topic_range(t) for t in sorted(subscribed) if space.has_topic(t)]
    if n_marked == sum(map(len, ranges)):  # every partition given is subscribed: all covered
        return True
    missing = {i for r in ranges for i in compress(r, map(not_, marks[r.start:r.stop]))}
    if cooperative:  # held back only from a current owner (who is given nothing of it now)
        missing -= set(space.indices(_holdable(subscriptions)))
    if missing:
        tp = space.partition(min(missing))
        raise InvalidAssignmentError(
            assignor_name, f"partition {tp} is assigned to 0 member(s) (no member), expected 1")
    return True


def _holdable(subscriptions: Mapping[str, Subscription]) -> set[TopicPartition]:
    """Partitions a cooperative round may give to nobody: those with a current owner.

    As in the Java client, the claim of the highest generation wins and a stale
    claim is no ownership. Claimed by several members at the same known generation,
    a partition has no owner (nobody keeps it), so it must be assigned at once,
    not held back. Claims without generations (-1) cannot be told apart: held
    back is allowed there.
    """
    best: dict[TopicPartition, int] = {}
    tied: set[TopicPartition] = set()
    for sub in subscriptions.values():
        gen = sub.generation
        for tp in sub.owned_partitions:
            top = best.get(tp)
            if top is None or gen > top:
                best[tp] = gen
                tied.discard(tp)
            elif gen == top and gen >= 0:
                tied.add(tp)
    return set(best) - tied
