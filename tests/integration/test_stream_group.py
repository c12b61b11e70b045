"""Several members in one group: Spark queries (each query's runner process is one member) and
plain confluent-kafka consumers share the partitions disjointly; a leaving member's partitions
move to the others from the committed offsets, with no loss."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException
from test_stream_support import (
    assert_all_read,
    duplicates,
    ends,
    owned_partitions,
    probe_ownership,
    process_all,
    produce,
    rows,
    stop,
    stream,
    table_name,
    to_memory,
)

from helpers import (
    LEAVE_GROUP_API_KEY,
    committed_offsets,
    consumer_conf,
    kafka_group_departures,
    wait_until,
)

PARTS = 4
MOCK_SESSION_MS = 6000


def session_s(broker) -> float:
    return (MOCK_SESSION_MS if broker.backend == "mock" else broker.recommended_session_timeout_ms) / 1000


def _group_stream(spark, broker, topic, group, **opts):
    """Members that reset to earliest. On the mock the session timeout is raised to 10 s: its
    coordinator ignores the rebalance timeout and closes a join window after session - 1 s, so
    a member still draining a slow first micro-batch (Python workers starting) would be left
    out of the generation and its commit fenced (more at-least-once duplicates, never loss)."""
    if broker.backend == "mock":
        opts = {"kafka.session.timeout.ms": str(MOCK_SESSION_MS), "kafka.heartbeat.interval.ms": "1000", **opts}
    return stream(spark, broker, topic, group, **{"kafka.auto.offset.reset": "earliest", **opts})


def test_two_queries_split_and_take_over(spark, broker, new_topic, unique_name, tmp_path):
    topic, group = new_topic(PARTS), unique_name("g")
    names = [table_name(unique_name, "a"), table_name(unique_name, "b")]
    produced = produce(broker.bootstrap, topic, 20, PARTS)
    queries = [
        to_memory(_group_stream(spark, broker, topic, group), names[i], str(tmp_path / f"ck{i}"))
        for i in range(2)
    ]
    try:
        owned = probe_ownership(spark, broker, topic, PARTS, queries, produced, timeout=90)
        # steady state: every new record goes to the query owning its partition, and only there
        before = [len(rows(spark, n)) for n in names]
        batch = produce(broker.bootstrap, topic, 40, PARTS, start=len(produced))
        produced += batch
        for q in queries:
            process_all(q)
        for i, n in enumerate(names):
            new = rows(spark, n)[before[i]:]
            assert {r[1] for r in new} <= owned[i]
            assert {(r[1], r[2]) for r in new} == {(r.partition, r.offset) for r in batch if r.partition in owned[i]}
        assert_all_read(rows(spark, names[0]) + rows(spark, names[1]), produced)

        # b stops: its runner gets SIGTERM and leaves the group; a takes over from the commits
        if broker.mock is not None:
            broker.mock.clear_requests()
            broker.mock.start_request_tracking()
        queries[1].stop()
        after = produce(broker.bootstrap, topic, 40, PARTS, start=len(produced))
        produced += after

        def a_owns_all() -> bool:
            process_all(queries[0])
            return owned_partitions(queries[0]) == set(range(PARTS))

        wait_until(a_owns_all, timeout=60, interval=0.3, message="query a to own every partition")
        process_all(queries[0])
        got = rows(spark, names[0]) + rows(spark, names[1])
        assert_all_read(got, produced)
        # records produced once the split was stable are read at most twice (the handover)
        steady = {(r.partition, r.offset) for r in batch + after}
        _assert_handover_duplicates([g for g in got if (g[1], g[2]) in steady])
        assert queries[0].exception() is None
        # b left (LeaveGroup), it did not just expire: the broker's own account (its log on
        # Kafka, the requests it received on the mock), not the takeover's timing
        if broker.backend == "kafka":
            assert kafka_group_departures(broker, group) == (1, 0)
        elif broker.mock is not None:
            assert LEAVE_GROUP_API_KEY in {k for _, k in broker.mock.requests()}
    finally:
        for q in queries:
            stop(q)
        if broker.mock is not None:
            broker.mock.stop_request_tracking()
            broker.mock.clear_requests()


def _assert_handover_duplicates(got) -> None:
    """At-least-once across one handover: a record is read at most twice, and per partition
    the re-read offsets form one contiguous run (one uncommitted micro-batch). With an eager
    assignor every partition changes hands; the mock also refuses OffsetCommit while a
    rebalance is joining (REBALANCE_IN_PROGRESS, unlike Kafka), so any partition may repeat."""
    dups = duplicates(got)
    assert all(n == 2 for n in dups.values()), dups
    per_part = defaultdict(list)
    for _t, p, o in dups:
        per_part[p].append(o)
    for p, offs in per_part.items():
        offs.sort()
        assert offs == list(range(offs[0], offs[-1] + 1)), (p, offs)


class _PolledConsumer:
    """A plain confluent-kafka group member polled on its own thread (so it rejoins rebalances
    however long the Spark side takes), committing what it consumed."""

    def __init__(self, conf, topic):
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        self.seen: set[tuple[int, int]] = set()
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for msg in self.consumer.consume(200, timeout=0.1):
                if msg.error() is None:
                    self.seen.add((msg.partition(), msg.offset()))
                    try:
                        self.consumer.commit(message=msg, asynchronous=False)
                    except KafkaException:
                        pass  # fenced by a rebalance: the next owner re-reads it (at-least-once)
            self.owned = {tp.partition for tp in self.consumer.assignment()}

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_query_shares_with_a_plain_consumer(spark, broker, new_topic, unique_name, tmp_path, strategy):
    topic, group, name = new_topic(PARTS), unique_name("g"), table_name(unique_name)
    # The query joins first and so leads (the mock elects the first member): the mock answers
    # INVALID_REQUEST to a follower SyncGroup that arrives after the leader's, and librdkafka
    # followers are fast, while our leader waits leaderSyncDelayMs before syncing.
    session_ms = int(session_s(broker) * 1000)
    q = to_memory(_group_stream(spark, broker, topic, group, assignor=strategy), name, str(tmp_path / "ck"))
    consumer = None
    try:
        produced = produce(broker.bootstrap, topic, PARTS, PARTS, start=0)
        wait_until(lambda: process_all(q) or owned_partitions(q), timeout=60, message="the query to join")
        consumer = _PolledConsumer(
            consumer_conf(broker, group, partition_assignment_strategy=strategy,
                          session_timeout_ms=session_ms, heartbeat_interval_ms=session_ms // 6), topic)
        splits = []

        def split() -> bool:
            produced.extend(produce(broker.bootstrap, topic, PARTS, PARTS, start=len(produced)))
            process_all(q)
            mine, theirs = set(consumer.owned), owned_partitions(q) or set()
            ok = bool(mine) and bool(theirs) and not mine & theirs and mine | theirs == set(range(PARTS))
            splits.append((mine, theirs) if ok else None)
            return splits[-2:] == [(mine, theirs)] * 2  # the same split twice: stable

        wait_until(split, timeout=60, interval=0.2, message="a disjoint split with the consumer")
        mine, theirs = splits[-1]
        late = produce(broker.bootstrap, topic, 40, PARTS, start=len(produced))
        produced += late

        def all_read() -> bool:
            process_all(q)
            got = {(p, o) for _t, p, o, *_ in rows(spark, name)}
            return got | consumer.seen >= {(r.partition, r.offset) for r in produced}

        wait_until(all_read, timeout=60, interval=0.2, message="the query and the consumer to read everything")
        got = rows(spark, name)
        by_consumer = [(r.topic, r.partition, r.offset, r.key, r.value) for r in produced
                       if (r.partition, r.offset) in consumer.seen]
        assert_all_read(got + by_consumer, produced)
        # after the split, each new record went to its partition's owner only
        got_po = {(p, o) for _t, p, o, *_ in got}
        assert {(r.partition, r.offset) for r in late if r.partition in theirs} <= got_po
        assert not {(r.partition, r.offset) for r in late if r.partition in mine} & got_po
        assert {(r.partition, r.offset) for r in late if r.partition in mine} <= consumer.seen
        assert q.exception() is None
        wait_until(
            lambda: all(committed_offsets(broker.bootstrap, group, topic, PARTS)[p] == ends(produced)[p]
                        for p in theirs),
            timeout=90, message="the query's partitions committed")
    finally:
        stop(q)
        if consumer is not None:
            consumer.close()
