"""Helpers mirroring the Java client's assignor test fixtures (AbstractStickyAssignorTest).

The ported test modules (``test_java_reference_*.py``) name the upstream test method each case
ports, from apache/kafka ``clients/src/test/java/org/apache/kafka/clients/consumer/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assignment import (
    Assignor,
    ClusterMetadata,
    CooperativeStickyAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
)
from assignment.protocol import encode_cooperative_user_data, encode_sticky_user_data

DEFAULT_GENERATION = -1
TOPIC, TOPIC1, TOPIC2, TOPIC3 = "topic", "topic1", "topic2", "topic3"
C1, C2, C3, C4 = "consumer1", "consumer2", "consumer3", "consumer4"


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def subscription(member: str, topics: Iterable[str]) -> Subscription:
    """Java's ``subscription(topics, i)``: no previous ownership."""
    return Subscription(member, tuple(topics))


def v2_above(assignor: Assignor, member: str, topics: Iterable[str],
             partitions: Iterable[TopicPartition], generation: int) -> Subscription:
    """Java's ``buildSubscriptionV2Above``: owned partitions and generation in the subscription
    (the eager StickyAssignor also writes them into its user data, which it honours)."""
    parts = tuple(partitions)
    if isinstance(assignor, StickyAssignor):
        user_data = encode_sticky_user_data(parts, generation)
    else:
        user_data = encode_cooperative_user_data(generation)
    return Subscription(member, tuple(topics), user_data, parts, generation)


def v1(assignor: Assignor, member: str, topics: Iterable[str],
       partitions: Iterable[TopicPartition], generation: int) -> Subscription:
    """Java's ``buildSubscriptionV1``: owned partitions, generation only in the user data."""
    parts = tuple(partitions)
    if isinstance(assignor, StickyAssignor):
        user_data = encode_sticky_user_data(parts, generation)
    else:
        user_data = encode_cooperative_user_data(generation)
    return Subscription(member, tuple(topics), user_data, parts, DEFAULT_GENERATION)


def v0_sticky(member: str, topics: Iterable[str], partitions: Iterable[TopicPartition],
              generation: int) -> Subscription:
    """StickyAssignorTest ``buildSubscriptionV0``: ownership only in the sticky user data."""
    return Subscription(member, tuple(topics), encode_sticky_user_data(tuple(partitions), generation))


def assign(assignor: Assignor, partitions_per_topic: Mapping[str, int],
           subs: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
    got = assignor.assign(ClusterMetadata(dict(partitions_per_topic)), subs)
    return {m: list(a.partitions) for m, a in got.items()}


def is_fully_balanced(assignment: Mapping[str, list[TopicPartition]]) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return max(sizes) - min(sizes) <= 1


def _verify_validity_and_balance(subs: Mapping[str, Subscription],
                                 assignment: Mapping[str, list[TopicPartition]]) -> None:
    """AbstractStickyAssignorTest.verifyValidityAndBalance, literally."""
    assert len(subs) == len(assignment)
    consumers = sorted(assignment)
    for i, c in enumerate(consumers):
        parts = assignment[c]
        for p in parts:
            assert p.topic in subs[c].topics, f"{p} assigned to {c}, not subscribed"
        for other in consumers[i + 1:]:
            others = assignment[other]
            common = set(parts) & set(others)
            assert not common, f"{c} and {other} share {common}"
            if abs(len(parts) - len(others)) <= 1:
                continue
            topics = {p.topic for p in parts}
            other_topics = {p.topic for p in others}
            assert not topics & other_topics, (
                f"partitions can move between {c} ({len(parts)}) and {other} ({len(others)})")


def _cooperative_revokes(subs: Mapping[str, Subscription],
                         assignment: Mapping[str, list[TopicPartition]]) -> bool:
    """CooperativeStickyAssignorTest.verifyCooperativeValidity: nothing added while revoked."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for c, parts in assignment.items():
        owned = set(subs[c].owned_partitions)
        revoked |= owned - set(parts)
        added |= set(parts) - owned
    assert not added & revoked, f"assigned in the same round they are revoked: {added & revoked}"
    return bool(revoked)


def verify_validity_and_balance(assignor: Assignor, partitions_per_topic: Mapping[str, int],
                                subs: dict[str, Subscription],
                                assignment: dict[str, list[TopicPartition]],
                                generation: int = 1) -> dict[str, list[TopicPartition]]:
    """Java's verifyValidityAndBalance; the cooperative override first runs the follow-up
    rebalances (at most 4) its revocations trigger. Returns the final assignment."""
    if isinstance(assignor, CooperativeStickyAssignor):
        rounds = 0
        while _cooperative_revokes(subs, assignment):
            for c, parts in assignment.items():
                subs[c] = v2_above(assignor, c, subs[c].topics, parts, generation)
            assignment = assign(assignor, partitions_per_topic, subs)
            rounds += 1
            assert rounds <= 4
    _verify_validity_and_balance(subs, assignment)
    return assignment


def withheld(partitions_per_topic: Mapping[str, int], subs: Mapping[str, Subscription],
             assignment: Mapping[str, list[TopicPartition]]) -> set[TopicPartition]:
    """Subscribed partitions nobody got: the cooperative assignor's partitionsTransferringOwnership."""
    topics = {t for s in subs.values() for t in s.topics}
    everything = {tp(t, p) for t in topics for p in range(partitions_per_topic.get(t, 0))}
    return everything - {p for parts in assignment.values() for p in parts}


STICKY_KINDS = (StickyAssignor, CooperativeStickyAssignor)
