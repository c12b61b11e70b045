"""The scenarios: each drives one fault while the producer writes and members read.

A scenario gets a fresh :class:`~chaos.run.Run` (its own dev broker: a 3-broker mock cluster, or
Apache Kafka with ``--broker kafka``; topic and group) and returns once its fault is over; the runner then waits out the quiet period and
judges. Sizes are scaled so the whole suite fits about 25 minutes on 2 idle cores.

Each scenario names the group protocols it applies to (``python -m chaos --protocol
consumer`` runs the KIP-848 ones); :data:`NOT_IN_CONSUMER` says why the others do not apply.
Likewise each names the dev broker backends it runs on: those that inject the mock's faults
(pushed request errors, a broker down with a chosen leader and coordinator, a coordinator
moved by hand) run on the mock only; :data:`NOT_ON_KAFKA` says why.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass

from chaos import crowd, traffic
from chaos import kafka_faults as kf
from chaos import netfaults as nf
from chaos.run import (
    BACKENDS,
    PROTOCOLS,
    SESSION_S,
    START_WAIT_S,
    Outcome,
    Run,
    Scenario,
    ScenarioError,
)
from chaos.sink import read_batches

OFFSET_COMMIT = 8
# OffsetCommit errors a coordinator really returns: REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
# UNKNOWN_MEMBER_ID, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# REQUEST_TIMED_OUT
COMMIT_ERRORS = [27, 22, 25, 14, 15, 16, 7]
# ... and to a KIP-848 member (no rebalance in progress, no generation; commits carry the
# member epoch): STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, then the coordinator errors
CONSUMER_COMMIT_ERRORS = [113, 25, 14, 15, 16, 7]


@dataclass(frozen=True)
class Spec:
    name: str
    run: Scenario
    about: str
    partitions: int = 4
    quick: tuple[str, ...] = ()  # the protocols whose short version (--quick) runs it
    protocols: tuple[str, ...] = PROTOCOLS
    backends: tuple[str, ...] = BACKENDS  # the dev brokers it runs on
    kafka_nodes: int = 1  # Kafka nodes it needs (a cluster fault needs the other nodes to fail over to)
    java_on: tuple[str, ...] = ()  # the backends where its plain members are Java consumers (java-consumer.sh)
    named_only: bool = False  # runs only when --only names it (a target of its own: make chaos-net)


def eager_churn(r: Run, **options: str) -> None:
    """Production runs through the whole churn (the run ends it 5 s after), not a fixed 400 s:
    on a loaded machine the three query starts took longer than that, so the last query joined
    with every record already read and committed, and had nothing to write (a failure of the
    scenario, not of the member: 2026-11-26 on 4.3.1, 2026-12-07 on 3.9.1)."""
    r.produce(seconds=3 * START_WAIT_S + 60)
    a = r.start("a", **options)
    r.wait_reading(a)
    for _ in range(2):
        b = r.start("b", **options)
        r.wait_reading(b)
        r.sleep(4)
        r.stop(b)
        r.sleep(4)


def query_churn(r: Run) -> None:
    """KIP-848: a second query joins and leaves twice (both name the broker's range assignor)."""
    eager_churn(r, **{"kafka.group.remote.assignor": "range"})


def cooperative_churn(r: Run) -> None:
    """Plain consumers stay 20 s each (a cooperative rebalance takes two rounds, and a round
    on the mock up to session - 1 s), overlapping: c0; c0 + c1; c1; none. They must get
    partitions and read from them, or the scenario proved nothing. On Kafka they are Java
    consumers (kafka-clients 4.0.1), on the mock librdkafka ones."""
    _plain_churn(r, {"assignor": "cooperative-sticky"}, "cooperative-sticky")


def eager_plain_churn(r: Run) -> None:
    """The same churn, eager: a ``range`` query and Java consumers with the ``range`` assignor
    (Kafka only), so each join and leave revokes every partition of every member."""
    _plain_churn(r, {"assignor": "range"}, "range")


def consumer_churn(r: Run) -> None:
    """The same with plain consumers in ``group.protocol=consumer`` (no client-side assignor:
    the broker assigns, incrementally): Java consumers on Kafka, librdkafka ones on the mock."""
    _plain_churn(r, {}, None)


def _plain_churn(r: Run, query_options: dict[str, str], assignor: str | None) -> None:
    r.produce()
    a = r.start("a", **query_options)
    r.wait_reading(a)
    c0 = r.plain_member("c0", assignor)
    r.sleep(20)
    c1 = r.plain_member("c1", assignor)
    r.sleep(20)
    c0.close()
    r.event("plain consumer c0 left")
    r.sleep(20)
    c1.close()
    r.event("plain consumer c1 left")
    r.sleep(10)
    for c in (c0, c1):
        if not c.batches:
            r.problems.append(f"plain consumer {c.owner} read nothing in 20-40 s in the group "
                              f"(acquired partitions: {sorted(c.acquired)})")


def driver_kill9(r: Run) -> None:
    """kill -9 the member mid-stream and restart it from its checkpoint. Its batches run as one
    task (maxPartitions=1, its one core): the replay after the restart reads every range of the
    logged batch in that one task."""
    r.produce()
    a = r.start("a", maxPartitions="1")
    r.wait_reading(a)
    r.wait_reading(a, batches=3)
    r.kill9(a)
    r.sleep(2)
    a = r.start("a", maxPartitions="1")  # the same checkpoint: Spark replays the planned batch
    r.wait_reading(a)


def member_frozen(r: Run) -> None:
    r.produce()
    a, b = r.start("a"), r.start("b")
    r.wait_reading(a)
    r.wait_reading(b)
    r.sleep(3)
    pids = b.signal_all(signal.SIGSTOP)
    r.event(f"SIGSTOP {b.owner} ({len(pids)} processes) for {2 * SESSION_S + 4:.0f}s")
    r.sleep(2 * SESSION_S + 4)
    b.signal_all(signal.SIGCONT)
    r.event(f"SIGCONT {b.owner}")
    r.sleep(10)


def worker_kill(r: Run) -> None:
    """Kill -9 the executor Python workers while one is busy until three tasks have died
    mid-batch, 10 s apart. Spark retries a task 4 times (local[1,4]); a kill that failed a task
    is followed by 10 s without kills, so its retry runs untouched, the retries are never
    exhausted and the query must survive and lose nothing. A task per range
    (smallRangesPerTask=1): at this rate every range is small, and four to a task left too few
    tasks per batch for a kill to land in one (make chaos at e646c74: no task failed). A task at this rate lasts milliseconds: a kill often lands after its task
    ended (on an idle machine all three did, make chaos at 2ea6aaa), so the scenario counts the
    tasks Spark reports lost, not the kills, and tries again after a kill that failed none."""
    r.produce(rate=100)
    a = r.start("a", smallRangesPerTask="1")
    r.wait_reading(a)
    kills, failed, deadline = 0, 0, time.monotonic() + 90
    while failed < 3 and time.monotonic() < deadline:
        busy = _busy(a.python_workers(), window=0.05)
        if not busy:
            continue
        for pid in busy:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kills += 1
        r.sleep(1)  # Spark logs a lost task within milliseconds of its worker's death
        now_failed = _text(a.log_path).count("Lost task")
        r.event(f"kill -9 busy Python workers {busy}: {now_failed - failed} task(s) lost")
        if now_failed > failed:
            failed = now_failed
            r.sleep(10)
    r.sleep(5)
    failed = _text(a.log_path).count("Lost task")
    r.notes.append(f"{kills} kills, {failed} task failures logged")
    if not failed:
        r.problems.append("fault not injected: no task failed (no kill landed mid-batch)")


def _busy(pids: list[int], window: float = 0.3) -> list[int]:
    """Those of ``pids`` that used CPU during ``window`` seconds (running a task)."""
    def cpu(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            return None

    before = {p: cpu(p) for p in pids}
    time.sleep(window)
    return [p for p in pids if before[p] is not None and (c := cpu(p)) is not None and c > before[p]]


def broker_outage(r: Run) -> None:
    """The leader of partitions 1, 4, 7 and the group's coordinator down for 20 s, longer than
    the clients' retries (request timeout 5 s)."""
    mock = r.broker.mock
    for p in range(r.partitions):
        mock.set_partition_leader(r.topic, p, 2 if p % 3 == 1 else (1 if p % 3 == 0 else 3))
    mock.set_coordinator(r.group, 2)
    r.produce()
    a = r.start("a")
    r.wait_reading(a)
    mock.broker_down(2)
    r.event("broker 2 down (leader of 1, 4, 7 and the coordinator)")
    r.sleep(20)
    mock.broker_up(2)
    r.event("broker 2 up")
    r.sleep(10)


def coordinator_moved(r: Run) -> None:
    mock = r.broker.mock
    r.produce()
    a = r.start("a")
    r.wait_reading(a)
    for broker_id in (2, 3, 1, 2):
        mock.set_coordinator(r.group, broker_id)
        r.event(f"coordinator of {r.group} moved to broker {broker_id}")
        r.sleep(6)


def commit_errors(r: Run) -> None:
    mock = r.broker.mock
    r.produce()
    a = r.start("a")
    r.wait_reading(a)
    for code in CONSUMER_COMMIT_ERRORS if r.protocol == "consumer" else COMMIT_ERRORS:
        mock.push_request_errors(OFFSET_COMMIT, [code])
        r.event(f"next OffsetCommit fails with error {code}")
        r.sleep(3)
    mock.clear_request_errors(OFFSET_COMMIT)


def unreachable_bootstrap(r: Run) -> None:
    """Nothing listens at 127.0.0.1:9: the query must fail within groupJoinTimeoutMs (10 s here)
    of its start, with an error naming the bootstrap servers and the group."""
    bound_s, slack_s = 10, 30
    r.outcome = Outcome(expect_failure=rf"127\.0\.0\.1:9\b.*{r.group}|{r.group}.*127\.0\.0\.1:9\b")
    a = r.start("a", bootstrap="127.0.0.1:9", groupJoinTimeoutMs=str(bound_s * 1000))
    deadline = time.monotonic() + 240
    started = None
    while a.running() and time.monotonic() < deadline:
        if started is None and "chaos.member a-1: started" in _text(a.log_path):
            started = time.monotonic()
            r.event("query started")
        time.sleep(0.5)
    code = r.wait_exit(a, timeout=1)
    if code is None:
        r.problems.append("the query did not fail within 240 s of its launch")
    elif started is not None:
        took = time.monotonic() - started
        r.notes.append(f"failed {took:.0f}s after the query started")
        if took > bound_s + slack_s:
            r.problems.append(f"failed {took:.0f}s after the query started (groupJoinTimeoutMs={bound_s * 1000})")


def _text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def redundant_restart(r: Run) -> None:
    r.per_member = True
    opts = {"assignor": "redundant", "redundant.replicas": "2"}
    r.produce()
    a, b = r.start("a", **opts), r.start("b", **opts)
    r.wait_reading(a)
    r.wait_reading(b)
    r.sleep(3)
    r.kill9(b)
    r.sleep(SESSION_S + 4)  # past b's session: a alone, fewer members than replicas
    b = r.start("b", **opts)
    r.wait_reading(b)
    r.sleep(5)


def _retention(r: Run, fail_on_data_loss: bool) -> None:
    """The member's sink is paused (its next batch waits before fetching) while the producer
    writes on; then retention deletes, in every partition, everything but the last 40 records,
    and the sink resumes: the records between the member's position and the new log start
    are gone unread."""
    r.produce(rate=100)
    a = r.start("a", failOnDataLoss=str(fail_on_data_loss).lower())
    r.wait_reading(a)
    r.pause_sink(a, True)
    r.sleep(8)
    r.end_production(0)
    r.producer.finish()
    committed = r.sampler.sample() or {}
    marks = r.sampler.watermarks()
    for p in range(r.partitions):
        lo, hi = marks[p]
        point = max(lo, committed.get(p, 0), hi - 40)
        r.delete_records(p, point)
        r.deleted_before[p] = point
    r.event(f"retention deleted records below {r.deleted_before} (committed {committed})")
    r.pause_sink(a, False)
    if fail_on_data_loss:
        code = r.wait_exit(a, timeout=120)
        if code is None:
            r.problems.append("the query did not fail within 120 s of the deletion")
    else:
        r.outcome = Outcome(expect_logged=[rf"(?i)data loss.*{r.topic}-{p}\b" for p in range(r.partitions)])
        r.sleep(10)


def retention_fail(r: Run) -> None:
    r.outcome = Outcome(expect_failure=r"(?i)DataLossError|data loss")
    _retention(r, True)


def retention_skip(r: Run) -> None:
    _retention(r, False)


#: partitions_added: the topic's partitions before and after
PARTITIONS_BEFORE, PARTITIONS_AFTER = 8, 12
#: stuck_batch: the queries' kafka.max.poll.interval.ms and (classic) kafka.session.timeout.ms,
#: and how long after query a's sink blocks query b must have read a's partitions
POLL_INTERVAL_S, STUCK_SESSION_S = 20, 10
TAKEOVER_BOUND_S = POLL_INTERVAL_S + 30


def _starts(r: Run, members) -> set[int]:
    """The partitions the members' logs say they started ("<topic>-<p> starts at offset")."""
    import re

    return {int(p) for m in members
            for p in re.findall(rf"{re.escape(r.topic)}-(\d+) starts at offset", _text(m.log_path))}


#: how long partitions_added waits for both queries to have started their partitions
STARTS_S = 360.0


def partitions_added(r: Run) -> None:
    """The topic grows from 8 to 12 partitions under traffic; the queries run with the reader's
    defaults (no kafka.auto.offset.reset: `latest`), so only the commit 4002ac5 rule reads the new
    partitions from their start: each has no group offset when the group hands it over, and a
    partition added after the query first planned starts at its earliest offset. Production
    starts once both queries have started every partition (the topic empty: `latest` is
    offset 0 then), so nothing before is left out on purpose. kafka.metadata.max.age.ms=5000 is
    the harness's (the default, 5 min, would outlast the scenario): the members see the new
    partitions within 5 s, the producer at once (it asks), so records are written into them
    before the group hands them over."""
    opts = {"kafka.auto.offset.reset": None, "kafka.metadata.max.age.ms": "5000"}
    a = r.start("a", **opts)
    r.wait_logged(a, r"starts at offset")
    b = r.start("b", **opts)
    # b's Spark start alone took 142 s at load 45 (4.0.1, 2026-12-02): the bound is the other
    # set-up waits' (chaos.run.START_WAIT_S), not a property of the product
    deadline = time.monotonic() + STARTS_S
    while _starts(r, (a, b)) != set(range(r.partitions)) or not _starts(r, (b,)):
        if time.monotonic() > deadline:
            r.problems.append(f"the queries started partitions {sorted(_starts(r, (a, b)))} of {r.partitions} "
                              f"(b: {sorted(_starts(r, (b,)))}) in {STARTS_S:.0f} s")
            break
        time.sleep(0.5)
    r.sleep(3)
    r.event(f"partitions started: {sorted(_starts(r, (a, b)))}")
    r.produce()
    r.wait_reading(a, batches=2)
    r.wait_reading(b, batches=2)
    r.sleep(3)
    r.add_partitions(PARTITIONS_AFTER)
    r.sleep(30)

    def new_ones_read(batches) -> list[str]:
        read = {p for b in batches for p, _o, _s in b.rows}
        missing = sorted(set(range(PARTITIONS_BEFORE, PARTITIONS_AFTER)) - read)
        return [f"nothing read from the added partitions {missing}"] if missing else []

    r.checks.append(new_ones_read)


def topic_recreated(r: Run) -> None:
    """The topic deleted and created again (as many partitions) under traffic, the query with
    failOnDataLoss=false. The query's sink pauses 5 s before the deletion (it lags: records of
    the first incarnation are unread when it goes) and resumes once the topic is back. The
    producer pauses for the deletion (each record belongs to one incarnation) and writes into
    the new topic with a new producer id. The verdict: every record of the first incarnation is
    read or gone with the topic (counted as deleted, as retention's); every record of the second
    is read (Spark's source reads a recreated topic's partitions from their start: its test
    "delete a topic when a Spark job is running"); offsets of each incarnation judged apart."""
    r.produce()
    a = r.start("a", failOnDataLoss="false")
    r.wait_reading(a, batches=3)
    r.pause_sink(a, True)
    r.sleep(5)
    r.recreate_topic(hold=lambda: r.sleep(2))
    r.pause_sink(a, False)
    r.sleep(30)


def stuck_batch(r: Run) -> None:
    """Two queries in one group (kafka.max.poll.interval.ms 20 s; classic: session 10 s); query
    a's sink blocks on one batch for longer than the interval while query b runs. As for the
    Java consumer (PlaintextConsumerPollTest testMaxPollIntervalMs), a's member must leave the
    group when its query has not come back within the interval, so that b reads the records
    written to a's partitions within TAKEOVER_BOUND_S of the block; then a's sink is released,
    its batch completes and a rejoins. Nothing lost, no committed offset back; the only records
    read twice are those of a's stuck batch (b re-reads it from the group's offset)."""
    opts = {"kafka.max.poll.interval.ms": str(POLL_INTERVAL_S * 1000)}
    if r.protocol == "classic":
        opts["kafka.session.timeout.ms"] = str(STUCK_SESSION_S * 1000)
    r.produce()
    a, b = r.start("a", **opts), r.start("b", **opts)
    r.wait_reading(a)
    r.wait_reading(b)
    r.sleep(5)
    recent = [bt for bt in read_batches(r.out) if bt.owner == a.owner][-4:]
    mine = sorted({p for bt in recent for p, _o, _s in bt.rows})
    if not mine:
        raise ScenarioError(f"{a.owner} read no partition in its last batches")
    r.pause_sink(a, True)
    blocked = time.time()
    r.event(f"{a.owner}'s sink blocks its next batch; its partitions {mine}")
    taken: dict[int, float] = {}
    deadline = time.monotonic() + TAKEOVER_BOUND_S
    while time.monotonic() < deadline and len(taken) < len(mine):
        for bt in read_batches(r.out):
            if bt.owner.startswith("b-") and bt.t > blocked:
                for p in {p for p, _o, _s in bt.rows} & set(mine):
                    taken.setdefault(p, bt.t - blocked)
        time.sleep(1)
    r.event(f"b read a's partitions {sorted(taken)} (s after the block: "
            f"{ {p: round(t) for p, t in sorted(taken.items())} })")
    left = sorted(set(mine) - set(taken))
    if left:
        r.problems.append(f"b read nothing of a's partitions {left} within {TAKEOVER_BOUND_S} s of a's sink "
                          f"blocking (kafka.max.poll.interval.ms={POLL_INTERVAL_S * 1000}): a's member did not "
                          f"leave the group when its query stopped coming back")
    else:
        r.notes.append(f"b read a's partitions {max(taken.values()):.0f} s after a's sink blocked "
                       f"(interval {POLL_INTERVAL_S} s, bound {TAKEOVER_BOUND_S} s)")
    r.sleep(max(0.0, POLL_INTERVAL_S + 5 - (time.time() - blocked)))  # blocked past the interval in any case
    r.pause_sink(a, False)
    released = time.time()
    r.sleep(20)  # a's batch completes, a plans again and rejoins
    r.wait_reading(a, batches=r.batches_of(a.owner) + 1, timeout=60)

    def only_the_stuck_batch_twice(batches) -> list[str]:
        stuck = next((bt for bt in batches if bt.owner == a.owner and bt.t >= released), None)
        if stuck is None:
            return [f"{a.owner} wrote no batch after its sink was released"]
        # re-reads before the block (a slow first batch at start-up, ...) are the general
        # promise's; from the block on, only the stuck batch's records may be read twice
        counts = Counter(s for bt in batches for _p, _o, s in bt.rows)
        since = {s for bt in batches if bt.t > blocked for _p, _o, s in bt.rows}
        twice = {s for s in since if counts[s] > 1}
        outside = twice - {s for _p, _o, s in stuck.rows}
        if outside:
            return [f"{len(outside)} records read twice since a's sink blocked, not in {a.owner}'s stuck "
                    f"batch {stuck.batch}, e.g. seq {sorted(outside)[:5]}"]
        r.notes.append(f"since the block {len(twice)} records read twice, all in {a.owner}'s stuck batch "
                       f"{stuck.batch} ({len(stuck.rows)} records)")
        return []

    r.checks.append(only_the_stuck_batch_twice)


CLASSIC, CONSUMER = ("classic",), ("consumer",)
MOCK, KAFKA = ("mock",), ("kafka",)
SCENARIOS = [
    Spec("eager_churn", eager_churn, "a second query started and stopped twice (range)", protocols=CLASSIC),
    Spec("cooperative_churn", cooperative_churn,
         "plain consumers (cooperative-sticky; Java on Kafka, librdkafka on the mock) join and leave "
         "a cooperative-sticky query", protocols=CLASSIC, java_on=KAFKA),
    Spec("eager_plain_churn", eager_plain_churn,
         "plain Java consumers (range, eager) join and leave a range query", protocols=CLASSIC,
         backends=KAFKA, java_on=KAFKA),
    Spec("query_churn", query_churn, "a second query started and stopped twice (remote assignor range)",
         protocols=CONSUMER),
    Spec("consumer_churn", consumer_churn,
         "plain consumers (group.protocol=consumer; Java on Kafka, librdkafka on the mock) join and leave "
         "the query", protocols=CONSUMER, java_on=KAFKA),
    Spec("driver_kill9", driver_kill9, "the member's processes kill -9, restart from the checkpoint "
         "(maxPartitions=1: a batch is one task)",
         quick=CLASSIC),
    Spec("member_frozen", member_frozen, "one of two members SIGSTOPped past its session timeout, resumed"),
    Spec("worker_kill", worker_kill, "busy executor Python workers kill -9ed until 3 tasks die, 10 s apart "
         "(smallRangesPerTask=1: a task per range)"),
    Spec("broker_outage", broker_outage, "leader of 3 of 8 partitions and the coordinator down 20 s",
         partitions=8, backends=MOCK),
    Spec("coordinator_moved", coordinator_moved, "the group coordinator moved 4 times", backends=MOCK),
    Spec("commit_errors", commit_errors,
         "OffsetCommit errors injected one by one (classic 27 22 25 14 15 16 7; consumer 113 25 14 15 16 7)",
         quick=CLASSIC, backends=MOCK),
    Spec("unreachable_bootstrap", unreachable_bootstrap,
         "bootstrap 127.0.0.1:9: must fail within groupJoinTimeoutMs naming servers and group"),
    Spec("redundant_restart", redundant_restart, "redundant (2 replicas), a member kill -9 and restarted",
         protocols=CLASSIC),
    Spec("retention_fail", retention_fail, "retention deletes unread records, failOnDataLoss=true: must fail"),
    Spec("retention_skip", retention_skip,
         "retention deletes unread records, failOnDataLoss=false: only those missing, reported", quick=CONSUMER),
    Spec("broker_crash", kf.broker_crash, "kill -9 of the broker leading most partitions, restarted after 20 s",
         partitions=6, backends=KAFKA, kafka_nodes=3, quick=CLASSIC),
    Spec("coordinator_crash", kf.coordinator_crash,
         "kill -9 of the group coordinator's broker (two members), restarted after 20 s",
         partitions=6, backends=KAFKA, kafka_nodes=3),
    Spec("rolling_restart", kf.rolling_restart, "each broker in turn stopped cleanly and restarted",
         partitions=6, backends=KAFKA, kafka_nodes=3),
    Spec("broker_frozen", kf.broker_frozen, "SIGSTOP of the busiest leader past its controller session, SIGCONT",
         partitions=6, backends=KAFKA, kafka_nodes=3),
    Spec("cluster_down", kf.cluster_down, "every broker kill -9 for 20 s (bounds 90 s): the query survives",
         partitions=6, backends=KAFKA, kafka_nodes=3),
    Spec("cluster_down_long", kf.cluster_down_long,
         "every broker kill -9 past the query's 15 s outage bounds: must fail clearly",
         partitions=6, backends=KAFKA, kafka_nodes=3),
    Spec("partitions_added", partitions_added,
         "partitions 8 -> 12 under traffic, default options (no auto.offset.reset): the new ones read "
         "from their start", partitions=PARTITIONS_BEFORE, protocols=CLASSIC, backends=KAFKA),
    Spec("topic_recreated", topic_recreated,
         "the topic deleted and created again under traffic, failOnDataLoss=false: the new one read whole",
         protocols=CLASSIC),
    Spec("stuck_batch", stuck_batch,
         "two queries; a's sink blocks past kafka.max.poll.interval.ms (20 s): b takes a's partitions",
         protocols=CLASSIC, backends=KAFKA),
]

# the crowded group: run by name (its JVMs and 11-50 members cost minutes); the history checker
# judges it, and the group must settle after the last wave (chaos/crowd.py)
SCENARIOS.append(Spec(
    "crowded_group", crowd.crowded_group,
    f"2 queries, {crowd.CROWD.java} Java consumers, {crowd.CROWD.librdkafka} librdkafka ones (range) joining "
    f"and leaving in {len(crowd.CROWD.waves)} waves ({max(crowd.CROWD.members_after())} members at the peak); "
    f"the group settles within {crowd.CROWD.settle_s:.0f} s ({crowd.FULL_ENV}=1: the 50-member crowd)",
    partitions=crowd.CROWD.partitions, protocols=CLASSIC, backends=KAFKA, java_on=KAFKA, named_only=True))

# issue 53: network faults through our fault proxies, and clock jumps (chaos/netfaults.py)
SCENARIOS += [Spec(name, fn, nf.ABOUT[name], partitions=6, protocols=CLASSIC, backends=KAFKA, kafka_nodes=3,
                   named_only=True)
              for name, fn in nf.ALL.items()]

#: Why the classic-only scenarios do not apply to a KIP-848 member (``--protocol consumer``).
NOT_IN_CONSUMER = {
    **{name: "not yet run in the consumer mode (issue 53: classic on the 3-node Kafka first)" for name in nf.ALL},
    "eager_churn": "eager assignment is a classic client-side assignor behaviour; KIP-848 rebalances are "
    "always incremental (query_churn runs the same churn)",
    "cooperative_churn": "the cooperative-sticky client-side assignor is rejected in this mode (the broker "
    "assigns); consumer_churn runs the same churn with group.protocol=consumer consumers",
    "redundant_restart": "redundant is a client-side assignor; the broker assigns each partition to one member",
    "eager_plain_churn": "eager assignment is a classic client-side assignor behaviour; KIP-848 rebalances are "
    "always incremental (consumer_churn runs the same churn)",
    "partitions_added": "not yet run in the consumer mode (issue 52: classic on the 3-node Kafka first)",
    "topic_recreated": "not yet run in the consumer mode (issue 52: classic on the 3-node Kafka first)",
    "stuck_batch": "not yet run in the consumer mode (issue 52: classic on the 3-node Kafka first)",
    "crowded_group": "a classic group's crowd (client-side range assignor); not yet run in the consumer mode",
}
#: Classic has its own churn scenarios for these.
NOT_IN_CLASSIC = {
    "query_churn": "the classic mode runs eager_churn",
    "consumer_churn": "the classic mode runs cooperative_churn (and eager_plain_churn on Kafka)",
}


#: Why the mock-only scenarios do not run with ``--broker kafka``.
NOT_ON_KAFKA = {
    "broker_outage": "needs the mock's fault injection: a chosen partition leader and coordinator on "
    "broker 2 of 3, then that broker down and up (on Kafka: broker_crash and coordinator_crash)",
    "coordinator_moved": "needs the mock's fault injection: Kafka places the coordinator by the group's "
    "__consumer_offsets partition; it cannot be moved by hand",
    "commit_errors": "needs the mock's fault injection: OffsetCommit answers with chosen error codes",
}


#: Why the real-cluster scenarios do not run on the mock.
NOT_ON_MOCK = "a real cluster's fault (JVMs killed, frozen, restarted; controller fail-over): --broker kafka"
#: ... and the Kafka-only scenarios that are no cluster fault.
NOT_ON_MOCK_WHY = {
    "eager_plain_churn": "its plain members are Java consumers, which the suite runs on Kafka only "
    "(--broker kafka); on the mock eager_churn churns a second query",
    "partitions_added": "librdkafka's mock has no CreatePartitions handler: a topic's partition count is fixed "
    "(--broker kafka)",
    "crowded_group": "its Java consumers run on Kafka only (--broker kafka)",
    "stuck_batch": "measured on Kafka only (--broker kafka): the mock enforces no rebalance timeout, and its "
    "SyncGroup quirks (leaderSyncDelayMs) would time the hand-over, not the member's max.poll.interval",
}


def for_protocol(protocol: str, backend: str = "mock", kafka_nodes: int = 1) -> list[Spec]:
    return [s for s in SCENARIOS if protocol in s.protocols and backend in s.backends
            and (backend != "kafka" or s.kafka_nodes <= kafka_nodes)
            and not (backend in s.java_on and traffic.java_missing())]


def why_not(name: str, protocol: str, backend: str = "mock", kafka_nodes: int = 1) -> str | None:
    why = (NOT_IN_CONSUMER if protocol == "consumer" else NOT_IN_CLASSIC).get(name)
    spec = next((s for s in SCENARIOS if s.name == name), None)
    if why is None and backend == "kafka":
        why = NOT_ON_KAFKA.get(name)
        if why is None and spec is not None and spec.kafka_nodes > kafka_nodes:
            why = f"needs a {spec.kafka_nodes}-node Kafka cluster (--kafka-brokers {spec.kafka_nodes})"
    if why is None and backend == "mock" and spec is not None and "mock" not in spec.backends:
        why = NOT_ON_MOCK_WHY.get(name, NOT_ON_MOCK)
    if why is None and spec is not None and backend in spec.java_on:
        missing = traffic.java_missing()
        if missing:
            why = f"its plain members are Java consumers on {backend}, which cannot run here: {missing}"
    return why
