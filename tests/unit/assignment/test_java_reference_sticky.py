"""The Java client's sticky assignor tests, ported (AbstractStickyAssignorTest, StickyAssignorTest,
CooperativeStickyAssignorTest in apache/kafka clients/src/test/java/.../consumer/).

Each test names the upstream method it ports. Both sticky assignors run every
AbstractStickyAssignorTest case, as upstream does. Java asserts on
``partitionsTransferringOwnership``; here that is what the cooperative assignor leaves unassigned
(``withheld``), since that is its only observable effect. The rack-aware variants (RackConfig)
are not ported: our rack-aware sticky path is covered by the property tests instead.
"""

from __future__ import annotations

import random

import pytest
from _java_reference import (
    C1,
    C2,
    C3,
    C4,
    DEFAULT_GENERATION,
    STICKY_KINDS,
    TOPIC,
    TOPIC1,
    TOPIC2,
    TOPIC3,
    assign,
    is_fully_balanced,
    subscription,
    tp,
    v1,
    v2_above,
    verify_validity_and_balance,
    withheld,
)

from assignment import CooperativeStickyAssignor, StickyAssignor

GEN = 1


@pytest.fixture(params=STICKY_KINDS, ids=lambda c: c.name)
def assignor(request):
    return request.param()


def coop(a) -> bool:
    return isinstance(a, CooperativeStickyAssignor)


def check_withheld(a, ppt, subs, got, expected) -> None:
    """Java: ``assertEquals(expected, assignor.partitionsTransferringOwnership)``."""
    if coop(a):
        assert withheld(ppt, subs, got) == set(expected)


def as_set(xs):
    return set(xs)


# ------------------------------------------------------------------ AbstractStickyAssignorTest


def test_one_consumer_no_topic(assignor):  # testOneConsumerNoTopic
    subs = {"consumer": subscription("consumer", [])}
    got = assign(assignor, {}, subs)
    assert got == {"consumer": []}
    verify_validity_and_balance(assignor, {}, subs, got)


def test_one_consumer_nonexistent_topic(assignor):  # testOneConsumerNonexistentTopic
    subs = {"consumer": subscription("consumer", [TOPIC])}
    got = assign(assignor, {TOPIC: 0}, subs)
    assert got == {"consumer": []}


def test_one_consumer_one_topic(assignor):  # testOneConsumerOneTopic
    subs = {"consumer": subscription("consumer", [TOPIC])}
    got = assign(assignor, {TOPIC: 3}, subs)
    assert got == {"consumer": [tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC, 2)]}


def test_only_assigns_partitions_from_subscribed_topics(assignor):
    # testOnlyAssignsPartitionsFromSubscribedTopics
    ppt = {TOPIC: 2}
    owned = [tp(TOPIC, 0), tp(TOPIC, 1), tp("other", 0), tp("other", 1)]
    subs = {"consumer": v2_above(assignor, "consumer", [TOPIC], owned, GEN)}
    got = assign(assignor, ppt, subs)
    assert got == {"consumer": [tp(TOPIC, 0), tp(TOPIC, 1)]}
    check_withheld(assignor, ppt, subs, got, [])


def test_one_consumer_multiple_topics(assignor):  # testOneConsumerMultipleTopics
    got = assign(assignor, {TOPIC1: 1, TOPIC2: 2}, {"c": subscription("c", [TOPIC1, TOPIC2])})
    assert got == {"c": [tp(TOPIC1, 0), tp(TOPIC2, 0), tp(TOPIC2, 1)]}


def test_two_consumers_one_topic_one_partition(assignor):  # testTwoConsumersOneTopicOnePartition
    ppt = {TOPIC: 1}
    subs = {C1: subscription(C1, [TOPIC]), C2: subscription(C2, [TOPIC])}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    verify_validity_and_balance(assignor, ppt, subs, got)
    assert is_fully_balanced(got)


def test_two_consumers_one_topic_two_partitions(assignor):  # testTwoConsumersOneTopicTwoPartitions
    ppt = {TOPIC: 2}
    subs = {C1: subscription(C1, [TOPIC]), C2: subscription(C2, [TOPIC])}
    got = assign(assignor, ppt, subs)
    assert got == {C1: [tp(TOPIC, 0)], C2: [tp(TOPIC, 1)]}


def test_multiple_consumers_mixed_topic_subscriptions(assignor):
    # testMultipleConsumersMixedTopicSubscriptions
    ppt = {TOPIC1: 3, TOPIC2: 2}
    subs = {C1: subscription(C1, [TOPIC1]), C2: subscription(C2, [TOPIC1, TOPIC2]),
            C3: subscription(C3, [TOPIC1])}
    got = assign(assignor, ppt, subs)
    assert got[C2] == [tp(TOPIC2, 0), tp(TOPIC2, 1)]
    # Java gives C1 topic1-0, topic1-2 and C3 topic1-1 (a HashMap-order tie): equally balanced
    assert sorted(map(len, (got[C1], got[C3]))) == [1, 2]
    verify_validity_and_balance(assignor, ppt, subs, got)
    assert is_fully_balanced(got)


def test_two_consumers_two_topics_six_partitions(assignor):  # testTwoConsumersTwoTopicsSixPartitions
    ppt = {TOPIC1: 3, TOPIC2: 3}
    subs = {C1: subscription(C1, [TOPIC1, TOPIC2]), C2: subscription(C2, [TOPIC1, TOPIC2])}
    got = assign(assignor, ppt, subs)
    assert as_set(got[C1]) == {tp(TOPIC1, 0), tp(TOPIC1, 2), tp(TOPIC2, 1)}
    assert as_set(got[C2]) == {tp(TOPIC1, 1), tp(TOPIC2, 0), tp(TOPIC2, 2)}


def test_consumer_owning_min_quota_expected_max_quota(assignor):
    # testConsumerOwningMinQuotaExpectedMaxQuota
    ppt = {TOPIC1: 2, TOPIC2: 3}
    t = [TOPIC1, TOPIC2]
    subs = {C1: v2_above(assignor, C1, t, [tp(TOPIC1, 0), tp(TOPIC2, 1)], GEN),
            C2: v2_above(assignor, C2, t, [tp(TOPIC1, 1), tp(TOPIC2, 2)], GEN)}
    got = assign(assignor, ppt, subs)
    assert as_set(got[C1]) == {tp(TOPIC1, 0), tp(TOPIC2, 1), tp(TOPIC2, 0)}
    assert as_set(got[C2]) == {tp(TOPIC1, 1), tp(TOPIC2, 2)}
    check_withheld(assignor, ppt, subs, got, [])


def test_max_quota_consumer_more_than_num_expected_max_capacity_members(assignor):
    # testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers
    ppt = {TOPIC1: 2, TOPIC2: 2}
    t = [TOPIC1, TOPIC2]
    subs = {C1: v2_above(assignor, C1, t, [tp(TOPIC1, 0), tp(TOPIC2, 0)], GEN),
            C2: v2_above(assignor, C2, t, [tp(TOPIC1, 1), tp(TOPIC2, 1)], GEN),
            C3: v2_above(assignor, C3, t, [], GEN)}
    got = assign(assignor, ppt, subs)
    # Java takes topic2-0 from consumer1 because HashMap order visits consumer2 first; which of
    # the two equal owners keeps the max quota is such a tie, so either one may give up its
    # topic2 partition (equally balanced, equally sticky).
    if coop(assignor):
        held = withheld(ppt, subs, got)
        assert held in ({tp(TOPIC2, 0)}, {tp(TOPIC2, 1)})
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert got[C3] in ([tp(TOPIC2, 0)], [tp(TOPIC2, 1)])
    assert set(got[C1]) <= {tp(TOPIC1, 0), tp(TOPIC2, 0)} and tp(TOPIC1, 0) in got[C1]
    assert set(got[C2]) <= {tp(TOPIC1, 1), tp(TOPIC2, 1)} and tp(TOPIC1, 1) in got[C2]
    assert sorted(len(v) for v in got.values()) == [1, 1, 2]


def test_all_consumers_are_under_min_quota(assignor):  # testAllConsumersAreUnderMinQuota
    ppt = {TOPIC1: 2, TOPIC2: 3}
    t = [TOPIC1, TOPIC2]
    subs = {C1: v2_above(assignor, C1, t, [tp(TOPIC1, 0)], GEN),
            C2: v2_above(assignor, C2, t, [tp(TOPIC1, 1)], GEN),
            C3: v2_above(assignor, C3, t, [], GEN)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert got == {C1: [tp(TOPIC1, 0), tp(TOPIC2, 1)], C2: [tp(TOPIC1, 1), tp(TOPIC2, 2)],
                   C3: [tp(TOPIC2, 0)]}


def test_add_remove_consumer_one_topic(assignor):  # testAddRemoveConsumerOneTopic
    ppt = {TOPIC: 3}
    subs = {C1: subscription(C1, [TOPIC])}
    got = assign(assignor, ppt, subs)
    assert got[C1] == [tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC, 2)]
    subs = {C1: v2_above(assignor, C1, [TOPIC], got[C1], GEN), C2: v2_above(assignor, C2, [TOPIC], [], GEN)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [tp(TOPIC, 2)])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert got == {C1: [tp(TOPIC, 0), tp(TOPIC, 1)], C2: [tp(TOPIC, 2)]}
    subs = {C2: v2_above(assignor, C2, [TOPIC], got[C2], GEN)}
    got = assign(assignor, ppt, subs)
    assert as_set(got[C2]) == {tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC, 2)}
    check_withheld(assignor, ppt, subs, got, [])


def test_topic_balance_after_reassignment(assignor):  # testTopicBalanceAfterReassignment
    ppt = {TOPIC1: 12, TOPIC2: 12}
    t = [TOPIC1, TOPIC2]
    subs = {C1: subscription(C1, t)}
    got = assign(assignor, ppt, subs)

    def per_topic(n):
        for parts in got.values():
            for topic in t:
                assert sum(1 for p in parts if p.topic == topic) == n

    per_topic(12)
    subs = {C1: v2_above(assignor, C1, t, got[C1], GEN), C2: v2_above(assignor, C2, t, [], GEN)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    per_topic(6)
    subs = {c: v2_above(assignor, c, t, got.get(c, []), GEN) for c in (C1, C2, C3, C4)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    per_topic(3)
    subs = {c: v2_above(assignor, c, t, got[c], GEN) for c in (C3, C4)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    per_topic(6)


def test_add_remove_two_consumers_two_topics(assignor):  # testAddRemoveTwoConsumersTwoTopics
    ppt = {TOPIC1: 3, TOPIC2: 4}
    t = [TOPIC1, TOPIC2]
    subs = {C1: subscription(C1, t), C2: subscription(C2, t)}
    got = assign(assignor, ppt, subs)
    assert as_set(got[C1]) == {tp(TOPIC1, 0), tp(TOPIC1, 2), tp(TOPIC2, 1), tp(TOPIC2, 3)}
    assert as_set(got[C2]) == {tp(TOPIC1, 1), tp(TOPIC2, 0), tp(TOPIC2, 2)}
    subs = {c: v2_above(assignor, c, t, got.get(c, []), GEN) for c in (C1, C2, C3, C4)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [tp(TOPIC1, 2), tp(TOPIC2, 3), tp(TOPIC2, 2)])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert as_set(got[C1]) == {tp(TOPIC1, 0), tp(TOPIC2, 1)}
    assert as_set(got[C2]) == {tp(TOPIC2, 0), tp(TOPIC1, 1)}
    assert as_set(got[C3]) == {tp(TOPIC1, 2), tp(TOPIC2, 3)}
    assert as_set(got[C4]) == {tp(TOPIC2, 2)}
    subs = {c: v2_above(assignor, c, t, got[c], GEN) for c in (C3, C4)}
    got = assign(assignor, ppt, subs)
    assert as_set(got[C3]) == {tp(TOPIC1, 2), tp(TOPIC2, 3), tp(TOPIC1, 0), tp(TOPIC2, 1)}
    assert as_set(got[C4]) == {tp(TOPIC2, 2), tp(TOPIC1, 1), tp(TOPIC2, 0)}
    check_withheld(assignor, ppt, subs, got, [])


def test_poor_round_robin_assignment_scenario(assignor):  # testPoorRoundRobinAssignmentScenario
    ppt = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    everything = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    subs = {"consumer1": subscription("consumer1", everything), "consumer2": subscription("consumer2", odd),
            "consumer3": subscription("consumer3", odd), "consumer4": subscription("consumer4", everything)}
    verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))


def test_add_remove_topic_two_consumers(assignor):  # testAddRemoveTopicTwoConsumers
    ppt = {TOPIC: 3}
    subs = {C1: subscription(C1, [TOPIC]), C2: subscription(C2, [TOPIC])}
    got = assign(assignor, ppt, subs)
    first1, first2 = got[C1], got[C2]
    assert sorted([len(first1), len(first2)]) == [1, 2]
    ppt = {TOPIC: 3, TOPIC2: 3}
    subs = {c: v2_above(assignor, c, [TOPIC, TOPIC2], got[c], GEN) for c in (C1, C2)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert len(got[C1]) == len(got[C2]) == 3
    assert set(first1) <= set(got[C1]) and set(first2) <= set(got[C2])
    second1, second2 = got[C1], got[C2]
    ppt = {TOPIC2: 3}
    subs = {c: v2_above(assignor, c, [TOPIC2], got[c], GEN) for c in (C1, C2)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert sorted([len(got[C1]), len(got[C2])]) == [1, 2]
    assert set(got[C1]) <= set(second1) and set(got[C2]) <= set(second2)


def _name(prefix: str, i: int, width: int) -> str:
    return f"{prefix}{str(i).zfill(len(str(width)))}"


def test_reassignment_after_one_consumer_leaves(assignor):  # testReassignmentAfterOneConsumerLeaves
    ppt = {_name("t", i, 20): i for i in range(1, 20)}
    subs = {_name("c", i, 20): subscription(_name("c", i, 20), [_name("t", j, 20) for j in range(1, i + 1)])
            for i in range(1, 20)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    subs = {c: v2_above(assignor, c, s.topics, got[c], GEN) for c, s in subs.items() if c != "c10"}
    before = got
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    # Java asserts isSticky() (no cycle of partition movements); the observable form used here:
    # no more partitions moved between survivors than the leaving member held
    moved = sum(1 for c in subs for p in before[c] if p not in got[c])
    assert moved <= len(before["c10"])


def test_reassignment_after_one_consumer_added(assignor):  # testReassignmentAfterOneConsumerAdded
    ppt = {"topic": 20}
    subs = {_name("c", i, 10): subscription(_name("c", i, 10), ["topic"]) for i in range(1, 10)}
    verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    subs[_name("c", 10, 10)] = subscription(_name("c", 10, 10), ["topic"])
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    verify_validity_and_balance(assignor, ppt, subs, got)


def test_same_subscriptions(assignor):  # testSameSubscriptions
    ppt = {_name("t", i, 15): i for i in range(1, 15)}
    subs = {_name("c", i, 9): subscription(_name("c", i, 9), list(ppt)) for i in range(1, 9)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    subs = {c: v2_above(assignor, c, s.topics, got[c], GEN) for c, s in subs.items() if c != "c5"}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    verify_validity_and_balance(assignor, ppt, subs, got)


def test_new_subscription(assignor):  # testNewSubscription
    ppt = {_name("t", i, 5): 1 for i in range(1, 5)}
    subs = {_name("c", i, 3): subscription(_name("c", i, 3), [_name("t", j, 5) for j in range(i, 3 * i - 1)])
            for i in range(3)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    c0 = _name("c", 0, 3)
    subs = {c: v2_above(assignor, c, s.topics, got[c], GEN) for c, s in subs.items()}
    subs[c0] = v2_above(assignor, c0, (*subs[c0].topics, _name("t", 1, 5)), got[c0], GEN)
    verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))


def test_move_existing_assignments(assignor):  # testMoveExistingAssignments
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {
        C1: v2_above(assignor, C1, [TOPIC1, TOPIC2], [tp(TOPIC1, 0)], GEN),
        C2: v2_above(assignor, C2, [TOPIC1, TOPIC2, TOPIC3, "topic4"], [tp(TOPIC2, 0), tp(TOPIC3, 0)], GEN),
        C3: v2_above(assignor, C3, [TOPIC2, TOPIC3, "topic4", "topic5", "topic6"],
                     [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)], GEN),
    }
    verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))


def test_stickiness(assignor):  # testStickiness
    ppt = {TOPIC1: 3}
    subs = {c: subscription(c, [TOPIC1]) for c in (C1, C2, C3, C4)}
    got = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert all(len(v) <= 1 for v in got.values())
    had = {c: v[0] for c, v in got.items() if v}
    subs = {c: v2_above(assignor, c, [TOPIC1], got[c], GEN) for c in (C2, C3, C4)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    for c, v in got.items():
        assert len(v) == 1
        assert c not in had or had[c] in v, f"stickiness not honoured for {c}"


def test_assignment_updated_for_deleted_topic(assignor):  # testAssignmentUpdatedForDeletedTopic
    ppt = {TOPIC1: 1, TOPIC3: 100}
    got = assign(assignor, ppt, {"c": subscription("c", [TOPIC1, TOPIC2, TOPIC3])})
    assert list(got) == ["c"] and len(got["c"]) == 101


def test_no_exception_thrown_when_only_subscribed_topic_deleted(assignor):
    # testNoExceptionThrownWhenOnlySubscribedTopicDeleted
    got = assign(assignor, {TOPIC: 3}, {"c": subscription("c", [TOPIC])})
    subs = {"c": v2_above(assignor, "c", [TOPIC], got["c"], GEN)}
    assert assign(assignor, {}, subs) == {"c": []}


@pytest.mark.parametrize("seed", range(10))
def test_reassignment_with_random_subscriptions_and_changes(assignor, seed):
    # testReassignmentWithRandomSubscriptionsAndChanges (100 random rounds upstream; 10 seeded here)
    rnd = random.Random(seed)
    topics = [_name("t", i, 20) for i in range(rnd.randrange(10, 20))]
    ppt = {t: i + 1 for i, t in enumerate(topics)}
    n = rnd.randrange(20, 40)

    def sublist():
        keep = list(topics)
        for _ in range(rnd.randrange(len(topics))):
            keep.pop(rnd.randrange(len(keep)))
        return sorted(keep)

    subs = {_name("c", i, 40): subscription(_name("c", i, 40), sublist()) for i in range(n)}
    a = type(assignor)()
    got = verify_validity_and_balance(a, ppt, subs, assign(a, ppt, subs))
    subs = {c: v2_above(a, c, sublist(), got[c], GEN) for c in subs}
    verify_validity_and_balance(a, ppt, subs, assign(a, ppt, subs))


def test_all_consumers_reach_expected_quota_and_are_considered_filled(assignor):
    # testAllConsumersReachExpectedQuotaAndAreConsideredFilled
    ppt = {TOPIC: 4}
    subs = {C1: v2_above(assignor, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 1)], GEN),
            C2: v2_above(assignor, C2, [TOPIC], [tp(TOPIC, 2)], GEN),
            C3: v2_above(assignor, C3, [TOPIC], [], GEN)}
    got = assign(assignor, ppt, subs)
    assert got == {C1: [tp(TOPIC, 0), tp(TOPIC, 1)], C2: [tp(TOPIC, 2)], C3: [tp(TOPIC, 3)]}
    check_withheld(assignor, ppt, subs, got, [])


STALE_PPT = {TOPIC: 3, TOPIC2: 3}


@pytest.mark.parametrize("stale_generation", [9, DEFAULT_GENERATION], ids=["stale", "none"])
def test_owned_partitions_are_invalidated_for_consumer_with_stale_generation(assignor, stale_generation):
    # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration,
    # testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration
    owned = [tp(TOPIC, 0), tp(TOPIC, 2), tp(TOPIC2, 1)]
    t = [TOPIC, TOPIC2]
    subs = {C1: v2_above(assignor, C1, t, owned, 10), C2: v2_above(assignor, C2, t, owned, stale_generation)}
    got = assign(assignor, STALE_PPT, subs)
    assert as_set(got[C1]) == set(owned)
    assert as_set(got[C2]) == {tp(TOPIC, 1), tp(TOPIC2, 0), tp(TOPIC2, 2)}
    check_withheld(assignor, STALE_PPT, subs, got, [])
    verify_validity_and_balance(assignor, STALE_PPT, subs, got)


def test_partitions_transferring_ownership_include_the_partition_claimed_by_multiple_consumers(assignor):
    # testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration
    ppt = {TOPIC: 3}
    subs = {C1: v2_above(assignor, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 1)], GEN),
            C2: v2_above(assignor, C2, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 2)], GEN),
            C3: v2_above(assignor, C3, [TOPIC], [], GEN)}
    got = assign(assignor, ppt, subs)
    check_withheld(assignor, ppt, subs, got, [tp(TOPIC, 0)])
    got = verify_validity_and_balance(assignor, ppt, subs, got)
    assert got == {C1: [tp(TOPIC, 1)], C2: [tp(TOPIC, 2)], C3: [tp(TOPIC, 0)]}


def test_ensure_partitions_assigned_to_highest_generation(assignor):
    # testEnsurePartitionsAssignedToHighestGeneration
    ppt = {TOPIC: 3, TOPIC2: 3, TOPIC3: 3}
    t = [TOPIC, TOPIC2, TOPIC3]
    subs = {
        C1: v2_above(assignor, C1, t, [tp(TOPIC, 0), tp(TOPIC2, 0), tp(TOPIC3, 0)], 10),
        C2: v2_above(assignor, C2, t, [tp(TOPIC, 1), tp(TOPIC2, 1), tp(TOPIC3, 1)], 9),
        C3: v2_above(assignor, C3, t, [tp(TOPIC2, 1), tp(TOPIC3, 0), tp(TOPIC3, 2)], 8),
    }
    got = assign(assignor, ppt, subs)
    assert as_set(got[C1]) == {tp(TOPIC, 0), tp(TOPIC2, 0), tp(TOPIC3, 0)}
    assert as_set(got[C2]) == {tp(TOPIC, 1), tp(TOPIC2, 1), tp(TOPIC3, 1)}
    assert as_set(got[C3]) == {tp(TOPIC, 2), tp(TOPIC2, 2), tp(TOPIC3, 2)}
    check_withheld(assignor, ppt, subs, got, [])
    verify_validity_and_balance(assignor, ppt, subs, got)


def test_no_reassignment_on_current_members(assignor):  # testNoReassignmentOnCurrentMembers
    ppt = {TOPIC: 3, TOPIC1: 3, TOPIC2: 3, TOPIC3: 3}
    t = [TOPIC, TOPIC2, TOPIC3, TOPIC1]
    subs = {
        C1: v2_above(assignor, C1, t, [], DEFAULT_GENERATION),
        C2: v2_above(assignor, C2, t, [tp(TOPIC, 0), tp(TOPIC2, 0), tp(TOPIC1, 0)], 9),
        C3: v2_above(assignor, C3, t, [tp(TOPIC3, 2), tp(TOPIC2, 2), tp(TOPIC1, 1)], 8),
        C4: v2_above(assignor, C4, t, [tp(TOPIC3, 1), tp(TOPIC, 1), tp(TOPIC, 2)], 7),
    }
    got = assign(assignor, ppt, subs)
    assert as_set(got[C1]) == {tp(TOPIC1, 2), tp(TOPIC2, 1), tp(TOPIC3, 0)}
    check_withheld(assignor, ppt, subs, got, [])
    verify_validity_and_balance(assignor, ppt, subs, got)


def test_owned_partitions_are_invalidated_for_consumer_with_multiple_generation(assignor):
    # testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration
    t = [TOPIC, TOPIC2]
    subs = {C1: v2_above(assignor, C1, t, [tp(TOPIC, 0), tp(TOPIC2, 1), tp(TOPIC, 1)], 10),
            C2: v2_above(assignor, C2, t, [tp(TOPIC, 0), tp(TOPIC2, 1), tp(TOPIC2, 2)], 8)}
    got = assign(assignor, STALE_PPT, subs)
    assert as_set(got[C1]) == {tp(TOPIC, 0), tp(TOPIC2, 1), tp(TOPIC, 1)}
    assert as_set(got[C2]) == {tp(TOPIC, 2), tp(TOPIC2, 2), tp(TOPIC2, 0)}
    check_withheld(assignor, STALE_PPT, subs, got, [])


def test_subscription_not_equal_and_assign_same_partition_with_3_generation(assignor):
    # testSubscriptionNotEqualAndAssignSamePartitionWith3Generation
    ppt = {TOPIC: 6, TOPIC1: 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {
            C1: v2_above(assignor, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 2)], g1),
            C2: v2_above(assignor, C2, [TOPIC], [tp(TOPIC, 1), tp(TOPIC, 2), tp(TOPIC, 3)], g2),
            C3: v2_above(assignor, C3, [TOPIC], [tp(TOPIC, 2), tp(TOPIC, 4), tp(TOPIC, 5)], g3),
            C4: v2_above(assignor, C4, [TOPIC1], [tp(TOPIC1, 0)], 2),
        }
        got = assign(assignor, ppt, subs)
        every = [p for v in got.values() for p in v]
        assert len(every) == len(set(every))
        # Java: every member 1 or 2 partitions; the cooperative one may hold one back a round
        low = 0 if coop(assignor) else 1
        assert all(low <= len(v) <= 2 for v in got.values())
        verify_validity_and_balance(assignor, ppt, subs, got)


@pytest.mark.parametrize("uniform", [True, False], ids=["uniform", "general"])
def test_assignment_with_multiple_generations1(assignor, uniform):  # testAssignmentWithMultipleGenerations1
    ppt = {TOPIC: 6, TOPIC2: 6}
    every = [TOPIC, TOPIC2]
    t2 = every if uniform else [TOPIC]
    subs = {C1: subscription(C1, every), C2: subscription(C2, t2), C3: subscription(C3, every)}
    r1 = assign(assignor, ppt, subs)
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    subs = {C1: v2_above(assignor, C1, every, r1[C1], GEN), C2: v2_above(assignor, C2, t2, r1[C2], GEN)}
    r2 = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert len(r2[C1]) == len(r2[C2]) == 6
    if uniform:
        assert set(r1[C1]) <= set(r2[C1])
    assert set(r1[C2]) <= set(r2[C2])
    assert set(r2[C2]) & set(r1[C3])
    subs = {C2: v2_above(assignor, C2, t2, r2[C2], 2), C3: v2_above(assignor, C3, every, r1[C3], 1)}
    r3 = assign(assignor, ppt, subs)
    if not coop(assignor):
        assert len(r3[C2]) == len(r3[C3]) == 6
    assert not set(r3[C2]) & set(r3[C3])
    r3 = verify_validity_and_balance(assignor, ppt, subs, r3, generation=3)
    assert len(r3[C2]) == len(r3[C3]) == 6


@pytest.mark.parametrize("uniform", [True, False], ids=["uniform", "general"])
def test_assignment_with_multiple_generations2(assignor, uniform):  # testAssignmentWithMultipleGenerations2
    ppt = {TOPIC: 4, TOPIC2: 4, TOPIC3: 4}
    every = [TOPIC, TOPIC2, TOPIC3]
    t1 = every if uniform else [TOPIC]
    t3 = every if uniform else [TOPIC, TOPIC2]
    subs = {C1: subscription(C1, t1), C2: subscription(C2, every), C3: subscription(C3, t3)}
    r1 = assign(assignor, ppt, subs)
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    subs = {C2: v2_above(assignor, C2, every, r1[C2], 1)}
    r2 = assign(assignor, ppt, subs)
    assert len(r2[C2]) == 12 and set(r1[C2]) <= set(r2[C2])
    subs = {C1: v2_above(assignor, C1, t1, r1[C1], 1), C2: v2_above(assignor, C2, every, r2[C2], 2),
            C3: v2_above(assignor, C3, t3, r1[C3], 1)}
    r3 = verify_validity_and_balance(assignor, ppt, subs, assign(assignor, ppt, subs), generation=3)
    assert [len(r3[c]) for c in (C1, C2, C3)] == [4, 4, 4]


@pytest.mark.parametrize("uniform", [True, False], ids=["uniform", "general"])
def test_assignment_with_conflicting_previous_generations(assignor, uniform):
    # testAssignmentWithConflictingPreviousGenerations
    ppt = {TOPIC: 4, TOPIC2: 4, TOPIC3: 4}
    every = [TOPIC, TOPIC2, TOPIC3]
    t1 = every if uniform else [TOPIC]
    t2 = every if uniform else [TOPIC, TOPIC2]
    c1_0 = ([tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC, 2), tp(TOPIC2, 2), tp(TOPIC2, 3), tp(TOPIC3, 0)]
            if uniform else [tp(TOPIC, p) for p in range(4)])
    c2_0 = [tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC2, 0), tp(TOPIC2, 1), tp(TOPIC2, 2), tp(TOPIC2, 3)]
    c3_0 = [tp(TOPIC, 2), tp(TOPIC, 3), tp(TOPIC3, 0), tp(TOPIC3, 1), tp(TOPIC3, 2), tp(TOPIC3, 3)]
    subs = {C1: v2_above(assignor, C1, t1, c1_0, 1), C2: v2_above(assignor, C2, t2, c2_0, 2),
            C3: v2_above(assignor, C3, every, c3_0, 2)}
    got = assign(assignor, ppt, subs)
    if not coop(assignor):
        assert [len(got[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    assert set(got[C2]) <= set(c2_0) and set(got[C3]) <= set(c3_0)
    got = verify_validity_and_balance(assignor, ppt, subs, got, generation=3)
    assert [len(got[c]) for c in (C1, C2, C3)] == [4, 4, 4]


# ------------------------------------------------------------------ StickyAssignorTest


def test_sticky_all_consumers_have_owned_partition_invalidated_equal():
    # StickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumers
    # InSameGenerationWithEqualPartitionsPerConsumer
    a = StickyAssignor()
    ppt = {TOPIC: 3}
    subs = {C1: v2_above(a, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 1)], GEN),
            C2: v2_above(a, C2, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 2)], GEN),
            C3: v2_above(a, C3, [TOPIC], [], GEN)}
    got = assign(a, ppt, subs)
    assert got == {C1: [tp(TOPIC, 1)], C2: [tp(TOPIC, 2)], C3: [tp(TOPIC, 0)]}


def test_sticky_all_consumers_have_owned_partition_invalidated_unequal():
    # StickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumers
    # InSameGenerationWithUnequalPartitionsPerConsumer
    a = StickyAssignor()
    ppt = {TOPIC: 4}
    subs = {C1: v2_above(a, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 1)], GEN),
            C2: v2_above(a, C2, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 2)], GEN),
            C3: v2_above(a, C3, [TOPIC], [], GEN)}
    got = assign(a, ppt, subs)
    assert got == {C1: [tp(TOPIC, 1), tp(TOPIC, 3)], C2: [tp(TOPIC, 2)], C3: [tp(TOPIC, 0)]}


def test_sticky_schema_backward_compatibility():  # StickyAssignorTest.testSchemaBackwardCompatibility
    from assignment import Subscription
    from assignment.protocol import encode_sticky_user_data

    a = StickyAssignor()
    ppt = {TOPIC: 3}
    c1_0 = [tp(TOPIC, 0), tp(TOPIC, 2)]
    c2_0 = [tp(TOPIC, 1)]
    subs = {C1: v2_above(a, C1, [TOPIC], c1_0, 1),
            # buildSubscriptionWithOldSchema: v0 user data (no generation), no owned partitions
            C2: Subscription(C2, (TOPIC,), encode_sticky_user_data(c2_0, None)),
            C3: subscription(C3, [TOPIC])}
    got = assign(a, ppt, subs)
    assert [len(got[c]) for c in (C1, C2, C3)] == [1, 1, 1]
    assert set(got[C1]) <= set(c1_0) and set(got[C2]) <= set(c2_0)


def test_sticky_member_data_with_inconsistent_data():  # StickyAssignorTest.testMemberDataWithInconsistentData
    from assignment import MemberAssignment, Subscription

    a = StickyAssignor()
    a.on_assignment(MemberAssignment((tp(TOPIC, 1),)), GEN)
    sub = Subscription("c", (TOPIC,), a.subscription_user_data((TOPIC,)), (tp(TOPIC, 0),))
    md = StickyAssignor.member_data(sub)
    assert md.partitions == (tp(TOPIC, 1),) and md.generation == GEN


def test_sticky_member_data_will_honor_user_data():  # StickyAssignorTest.testMemberDataWillHonorUserData
    from assignment import Subscription
    from assignment.protocol import encode_sticky_user_data

    owned = (tp(TOPIC1, 0), tp(TOPIC2, 1))
    sub = Subscription("c", (TOPIC,), encode_sticky_user_data(owned, GEN - 1), (), GEN)
    md = StickyAssignor.member_data(sub)
    assert md.partitions == owned and md.generation == GEN - 1


@pytest.mark.parametrize("kind", STICKY_KINDS, ids=lambda c: c.name)
def test_assignor_with_old_version_subscriptions(kind):
    # StickyAssignorTest / CooperativeStickyAssignorTest.testAssignorWithOldVersionSubscriptions
    from _java_reference import v0_sticky

    a = kind()
    ppt = {TOPIC1: 3}
    first = (v0_sticky(C1, [TOPIC1], [tp(TOPIC1, 0)], GEN) if kind is StickyAssignor
             else v1(a, C1, [TOPIC1], [tp(TOPIC1, 0)], GEN))
    subs = {C1: first, C2: v1(a, C2, [TOPIC1], [tp(TOPIC1, 1)], GEN), C3: v2_above(a, C3, [TOPIC1], [], GEN)}
    got = assign(a, ppt, subs)
    assert got == {C1: [tp(TOPIC1, 0)], C2: [tp(TOPIC1, 1)], C3: [tp(TOPIC1, 2)]}


def test_member_data_all_subscription_versions():  # AbstractStickyAssignorTest.testMemberData
    from _java_reference import v0_sticky

    owned = (tp(TOPIC1, 0), tp(TOPIC2, 1))
    s = StickyAssignor()
    for sub in (v0_sticky("c", [TOPIC], owned, GEN), v1(s, "c", [TOPIC], owned, GEN),
                v2_above(s, "c", [TOPIC], owned, GEN)):
        md = StickyAssignor.member_data(sub)
        assert md.partitions == owned and md.generation == GEN
    c = CooperativeStickyAssignor()  # cooperative has no v0 (it needs owned partitions)
    for sub in (v1(c, "c", [TOPIC], owned, GEN), v2_above(c, "c", [TOPIC], owned, GEN)):
        md = CooperativeStickyAssignor.member_data(sub)
        assert md.partitions == owned and md.generation == GEN


# ------------------------------------------------------------------ CooperativeStickyAssignorTest


def test_cooperative_encode_and_decode_generation():
    # CooperativeStickyAssignorTest.testEncodeAndDecodeGeneration, testDecodeGeneration
    from assignment import MemberAssignment, Subscription

    a = CooperativeStickyAssignor()
    sub = Subscription("c", (TOPIC,), a.subscription_user_data((TOPIC,)))
    assert CooperativeStickyAssignor.member_data(sub).generation == DEFAULT_GENERATION
    a.on_assignment(MemberAssignment(()), 10)
    sub = Subscription("c", (TOPIC,), a.subscription_user_data((TOPIC,)))
    assert CooperativeStickyAssignor.member_data(sub).generation == 10
    assert CooperativeStickyAssignor.member_data(Subscription("c", (TOPIC,))).generation is None


@pytest.mark.parametrize("n,c1", [(3, [tp(TOPIC, 1)]), (4, [tp(TOPIC, 1), tp(TOPIC, 3)])],
                         ids=["equal", "unequal"])
def test_cooperative_all_consumers_have_owned_partition_invalidated(n, c1):
    # CooperativeStickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedBy
    # MultipleConsumersInSameGenerationWith{Equal,Unequal}PartitionsPerConsumer
    a = CooperativeStickyAssignor()
    ppt = {TOPIC: n}
    subs = {C1: v2_above(a, C1, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 1)], GEN),
            C2: v2_above(a, C2, [TOPIC], [tp(TOPIC, 0), tp(TOPIC, 2)], GEN),
            C3: v2_above(a, C3, [TOPIC], [], GEN)}
    got = assign(a, ppt, subs)
    # topic-0 counts as owned: nobody gets it until both have revoked it
    assert got == {C1: c1, C2: [tp(TOPIC, 2)], C3: []}
    verify_validity_and_balance(a, ppt, subs, got)


def test_cooperative_member_data_with_inconsistent_data():
    # CooperativeStickyAssignorTest.testMemberDataWithInconsistentData
    from assignment import MemberAssignment, Subscription

    a = CooperativeStickyAssignor()
    a.on_assignment(MemberAssignment((tp(TOPIC, 1),)), GEN)
    sub = Subscription("c", (TOPIC,), a.subscription_user_data((TOPIC,)), (tp(TOPIC, 0),))
    md = CooperativeStickyAssignor.member_data(sub)
    assert md.partitions == (tp(TOPIC, 0),) and md.generation == GEN


@pytest.mark.parametrize("user_data_generation", [GEN, GEN - 1], ids=["equal", "higher"])
def test_cooperative_member_data_with_empty_partitions(user_data_generation):
    # CooperativeStickyAssignorTest.testMemberDataWithEmptyPartitionsAndEqualGeneration,
    # testMemberDataWithEmptyPartitionsAndHigherGeneration
    from assignment import Subscription
    from assignment.protocol import encode_cooperative_user_data

    sub = Subscription("c", (TOPIC,), encode_cooperative_user_data(user_data_generation), (), GEN)
    md = CooperativeStickyAssignor.member_data(sub)
    assert md.partitions == () and md.generation == GEN


def test_cooperative_uniform_subscription_transfer_ownership_list_is_right():
    # CooperativeStickyAssignorTest.testUniformSubscriptionTransferOwnershipListIsRight (the rack
    # part is not ported; without racks nothing moves, with them two partitions change owner)
    a = CooperativeStickyAssignor()
    ppt = {TOPIC1: 4}
    subs = {"c0": v2_above(a, "c0", [TOPIC1], [tp(TOPIC1, 0), tp(TOPIC1, 1)], GEN),
            "c1": v2_above(a, "c1", [TOPIC1], [tp(TOPIC1, 2), tp(TOPIC1, 3)], GEN)}
    got = assign(a, ppt, subs)
    assert withheld(ppt, subs, got) == set()


# ------------------------------------------------------------------ issue #9, defect 1


@pytest.mark.parametrize("kind", STICKY_KINDS, ids=lambda c: c.name)
def test_stale_claim_does_not_withhold_from_the_rightful_owner(kind):
    """c1 owns t-0 at generation 2, c2 claims it from generation 1: c1 keeps it (Java)."""
    a = kind()
    ppt = {"t": 1}
    subs = {"c1": v2_above(a, "c1", ["t"], [tp("t", 0)], 2),
            "c2": v2_above(a, "c2", ["t"], [tp("t", 0)], 1)}
    assert assign(a, ppt, subs) == {"c1": [tp("t", 0)], "c2": []}


@pytest.mark.parametrize("kind", STICKY_KINDS, ids=lambda c: c.name)
def test_stale_claim_does_not_withhold_on_the_general_path(kind):
    a = kind()
    ppt = {"t": 2, "u": 1}
    subs = {"c1": v2_above(a, "c1", ["t"], [tp("t", 0), tp("t", 1)], 2),
            "c2": v2_above(a, "c2", ["t", "u"], [tp("t", 0)], 1)}
    assert assign(a, ppt, subs) == {"c1": [tp("t", 0), tp("t", 1)], "c2": [tp("u", 0)]}
