"""The Java client's RangeAssignorTest and RoundRobinAssignorTest, ported (apache/kafka
clients/src/test/java/org/apache/kafka/clients/consumer/). Each test names the method it ports;
the rack-aware Range cases live in test_assignment_assignors.py (KIP-881)."""

from __future__ import annotations

import pytest

from assignment import RangeAssignor, RoundRobinAssignor, Subscription
from assignment.model import TopicPartition as TP

T1, T2 = "topic1", "topic2"


def run(assignor, ppt, subs):
    from assignment import ClusterMetadata

    return {m: list(a.partitions) for m, a in assignor.assign(ClusterMetadata(ppt), subs).items()}


def sub(member, topics, instance=None):
    return Subscription(member, tuple(topics), group_instance_id=instance)


def ps(*specs):
    return sorted(TP(t, p) for t, p in specs)


@pytest.mark.parametrize("kind", [RangeAssignor, RoundRobinAssignor], ids=["range", "roundrobin"])
class TestCommon:
    def test_one_consumer_no_topic(self, kind):  # testOneConsumerNoTopic
        assert run(kind(), {}, {"c": sub("c", [])}) == {"c": []}

    def test_one_consumer_nonexistent_topic(self, kind):  # testOneConsumerNonexistentTopic
        assert run(kind(), {}, {"c": sub("c", ["topic"])}) == {"c": []}

    def test_one_consumer_one_topic(self, kind):  # testOneConsumerOneTopic
        assert run(kind(), {"topic": 3}, {"c": sub("c", ["topic"])}) == {
            "c": ps(("topic", 0), ("topic", 1), ("topic", 2))}

    def test_only_assigns_partitions_from_subscribed_topics(self, kind):
        # testOnlyAssignsPartitionsFromSubscribedTopics
        got = run(kind(), {"topic": 3, "other": 3}, {"c": sub("c", ["topic"])})
        assert got == {"c": ps(("topic", 0), ("topic", 1), ("topic", 2))}

    def test_one_consumer_multiple_topics(self, kind):  # testOneConsumerMultipleTopics
        got = run(kind(), {T1: 1, T2: 2}, {"c": sub("c", [T1, T2])})
        assert got == {"c": ps((T1, 0), (T2, 0), (T2, 1))}

    def test_two_consumers_one_topic_one_partition(self, kind):  # testTwoConsumersOneTopicOnePartition
        got = run(kind(), {"topic": 1}, {"c1": sub("c1", ["topic"]), "c2": sub("c2", ["topic"])})
        assert got == {"c1": [TP("topic", 0)], "c2": []}

    def test_two_consumers_one_topic_two_partitions(self, kind):  # testTwoConsumersOneTopicTwoPartitions
        got = run(kind(), {"topic": 2}, {"c1": sub("c1", ["topic"]), "c2": sub("c2", ["topic"])})
        assert got == {"c1": [TP("topic", 0)], "c2": [TP("topic", 1)]}

    def test_multiple_consumers_mixed_topics(self, kind):  # testMultipleConsumersMixedTopics
        subs = {"consumer1": sub("consumer1", [T1]), "consumer2": sub("consumer2", [T1, T2]),
                "consumer3": sub("consumer3", [T1])}
        assert run(kind(), {T1: 3, T2: 2}, subs) == {
            "consumer1": [TP(T1, 0)], "consumer2": ps((T1, 1), (T2, 0), (T2, 1)),
            "consumer3": [TP(T1, 2)]}


SIX = {T1: 3, T2: 3}


def test_range_two_consumers_two_topics_six_partitions():  # Range.testTwoConsumersTwoTopicsSixPartitions
    got = run(RangeAssignor(), SIX, {"consumer1": sub("consumer1", [T1, T2]),
                                     "consumer2": sub("consumer2", [T1, T2])})
    assert got == {"consumer1": ps((T1, 0), (T1, 1), (T2, 0), (T2, 1)),
                   "consumer2": ps((T1, 2), (T2, 2))}


@pytest.mark.parametrize("high_instance", ["instance2", None], ids=["both-static", "one-static"])
def test_range_static_consumers_two_topics_six_partitions(high_instance):
    # Range.testTwoStaticConsumersTwoTopicsSixPartitions,
    # Range.testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    subs = {"consumer-b": sub("consumer-b", [T1, T2], "instance1"),
            "consumer-a": sub("consumer-a", [T1, T2], high_instance)}
    got = run(RangeAssignor(), SIX, subs)
    assert got == {"consumer-b": ps((T1, 0), (T1, 1), (T2, 0), (T2, 1)),
                   "consumer-a": ps((T1, 2), (T2, 2))}


def test_range_static_member_assignment_persistent():  # Range.testStaticMemberRangeAssignmentPersistent
    ppt = {T1: 5, T2: 4}
    subs = {f"consumer{i}": sub(f"consumer{i}", [T1, T2], f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub("consumer4", [T1, T2])
    want = {"consumer1": ps((T1, 0), (T1, 1), (T2, 0)), "consumer2": ps((T1, 2), (T2, 1)),
            "consumer3": ps((T1, 3), (T2, 2)), "consumer4": ps((T1, 4), (T2, 3))}
    assert run(RangeAssignor(), ppt, subs) == want
    del subs["consumer4"]
    subs["consumer5"] = sub("consumer5", [T1, T2])
    want["consumer5"] = want.pop("consumer4")
    assert run(RangeAssignor(), ppt, subs) == want


def _by_instance(got, subs):
    return {subs[m].group_instance_id: v for m, v in got.items()}


def test_range_static_member_assignment_persistent_after_member_id_changes():
    # Range.testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges
    ppt = {T1: 5, T2: 5}
    subs = {f"consumer{i}": sub(f"consumer{i}", [T1, T2], f"instance{i}") for i in (1, 2, 3)}
    want = {"instance1": ps((T1, 0), (T1, 1), (T2, 0), (T2, 1)),
            "instance2": ps((T1, 2), (T1, 3), (T2, 2), (T2, 3)),
            "instance3": ps((T1, 4), (T2, 4))}
    assert _by_instance(run(RangeAssignor(), ppt, subs), subs) == want
    swapped = {"consumer1": subs["consumer1"], "consumer4": subs["consumer3"], "consumer5": subs["consumer2"]}
    swapped = {m: Subscription(m, s.topics, group_instance_id=s.group_instance_id) for m, s in swapped.items()}
    assert _by_instance(run(RangeAssignor(), ppt, swapped), swapped) == want


def test_roundrobin_two_dynamic_consumers_two_topics_six_partitions():
    # RoundRobin.testTwoDynamicConsumersTwoTopicsSixPartitions
    got = run(RoundRobinAssignor(), SIX, {"consumer1": sub("consumer1", [T1, T2]),
                                          "consumer2": sub("consumer2", [T1, T2])})
    assert got == {"consumer1": ps((T1, 0), (T1, 2), (T2, 1)),
                   "consumer2": ps((T1, 1), (T2, 0), (T2, 2))}


@pytest.mark.parametrize("high_instance", ["instance2", None], ids=["both-static", "one-static"])
def test_roundrobin_static_consumers_two_topics_six_partitions(high_instance):
    # RoundRobin.testTwoStaticConsumersTwoTopicsSixPartitions,
    # RoundRobin.testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    subs = {"consumer-b": sub("consumer-b", [T1, T2], "instance1"),
            "consumer-a": sub("consumer-a", [T1, T2], high_instance)}
    got = run(RoundRobinAssignor(), SIX, subs)
    assert got == {"consumer-b": ps((T1, 0), (T1, 2), (T2, 1)),
                   "consumer-a": ps((T1, 1), (T2, 0), (T2, 2))}


def test_roundrobin_static_member_assignment_persistent():
    # RoundRobin.testStaticMemberRoundRobinAssignmentPersistent
    subs = {f"consumer{i}": sub(f"consumer{i}", [T1, T2], f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub("consumer4", [T1, T2])
    want = {"consumer1": ps((T1, 0), (T2, 1)), "consumer2": ps((T1, 1), (T2, 2)),
            "consumer3": [TP(T1, 2)], "consumer4": [TP(T2, 0)]}
    assert run(RoundRobinAssignor(), SIX, subs) == want
    del subs["consumer4"]
    subs["consumer5"] = sub("consumer5", [T1, T2])
    want["consumer5"] = want.pop("consumer4")
    assert run(RoundRobinAssignor(), SIX, subs) == want


def test_roundrobin_static_member_assignment_persistent_after_member_id_changes():
    # RoundRobin.testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges
    ppt = {T1: 5, T2: 5}
    subs = {f"consumer{i}": sub(f"consumer{i}", [T1, T2], f"instance{i}") for i in (1, 2, 3)}
    want = {"instance1": ps((T1, 0), (T1, 3), (T2, 1), (T2, 4)),
            "instance2": ps((T1, 1), (T1, 4), (T2, 2)),
            "instance3": ps((T1, 2), (T2, 0), (T2, 3))}
    assert _by_instance(run(RoundRobinAssignor(), ppt, subs), subs) == want
    swapped = {"consumer1": subs["consumer1"], "consumer4": subs["consumer3"], "consumer5": subs["consumer2"]}
    swapped = {m: Subscription(m, s.topics, group_instance_id=s.group_instance_id) for m, s in swapped.items()}
    assert _by_instance(run(RoundRobinAssignor(), ppt, swapped), swapped) == want
