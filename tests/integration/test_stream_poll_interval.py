"""``kafka.max.poll.interval.ms`` means what it means for the Java consumer (issue 52, part 3).

A query whose micro-batch has been in flight for longer than the interval, with no plan since,
leaves the group (its member heartbeats from its own thread whatever the query does, so without
this the group never moved its partitions), so another member takes them over and reads what is
written to them; it rejoins when the query plans again. Nothing is lost, at most the stuck batch
is read twice, committed offsets never move back. And no livelock: a query alone whose every
batch outlasts the interval still reads everything (the late batch is committed after the rejoin
when nobody committed its partitions meanwhile). Kafka's own test of the rule:
PlaintextConsumerPollTest ``testMaxPollIntervalMs``.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient
from test_stream_support import duplicates, ends, produce, stop

from helpers import committed_offsets, consumer_conf, kafka_group_departures, wait_until

PARTS = 4
SESSION_MS = 6000
INTERVAL_MS = 8000


class _Sink:
    """A foreachBatch sink (it runs in this process): records every batch's (partition, offset)
    rows; ``block_first`` holds the first batch with rows until released, ``sleep_s`` holds every
    batch with rows that long."""

    def __init__(self, *, block_first: bool = False, sleep_s: float = 0.0):
        self.block_first, self.sleep_s = block_first, sleep_s
        self.batches: list[tuple[int, list[tuple[int, int]]]] = []
        self.stuck: set[tuple[int, int]] = set()  # the rows of the first batch with rows
        self.entered = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        got = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
        first = bool(got) and not self.entered.is_set()
        if first:
            self.stuck = set(got)
            self.entered.set()
        if first and self.block_first:
            self.release.wait(120)
        elif got and self.sleep_s:
            time.sleep(self.sleep_s)
        with self.lock:
            self.batches.append((batch_id, got))

    def read(self) -> list[tuple[int, int]]:
        with self.lock:
            return [po for _, got in self.batches for po in got]


def _query(spark, broker, topic, group, sink, tmp_path, **options):
    opts = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.group.id": group,
        "subscribe": topic,
        "kafka.auto.offset.reset": "earliest",
        "kafka.max.poll.interval.ms": str(INTERVAL_MS),
        **options,
    }
    if opts.get("kafka.group.protocol") != "consumer":
        opts = {"kafka.session.timeout.ms": str(SESSION_MS), "kafka.heartbeat.interval.ms": "1000", **opts}
    return (spark.readStream.format("groupkafka").options(**opts).load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="200 milliseconds")
            .start())


class _Member:
    """A plain librdkafka group member (classic protocol) polled on its own thread, committing
    each record it reads before reading on."""

    def __init__(self, broker, group, topic):
        self.consumer = Consumer(consumer_conf(broker, group, session_timeout_ms=SESSION_MS,
                                               heartbeat_interval_ms=1000))
        self.consumer.subscribe([topic])
        self.seen: list[tuple[int, int]] = []
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="plain-member")
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for msg in self.consumer.consume(100, timeout=0.1):
                if msg.error() is None:
                    self.seen.append((msg.partition(), msg.offset()))
                    try:
                        self.consumer.commit(message=msg, asynchronous=False)
                    except KafkaException:
                        pass  # met a rebalance: the next owner re-reads it (at-least-once)
            self.owned = {tp.partition for tp in self.consumer.assignment()}

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


class _Watch:
    """Samples, every 0.25 s, the group's committed offsets (they must never move back) and its
    member count (a member that left shows as a moment with none)."""

    def __init__(self, broker, group, topic, parts):
        self.broker, self.group, self.topic, self.parts = broker, group, topic, parts
        self.commits: list[dict[int, int | None]] = []
        self.members: list[int] = []
        self.admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="group-watch")
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.25):
            try:
                self.commits.append(committed_offsets(self.broker.bootstrap, self.group, self.topic, self.parts))
                desc = self.admin.describe_consumer_groups([self.group])[self.group].result(10)
                self.members.append(len(desc.members))
            except Exception:  # noqa: BLE001 - a sample missed under load
                continue

    def close(self):
        self._stop.set()
        self._thread.join(15)

    def assert_never_back(self):
        last: dict[int, int] = {}
        for sample in self.commits:
            for p, off in sample.items():
                if off is None:
                    continue
                assert off >= last.get(p, off), f"partition {p}'s committed offset moved back: {last[p]} -> {off}"
                last[p] = off

    def left_once(self) -> bool:
        """The group had members, then none (the member left), then members again."""
        first = next((i for i, n in enumerate(self.members) if n), None)
        if first is None:
            return False
        gap = next((i for i in range(first, len(self.members)) if self.members[i] == 0), None)
        return gap is not None and any(self.members[gap:])


def _committed_ends(broker, group, topic, want):
    return wait_until(lambda: committed_offsets(broker.bootstrap, group, topic, sorted(want)) == want,
                      timeout=60, interval=0.3, message=f"group {group} to commit {want}")


def test_a_stuck_batch_hands_its_partitions_over_after_the_interval(spark, kafka_broker, unique_name, tmp_path):
    broker = kafka_broker
    topic, group = unique_name("topic"), unique_name("g")
    broker.create_topic(topic, PARTS)
    sink = _Sink(block_first=True)
    other = _Member(broker, group, topic)
    q = watch = None
    try:
        wait_until(lambda: other.owned == set(range(PARTS)), timeout=30, message="the plain member to join")
        q = _query(spark, broker, topic, group, sink, tmp_path)
        wait_until(lambda: len(other.owned) == PARTS // 2, timeout=60, interval=0.2,
                   message="the query to join and take half the partitions")
        theirs = set(other.owned)
        watch = _Watch(broker, group, topic, PARTS)
        produced_at = time.monotonic()  # before the stuck batch is planned
        produced = produce(broker.bootstrap, topic, 40, PARTS)
        assert sink.entered.wait(60), "query a's sink never got a batch"
        # the query's member leaves after the interval; the plain member takes its partitions
        # and reads what was written to them (from the group's offsets: none, so earliest)
        more = produce(broker.bootstrap, topic, 8, PARTS, start=len(produced))
        produced += more
        want = {(r.partition, r.offset) for r in produced}
        wait_until(lambda: set(other.seen) >= want, timeout=INTERVAL_MS / 1000 + 30, interval=0.2,
                   message="the plain member to read the records of the stuck query's partitions")
        took_s = time.monotonic() - produced_at
        assert took_s > INTERVAL_MS / 1000, f"handed over {took_s:.1f}s after the batch's records, within the interval"
        assert other.owned == set(range(PARTS))
        assert kafka_group_departures(broker, group)[0] >= 1  # it left with LeaveGroup
        sink.release.set()
        # the query rejoins at its next plan and takes partitions back from the group's offsets
        wait_until(lambda: len(other.owned) == PARTS // 2, timeout=60, interval=0.2,
                   message="the query to rejoin and take partitions back")
        late = produce(broker.bootstrap, topic, 8, PARTS, start=len(produced))
        produced += late
        want = {(r.partition, r.offset) for r in produced}
        wait_until(lambda: set(other.seen) | set(sink.read()) >= want, timeout=60, interval=0.2,
                   message="the query and the plain member to read everything")
        _committed_ends(broker, group, topic, ends(produced))
        assert q.exception() is None
        # nothing lost; read twice: only records of the stuck batch (which the plain member
        # re-read from the group's offsets), at most twice
        stuck = sink.stuck
        assert stuck and {p for p, _ in stuck} <= set(range(PARTS)) - theirs
        both = [("t", p, o) for p, o in other.seen + sink.read()]
        dups = duplicates(both)
        assert all(n == 2 for n in dups.values()), dups
        assert {(p, o) for _t, p, o in dups} <= stuck, sorted(set(dups) - {("t", p, o) for p, o in stuck})[:5]
        watch.close()
        watch.assert_never_back()
    finally:
        sink.release.set()
        if watch is not None:
            watch.close()
        if q is not None:
            stop(q)
        other.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_alone_every_batch_outlasting_the_interval_still_makes_progress(spark, kafka_broker, unique_name, tmp_path,
                                                                        protocol):
    """No livelock: each batch's sink takes longer than the interval, so the member leaves
    during every batch and rejoins at the next plan, gets its partitions back, nobody committed
    them meanwhile: the late batch is committed and the query goes on from its end. Every
    record is read once, the commits reach the log end. Records arrive during the first batch,
    so a plan from the group's offset would differ from the late batch and re-read it (with
    nothing new, the re-plan equals the late batch's offsets and Spark runs nothing: that would
    hide a re-read)."""
    broker = kafka_broker
    topic, group = unique_name("topic"), unique_name("g")
    parts = 2
    broker.create_topic(topic, parts)
    interval_s = INTERVAL_MS / 1000
    sink = _Sink(sleep_s=interval_s + 3)
    produced = produce(broker.bootstrap, topic, 40, parts)
    watch = _Watch(broker, group, topic, parts)
    q = None
    try:
        q = _query(spark, broker, topic, group, sink, tmp_path,
                   **({"kafka.group.protocol": "consumer"} if protocol == "consumer" else {}))
        assert sink.entered.wait(60), "the query's sink never got a batch"
        produced += produce(broker.bootstrap, topic, 10, parts, start=len(produced))
        want = {(r.partition, r.offset) for r in produced}
        wait_until(lambda: set(sink.read()) >= want or q.exception(), timeout=75, interval=0.3,
                   message="the query to read everything")
        assert q.exception() is None
        _committed_ends(broker, group, topic, ends(produced))
        got = sink.read()
        assert sorted(got) == sorted(want), duplicates([("t", p, o) for p, o in got])  # each once
        assert len([b for b in sink.batches if b[1]]) >= 2  # several batches, each past the interval
        watch.close()
        watch.assert_never_back()
        assert watch.left_once(), f"the member never left the group: members {watch.members}"
        if protocol == "classic":
            assert kafka_group_departures(broker, group)[0] >= 1
    finally:
        watch.close()
        if q is not None:
            stop(q)
