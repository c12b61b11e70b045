"""One scenario's run: its own dev broker (librdkafka's mock cluster, or Apache Kafka), topic and
group; members, producer and sampler; then the quiet period and the verdict. Every wait is
bounded."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields

from chaos import history as hist
from chaos.procs import Member, start_member
from chaos.sink import Batch, read_batches
from chaos.traffic import GroupSampler, JavaPlainMember, OffsetSampler, PlainMember, SeqProducer
from chaos.verdict import completeness, separate_log_copies, tally, unreported
from spark_groupsource.devbroker import DevBroker

#: Reader options of every member on the mock: a 6 s session (a member still draining a slow
#: first micro-batch is not left out of the next generation), and the mock's SyncGroup
#: workarounds (see tests/integration/test_stream_support.broker_options).
MEMBER_OPTIONS = {
    "kafka.auto.offset.reset": "earliest",
    "kafka.session.timeout.ms": "6000",
    "kafka.heartbeat.interval.ms": "1000",
    "leaderSyncDelayMs": "1000",
    "kafka.request.timeout.ms": "5000",
}
SESSION_S = 6.0
#: Seconds a chaos scenario's Kafka cluster may take to start (DevBroker default: 120).
CHAOS_BROKER_START_S = 300.0
#: The same for a KIP-848 member (``--protocol consumer``): the broker owns the session and
#: heartbeat (set on the mock cluster to the classic values, see :class:`Run`), there is no
#: leader or SyncGroup; a revocation may take up to 60 s (the rebalance timeout).
CONSUMER_MEMBER_OPTIONS = {
    "kafka.auto.offset.reset": "earliest",
    "kafka.group.protocol": "consumer",
    "kafka.max.poll.interval.ms": "60000",
    "kafka.request.timeout.ms": "5000",
}
PROTOCOLS = ("classic", "consumer")
#: The dev broker backends a run can use: ``mock`` (3 brokers, fault injection) and ``kafka``
#: (Apache Kafka 4.x from the jars the devbroker finds; one KRaft node unless asked for more).
BACKENDS = ("kafka", "mock")
#: Options only the mock needs (its SyncGroup quirks); never set on Kafka.
MOCK_ONLY_OPTIONS = ("leaderSyncDelayMs",)


def kafka_broker_config(protocol: str) -> dict[str, str]:
    """Broker settings of a chaos run on Kafka: the KIP-848 session and heartbeat the suite
    uses on the mock (6 s, 1 s; the dev defaults are 10 s, 500 ms), so that a scenario's
    timing (a member frozen past its session) means the same on both."""
    if protocol != "consumer":
        return {}
    return {"group.consumer.session.timeout.ms": str(int(SESSION_S * 1000)),
            "group.consumer.heartbeat.interval.ms": "1000"}


#: the kinds of plain (non-Spark) group member: the Java reference consumer, a librdkafka one
PLAIN_KINDS = ("java", "librdkafka")


def plain_kind(backend: str, kind: str | None = None) -> str:
    """The kind of plain member a run starts: ``kind``, else Java on Kafka and librdkafka on the
    mock. The Java client is run against Kafka only (not against librdkafka's mock)."""
    chosen = kind or ("java" if backend == "kafka" else "librdkafka")
    if chosen not in PLAIN_KINDS:
        raise ValueError(f"a plain member is one of {PLAIN_KINDS}, not {kind!r}")
    if chosen == "java" and backend != "kafka":
        raise ValueError(f"Java plain members run on Kafka only, not on the {backend} broker")
    return chosen


#: scenario name -> what runs before its Kafka cluster starts, returning more broker settings
#: (chaos/netfaults.py: the fault proxies' ports, the cluster's PROXIED listener advertises them)
BEFORE_BROKER: dict[str, Callable[[Run], dict[str, str]]] = {}


class ScenarioError(Exception):
    """The scenario could not drive its fault (a member never started reading, ...)."""


@dataclass
class Outcome:
    """What the scenario expects besides 'nothing lost': a failure (regex on the member's error)
    within ``within_s`` of the member's start, or an explicit report in the members' logs."""

    expect_failure: str | None = None
    within_s: float | None = None
    expect_logged: list[str] = field(default_factory=list)  # regexes, each must match a log line


@dataclass
class Row:
    scenario: str
    produced: int = 0
    read: int = 0
    lost: int = 0
    deleted: int = 0
    dup_total: int = 0
    dup_max: int = 0
    handovers: int = 0
    regressions: int = 0
    order_breaks: int = 0  # gaps and reorders within one ownership of a partition (chaos.history)
    history_breaches: int = 0  # every breach of the history checker's rules (chaos/history.py)
    generations: int = 0  # distinct generations (KIP-848: member epochs) in the members' histories
    group_samples: int = 0  # the coordinator's descriptions of the group taken
    # the history checker's findings, rule by rule (None: a results file from before they were kept)
    two_owners: int | None = None  # a: one partition planned or described in two members at once
    fenced_commits: int | None = None  # b: a commit accepted after its generation was fenced
    reads_unowned: int | None = None  # c: a partition read outside its reader's ownership
    unplanned: int | None = None  # a Spark batch with no plan in its member's history
    replayed: int | None = None  # batches replayed from a checkpoint by a later incarnation
    group_sample_errors: int | None = None  # the coordinator's descriptions asked for and not had
    offset_samples: int | None = None  # the committed-offset sampler's successful samples
    offset_sample_errors: int | None = None  # ... and its failed asks
    unacked_absent: int = 0  # records sent, never acknowledged, not in the log (never written)
    failures: int = 0
    reached_end: bool | None = None
    elapsed_s: float = 0.0
    ok: bool = False
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    protocol: str = "classic"
    broker: str = "mock"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Row:
        """A row of a results file (fields it lacks keep their defaults; unknown ones are dropped)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})  # type: ignore[arg-type]


#: how long a query may take to write its first batches: a set-up wait, not a property of the
#: product. Spark took 2.5-3.5 min from its first log line to the group's assignment at load
#: 40-70, and a CI run at load 73 (2026-12-02) ended broker_crash on the old 240 s before any fault
START_WAIT_S = 600.0


class Run:
    def __init__(self, name: str, workdir: str, *, partitions: int = 4, brokers: int | None = None,
                 protocol: str = "classic", backend: str = "mock"):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.name = name
        self.protocol = protocol
        self.backend = backend
        self.dir = os.path.join(workdir, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.out = os.path.join(self.dir, "sink")
        os.makedirs(self.out)
        self.partitions = partitions
        self.topic = f"chaos-{name}"
        self.group = f"chaos-{name}-g"
        if backend == "kafka":
            # The suites run beside other work: at load ~38 on 2 cores three 3-node starts took
            # over 120 s. A slow start is the machine's, not a fault of the product under test.
            config = {**kafka_broker_config(protocol), **(BEFORE_BROKER[name](self) if name in BEFORE_BROKER else {})}
            self.broker = DevBroker("kafka", brokers=brokers or 1, broker_config=config,
                                    startup_timeout=CHAOS_BROKER_START_S).start()
        else:
            self.broker = DevBroker("mock", brokers=brokers or 3).start()
            if protocol == "consumer":  # the broker-owned session of KIP-848 groups, as the classic one
                self.broker.mock.set_group_consumer_session_timeout_ms(int(SESSION_S * 1000))
                self.broker.mock.set_group_consumer_heartbeat_interval_ms(1000)
        try:
            self.broker.create_topic(self.topic, partitions)
        except BaseException:
            self.broker.stop()  # a set-up that failed leaves nothing running
            raise
        self.members: dict[str, Member] = {}
        self.history: list[Member] = []
        self.plain: list[PlainMember | JavaPlainMember] = []
        self.producer: SeqProducer | None = None
        self.sampler = OffsetSampler(self.broker.bootstrap, self.group, self.topic, partitions).start()
        self.group_sampler = GroupSampler(self.broker.bootstrap, self.group, self.topic).start()
        #: records sent with no successful delivery report that the log does not hold
        self.unacked_absent: dict[int, str] = {}
        self.deleted_before: dict[int, int] = {}
        self.outcome = Outcome()
        self.per_member = False
        self.notes: list[str] = []
        #: records the log holds more than once (seq -> positions), read before the broker stops
        self.log_copies: dict[int, list[tuple[int, int]]] = {}
        self.problems: list[str] = []  # strict checks a scenario made itself
        #: checks of the sinks a scenario asks for at the verdict: batches -> problems
        self.checks: list[Callable[[list[Batch]], list[str]]] = []
        #: incarnations of the topic that were deleted (their unread records are gone, not lost)
        self.gone_incarnations: set[int] = set()
        self.t0 = time.monotonic()
        self._events: list[str] = []
        #: more arguments of every member's start_member (the soak: max_seconds, progress_dir)
        self.member_args: dict[str, object] = {}

    @property
    def member_options(self) -> dict[str, str]:
        opts = dict(CONSUMER_MEMBER_OPTIONS if self.protocol == "consumer" else MEMBER_OPTIONS)
        if self.backend != "mock":
            for key in MOCK_ONLY_OPTIONS:
                opts.pop(key, None)
        return opts

    def delete_records(self, partition: int, before_offset: int) -> None:
        """Retention: the partition's records below ``before_offset`` are deleted (its log start
        moves there): the mock's control call, or DeleteRecords on Kafka."""
        if self.broker.mock is not None:
            self.broker.mock.delete_records(self.topic, partition, before_offset)
            return
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, "log_level": 0})
        futures = admin.delete_records([TopicPartition(self.topic, partition, before_offset)], request_timeout=30)
        for fut in futures.values():
            fut.result(timeout=60)

    def _admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.broker.bootstrap, "log_level": 0})

    def add_partitions(self, total: int, timeout: float = 60.0) -> None:
        """CreatePartitions (Kafka only: the mock has no handler for it): the topic grows to
        ``total`` partitions; the producer writes to all of them once its metadata has them, and
        the sampler and the verdict count them."""
        from confluent_kafka.admin import NewPartitions

        before = self.partitions
        admin = self._admin()  # kept until its futures are done (a destroyed handle fails them)
        for fut in admin.create_partitions([NewPartitions(self.topic, total)], request_timeout=30).values():
            fut.result(timeout=timeout)
        self.event(f"{self.topic}: partitions {before} -> {total}")
        if self.producer is not None:
            self.producer.set_partitions(total, timeout)
            self.event(f"the producer writes to all {total} partitions")
        self.partitions = total
        self.sampler.partitions = total

    def recreate_topic(self, hold: Callable[[], None] | None = None, timeout: float = 120.0) -> None:
        """The topic deleted (with its records and, on Kafka, the group's offsets for it) and
        created again with as many partitions, under traffic: the producer pauses (every record
        sent acknowledged, so each belongs to one incarnation), the topic goes, ``hold`` runs
        while it is gone, and the producer resumes into the new incarnation with a new producer
        id. The records of the old incarnation nobody read are gone with it (the verdict counts
        them as deleted), the sampler compares offsets within an incarnation only."""
        assert self.producer is not None
        self.producer.pause()
        incarnation = len(self.producer.incarnation_starts)
        self.event(f"producer paused ({len(self.producer.delivered)} delivered)")
        deadline = time.monotonic() + timeout
        if self.broker.mock is not None:
            self.broker.mock.delete_topic(self.topic)
        else:
            admin = self._admin()  # kept until its futures are done
            for fut in admin.delete_topics([self.topic], request_timeout=30).values():
                fut.result(timeout=timeout)
            while self.topic in admin.list_topics(timeout=10).topics:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.topic} still listed {timeout:.0f}s after its deletion")
                time.sleep(0.5)
        self.gone_incarnations.add(incarnation)
        self.event(f"{self.topic} deleted (incarnation {incarnation})")
        if hold is not None:
            hold()
        while True:
            try:
                if self.broker.create_topic(self.topic, self.partitions):
                    break
            except Exception as exc:  # noqa: BLE001 - Kafka may still be deleting it: asked again
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.topic} could not be created again: {exc}") from exc
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.topic} could not be created again within {timeout:.0f}s")
            time.sleep(1)
        self.sampler.new_epoch()
        self.producer.new_incarnation()
        self.event(f"{self.topic} created again ({self.partitions} partitions, incarnation {incarnation + 1}); "
                   f"producing into it")

    def wait_logged(self, m: Member, pattern: str, count: int = 1, timeout: float = 240.0) -> None:
        """Until ``m``'s log matches ``pattern`` ``count`` times."""
        deadline = time.monotonic() + timeout
        while len(re.findall(pattern, _read(m.log_path))) < count:
            if not m.running():
                raise ScenarioError(f"{m.owner} exited (code {m.proc.returncode}); see {m.log_path}")
            if time.monotonic() > deadline:
                raise ScenarioError(f"{m.owner} did not log {pattern!r} {count}x in {timeout:.0f}s; see {m.log_path}")
            time.sleep(0.5)

    # -- driving -----------------------------------------------------------------------------
    def event(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:7.1f}s {text}"
        self._events.append(line)
        with open(os.path.join(self.dir, "events.log"), "a") as f:
            f.write(line + "\n")

    def start(self, name: str, *, bootstrap: str | None = None, **options: str | None) -> Member:
        """Start member ``name``'s next incarnation; ``options`` over the suite's (None: leave the
        suite's option out, so the reader's default applies)."""
        incarnation = sum(1 for m in self.history if m.name == name) + 1
        merged = {k: v for k, v in {**self.member_options, **options}.items() if v is not None}
        m = start_member(name, incarnation, bootstrap=bootstrap or self.broker.bootstrap, topic=self.topic,
                         group=self.group, out=self.out, checkpoint=os.path.join(self.dir, f"ck-{name}"),
                         options=merged, log_dir=self.dir, **self.member_args)  # type: ignore[arg-type]
        self.members[name] = m
        self.history.append(m)
        self.event(f"started {m.owner} (pid {m.pid})")
        return m

    def produce(self, rate: float = 50, seconds: float = 400) -> SeqProducer:
        """Start producing (until :meth:`end_production`, ``seconds`` at most)."""
        self.producer = SeqProducer(self.broker.bootstrap, self.topic, self.partitions, rate=rate,
                                    seconds=seconds).start()
        self.event(f"producing {rate}/s")
        return self.producer

    def end_production(self, after: float = 8) -> None:
        assert self.producer is not None
        self.producer.stop_after(after)
        self.event(f"production ends in {after}s")

    def pause_sink(self, m: Member, paused: bool) -> None:
        """A paused member's next batch blocks before it fetches (records pile up unread)."""
        flag = os.path.join(self.out, f"pause-{m.name}")
        if paused:
            open(flag, "w").close()
        elif os.path.exists(flag):
            os.remove(flag)
        self.event(f"{'paused' if paused else 'resumed'} {m.owner}'s sink")

    def plain_member(self, name: str, assignor: str | None = None,
                     kind: str | None = None) -> PlainMember | JavaPlainMember:
        """A plain (non-Spark) consumer in the group: by default on Kafka the Java reference
        consumer (``java-consumer.sh``), on the mock a librdkafka one (the Java client is not run
        against librdkafka's mock); ``kind`` (:func:`plain_kind`) asks for a librdkafka one on
        Kafka too, a thread of the harness where a crowd of JVMs would not fit the machine.
        Classic: a 6 s session, 1 s heartbeat and ``assignor`` (the
        ``partition.assignment.strategy``); ``--protocol consumer``: ``group.protocol=consumer``
        and no session, heartbeat or assignor (the broker owns them; ``assignor`` is ignored)."""
        consumer = self.protocol == "consumer"
        label = "Java" if plain_kind(self.backend, kind) == "java" else "librdkafka"
        if label == "Java":
            java = ({"group_protocol": "consumer"} if consumer
                    else {"session_timeout_ms": int(SESSION_S * 1000), "heartbeat_interval_ms": 1000,
                          "assignment_strategy": assignor})
            pm: PlainMember | JavaPlainMember = JavaPlainMember(
                name, self.broker.bootstrap, self.topic, self.group, self.out, log_dir=self.dir, **java)
        else:
            conf = ({"group.protocol": "consumer"} if consumer
                    else {"session.timeout.ms": int(SESSION_S * 1000), "heartbeat.interval.ms": 1000})
            if assignor and not consumer:
                conf["partition.assignment.strategy"] = assignor
            pm = PlainMember(name, self.broker.bootstrap, self.topic, self.group, self.out, conf)
        self.plain.append(pm)
        self.event(f"plain {label} consumer {name} joined")
        return pm

    def _flush_java_members(self) -> None:
        """The Java members' batches into the sink, now that every delivery report is in (see
        :class:`JavaPlainMember`); read offsets with no known seq, and polls with gaps, are
        problems of the run."""
        java = [pm for pm in self.plain if isinstance(pm, JavaPlainMember)]
        if not java:
            return
        delivered = self.producer.delivered if self.producer else {}
        offset_to_seq = {po: seq for seq, po in delivered.items()}
        offset_to_seq.update((po, seq) for seq, positions in self.log_copies.items() for po in positions)
        for pm in java:
            pm.close()
            rows = pm.flush_to_sink(offset_to_seq)
            self.event(f"{pm.owner}: {pm.batches} polls, {rows} records into the sink, "
                       f"{pm.commit_errors} failed commits, exit {pm.exit_code}")
            if pm.unmapped:
                self.problems.append(f"Java consumer {pm.owner} read {len(pm.unmapped)} offsets the producer "
                                     f"reported no record at, e.g. (partition, offset) {pm.unmapped[:5]}")
            errors = pm.consumer.events("error")
            if errors:
                self.notes.append(f"Java consumer {pm.owner} reported {len(errors)} errors, e.g. {errors[0]}")
            if pm.gaps:
                self.problems.append(f"Java consumer {pm.owner}: polls with gaps in their offset ranges: "
                                     f"{pm.gaps[:3]}")

    def batches_of(self, owner: str) -> int:
        return sum(1 for f in os.listdir(self.out) if f.startswith(owner + "-") and f.endswith(".jsonl"))

    def wait_reading(self, m: Member, batches: int = 1, timeout: float = START_WAIT_S) -> None:
        """Until ``m`` wrote ``batches`` non-empty batches (Spark started, group joined)."""
        deadline = time.monotonic() + timeout
        while self.batches_of(m.owner) < batches:
            if not m.running():
                raise ScenarioError(f"{m.owner} exited (code {m.proc.returncode}) before reading; see {m.log_path}")
            if time.monotonic() > deadline:
                raise ScenarioError(f"{m.owner} wrote {self.batches_of(m.owner)} of {batches} batches in {timeout:.0f}s; see {m.log_path}")
            time.sleep(0.5)
        self.event(f"{m.owner} is reading")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def stop(self, m: Member) -> None:
        code = m.stop()
        self.event(f"stopped {m.owner} (SIGTERM, exit {code})")

    def kill9(self, m: Member) -> None:
        m.kill9()
        self.event(f"kill -9 {m.owner} and its processes")

    def wait_exit(self, m: Member, timeout: float) -> int | None:
        """Wait for ``m`` to exit by itself (an expected failure); its exit is then expected."""
        deadline = time.monotonic() + timeout
        while m.running() and time.monotonic() < deadline:
            time.sleep(0.5)
        code = m.proc.poll()
        m.ended_by_suite = code is not None
        self.event(f"{m.owner} exited with code {code}" if code is not None else f"{m.owner} still running")
        return code

    # -- the end -------------------------------------------------------------------------------
    def _caught_up(self) -> bool:
        marks = self.sampler.watermarks()
        got = self.sampler.sample()
        return bool(got is not None and len(marks) == self.partitions
                    and all(got.get(p) == hi for p, (_lo, hi) in marks.items()))

    def _end_production(self, beyond_s: float = 5.0) -> None:
        if self.producer is not None and not self.producer.finished:
            self.producer.stop_after(beyond_s)  # production runs through the fault and 5 s beyond
            self.producer.finish()
            self.event(f"production done: {len(self.producer.delivered)} delivered, "
                       f"{len(self.producer.failed)} failed")
            try:
                absent = self.producer.confirm_unknown(self.broker.bootstrap)
            except Exception as exc:  # noqa: BLE001 - the tally then counts them as lost
                absent = {}
                self.notes.append(f"records with unknown offsets could not be looked up: {exc}")
            if absent:
                self.notes.append(f"{len(absent)} records the producer reported delivered with no offset are not in "
                                  f"the log (acknowledged, so counted lost): (seq, partition) "
                                  f"{sorted(absent.items())[:5]}")
                self.event(self.notes[-1])
            try:
                found, self.unacked_absent = self.producer.unacknowledged(self.broker.bootstrap)
            except Exception as exc:  # noqa: BLE001 - not judged: said as a reason of the run
                found = {}
                self.problems.append(f"records sent without an acknowledgement could not be looked up: {exc}")
            if found:  # in the log: a reader must read them like any other
                self.producer.delivered.update(found)
                self.notes.append(f"{len(found)} records sent with no successful delivery report are in the log, "
                                  f"judged as records: (seq, position) {sorted(found.items())[:3]}")
                self.event(self.notes[-1])
            if self.unacked_absent:
                self.notes.append(f"{len(self.unacked_absent)} records sent, never acknowledged, are not in the log "
                                  f"(never written; not lost): (seq, why) {sorted(self.unacked_absent.items())[:3]}")
                self.event(self.notes[-1])
            try:
                self.log_copies = self.producer.log_copies(self.broker.bootstrap)
            except Exception as exc:  # noqa: BLE001 - then a copy read counts as a wrong read
                self.notes.append(f"the log could not be read for records written twice: {exc}")
            if self.log_copies:
                self.notes.append(f"{len(self.log_copies)} records the producer wrote more than once, each copy "
                                  f"judged as a record of its own: (seq, positions) "
                                  f"{sorted(self.log_copies.items())[:3]}")
                self.event(self.notes[-1])

    def quiet(self, timeout: float) -> bool:
        """After production: until the group's commits reach the log end (or ``timeout``)."""
        self._end_production()
        if self.outcome.expect_failure:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._caught_up():
                self.event("committed offsets reached the log end")
                time.sleep(3)  # let any last batch land in the sink
                return True
            time.sleep(1)
        self.event(f"committed offsets did not reach the log end within {timeout:.0f}s")
        return False

    def finish(self, quiet_timeout: float = 120.0, error: BaseException | None = None) -> Row:
        row = Row(self.name, protocol=self.protocol, broker=self.backend)
        stopped = isinstance(error, KeyboardInterrupt)  # a SIGTERM or SIGINT: stop now, judge what ran
        try:
            self._end_production(0 if stopped else 5)
            reached = None if error else self.quiet(quiet_timeout)
            if self.outcome.expect_failure is None and error is None:
                row.reached_end = reached
            elif self.outcome.expect_failure:
                row.reached_end = None
        finally:
            for m in self.history:
                if not m.running() and not m.ended_by_suite:
                    m.unexpected_exit = m.proc.returncode
            for m in self.history:  # every incarnation: one a scenario left running too
                if m.running():
                    m.stop()
                m.sweep()
            for pm in self.plain:
                pm.close()
            self.sampler.sample()
            final = self.sampler.last.copy()
            self.sampler.close()
            self.group_sampler.close(1 if stopped else 15)
            self.broker.stop()
        self._flush_java_members()  # production has ended, the members have left, the broker is down
        row.elapsed_s = round(time.monotonic() - self.t0, 1)
        self._verdict(row, final, error)
        with open(os.path.join(self.dir, "events.log"), "a") as f:
            f.write(json.dumps(row.to_json()) + "\n")
        return row

    def kill_all(self) -> None:
        """kill -9 every process of the run still running: its members (and their JVMs and
        Python workers), its Java consumers. Quick (no waiting): a second SIGTERM or Ctrl-C
        hurries the stop :meth:`finish` began; the broker's host follows this process when it
        exits (it watches its parent)."""
        for m in self.history:
            m.ended_by_suite = m.ended_by_suite or m.running()
            m.signal_all(signal.SIGKILL)
        for pm in self.plain:
            if isinstance(pm, JavaPlainMember):
                pm.kill()

    def history_of(self, logs: dict[str, str], batches: list[Batch]) -> hist.History:
        """The run's history: the members' logged ownership, plans and commits, the plain
        consumers' rebalance callbacks, the sinks' batches and the coordinator's samples."""
        h = hist.History(reads=batches, samples=_sampled(self.group_sampler), classic=self.protocol == "classic",
                         exclusive=not self.per_member)
        for m in self.history:
            own, plans, commits = hist.parse_member_log(m.owner, logs[m.owner], self.topic)
            h.ownership += own
            h.plans += plans
            h.commits += commits
        for pm in self.plain:
            h.ownership += pm.owned_history(self.topic)
        return h

    def _samplers_verdict(self, row: Row, reasons: list[str]) -> None:
        """The run reached the log end and the offset sampler sampled (chaos.verdict.completeness);
        its failed asks and the group sampler's are said."""
        s = self.sampler
        reasons += completeness(row.reached_end, s.samples, s.errors)
        if s.samples and s.errors:
            row.notes.append(f"committed-offset sampler: {s.samples} samples, {s.errors} failed asks")
        g = self.group_sampler
        if g.errors:
            row.notes.append(f"the coordinator's group description: {len(g.samples)} samples, {g.errors} failed asks "
                             f"(last: {g.last_error})")

    def _verdict(self, row: Row, final: dict[int, int], error: BaseException | None) -> None:
        reasons = row.reasons
        if isinstance(error, KeyboardInterrupt):  # chaos.procs.Interrupt: SIGTERM or SIGINT
            reasons.append(f"stopped by {error} before its end (its counts are of what ran until then)")
        elif error is not None:
            reasons.append(f"scenario could not run: {error}")
        produced = self.producer.delivered if self.producer else {}
        logs = {h.owner: _read(h.log_path) for h in self.history}
        produced, batches = separate_log_copies(produced, read_batches(self.out), self.log_copies)
        history = self.history_of(logs, batches)
        incarnation_of = self.producer.incarnation_of() if self.producer else {}
        t = tally(produced, batches, acquisitions=hist.acquisitions(history.ownership),
                  deleted_before=self.deleted_before,
                  counted_below={p: final.get(p) for p in range(self.partitions)} if self.outcome.expect_failure
                  else None, per_member=self.per_member, incarnation_of=incarnation_of,
                  gone_incarnations=self.gone_incarnations)
        all_logs = "\n".join(logs.values())
        judged = hist.judge(history, produced, spark_owners={h.owner for h in self.history},
                            deleted_before=self.deleted_before, skipped=reported_skips(all_logs, self.topic),
                            incarnation_of=incarnation_of)
        breaches = judged.breaches
        row.order_breaks, row.history_breaches = len(judged.order_breaks), len(breaches)
        row.generations, row.group_samples = judged.generations, len(history.samples)
        row.two_owners, row.fenced_commits = len(judged.double_plans), len(judged.fenced_commits)
        row.reads_unowned, row.unplanned, row.replayed = len(judged.reads_unowned), len(judged.unplanned), judged.replayed
        row.group_sample_errors = self.group_sampler.errors
        row.offset_samples, row.offset_sample_errors = self.sampler.samples, self.sampler.errors
        if breaches:
            reasons.append(f"{len(breaches)} breaches of the history's rules (chaos/history.py): "
                           + "; ".join(breaches[:4]))
        if judged.replayed:
            row.notes.append(f"{judged.replayed} batches replayed from a checkpoint by a later incarnation "
                             f"(judged by the lost and duplicate checks)")
        self._samplers_verdict(row, reasons)
        row.produced, row.read, row.lost, row.deleted = t.produced, t.read, t.lost, t.deleted + t.gone
        if self.gone_incarnations:
            row.notes.append(f"{t.gone} records of the deleted topic's incarnation(s) "
                             f"{sorted(self.gone_incarnations)} unread, gone with the topic (counted as deleted)")
        row.dup_total, row.dup_max, row.handovers = t.dup_total, t.dup_max, t.handovers
        row.regressions = len(self.sampler.regressions)
        for r in self.sampler.beyond_end[:5]:
            row.notes.append(f"committed offset of partition {r.partition} {r.before} lay beyond its log end, "
                             f"replaced by {r.after} (a re-created topic or a truncated log; not a move back)")
        if t.lost:
            reasons.append(f"{t.lost} records lost, e.g. (seq, partition, offset) {t.lost_examples[:5]}")
        if t.wrong:
            reasons.append(f"{t.wrong} reads at a partition/offset where the record was not written")
        reasons += [f"duplicates beyond the promise: {b}" for b in t.dup_breaches]
        for r in self.sampler.regressions[:5]:
            reasons.append(f"committed offset of partition {r.partition} moved back {r.before} -> {r.after}")
        errors = {h.owner: _read(os.path.join(self.out, f"{h.owner}.error")) for h in self.history}
        failed = {o: e for o, e in errors.items() if e}
        row.failures = len(failed)
        want = self.outcome.expect_failure
        if want:
            if not failed:
                reasons.append(f"expected a query failure matching {want!r}, none happened")
            for owner, err in failed.items():
                if not re.search(want, err, re.S):
                    reasons.append(f"{owner} failed, but not as expected ({want!r}): {_first_line(err)}")
        else:
            for owner, err in failed.items():
                reasons.append(f"query {owner} failed: {_first_line(err)}")
        for h in self.history:
            if h.owner not in failed and h.unexpected_exit is not None:
                row.failures += 1
                reasons.append(f"{h.owner} exited by itself with code {h.unexpected_exit}; see {h.log_path}")
        reasons += self.problems
        for check in self.checks:
            reasons += check(batches)
        if t.deleted_records and not self.outcome.expect_failure:
            missing = unreported(t.deleted_records, reported_skips(all_logs, self.topic))
            if missing:
                reasons.append(f"{len(missing)} deleted records in no logged data-loss range, e.g. "
                               f"(partition, offset) {missing[:5]}")
        for pattern in self.outcome.expect_logged:
            if not re.search(pattern, all_logs):
                reasons.append(f"no log line matching {pattern!r}")
        row.unacked_absent = len(self.unacked_absent)
        row.notes += self.notes
        row.ok = not reasons


def _sampled(gs: GroupSampler) -> list[hist.GroupSample]:
    return [hist.GroupSample(t, state, {m: tuple(ps) for m, ps in members.items()}) for t, state, members in gs.samples]


def reported_skips(logs: str, topic: str) -> list[tuple[int, int, int]]:
    """(partition, from, until) of every data-loss skip the connector logged: the driver's
    "data loss: skipping ... t-p [from, until)" and the executors' "data loss in t-p: offsets
    [from, until)"."""
    t = re.escape(topic)
    out = []
    for line in logs.splitlines():
        if "data loss" not in line:
            continue
        for p, lo, hi in re.findall(rf"{t}-(\d+):? (?:offsets )?\[(\d+), (\d+)\)", line):
            out.append((int(p), int(lo), int(hi)))
    return out


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


Scenario = Callable[[Run], None]
