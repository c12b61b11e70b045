"""The KIP-848 member (``kafka.group.protocol=consumer``) on Apache Kafka 4.0.1 and librdkafka's mock.

Our member, librdkafka consumers (``group.protocol=consumer``) and the Java consumer in one
group: disjoint shares, the revoke barrier (a revoked partition moves only after its in-flight
batch committed; the others keep flowing), static restart, regex subscription, the broker's
``uniform`` and ``range`` assignors, a Spark query beside a Java and a librdkafka consumer.
Tests without fault injection run on every default backend (fixture ``k848``: Kafka and the
mock; Kafka is the broker whose behaviour counts). Those that push errors into the mock (a
commit refused after a fence, coordinator errors on commit, a fencing heartbeat) or count its
requests stay on the mock (fixture ``kip848``); those about what only Kafka does (its
assignors, the Java client) run on Kafka only. Tansu does not serve ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from helpers import committed_offsets, produce_keyed, wait_until
from javaclient import JavaConsumer, require_java_consumer
from spark_groupsource.group.consumer_member import (
    EMPTY_ASSIGNMENT_GRACE_S,
    ConsumerProtocolConfig,
    ConsumerProtocolMembership,
)

FETCH, OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 1, 8, 68
HEARTBEAT_MS, SESSION_MS = 300, 6000


def _fast_heartbeats(b: Any) -> Any:
    """On the mock: fast KIP-848 heartbeats (its defaults: 3 s heartbeat, 30 s session). Kafka's
    dev broker is left as it is (500 ms heartbeat, 10 s session: DEV_BROKER_CONFIG)."""
    if b.mock is not None:
        b.mock.set_group_consumer_heartbeat_interval_ms(HEARTBEAT_MS)
        b.mock.set_group_consumer_session_timeout_ms(SESSION_MS)
    return b


@pytest.fixture
def kip848(mock_broker: Any) -> Any:
    """The mock, for the tests that inject its faults (pushed errors, request tracking)."""
    return _fast_heartbeats(mock_broker)


@pytest.fixture
def k848(broker: Any) -> Any:
    """Every default backend (Apache Kafka and the mock), for the tests that need no fault."""
    if broker.backend == "external":
        pytest.skip("needs an embedded broker whose KIP-848 heartbeat settings are known")
    return _fast_heartbeats(broker)


def member(broker: Any, group: str, topic: str, **cfg: Any) -> ConsumerProtocolMembership:
    return ConsumerProtocolMembership(
        ConsumerProtocolConfig(group_id=group, topics=(topic,), client_config={
            "bootstrap.servers": broker.bootstrap, "log_level": 3}, rebalance_timeout_ms=20_000, **cfg),
        drain_timeout_s=15,
    )


class Peer:
    """A librdkafka consumer in the same group (``group.protocol=consumer``) that reads and
    records every record, with its assignment history; polled from its own thread."""

    def __init__(self, broker: Any, group: str, topic: str | list[str], *, commit: bool = False,
                 remote_assignor: str | None = None):
        self.records: list[tuple[int, int]] = []
        self.topic_records: list[tuple[str, int, int]] = []
        self.assigned: set[int] = set()
        self.owned: set[tuple[str, int]] = set()
        self.events: list[tuple[str, tuple[int, ...]]] = []
        self._commit = commit  # commit each record synchronously after reading it
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3}
        if remote_assignor:
            conf["group.remote.assignor"] = remote_assignor
        self._c = Consumer(conf)
        self._c.subscribe([topic] if isinstance(topic, str) else list(topic), on_assign=self._assign,
                          on_revoke=self._revoke)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assign(self, c: Any, parts: list[Any]) -> None:
        self.assigned |= {p.partition for p in parts}
        self.owned |= {(p.topic, p.partition) for p in parts}
        self.events.append(("assign", tuple(sorted(p.partition for p in parts))))

    def _revoke(self, c: Any, parts: list[Any]) -> None:
        self.assigned -= {p.partition for p in parts}
        self.owned -= {(p.topic, p.partition) for p in parts}
        self.events.append(("revoke", tuple(sorted(p.partition for p in parts))))

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self._c.poll(0.2)
            if m is not None and m.error() is None:
                if self._commit:
                    self._c.commit(offsets=[CkTP(m.topic(), m.partition(), m.offset() + 1)], asynchronous=False)
                self.records.append((m.partition(), m.offset()))
                self.topic_records.append((m.topic(), m.partition(), m.offset()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._c.close()


def parts(tps: Any) -> set[int]:
    return {tp.partition for tp in tps}


@pytest.mark.compat
@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_shares_partitions_disjointly_and_never_fetches(k848, unique_name):
    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 4)
    produce_keyed(k848.bootstrap, topic, 200, partitions=4)
    m = member(k848, group, topic)
    m.start()
    peer = None
    try:
        assert m.wait_for_assignment(20)
        wait_until(lambda: len(m.snapshot().owned) == 4, 20, message="member owns all 4 partitions")
        if k848.mock is not None:  # only the mock tracks requests
            k848.mock.start_request_tracking()
            time.sleep(2)  # several heartbeats of a member holding 4 partitions with 200 records
            k848.mock.stop_request_tracking()
            seen = Counter(api for _, api in k848.mock.requests())
            k848.mock.clear_requests()
            assert seen[CONSUMER_GROUP_HEARTBEAT] >= 2, seen
            assert seen[FETCH] == 0, f"the membership-only member fetched: {seen}"

        peer = Peer(k848, group, topic)
        wait_until(lambda: peer.assigned and len(m.snapshot().owned) + len(peer.assigned) == 4
                   and not m.snapshot().revoking, 30, message="a disjoint split of 4 partitions")
        ours = parts(m.snapshot().owned)
        assert ours and peer.assigned and not (ours & peer.assigned)
        assert ours | peer.assigned == {0, 1, 2, 3}
        assert m.snapshot().protocol == "consumer" and m.snapshot().generation > 0
        status = m.status()
        assert status.assigned_at is not None and status.stable and status.coordinator_missing_since is None
        assert "consumer protocol" in m.describe() and m.snapshot().member_id in m.describe()
    finally:
        if peer is not None:
            peer.close()
        m.close()


@pytest.mark.compat
@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_handover_waits_for_the_inflight_batch_and_loses_nothing(k848, unique_name):
    """A revoked partition moves only after the batch reading it completed and committed; the
    peer then starts exactly at our commit. Partitions we keep go on being planned meanwhile."""
    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 4)
    produce_keyed(k848.bootstrap, topic, 400, partitions=4)  # 100 per partition
    m = member(k848, group, topic)
    m.start()
    peer = None
    try:
        wait_until(lambda: len(m.snapshot().owned) == 4, 20, message="member owns all 4 partitions")
        owned = m.snapshot().owned
        assert m.batch_planned(owned)  # a batch reading [0, 60) of every partition is in flight
        peer = Peer(k848, group, topic)
        revoking = wait_until(lambda: m.snapshot().revoking, 20, message="a revocation to start")
        kept = set(owned) - set(revoking)
        time.sleep(2)  # the barrier holds: the peer gets nothing while our batch runs
        assert not peer.assigned and not peer.records
        assert not m.batch_planned(revoking), "a batch over partitions being revoked was accepted"
        result = m.commit({tp: 60 for tp in owned}, owned)
        assert result.committed == frozenset(owned), result
        m.batch_completed()
        wait_until(lambda: peer.assigned == parts(revoking), 20, message="the peer to get the revoked partitions")
        assert m.batch_planned(kept), "partitions we keep must keep flowing"
        m.batch_completed()
        wait_until(lambda: len(peer.records) == 40 * len(revoking), 20, message="the peer to read the rest")
        by_partition: dict[int, list[int]] = {}
        for p, off in peer.records:
            by_partition.setdefault(p, []).append(off)
        assert {p: sorted(o) for p, o in by_partition.items()} == {p: list(range(60, 100)) for p in parts(revoking)}
        assert set(m.snapshot().owned) == kept
        assert m.counters.drain_timeouts == 0
    finally:
        if peer is not None:
            peer.close()
        m.close()


def test_a_commit_waiting_on_a_frozen_coordinator_reads_as_its_silence(kafka_broker, unique_name):
    """While the member's thread waits in a synchronous commit it serves no statistics event, so
    the commit's own wait is the coordinator's silence: a commit in flight when Kafka froze hid
    the whole 5 s freeze from the metrics (CI, 2026-12-07). Without the commit's wait counted,
    the silence reads 0 here until the thaw."""
    topic, group = unique_name("topic"), unique_name("group")
    kafka_broker.create_topic(topic, 2)
    produce_keyed(kafka_broker.bootstrap, topic, 20, partitions=2)
    m = member(kafka_broker, group, topic)
    m.start()
    results: list[Any] = []
    committer = None
    try:
        wait_until(lambda: len(m.snapshot().owned) == 2, 30, message="member owns both partitions")
        owned = m.snapshot().owned
        assert m.batch_planned(owned) and m.coordinator_silence_s() == 0
        kafka_broker.kafka.freeze_node(1)
        try:
            committer = threading.Thread(target=lambda: results.append(m.commit({tp: 10 for tp in owned}, owned)))
            committer.start()
            wait_until(lambda: (m.coordinator_silence_s() or 0) >= 2, 8, interval=0.1,
                       message="the commit's wait to read as silence")
            assert committer.is_alive(), "the commit returned while the coordinator was frozen"
        finally:
            kafka_broker.kafka.thaw_node(1)
        committer.join(60)
        assert results and results[0].committed == frozenset(owned), results
        wait_until(lambda: m.coordinator_silence_s() == 0, 15, interval=0.2, message="the silence to end")
        assert committed_offsets(kafka_broker.bootstrap, group, topic, 2) == {0: 10, 1: 10}
    finally:
        if committer is not None:
            committer.join(60)
        m.close()


def test_a_batch_that_never_completes_holds_the_handover_only_for_the_drain_bound(k848, unique_name):
    """The barrier is bounded: a batch that never completes holds the revoked partitions for the
    drain timeout, then they move uncommitted (the next owner re-reads: at-least-once), counted."""
    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 2)
    produce_keyed(k848.bootstrap, topic, 20, partitions=2)
    m = ConsumerProtocolMembership(ConsumerProtocolConfig(
        group_id=group, topics=(topic,), client_config={"bootstrap.servers": k848.bootstrap, "log_level": 3},
        rebalance_timeout_ms=20_000), drain_timeout_s=3)
    m.start()
    peer = None
    try:
        wait_until(lambda: len(m.snapshot().owned) == 2, 20, message="member owns both partitions")
        assert m.batch_planned(m.snapshot().owned)  # and never completes
        peer = Peer(k848, group, topic)
        wait_until(lambda: m.snapshot().revoking, 20, message="a revocation to start")
        started = time.monotonic()
        wait_until(lambda: peer.assigned, 20, message="the peer to get a partition")
        assert time.monotonic() - started >= 2.5, "the barrier let go before the drain bound"
        assert m.counters.drain_timeouts == 1
        wait_until(lambda: len(peer.records) == 10, 20, message="the peer to re-read the partition from 0")
        assert sorted(o for _, o in peer.records) == list(range(10))
    finally:
        if peer is not None:
            peer.close()
        m.close()


def test_commit_after_the_member_was_fenced_is_refused_and_partitions_are_lost(kip848, unique_name):
    """The broker fences the member while its batch runs; the member learns it only 5 s later.
    The batch's commit in that window is refused by the broker (the member is unknown there),
    none of its offsets land, the partitions are marked lost at once; the member then rejoins
    with new acquisition serials, and a commit planned under the old ones is skipped."""
    topic, group = unique_name("topic"), unique_name("group")
    kip848.create_topic(topic, 4)
    produce_keyed(kip848.bootstrap, topic, 40, partitions=4)
    m = member(kip848, group, topic)
    m.start()
    try:
        wait_until(lambda: len(m.snapshot().owned) == 4, 20, message="member owns all 4 partitions")
        before = m.snapshot()
        assert m.batch_planned(before.owned)
        kip848.mock.clear_requests()
        kip848.mock.start_request_tracking()
        # the next heartbeat fences the member on the broker; the answer is held back 5 s
        kip848.mock.push_broker_request_error(1, CONSUMER_GROUP_HEARTBEAT, KafkaError.FENCED_MEMBER_EPOCH, 5000)
        wait_until(lambda: any(api == CONSUMER_GROUP_HEARTBEAT for _, api in kip848.mock.requests()), 5,
                   interval=0.02, message="the fencing heartbeat to reach the broker")
        kip848.mock.stop_request_tracking()
        assert kip848.mock.broker_pending_errors(1, CONSUMER_GROUP_HEARTBEAT) == 0
        result = m.commit({tp: 10 for tp in before.owned}, before.owned)
        m.batch_completed()
        assert not result.committed, result
        assert result.lost == frozenset(before.owned), result
        assert "UNKNOWN_MEMBER_ID" in (result.error or "") or "Unknown member" in (result.error or ""), result
        assert m.counters.fenced_commits == 1 and m.counters.partitions_lost == 4
        # lost at once: none is planned under its old acquisition any more (dropped, or, on a
        # loaded machine, already acquired again by the rejoin the refusal started)
        now = m.snapshot().owned
        assert all(now.get(tp) != before.owned[tp] for tp in before.owned), "lost partitions must stop being planned at once"
        assert committed_offsets(kip848.bootstrap, group, topic, 4) == {p: None for p in range(4)}
        # back in the group under a new epoch, with new serials
        wait_until(lambda: len(m.snapshot().owned) == 4, 30, message="a rejoin")
        after = m.snapshot()
        assert all(after.owned[tp] != before.owned[tp] for tp in after.owned)
        stale = m.commit({tp: 10 for tp in before.owned}, before.owned)
        assert not stale.committed and stale.skipped == frozenset(before.owned), stale
        assert committed_offsets(kip848.bootstrap, group, topic, 4) == {p: None for p in range(4)}
        fresh = m.commit({tp: 10 for tp in after.owned}, after.owned)
        assert fresh.committed == frozenset(after.owned), fresh
    finally:
        m.close()


def test_commit_refused_as_fenced_while_the_membership_stands_takes_the_partitions_back(kip848, unique_name):
    """Chaos finding 3: the coordinator answers one commit UNKNOWN_MEMBER_ID, yet the member was
    not fenced (its heartbeats go on, librdkafka keeps the partitions and reports no loss). The
    partitions stop being planned at once; the refused offsets are sent again, land, and the
    partitions come back under new serials, so planning resumes exactly there."""
    topic, group = unique_name("topic"), unique_name("group")
    kip848.create_topic(topic, 2)
    produce_keyed(kip848.bootstrap, topic, 20, partitions=2)
    m = member(kip848, group, topic)
    m.start()
    try:
        wait_until(lambda: len(m.snapshot().owned) == 2, 20, message="member owns both partitions")
        before = m.snapshot().owned
        kip848.mock.push_request_errors(OFFSET_COMMIT, [KafkaError.UNKNOWN_MEMBER_ID])
        result = m.commit({tp: 7 for tp in before}, before)
        assert result.lost == frozenset(before) and not result.committed, result
        assert not m.snapshot().owned, "partitions refused as fenced must stop being planned at once"
        wait_until(lambda: len(m.snapshot().owned) == 2, 10, message="the partitions to come back")
        after = m.snapshot().owned
        assert all(after[tp] != before[tp] for tp in after), "taken back under new acquisition serials"
        assert committed_offsets(kip848.bootstrap, group, topic, 2) == {0: 7, 1: 7}
        stale = m.commit({tp: 9 for tp in before}, before)
        assert stale.skipped == frozenset(before) and not stale.committed, stale
        assert m.commit({tp: 9 for tp in after}, after).committed == frozenset(after)
    finally:
        kip848.mock.clear_request_errors(OFFSET_COMMIT)
        m.close()


@pytest.mark.compat
@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_static_member_restart_keeps_its_partitions(k848, unique_name):
    """A static member that closes and comes back within the session keeps its partitions; the
    other member sees no rebalance."""
    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 4)
    m = member(k848, group, topic, group_instance_id="spark-driver-1")
    m.start()
    peer = None
    try:
        wait_until(lambda: len(m.snapshot().owned) == 4, 20, message="member owns all 4 partitions")
        peer = Peer(k848, group, topic)
        wait_until(lambda: peer.assigned and len(m.snapshot().owned) + len(peer.assigned) == 4
                   and not m.snapshot().revoking, 30, message="a disjoint split")
        ours, events = set(m.snapshot().owned), list(peer.events)
        m.close()
        time.sleep(1.0)  # a restart inside the 6 s session
        m = member(k848, group, topic, group_instance_id="spark-driver-1")
        m.start()
        wait_until(lambda: set(m.snapshot().owned) == ours, 20, message="the same partitions back")
        time.sleep(2 * HEARTBEAT_MS / 1000 + 0.5)
        assert peer.events == events, "the other member saw a rebalance"
        assert set(m.snapshot().owned) == ours
    finally:
        if peer is not None:
            peer.close()
        m.close()


@pytest.mark.parametrize("errors", [
    [KafkaError.COORDINATOR_LOAD_IN_PROGRESS] * 3,
    [KafkaError.NOT_COORDINATOR],
    [KafkaError.STALE_MEMBER_EPOCH],
], ids=["loading", "moved", "stale-epoch"])
def test_commit_meeting_a_moving_coordinator_is_kept_and_sent_again(kip848, unique_name, errors):
    """Coordinator errors and STALE_MEMBER_EPOCH on OffsetCommit: nothing is lost, the offsets
    are kept and land with the next flush while the partitions stay ours."""
    topic, group = unique_name("topic"), unique_name("group")
    kip848.create_topic(topic, 2)
    m = member(kip848, group, topic)
    m.start()
    try:
        wait_until(lambda: len(m.snapshot().owned) == 2, 20, message="member owns both partitions")
        owned = m.snapshot().owned
        kip848.mock.push_request_errors(OFFSET_COMMIT, errors)
        first = m.commit({tp: 5 for tp in owned}, owned)
        assert not first.lost, first
        if first.failed:  # librdkafka retries a moved coordinator itself; otherwise kept
            assert first.failed == frozenset(owned) and m.pending() == {tp: 5 for tp in owned}
            result = wait_until(lambda: (r := m.flush_pending()) is not None and r.committed and r, 15,
                                message="a resend to land")
            assert result.committed == frozenset(owned)
        else:
            assert first.committed == frozenset(owned)
        assert committed_offsets(kip848.bootstrap, group, topic, 2) == {0: 5, 1: 5}
        assert m.pending() == {}
    finally:
        kip848.mock.clear_request_errors(OFFSET_COMMIT)
        m.close()


def test_a_member_with_nothing_to_read_is_in_the_group_and_does_not_fail(k848, unique_name):
    """More members than partitions: the broker gives the second member an epoch and an empty
    assignment, for which librdkafka calls no callback. It is in the group (as a classic member
    with an empty assignment is) and must not fail at groupJoinTimeoutMs as if it never joined
    (it did before: "no assignment within 3s"); when the owner leaves, the partition comes to it."""
    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 1)
    a = member(k848, group, topic)
    a.start()
    b = member(k848, group, topic, join_timeout_ms=3000)
    try:
        wait_until(lambda: len(a.snapshot().owned) == 1, 30, message="the first member owns the partition")
        b.start()
        started = time.monotonic()
        assert b.wait_for_assignment(10), b.describe()
        joined = time.monotonic()
        snap = b.snapshot()
        assert not snap.owned and snap.generation > 0 and snap.member_id
        # an assignment may still be on its way: not "caught up" yet (a planner waits)...
        assert snap.rebalancing or time.monotonic() - joined >= EMPTY_ASSIGNMENT_GRACE_S
        time.sleep(max(0.0, started + 3.5 - time.monotonic()))  # past b's join bound
        b.raise_if_failed()
        assert b.status().assigned_at is not None
        # ...until the grace is over: then a member with nothing to read is settled
        wait_until(lambda: not b.snapshot().rebalancing, EMPTY_ASSIGNMENT_GRACE_S + 5,
                   message="the empty member to count as settled")
        assert time.monotonic() - joined >= EMPTY_ASSIGNMENT_GRACE_S - 0.5
        assert not b.snapshot().owned
        a.close()
        wait_until(lambda: len(b.snapshot().owned) == 1, 30, message="the partition to move to the idle member")
    finally:
        a.close()
        b.close()


def test_a_handover_held_up_past_the_grace_still_reads_as_a_rebalance(kafka_broker, unique_name):
    """The broker's target assignment gives the joiner a partition at once, but hands it over
    only after its owner's in-flight batch completed (here: held for 40 s). Past the 10 s grace
    the joiner, still holding nothing, must go on reporting a rebalance (ConsumerGroupDescribe:
    its target names a partition it does not hold), or AvailableNow/processAllAvailable would
    read "nothing owned" as caught up and end early. Once the batch completes, the partition
    arrives and the rebalance is over."""
    topic, group = unique_name("topic"), unique_name("group")
    kafka_broker.create_topic(topic, 2)
    conf = {"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3}
    a = ConsumerProtocolMembership(ConsumerProtocolConfig(group_id=group, topics=(topic,), client_config=conf,
                                                          rebalance_timeout_ms=60_000), drain_timeout_s=40)
    b = member(kafka_broker, group, topic)
    a.start()
    try:
        wait_until(lambda: len(a.snapshot().owned) == 2, 30, message="the first member owns both partitions")
        assert a.batch_planned(a.snapshot().owned)  # a batch that does not complete (yet)
        b.start()
        assert b.wait_for_assignment(20), b.describe()
        joined = time.monotonic()
        wait_until(lambda: a.snapshot().revoking, 20, message="the first member to be asked to give one up")
        # from past the grace until well before a's drain would give up: rebalancing, nothing owned
        time.sleep(max(0.0, joined + EMPTY_ASSIGNMENT_GRACE_S + 2 - time.monotonic()))
        samples = []
        while time.monotonic() < joined + EMPTY_ASSIGNMENT_GRACE_S + 6:
            snap = b.snapshot()
            samples.append((snap.rebalancing, bool(snap.owned)))
            time.sleep(0.2)
        assert samples and all(s == (True, False) for s in samples), samples
        assert a.counters.drain_timeouts == 0
        a.batch_completed()
        wait_until(lambda: len(b.snapshot().owned) == 1 and not b.snapshot().rebalancing, 30,
                   message="the partition to arrive once the batch completed")
    finally:
        b.close()
        a.close()


def test_a_joiner_waiting_for_a_batched_assignment_reads_as_a_rebalance(kafka_broker, unique_name):
    """Kafka >= 4.3 batches target assignments (KIP-1263): with the group's
    ``consumer.assignment.interval.ms`` at 14 s, a joiner's target stays empty for longer than
    the 10 s grace, so ConsumerGroupDescribe cannot say a handover is on its way. The member
    asks the broker for the interval and waits that much longer: it must read as rebalancing,
    never as "settled with nothing", until its partition arrives (else AvailableNow would end
    with zero rows). Skips on a broker without assignment batching (4.0)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    from spark_groupsource.group.handover_watch import ASSIGNMENT_INTERVAL_CONFIG

    topic, group = unique_name("topic"), unique_name("group")
    kafka_broker.create_topic(topic, 2)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 0})
    resource = ConfigResource(ResourceType.GROUP, group)
    reported = admin.describe_configs([resource])[resource].result(timeout=30)
    if ASSIGNMENT_INTERVAL_CONFIG not in reported:
        pytest.skip(f"this broker reports no {ASSIGNMENT_INTERVAL_CONFIG} (no assignment batching before Kafka 4.3)")
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        ASSIGNMENT_INTERVAL_CONFIG, "14000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(timeout=30)
    a, b = member(kafka_broker, group, topic), member(kafka_broker, group, topic)
    a.start()
    try:
        wait_until(lambda: len(a.snapshot().owned) == 2, 30, message="the first member owns both partitions")
        b.start()
        assert b.wait_for_assignment(20), b.describe()
        joined = time.monotonic()
        samples = []
        while not b.snapshot().owned and time.monotonic() < joined + 40:
            snap = b.snapshot()
            samples.append((round(time.monotonic() - joined, 1), snap.rebalancing, bool(snap.owned)))
            time.sleep(0.2)
        arrived = time.monotonic() - joined
        assert b.snapshot().owned, f"no partition 40 s after joining: {b.describe()}"
        # the case this test is about: the assignment came after the 10 s grace alone ran out
        assert arrived > EMPTY_ASSIGNMENT_GRACE_S, f"the batched assignment came after {arrived:.1f}s"
        assert all(rebalancing for _, rebalancing, _ in samples), [s for s in samples if not s[1]]
        wait_until(lambda: len(b.snapshot().owned) == 1 and not b.snapshot().rebalancing, 30,
                   message="the joiner settles with its partition")
    finally:
        b.close()
        a.close()


def test_topic_pattern_subscription(k848, unique_name):
    prefix = unique_name("pat").replace(".", "-")
    a, b = f"{prefix}-a", f"{prefix}-b"
    k848.create_topic(a, 2)
    k848.create_topic(b, 2)
    k848.create_topic(f"x{prefix}-c", 2)  # not a whole-name match
    m = ConsumerProtocolMembership(ConsumerProtocolConfig(
        group_id=unique_name("group"), pattern=f"{prefix}-.*",
        client_config={"bootstrap.servers": k848.bootstrap, "log_level": 3}, rebalance_timeout_ms=20_000))
    m.start()
    try:
        wait_until(lambda: len(m.snapshot().owned) == 4, 30, message="both matching topics")
        assert {tp.topic for tp in m.snapshot().owned} == {a, b}
        assert TopicPartition(a, 0) in m.snapshot().owned
    finally:
        m.close()


def test_spark_query_shares_a_topic_with_a_librdkafka_consumer(spark, k848, unique_name, tmp_path):
    """readStream with kafka.group.protocol=consumer: the query reads everything alone, then a
    librdkafka consumer joins; the broker moves partitions to it only after the query's batch
    committed, it continues exactly at the query's commits, and each new record is read by the
    one member owning its partition: every record once, commits at the ends."""
    from test_stream_support import (
        duplicates,
        ends,
        process_all,
        produce,
        rows,
        stop,
        table_name,
    )

    topic, group, name = unique_name("topic"), unique_name("group"), None
    k848.create_topic(topic, 4)
    produced = produce(k848.bootstrap, topic, 40, 4)
    name = table_name(unique_name, "k848")
    df = (spark.readStream.format("groupkafka")
          .option("kafka.bootstrap.servers", k848.bootstrap).option("kafka.group.id", group)
          .option("subscribe", topic).option("kafka.group.protocol", "consumer")
          .option("kafka.group.remote.assignor", "range").option("kafka.auto.offset.reset", "earliest")
          .option("kafka.max.poll.interval.ms", "60000").load())
    query = (df.select("topic", "partition", "offset", "key", "value").writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    peer = None
    try:
        wait_until(lambda: process_all(query) or len(rows(spark, name)) >= 40, 120, interval=0.5,
                   message="the query to read the first 40 records")
        assert {(r[1], r[2]) for r in rows(spark, name)} == {(r.partition, r.offset) for r in produced}
        wait_until(lambda: committed_offsets(k848.bootstrap, group, topic, 4) == ends(produced), 30,
                   message="the query to commit the first batch")
        peer = Peer(k848, group, topic)
        wait_until(lambda: len(peer.assigned) == 2, 60, interval=0.5, message="the peer to get two partitions")
        theirs = set(peer.assigned)
        before = len(rows(spark, name))
        more = produce(k848.bootstrap, topic, 40, 4, start=40)
        produced += more

        def all_read() -> bool:
            process_all(query)
            return len(rows(spark, name)) - before + len(peer.records) >= len(more)

        wait_until(all_read, 90, interval=0.5, message="the query and the peer to read the new records")
        ours_new = rows(spark, name)[before:]
        assert {r[1] for r in ours_new}.isdisjoint(theirs)
        assert {p for p, _ in peer.records} <= theirs
        got = {(r[1], r[2]) for r in rows(spark, name)} | set(peer.records)
        assert got == {(r.partition, r.offset) for r in produced}, "records lost"
        assert not duplicates(rows(spark, name)), "the query read a record twice"
        assert not {(r[1], r[2]) for r in rows(spark, name)} & set(peer.records), "read by both members"
        first = {p: min(o for q, o in peer.records if q == p) for p in theirs}
        assert first == {p: 10 for p in theirs}, "the peer must continue at the query's commits"
        mine = sorted(set(range(4)) - theirs)
        want = {p: o for p, o in ends(produced).items() if p in mine}
        wait_until(lambda: process_all(query) or committed_offsets(k848.bootstrap, group, topic, mine) == want,
                   30, interval=0.5, message="the query to commit its partitions' ends")
    finally:
        stop(query)
        if peer is not None:
            peer.close()


def test_spark_query_rides_through_its_member_being_fenced(spark, kip848, unique_name, tmp_path):
    """Chaos: the broker fences the query's member (a heartbeat answered FENCED_MEMBER_EPOCH,
    the answer held back 2 s) while records keep arriving. Its partitions are lost, it rejoins
    under a new epoch, resumes each partition from the group's commits: every record is read
    (at-least-once) and the commits reach the ends."""
    from test_stream_support import duplicates, ends, process_all, produce, rows, stop, table_name

    topic, group = unique_name("topic"), unique_name("group")
    kip848.create_topic(topic, 4)
    produced = produce(kip848.bootstrap, topic, 40, 4)
    name = table_name(unique_name, "fenced")
    df = (spark.readStream.format("groupkafka")
          .option("kafka.bootstrap.servers", kip848.bootstrap).option("kafka.group.id", group)
          .option("subscribe", topic).option("kafka.group.protocol", "consumer")
          .option("kafka.auto.offset.reset", "earliest").option("kafka.max.poll.interval.ms", "60000").load())
    query = (df.select("topic", "partition", "offset", "key", "value").writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: process_all(query) or len(rows(spark, name)) >= 40, 120, interval=0.5,
                   message="the query to read the first 40 records")
        kip848.mock.push_broker_request_error(1, CONSUMER_GROUP_HEARTBEAT, KafkaError.FENCED_MEMBER_EPOCH, 2000)
        for i in range(4):  # records arrive while the member is fenced and rejoins
            produced += produce(kip848.bootstrap, topic, 8, 4, start=40 + 8 * i)
            time.sleep(0.5)
        # the query's member is the only one in the group: its heartbeat took the error (the mock
        # dropped it from the group then)
        wait_until(lambda: kip848.mock.broker_pending_errors(1, CONSUMER_GROUP_HEARTBEAT) == 0, 10,
                   message="the fencing heartbeat")

        def all_read() -> bool:
            process_all(query)
            return {(r[1], r[2]) for r in rows(spark, name)} >= {(r.partition, r.offset) for r in produced}

        wait_until(all_read, 120, interval=0.5, message="every record to be read after the fence")
        got = rows(spark, name)
        assert {(r[1], r[2]) for r in got} == {(r.partition, r.offset) for r in produced}
        wait_until(lambda: process_all(query) or committed_offsets(kip848.bootstrap, group, topic, 4) == ends(produced),
                   30, interval=0.5, message="the commits to reach the ends")
        print(f"duplicates after the fence: {len(duplicates(got))} of {len(produced)} records")
    finally:
        stop(query)


def test_coordinated_backfill_in_consumer_mode(k848, unique_name):
    """A group-coordinated backfill joins as a KIP-848 member, plans only what the broker
    assigned to it (the rest stays with the librdkafka consumer) and commits those ends."""
    from spark_groupsource.backfill import BackfillPlan

    topic, group = unique_name("topic"), unique_name("group")
    k848.create_topic(topic, 4)
    produce_keyed(k848.bootstrap, topic, 40, partitions=4)
    peer = Peer(k848, group, topic)
    try:
        wait_until(lambda: peer.assigned == {0, 1, 2, 3}, 20, message="the consumer to own everything")
        options = {"kafka.bootstrap.servers": k848.bootstrap, "kafka.group.id": group, "subscribe": topic,
                   "kafka.group.protocol": "consumer", "groupCoordinated": "true", "commitOffsets": "true"}
        with BackfillPlan.resolve(options, settle_s=2 * HEARTBEAT_MS / 1000 + 1, assignment_timeout_s=60) as plan:
            planned = {r.partition for r in plan.ranges if r.size > 0}
            assert len(planned) == 2 and planned.isdisjoint(peer.assigned), (planned, peer.assigned)
            assert all((r.start, r.until) == (0, 10) for r in plan.ranges if r.size > 0)
            result = plan.commit()
        assert {tp.partition: off for tp, off in result.committed.items()} == {p: 10 for p in planned}
        assert committed_offsets(k848.bootstrap, group, topic, sorted(planned)) == {p: 10 for p in planned}
        wait_until(lambda: peer.assigned == {0, 1, 2, 3}, 20, message="the consumer to get everything back")
    finally:
        peer.close()


def test_broker_without_the_consumer_protocol_fails_at_once_saying_so(tansu_broker, unique_name):
    """Tansu's ApiVersions leave out ConsumerGroupHeartbeat: the member fails at once (instead of
    after groupJoinTimeoutMs) with an error naming the protocol and the fix."""
    from spark_groupsource.errors import MembershipError

    topic = unique_name("topic")
    tansu_broker.create_topic(topic, 2)
    m = member(tansu_broker, unique_name("group"), topic)
    m.start()
    try:
        with pytest.raises(MembershipError) as info:
            m.wait_for_assignment(30)
        assert "ConsumerGroupHeartbeat" in str(info.value) and "kafka.group.protocol=classic" in str(info.value)
    finally:
        m.close()


def test_kafka_3_9_fails_the_member_at_once_naming_the_version_and_the_option(kafka39_broker, unique_name):
    """Apache Kafka 3.9.1 as production runs it (classic groups only) offers ConsumerGroupHeartbeat
    v0, which librdkafka never sends (it keeps looking for a coordinator, silently): the member
    fails within seconds, not after groupJoinTimeoutMs, naming what the brokers answered, the
    Kafka versions and the option to change."""
    from spark_groupsource.errors import GroupUnreachableError, MembershipError

    topic = unique_name("topic")
    kafka39_broker.create_topic(topic, 2)
    # waited for less than the member's join bound (120 s), so only the early check can fail it
    m = member(kafka39_broker, unique_name("group"), topic, join_timeout_ms=120_000)
    m.start()
    try:
        with pytest.raises(MembershipError) as info:
            m.wait_for_assignment(60)
        text = str(info.value)
        assert not isinstance(info.value, GroupUnreachableError), text
        assert "ConsumerGroupHeartbeat v0..v0" in text and "before 4.0" in text, text
        assert "kafka.group.protocol=classic" in text, text
    finally:
        m.close()


# ---- what only Kafka does: its assignors, regex subscriptions, the Java client ---------------
def _assignment(m: ConsumerProtocolMembership) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in m.snapshot().owned}


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_broker_assignor_gives_its_assignment(kafka_broker, unique_name, assignor):
    """``remote_assignor`` (``kafka.group.remote.assignor``) reaches Kafka's coordinator, whose
    assignors differ on two topics of 3 partitions and 2 members: ``range`` assigns each topic
    in ranges and co-partitions (a member gets the same partition numbers of both topics: 4 and
    2 partitions), ``uniform`` balances the total (3 and 3). The mock ignored the setting."""
    a, b = unique_name("ta"), unique_name("tb")
    kafka_broker.create_topic(a, 3)
    kafka_broker.create_topic(b, 3)
    group = unique_name("group")
    m = ConsumerProtocolMembership(ConsumerProtocolConfig(
        group_id=group, topics=(a, b), remote_assignor=assignor,
        client_config={"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3}, rebalance_timeout_ms=20_000))
    m.start()
    peer = None
    try:
        wait_until(lambda: len(m.snapshot().owned) == 6, 30, message="member owns all 6 partitions")
        peer = Peer(kafka_broker, group, [a, b], remote_assignor=assignor)
        every = {(t, p) for t in (a, b) for p in range(3)}
        wait_until(lambda: peer.owned and not m.snapshot().revoking and _assignment(m) | peer.owned == every
                   and not _assignment(m) & peer.owned, 30, message="a disjoint split of the 6 partitions")
        time.sleep(1.5)  # three heartbeats: the split is the final one
        ours, theirs = _assignment(m), set(peer.owned)
        assert ours | theirs == every and not ours & theirs, (ours, theirs)
        if assignor == "range":
            for share in (ours, theirs):
                per_topic = [sorted(p for t, p in share if t == topic) for topic in (a, b)]
                assert per_topic[0] == per_topic[1], f"range co-partitions: {share}"
                assert per_topic[0] == list(range(per_topic[0][0], per_topic[0][0] + len(per_topic[0]))), share
            assert sorted((len(ours), len(theirs))) == [2, 4], (ours, theirs)
        else:
            assert (len(ours), len(theirs)) == (3, 3), (ours, theirs)
    finally:
        if peer is not None:
            peer.close()
        m.close()


def test_topic_pattern_picks_up_a_topic_created_later(kafka_broker, unique_name):
    """Kafka evaluates the subscription regex itself (SubscribedTopicRegex): a matching topic
    created while the member is in the group is assigned to it; a non-matching one is not."""
    prefix = unique_name("late").replace(".", "-")
    kafka_broker.create_topic(f"{prefix}-a", 2)
    m = ConsumerProtocolMembership(ConsumerProtocolConfig(
        group_id=unique_name("group"), pattern=f"{prefix}-.*",
        client_config={"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3}, rebalance_timeout_ms=20_000))
    m.start()
    try:
        wait_until(lambda: len(m.snapshot().owned) == 2, 30, message="the first matching topic")
        kafka_broker.create_topic(f"{prefix}-b", 3)
        kafka_broker.create_topic(f"{prefix}_c", 1)  # does not match
        got = wait_until(lambda: len(m.snapshot().owned) >= 5 and _assignment(m), 60, interval=0.2,
                         message="the topic created later to be assigned")
        assert {t for t, _ in got} == {f"{prefix}-a", f"{prefix}-b"}, got
    finally:
        m.close()


@pytest.mark.compat
@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_spark_query_beside_a_java_and_a_librdkafka_consumer(spark, kafka_broker, unique_name, tmp_path):
    """One KIP-848 group on Kafka: a ``kafka.group.protocol=consumer`` query reads alone, then a
    Java consumer and a librdkafka consumer join while records keep arriving; the broker's
    (uniform) assignor splits 6 partitions 2/2/2. Every record is read exactly once by one
    member (the query hands partitions over after its batch committed, the others commit what
    they read), the shares are disjoint, and the group's commits reach the log end."""
    from test_stream_support import (
        BackgroundProducer,
        duplicates,
        ends,
        process_all,
        produce,
        rows,
        stop,
        table_name,
    )

    require_java_consumer()
    b = kafka_broker
    topic, group = unique_name("topic"), unique_name("group")
    b.create_topic(topic, 6)
    produced = produce(b.bootstrap, topic, 60, 6)
    name = table_name(unique_name, "three")
    df = (spark.readStream.format("groupkafka")
          .option("kafka.bootstrap.servers", b.bootstrap).option("kafka.group.id", group)
          .option("subscribe", topic).option("kafka.group.protocol", "consumer")
          .option("kafka.auto.offset.reset", "earliest").option("kafka.max.poll.interval.ms", "60000").load())
    query = (df.select("topic", "partition", "offset", "key", "value").writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    java = peer = None
    producer = BackgroundProducer(b.bootstrap, topic, 6, produced, start=60, per_round=6, every_s=0.3, limit=600)
    try:
        wait_until(lambda: process_all(query) or len(rows(spark, name)) >= 60, 120, interval=0.5,
                   message="the query to read the first 60 records")
        java = JavaConsumer(b.bootstrap, group, [topic], group_protocol="consumer", name="java", start=True)
        peer = Peer(b, group, topic, commit=True)
        producer.start()  # records arrive while the partitions move

        def split() -> bool:
            process_all(query)
            progress = query.lastProgress or {}
            return len(java.owned()) == 2 and len(peer.assigned) == 2 and bool(progress)

        wait_until(split, 90, interval=0.5, message="the Java and the librdkafka consumer to get 2 partitions each")
        time.sleep(2)  # a few more records under the settled assignment
        producer.stop()
        final = produce(b.bootstrap, topic, 12, 6, start=10_000)
        produced += final
        want = {(r.partition, r.offset) for r in produced}

        def everyone() -> set[tuple[int, int]]:
            return ({(r[1], r[2]) for r in rows(spark, name)} | {(p, o) for _, p, o in java.offsets_read()}
                    | set(peer.records))

        wait_until(lambda: process_all(query) or everyone() >= want, 120, interval=0.5,
                   message="every record to be read")
        ours = [(r[1], r[2]) for r in rows(spark, name)]
        theirs_java = [(p, o) for (_, p, o), n in java.offsets_read().items() for _ in range(n)]
        assert everyone() == want, "records read that were not produced"
        assert not duplicates(rows(spark, name)), "the query read a record twice"
        assert len(set(theirs_java)) == len(theirs_java), "the Java consumer read a record twice"
        assert len(set(peer.records)) == len(peer.records), "the librdkafka consumer read a record twice"
        assert not set(ours) & set(theirs_java) and not set(ours) & set(peer.records) \
            and not set(theirs_java) & set(peer.records), "a record read by two members"
        j_parts, p_parts = {p for _, p in java.owned()}, set(peer.assigned)
        assert not j_parts & p_parts and len(j_parts | p_parts) == 4, (j_parts, p_parts)
        # records produced under the settled split were read by the partition's owner then
        owner = {(r.partition, r.offset): ("java" if r.partition in j_parts else "librdkafka"
                                           if r.partition in p_parts else "query") for r in final}
        readers = {**{k: "query" for k in ours}, **{k: "java" for k in theirs_java},
                   **{k: "librdkafka" for k in peer.records}}
        assert {k: readers[k] for k in owner} == owner
        wait_until(lambda: process_all(query) or committed_offsets(b.bootstrap, group, topic, 6) == ends(produced),
                   60, interval=0.5, message="the group's commits to reach the log end")
        print(f"read: query {len(ours)}, java {len(theirs_java)}, librdkafka {len(peer.records)} "
              f"of {len(produced)}")
        code = java.stop()  # SIGTERM: the JVM exits 143 after its shutdown hook closed the consumer
        assert code in (0, 143) and java.closed_cleanly(), f"the Java consumer did not leave cleanly: {java.describe()}"
        assert not java.errors(), java.describe()
    finally:
        producer.stop()
        stop(query)
        if java is not None:
            java.close()
        if peer is not None:
            peer.close()
