"""The Java reference consumer (kafka-clients 4.0.1) and our member in one classic group, on
Apache Kafka 4.0.1 (issue 15).

For each of ``range``, ``roundrobin``, ``sticky`` and ``cooperative-sticky``: our driver-side
member (``GroupMembership``) and a Java consumer with the same assignor, once with ours leading
(it joins first, the Java consumer joins and later leaves) and once with the Java consumer
leading (ours joins second and later leaves). Records are produced before the join and all the
while both are in the group. Checked: the settled assignments are disjoint and cover every
partition; every produced record is read exactly once across the two (both commit what they
read before giving a partition up, so the protocol allows no re-read here); the member that
stays takes over from the leaver's commits and commits up to the log end; and the join and the
leave each cost exactly as many generations as the same change in a group of two Java
consumers, measured in the same run (not hard-coded).

Our member does not fetch: a small planner thread here does what the streaming source's planner
does with it (``batch_planned`` over the owned partitions that are not being revoked, the range
from the position, or the group's committed offset for a partition newly acquired, to the log
end, ``commit`` with the acquisition serials, ``batch_completed``); the offsets it covers count
as read. The Spark test at the end reads for real: a streaming query and a cooperative-sticky
Java consumer that joins and leaves while records keep arriving.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTP

from assignment.model import TopicPartition
from helpers import committed_offsets, group_member, wait_until
from javaclient import JavaConsumer, JavaConsumers, require_java_consumer

PARTITIONS = 6
ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
#: with the Kafka 3.9.1 Java consumer on 3.9.1 too (make test-compat)
pytestmark = pytest.mark.kafka39
#: Both kinds of member heartbeat this often (Java: --heartbeat-interval-ms; ours: kafka-python's
#: heartbeat_interval_ms): a rebalance reaches the other member within it.
HEARTBEAT_MS = 500
#: A settled split must hold this long (two heartbeats: a generation the coordinator started
#: meanwhile reaches every member as REBALANCE_IN_PROGRESS).
QUIET_S = 2 * HEARTBEAT_MS / 1000
#: Every wait is bounded by this (generous: the machine may be loaded).
WAIT_S = 90


# ----------------------------------------------------------------------------------------------
# participants
# ----------------------------------------------------------------------------------------------
class Ours:
    """Our member plus the planner loop a streaming query would run over it (see module doc)."""

    name = "ours"

    def __init__(self, broker: Any, group: str, topic: str, assignor: str):
        self.topic = topic
        self.member = group_member(broker, group, topic, assignor,
                                   client={"heartbeat_interval_ms": HEARTBEAT_MS})
        self._ends = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "javainterop-ends",
                               "enable.auto.commit": False, "log_level": 3})
        self.ranges: list[tuple[int, int, int]] = []  # (partition, start, end) in order
        self.commit_errors: list[str] = []
        self.kept_commits = 0
        self._positions: dict[tuple[TopicPartition, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="javainterop-ours")
        self._error: BaseException | None = None

    def start(self) -> Ours:
        self.member.start()
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._batch():
                    self._stop.wait(0.05)
                else:
                    self._stop.wait(0.1)
        except BaseException as exc:  # noqa: BLE001 - reported by check()
            self._error = exc

    def _batch(self) -> bool:
        m = self.member
        snap = m.snapshot()
        if not m.may_plan(snap):
            return False
        serials = {tp: s for tp, s in snap.owned.items() if tp not in snap.revoking}
        if not serials:
            return False
        if not m.batch_planned(serials):
            return False
        try:
            new = [tp for tp, s in serials.items() if (tp, s) not in self._positions]
            if new:
                committed = m.committed(new)
                for tp in new:
                    low, _high = self._watermarks(tp)
                    got = committed.get(tp)
                    self._positions[(tp, serials[tp])] = got if got is not None else low
            ends = {}
            for tp, s in serials.items():
                _low, high = self._watermarks(tp)
                start = self._positions[(tp, s)]
                if high > start:
                    self.ranges.append((tp.partition, start, high))
                ends[tp] = high
                self._positions[(tp, s)] = high
            result = m.commit(ends, serials)
            # a commit that meets a rebalance fails and is kept for a retry (counted); a fenced
            # one (partitions lost) must not happen in a group where every member leaves cleanly
            if result.failed:
                self.kept_commits += 1
            if result.lost:
                self.commit_errors.append(result.error or "lost")
        finally:
            m.batch_completed()
        return True

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        """The partition's ends, asked again on an error as the source's own offset reader does
        (fetchOffset.numRetries): a CI run at load 30 met NOT_LEADER_FOR_PARTITION here, a
        broker still taking up the leadership of the new topic."""
        for attempt in range(10):
            try:
                return self._ends.get_watermark_offsets(KafkaTP(tp.topic, tp.partition), timeout=10)
            except KafkaException:
                if attempt == 9:
                    raise
                self._stop.wait(0.5)
        raise AssertionError("unreachable")

    def check(self) -> None:
        if self._error is not None:
            raise AssertionError(f"our planner loop failed: {self._error!r}") from self._error

    def owned(self) -> frozenset[int] | None:
        """Owned partitions, or None while a rebalance is under way."""
        s = self.member.snapshot()
        if s.rebalancing:
            return None
        return frozenset(tp.partition for tp in s.owned)

    def generation(self) -> int:
        return self.member.snapshot().generation

    def offsets_read(self) -> Counter[tuple[int, int]]:
        c: Counter[tuple[int, int]] = Counter()
        for p, start, end in list(self.ranges):
            c.update((p, o) for o in range(start, end))
        return c

    def led(self) -> list[int]:
        return list(self.member.join_stats().led)

    def stop(self) -> None:
        """Finish the batch under way (its commit included), then leave the group."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        self.member.close()
        self._ends.close()
        self.check()


class Java:
    """A Java consumer as a participant (same accessors as :class:`Ours`)."""

    def __init__(self, consumer: JavaConsumer):
        self.j = consumer
        self.name = consumer.name

    def check(self) -> None:
        # a commitSync that meets a rebalance fails with RebalanceInProgressException (Java does
        # that in Java-only groups too); the next commit carries the offsets again. SIGTERM
        # wakes the consumer up (WakeupException) and it closes with a final commit.
        errors = [e for e in self.j.errors()
                  if not any(ok in str(e.get("error")) for ok in ("RebalanceInProgress", "WakeupException"))]
        assert not errors, f"{self.name} reported errors: {errors}; {self.j.describe()}"
        if self.j.proc is not None and self.j.proc.poll() not in (None, 0, 143):
            raise AssertionError(f"{self.name} exited: {self.j.describe()}")

    def owned(self) -> frozenset[int] | None:
        return frozenset(p for _t, p in self.j.owned())

    def generation(self) -> int:
        gens = self.j.assigned_generations()
        return gens[-1] if gens else -1

    def offsets_read(self) -> Counter[tuple[int, int]]:
        return Counter({(p, o): n for (_t, p, o), n in self.j.offsets_read().items()})

    def uncommitted_reads(self) -> set[tuple[int, int]]:
        """Offsets it read whose commit failed (the CLI drops offsets whose commitSync failed,
        e.g. RebalanceInProgressException, or WakeupException at SIGTERM, and does not send them
        again): the partition's next owner starts before them, from the last commit that
        succeeded, and reads them again. The only re-reads the protocol allows here."""
        failed_upto: dict[int, int] = {}
        for c in self.j.commits():
            if not c.ok:
                for (_t, p), off in c.offsets.items():
                    failed_upto[p] = max(failed_upto.get(p, 0), off)
        return {(p, o) for (p, o) in self.offsets_read() if o < failed_upto.get(p, 0)}

    def stop(self) -> None:
        rc = self.j.stop(timeout=30)
        # 143: the JVM's exit status after SIGTERM, once its shutdown hook closed the consumer
        assert rc in (0, 143) and self.j.closed_cleanly(), f"{self.name} did not close cleanly: {self.j.describe()}"


def settled_generation(members: list[Any], what: str) -> int:
    """Wait until the members own disjoint, non-empty shares of all partitions in one generation
    with no rebalance under way, holding for QUIET_S (observed every 50 ms); its generation."""
    everything = frozenset(range(PARTITIONS))

    def split() -> Any:
        for m in members:
            m.check()
        shares = [m.owned() for m in members]
        if any(not s for s in shares):
            return None
        if sum(map(len, shares)) != PARTITIONS or frozenset().union(*shares) != everything:
            return None
        gens = {m.generation() for m in members}
        if len(gens) != 1:
            return None
        return tuple(shares), gens.pop()

    deadline = time.monotonic() + WAIT_S
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            settled = wait_until(split, timeout=left, interval=0.05, message=f"a settled split ({what})")
        except AssertionError as exc:
            state = "; ".join(f"{m.name}: gen {m.generation()} owns {m.owned()}" for m in members)
            raise AssertionError(f"{exc}; {state}") from None
        held_until = time.monotonic() + QUIET_S
        while time.monotonic() < held_until and split() == settled:
            time.sleep(0.05)
        if time.monotonic() >= held_until:
            return settled[1]


class Feed:
    """Produces one record per partition every ``every_s`` from a thread, until stopped;
    records where each landed (delivery reports)."""

    def __init__(self, bootstrap: str, topic: str, every_s: float = 0.05):
        self.topic, self.every_s = topic, every_s
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all", "log_level": 3})
        self.landed: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="javainterop-feed")
        self._n = 0

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.landed.append((msg.partition(), msg.offset()))

    def burst(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            for p in range(PARTITIONS):
                self.producer.produce(self.topic, key=f"k{self._n}".encode(), value=f"v{self._n}".encode(),
                                      partition=p, on_delivery=self._cb)
                self._n += 1
        self.producer.poll(0)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.burst()

    def start(self) -> Feed:
        self._thread.start()
        return self

    def stop(self) -> dict[int, int]:
        """Stop, flush; the log end per partition."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        if self.producer is not None:
            assert self.producer.flush(30) == 0, "records not delivered"
            self.producer = None  # no client left behind to reconnect after the test
        assert not self.errors, self.errors[:5]
        ends = dict.fromkeys(range(PARTITIONS), 0)
        for p, o in self.landed:
            ends[p] = max(ends[p], o + 1)
        return ends


# ----------------------------------------------------------------------------------------------
# one scenario: first member, second joins, second leaves
# ----------------------------------------------------------------------------------------------
def run_scenario(kafka_broker: Any, java: JavaConsumers, unique_name: Any, assignor: str,
                 first: str, second: str, label: str, delay_s: float = 0.0) -> dict[str, Any]:
    """``first`` and ``second`` are "ours" or "java". Returns the measurements; asserts the
    record and commit properties."""
    time.sleep(delay_s)  # scenarios run side by side: stagger the JVM starts a little
    topic, group = unique_name("jinterop"), unique_name("g")
    kafka_broker.create_topic(topic, PARTITIONS)
    feed = Feed(kafka_broker.bootstrap, topic)
    feed.burst(20)  # records before anyone joins

    def make(kind: str, name: str) -> Any:
        if kind == "ours":
            return Ours(kafka_broker, group, topic, assignor).start()
        return Java(java.start(group, [topic], name=f"{label}:{name}", assignment_strategy=assignor))

    t0 = time.monotonic()
    a = b = None
    try:
        a = make(first, "java-first")
        g0 = settled_generation([a], "first member alone")
        feed.burst(20)  # records the first member reads alone
        feed.start()    # and records produced all the while both are in the group
        t_join = time.monotonic()
        b = make(second, "java-second")
        g1 = settled_generation([a, b], "after the join")
        join_s = time.monotonic() - t_join
        split = (a.owned(), b.owned())
        timeline = {}
        if isinstance(b, Java):  # where a Java joiner's time goes: JVM start, then the join
            first_event = b.j.events()[0]["_mono"]
            first_assigned = next(e["_mono"] for e in b.j.events("assigned"))
            timeline = {"jvm_s": round(first_event - t_join, 1), "first_assigned_s": round(first_assigned - t_join, 1)}
        time.sleep(0.5)  # both read a little while the group is stable
        leaver, b = b, None
        t_leave = time.monotonic()
        leaver.stop()
        g2 = settled_generation([a], "after the leave")
        leave_s = time.monotonic() - t_leave
        ends = feed.stop()

        def caught_up() -> bool:
            a.check()
            return committed_offsets(kafka_broker.bootstrap, group, topic, PARTITIONS) == ends

        wait_until(caught_up, timeout=WAIT_S, interval=0.2,
                   message=f"the group's commits to reach the log end {ends}")
        a.stop()
        stayer, a = a, None
        read = stayer.offsets_read() + leaver.offsets_read()
        produced = set(feed.landed)
        allowed = set()
        for m in (stayer, leaver):
            if isinstance(m, Java):
                allowed |= m.uncommitted_reads()
        twice = sorted(k for k, n in read.items() if n > 1 and not (n == 2 and k in allowed))
        rereads = sorted(k for k, n in read.items() if n > 1 and k not in twice)
        missing = sorted(produced - set(read))
        foreign = sorted(set(read) - produced)
        assert not twice, f"{len(twice)} records read twice, e.g. {twice[:5]}"
        assert not missing, f"{len(missing)} records never read, e.g. {missing[:5]}"
        assert not foreign, f"offsets read that were never produced: {foreign[:5]}"
        for m in (stayer, leaver):
            if isinstance(m, Ours):
                assert not m.commit_errors, m.commit_errors
            else:
                m.check()
        return {
            "join": g1 - g0, "leave": g2 - g1, "split": split, "produced": len(produced),
            "reread": len(rereads),
            "read": {stayer.name: sum(stayer.offsets_read().values()),
                     leaver.name: sum(leaver.offsets_read().values())},
            "led": (stayer.led() if isinstance(stayer, Ours) else leaver.led() if isinstance(leaver, Ours) else None),
            "generations": (g0, g1, g2), "join_s": round(join_s, 1), **timeline, "leave_s": round(leave_s, 1),
            "total_s": round(time.monotonic() - t0, 1),
        }
    finally:
        with contextlib.suppress(Exception):
            feed.stop()
        for m in (a, b):
            if m is not None:
                with contextlib.suppress(Exception):
                    m.stop()


@pytest.fixture
def java(kafka_broker: Any) -> Any:
    require_java_consumer()
    consumers = JavaConsumers(kafka_broker.bootstrap, session_timeout_ms=kafka_broker.recommended_session_timeout_ms,
                              heartbeat_interval_ms=HEARTBEAT_MS, poll_ms=100)
    try:
        yield consumers
    finally:
        consumers.close_all()


SCENARIOS = {"java-only": ("java", "java"), "ours-leads": ("ours", "java"), "java-leads": ("java", "ours")}


@pytest.mark.compat(only={"assignor": ["cooperative-sticky"]})
@pytest.mark.extended(only={"assignor": ["roundrobin"]},
                      why="CI keeps range, the same eager protocol with empty user data (roundrobin's assignments "
                          "are checked against Java's in tests/unit/assignment/test_java_reference_range_roundrobin.py)")
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_java_consumer_in_our_group(kafka_broker, java, unique_name, assignor):
    """Our member and a Java consumer with the same assignor, ours leading (joining first) and
    the Java consumer leading, beside the same scenario with two Java consumers (the baseline),
    the three at once on their own topics and groups: disjoint, complete assignments; every
    record read once; the stayer continues from the leaver's commits up to the log end; the
    join and the leave cost as many generations as with two Java consumers."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(SCENARIOS)) as pool:
        futures = {}
        for i, (label, (first, second)) in enumerate(SCENARIOS.items()):
            futures[label] = pool.submit(run_scenario, kafka_broker, java, unique_name, assignor, first, second,
                                         label, delay_s=0.5 * i)
        results, failures = {}, {}
        for label, f in futures.items():
            try:
                results[label] = f.result(timeout=4 * WAIT_S)
            except Exception as exc:  # noqa: BLE001 - reported together below
                failures[label] = exc
    for label, got in results.items():
        print(f"{assignor} {label}: {got}")
    if failures:
        raise AssertionError("; ".join(f"{label}: {exc}" for label, exc in failures.items()))
    baseline = results["java-only"]
    assert results["ours-leads"]["led"], f"our member never led: {results['ours-leads']}"
    assert not results["java-leads"]["led"], f"our member led although the Java consumer joined first: {results}"
    for label in ("ours-leads", "java-leads"):
        got = results[label]
        assert (got["join"], got["leave"]) == (baseline["join"], baseline["leave"]), \
            f"{label}: generations (join, leave) ours+Java {got['join'], got['leave']}, Java only " \
            f"{baseline['join'], baseline['leave']}"


# ----------------------------------------------------------------------------------------------
# a real query
# ----------------------------------------------------------------------------------------------
def test_spark_query_with_a_cooperative_java_consumer_joining_and_leaving(spark, kafka_broker, java,
                                                                         unique_name, tmp_path):
    """A ``cooperative-sticky`` query (default options otherwise) reads alone; a cooperative-
    sticky Java consumer joins and later leaves while records keep arriving. Every record is read
    exactly once (beyond what a failed Java commit allows), the split while both are in is
    disjoint and complete, the group's commits reach the log end, and the query stays alive."""
    from test_stream_support import process_all, rows, stop, stream, table_name, to_memory

    b = kafka_broker
    topic, group = unique_name("jspark"), unique_name("g")
    b.create_topic(topic, PARTITIONS)
    feed = Feed(b.bootstrap, topic, every_s=0.1)
    feed.burst(10)
    name = table_name(unique_name, "jq")
    query = to_memory(stream(spark, b, topic, group, assignor="cooperative-sticky",
                             startingOffsets="earliest"), name, str(tmp_path / "ck"))
    j = None
    t0 = time.monotonic()

    def alive() -> None:
        assert query.isActive and query.exception() is None, f"the query died: {query.exception()}"

    def ours() -> list[tuple[int, int]]:
        return [(r[1], r[2]) for r in rows(spark, name)]

    try:
        wait_until(lambda: alive() or len(ours()) >= 10 * PARTITIONS, WAIT_S, interval=0.3,
                   message="the query to read the first records")
        feed.start()
        j = Java(java.start(group, [topic], name="java-coop", assignment_strategy="cooperative-sticky"))

        def split() -> Any:
            alive()
            mine = (owned := _query_owned(query)) and frozenset(owned)
            theirs = j.owned()
            if not mine or not theirs or mine & theirs or len(mine | theirs) != PARTITIONS:
                return None
            return mine, theirs

        mine, theirs = wait_until(split, WAIT_S, interval=0.3, message="a split between the query and Java")
        j.j.wait_for(lambda jc: jc.record_count() > 0, WAIT_S, "the Java consumer to read records")
        time.sleep(2)  # records under the settled split
        j.stop()
        feed.burst(5)
        wait_until(lambda: alive() or _query_owned(query) == set(range(PARTITIONS)), WAIT_S, interval=0.3,
                   message="the query to own every partition after the Java consumer left")
        time.sleep(1)
        ends = feed.stop()
        produced = set(feed.landed)

        def done() -> bool:
            alive()
            process_all(query)
            return committed_offsets(b.bootstrap, group, topic, PARTITIONS) == ends

        wait_until(done, WAIT_S, interval=0.5, message=f"the group's commits to reach the log end {ends}")
        alive()
        got = Counter(ours()) + j.offsets_read()
        allowed = j.uncommitted_reads()
        twice = sorted(k for k, n in got.items() if n > 1 and not (n == 2 and k in allowed))
        missing = sorted(produced - set(got))
        assert not twice, f"{len(twice)} records read twice, e.g. {twice[:5]}"
        assert not missing, f"{len(missing)} records never read, e.g. {missing[:5]}"
        assert set(got) <= produced
        assert len(set(ours())) == len(ours()), "the query read a record twice"
        j.check()
        print(f"spark + java cooperative-sticky: produced {len(produced)}, query read {len(ours())}, "
              f"java read {sum(j.offsets_read().values())}, re-read after failed java commits "
              f"{sum(1 for k, n in got.items() if n > 1)}, split query {sorted(mine)} / java {sorted(theirs)}, "
              f"{time.monotonic() - t0:.1f}s")
    finally:
        with contextlib.suppress(Exception):
            feed.stop()
        stop(query)
        if j is not None:
            j.j.close()


def _query_owned(query: Any) -> set[int] | None:
    from test_stream_support import owned_partitions

    return owned_partitions(query)
