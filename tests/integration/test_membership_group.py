"""The driver's group member against real brokers and a real librdkafka consumer in the same group.

No Spark here: these tests pin the membership layer (our assignors on the wire, commits with
generation, fencing, leaving) so that the stream tests can build on it.
"""

from __future__ import annotations

import time

import pytest
from conformance.kafka_ops import add_partitions

from assignment.model import TopicPartition
from helpers import PolledConsumer, committed_offsets, consumer_conf, group_member, wait_until
from spark_groupsource.devbroker import DevBroker
from spark_groupsource.group.classic_member import GroupMembership

OFFSET_COMMIT = 8
ILLEGAL_GENERATION = 22
COORDINATOR_LOAD_IN_PROGRESS = 14
LEAVE_GROUP = 13


def _member(broker, group, topic, assignor="range", **cfg) -> GroupMembership:
    return group_member(broker, group, topic, assignor, **cfg)


def _owning(m: GroupMembership, topic: str, partitions: int) -> dict[TopicPartition, int]:
    """Wait until ``m`` alone owns every partition of ``topic``, with no rebalance under way.

    The first round may assign nothing: the leader can join before its metadata has the
    topic that was just created, and its metadata watch then starts a second round.
    """
    assert m.wait_for_assignment(60), m.describe()
    want = {TopicPartition(topic, p) for p in range(partitions)}

    def check():
        s = m.snapshot()
        return dict(s.owned) if set(s.owned) == want and not s.rebalancing else None

    return wait_until(check, timeout=30, message=f"ownership of {topic}'s {partitions} partitions")


def _settled(m: GroupMembership, other, total: int):
    def check():
        s = m.snapshot()
        mine, theirs = set(s.owned), other.snapshot()
        if s.rebalancing or not mine or not theirs or len(mine) + len(theirs) != total:
            return None
        return mine, theirs

    return check


@pytest.mark.compat(only={"assignor": ["cooperative-sticky"]})
@pytest.mark.kafka39  # every assignor on 3.9.1 with make test-compat
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_group_shared_with_librdkafka_consumer(broker, unique_name, assignor):
    """Our member and a librdkafka member split the partitions disjointly, both ways round
    (whoever leads, the other decodes its bytes), and hand everything over when one leaves."""
    topic, group = unique_name("interop"), unique_name("g")
    broker.create_topic(topic, 6)
    ours = _member(broker, group, topic, assignor)
    ours.start()
    _owning(ours, topic, 6)
    theirs = PolledConsumer(consumer_conf(broker, group, partition_assignment_strategy=assignor), topic)
    try:
        mine, other = wait_until(_settled(ours, theirs, 6), timeout=60, message="a 6-partition split")
        assert mine.isdisjoint(other)
        assert mine | other == {TopicPartition(topic, p) for p in range(6)}
        assert len(mine) == 3 and len(other) == 3
    finally:
        theirs.close()
    wait_until(lambda: len(ours.snapshot().owned) == 6 and not ours.snapshot().rebalancing,
               timeout=60, message="our member to own every partition after the other left")
    ours.close()


def test_commit_uses_generation_and_reads_back(broker, unique_name):
    topic, group = unique_name("commit"), unique_name("g")
    broker.create_topic(topic, 2)
    m = _member(broker, group, topic)
    m.start()
    try:
        _owning(m, topic, 2)
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        result = m.commit({tp0: 7, tp1: 3})
        assert result.committed == {tp0, tp1} and not result.lost
        assert m.committed([tp0, tp1]) == {tp0: 7, tp1: 3}
        assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 7, 1: 3}
        # a partition we do not own is never committed
        stranger = TopicPartition(topic, 9)
        assert m.commit({stranger: 1}).skipped == {stranger}
    finally:
        m.close()


@pytest.fixture
def private_mock(mock_broker):
    """A mock cluster of this test's own: injected errors are cluster-wide, so a shared broker
    would let another client consume them (or leave them behind). Needs the embedded mock."""
    with DevBroker("mock") as b:
        yield b


def test_fenced_commit_marks_partitions_lost(private_mock, unique_name):
    mock_broker = private_mock
    topic, group = unique_name("fence"), unique_name("g")
    mock_broker.create_topic(topic, 2)
    m = _member(mock_broker, group, topic)
    m.start()
    try:
        _owning(m, topic, 2)
        tp0 = TopicPartition(topic, 0)
        mock_broker.mock.push_request_errors(OFFSET_COMMIT, [ILLEGAL_GENERATION])
        result = m.commit({tp0: 5})
        assert result.lost == {tp0} and not result.committed, result
        assert m.counters.fenced_commits == 1 and m.counters.partitions_lost >= 1
        assert committed_offsets(mock_broker.bootstrap, group, topic, 2)[0] is None
        # the member rejoins and owns the partition again, under a new acquisition serial
        wait_until(lambda: tp0 in m.snapshot().owned, timeout=30, message="rejoin after fencing")
    finally:
        m.close()


def test_retriable_commit_error_is_retried(private_mock, unique_name):
    mock_broker = private_mock
    topic, group = unique_name("retry"), unique_name("g")
    mock_broker.create_topic(topic, 1)
    m = _member(mock_broker, group, topic)
    m.start()
    try:
        _owning(m, topic, 1)
        tp0 = TopicPartition(topic, 0)
        mock_broker.mock.push_request_errors(OFFSET_COMMIT, [COORDINATOR_LOAD_IN_PROGRESS] * 2)
        result = m.commit({tp0: 4})
        assert result.committed == {tp0}, result
        assert committed_offsets(mock_broker.bootstrap, group, topic, 1) == {0: 4}
    finally:
        m.close()


def test_close_leaves_group_promptly(broker, unique_name):
    """After close(), the other member gets everything well before the session timeout."""
    topic, group = unique_name("leave"), unique_name("g")
    broker.create_topic(topic, 4)
    a, b = _member(broker, group, topic), _member(broker, group, topic)
    a.start()
    _owning(a, topic, 4)
    b.start()
    try:
        wait_until(_settled(a, b_proxy := _Owned(b), 4), timeout=60, message="a 2+2 split")
        if broker.mock is not None:
            broker.mock.start_request_tracking()
        t0 = time.monotonic()
        b.close()
        wait_until(lambda: len(a.snapshot().owned) == 4, timeout=60, message="takeover")
        if broker.mock is not None:
            # the mock's rebalances take a join window plus our leader sync delay whatever
            # started them, so time says little there: check the LeaveGroup itself
            requests = broker.mock.requests()
            broker.mock.stop_request_tracking()
            broker.mock.clear_requests()
            assert LEAVE_GROUP in {api for _broker, api in requests}
        else:
            # a LeaveGroup triggers the rebalance at once; without it we would wait a session
            # timeout (plus Tansu's JoinGroup parking of half a session timeout)
            assert time.monotonic() - t0 < broker.recommended_session_timeout_ms / 1000 * 2
        assert b_proxy is not None
    finally:
        a.close()
        b.close()


class _Owned:
    def __init__(self, m: GroupMembership):
        self.m = m

    def snapshot(self):
        return set(self.m.snapshot().owned)


def test_drain_waits_for_in_flight_batch(broker, unique_name):
    """Eager rebalance: revocation waits for the in-flight batch to complete and commit.

    Real Kafka accepts a commit with the current generation while the group prepares a
    rebalance (that is what Java's onPartitionsRevoked commits rely on). librdkafka's mock
    answers REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION there instead (depending on how far the
    rebalance got); the member then reports the commit as failed or lost and the next owner
    re-reads the batch: at-least-once, never lost.
    """
    topic, group = unique_name("drain"), unique_name("g")
    broker.create_topic(topic, 2)
    # Kafka waits for a's JoinGroup up to the rebalance timeout (max.poll.interval.ms, 20 s
    # here); the mock closes the join window a session timeout less 1 s after b's JoinGroup
    # whatever the rebalance timeout, then moves on without a (rd_kafka_mock_cgrp_rebalance).
    # With the mock's 3 s session a loaded machine's drain (1 s + a commit) did not fit in 2 s
    # (CI, 2026-11-27): a session of 10 s gives the mock's window 9 s.
    client = {"session_timeout_ms": 10_000} if broker.backend == "mock" else {}
    a = _member(broker, group, topic, client=client)
    a.start()
    owned = set(_owning(a, topic, 2))
    a.batch_planned(owned)
    b = _member(broker, group, topic, client=client)
    b.start()
    try:
        wait_until(lambda: a.snapshot().revoking, timeout=60, message="revocation to start")
        time.sleep(1.0)
        assert set(a.snapshot().owned) == owned, "partitions were given up while a batch was in flight"
        assert not a.may_plan()
        result = a.commit({tp: 1 for tp in owned})
        a.batch_completed()
        wait_until(_settled(a, _Owned(b), 2), timeout=60, message="a 1+1 split after the drain")
        committed = committed_offsets(broker.bootstrap, group, topic, 2)
        if broker.backend == "mock":
            assert (result.failed or result.lost) == owned and not result.committed
            assert committed == {0: None, 1: None}
        else:
            assert result.committed == owned
            assert committed == {0: 1, 1: 1}
    finally:
        a.close()
        b.close()


@pytest.mark.compat
def test_static_member_keeps_its_assignment_across_a_restart(kafka_broker, unique_name):
    """KIP-345 on Kafka: a static member that restarts within the session timeout (no
    LeaveGroup) gets its partitions back and the other member keeps its own, with no rebalance
    (same generation). A duplicate instance id is fenced: test_kafka_coordinator.py. (Not on
    the mock, which has no static membership, nor Tansu, which does not fence duplicates.)"""
    broker = kafka_broker
    topic, group = unique_name("static"), unique_name("g")
    broker.create_topic(topic, 4)
    session = {"session_timeout_ms": broker.recommended_session_timeout_ms}
    a = _member(broker, group, topic, group_instance_id="member-a", client=session)
    b = _member(broker, group, topic, group_instance_id="member-b", client=session)
    a.start()
    _owning(a, topic, 4)
    b.start()
    try:
        a_parts, b_parts = wait_until(_settled(a, _Owned(b), 4), timeout=90, message="a 2+2 split")
        b_before = (b.snapshot().generation, dict(b.snapshot().owned), b.counters.rebalances)
        a.close()  # static: no LeaveGroup, the coordinator keeps member-a's slot
        a2 = _member(broker, group, topic, group_instance_id="member-a", client=session)
        a2.start()
        try:
            t0 = time.monotonic()
            assert a2.wait_for_assignment(60), a2.describe()
            mine, theirs = wait_until(_settled(a2, _Owned(b), 4), timeout=60,
                                      message="the restarted static member to get its partitions back")
            assert (mine, theirs) == (a_parts, b_parts)
            # no rebalance reached b: same generation, same acquisitions, nothing revoked
            assert (b.snapshot().generation, dict(b.snapshot().owned), b.counters.rebalances) == b_before
            # Kafka hands the returning static member the current generation's assignment
            assert a2.snapshot().generation == b_before[0]
            print(f"static restart: partitions back after {time.monotonic() - t0:.2f}s, "
                  f"generation {b_before[0]} unchanged")
        finally:
            a2.close()
    finally:
        b.close()


def test_cooperative_rebalance_keeps_unrevoked_partitions_flowing(broker, unique_name):
    """KIP-429: when a second member joins, the first gives up only what moves; the partitions
    it keeps never leave its ownership (same acquisition serial) and stay plannable."""
    topic, group = unique_name("coop"), unique_name("g")
    broker.create_topic(topic, 4)
    a = _member(broker, group, topic, "cooperative-sticky")
    a.start()
    before = _owning(a, topic, 4)
    assert a.cooperative
    b = _member(broker, group, topic, "cooperative-sticky")
    b.start()
    seen_revoking = []

    def settled():
        s = a.snapshot()
        if s.revoking:
            seen_revoking.append(set(s.revoking))
            # what the planner may still read while the revoked ones drain
            assert set(s.owned) - s.revoking, "every partition stopped during a cooperative rebalance"
        mine, theirs = set(s.owned), set(b.snapshot().owned)
        return len(mine) == 2 and len(theirs) == 2 and not mine & theirs and not s.rebalancing

    try:
        wait_until(settled, timeout=90, interval=0.02, message="a cooperative 2+2 split")
        kept = a.snapshot().owned
        assert all(before[tp] == serial for tp, serial in kept.items()), "kept partitions were re-acquired"
        assert all(r.isdisjoint(kept) for r in seen_revoking)
    finally:
        a.close()
        b.close()


def test_commit_that_meets_a_rebalance_is_kept_and_sent_after(broker, unique_name):
    """A commit refused because a rebalance is under way is not dropped: the member keeps the
    offsets and sends them once the generation is stable (kept partitions by the planner's
    flush, revoked ones before they are handed over), so the group's offset never stays behind."""
    topic, group = unique_name("kept"), unique_name("g")
    broker.create_topic(topic, 4)
    a = _member(broker, group, topic, "cooperative-sticky")
    a.start()
    parts = set(_owning(a, topic, 4))
    b = _member(broker, group, topic, "cooperative-sticky")
    b.start()
    try:
        offset = 0

        def commit_until_refused():
            nonlocal offset
            offset += 1
            result = a.commit({tp: offset for tp in parts})
            return result if result.failed else None

        refused = wait_until(commit_until_refused, timeout=60, interval=0.02,
                             message="a commit refused by the rebalance b's join starts")
        # usually all four are still a's; on Tansu the first refusal can come after the
        # cooperative revocation already handed two over (those are skipped, not kept)
        kept = refused.failed
        assert kept and kept | refused.skipped == parts and not refused.lost, refused
        assert a.pending() == {tp: offset for tp in kept}
        wait_until(_settled(a, _Owned(b), 4), timeout=90, message="a 2+2 split")
        a.flush_pending()
        assert not a.pending()
        committed = committed_offsets(broker.bootstrap, group, topic, 4)
        # the kept partitions carry the refused commit (a's through the flush, revoked ones
        # through the drain before they were handed to b); partitions handed over before the
        # refusal carry a's last commit before their hand-over
        assert {tp.partition: committed[tp.partition] for tp in kept} == {tp.partition: offset for tp in kept}, committed
        assert all(1 <= committed[tp.partition] < offset for tp in parts - kept), committed
    finally:
        a.close()
        b.close()


def test_redundant_only_the_primary_commits(broker, unique_name):
    """``redundant`` (2 replicas): a member alone holds (and commits) every partition instead of
    failing the group (issue #8: a rolling restart); when the second member joins, both read
    every partition and each commits only where it is primary; when it leaves, the first is
    again the sole, committing replica."""
    topic, group = unique_name("redundant"), unique_name("g")
    broker.create_topic(topic, 4)
    all_parts = {TopicPartition(topic, p) for p in range(4)}
    a = _member(broker, group, topic, "redundant")
    b = _member(broker, group, topic, "redundant")
    a.start()
    try:
        def alone():
            s = a.snapshot()
            ok = set(s.owned) == all_parts and s.committable == all_parts and not s.rebalancing
            return s if ok else None

        wait_until(alone, timeout=60, message="one member holding every partition alone")
        b.start()

        def both_hold_all():
            sa, sb = a.snapshot(), b.snapshot()
            ok = (set(sa.owned) == all_parts and set(sb.owned) == all_parts
                  and not sa.rebalancing and not sb.rebalancing)
            ok = ok and sa.committable | sb.committable == all_parts
            return (sa, sb) if ok and not sa.committable & sb.committable else None

        sa, sb = wait_until(both_hold_all, timeout=60, message="two replicas of every partition")
        assert sa.committable and sb.committable  # primaries are balanced: 2 and 2
        ra = a.commit({tp: 10 for tp in all_parts})
        assert ra.committed == sa.committable and ra.skipped == all_parts - sa.committable
        b.close()
        wait_until(alone, timeout=60, message="the remaining member holding everything again")
    finally:
        a.close()
        b.close()


def test_pattern_subscription_picks_up_new_topics(broker, unique_name):
    """subscribePattern: a topic created later that matches the whole pattern is assigned
    after the leader's metadata watch sees it; a topic that only contains a match is not."""
    prefix = unique_name("pat").replace("-", "_")
    first, later, other = f"{prefix}_a", f"{prefix}_b", f"x{prefix}_c"
    broker.create_topic(first, 2)
    # the pattern as the stream passes it for subscribePattern
    m = group_member(broker, unique_name("g"), pattern=f"(?:{prefix}_.*)\\Z", client={"metadata_max_age_ms": 1_000})
    m.start()
    try:
        assert m.wait_for_assignment(60), m.describe()
        wait_until(lambda: {tp.topic for tp in m.snapshot().owned} == {first}, timeout=30,
                   message="the first matching topic")
        broker.create_topic(later, 3)
        broker.create_topic(other, 1)
        want = {TopicPartition(first, p) for p in range(2)} | {TopicPartition(later, p) for p in range(3)}
        wait_until(lambda: set(m.snapshot().owned) == want and not m.snapshot().rebalancing,
                   timeout=60, message="the new matching topic's partitions")
        time.sleep(2)  # the non-matching topic is never picked up
        assert set(m.snapshot().owned) == want
    finally:
        m.close()


def _count_change_is_picked_up(broker, unique_name, grow) -> None:
    """A member of a group on a 2-partition topic owns all 4 partitions after ``grow(topic)``."""
    topic = unique_name("grow")
    broker.create_topic(topic, 2)
    m = group_member(broker, unique_name("g"), topic, client={"metadata_max_age_ms": 1_000})
    m.start()
    try:
        _owning(m, topic, 2)
        grow(topic)
        want = {TopicPartition(topic, p) for p in range(4)}
        wait_until(lambda: set(m.snapshot().owned) == want and not m.snapshot().rebalancing,
                   timeout=60, message="all 4 partitions after the count changed")
    finally:
        m.close()


def test_partition_count_change_is_picked_up(kafka_broker, unique_name):
    """The leader's metadata watch sees a subscribed topic grow (CreatePartitions on Apache
    Kafka, as an operator adds partitions) and the group rebalances onto every partition."""
    _count_change_is_picked_up(kafka_broker, unique_name, lambda t: add_partitions(kafka_broker.bootstrap, t, 4))


def test_topic_recreated_with_more_partitions_is_picked_up(mock_broker, unique_name):
    """The same watch when the topic is deleted and re-created with more partitions (the mock,
    which deletes a topic at once)."""

    def recreate(topic):
        mock_broker.mock.delete_topic(topic)
        mock_broker.create_topic(topic, 4)

    _count_change_is_picked_up(mock_broker, unique_name, recreate)

