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
from dataclasses import dataclass

from chaos import kafka_faults as kf
from chaos import traffic
from chaos.run import BACKENDS, PROTOCOLS, SESSION_S, Outcome, Run, Scenario

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


def eager_churn(r: Run, **options: str) -> None:
    r.produce()
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
]

#: Why the classic-only scenarios do not apply to a KIP-848 member (``--protocol consumer``).
NOT_IN_CONSUMER = {
    "eager_churn": "eager assignment is a classic client-side assignor behaviour; KIP-848 rebalances are "
    "always incremental (query_churn runs the same churn)",
    "cooperative_churn": "the cooperative-sticky client-side assignor is rejected in this mode (the broker "
    "assigns); consumer_churn runs the same churn with group.protocol=consumer consumers",
    "redundant_restart": "redundant is a client-side assignor; the broker assigns each partition to one member",
    "eager_plain_churn": "eager assignment is a classic client-side assignor behaviour; KIP-848 rebalances are "
    "always incremental (consumer_churn runs the same churn)",
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
