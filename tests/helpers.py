"""Kafka helpers for tests: produce known records, read them back, read committed offsets, wait.

Every function takes a bootstrap string (``broker.bootstrap``), so it works against the embedded
dev brokers and an external cluster alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

T = TypeVar("T")

#: A quiet client: librdkafka logs only errors (connection refused etc. still show).
_QUIET = {"log_level": 3}
#: librdkafka properties whose names really contain "_".
_UNDERSCORE_KEYS = frozenset({"log_level"})


@dataclass(frozen=True)
class Record:
    """One record as produced (with where it landed) or as consumed."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms since the epoch (CreateTime)
    headers: tuple[tuple[str, bytes], ...] = field(default=())

    @property
    def content(self) -> tuple[Any, ...]:
        """What a round trip must preserve (everything but the offset)."""
        return (self.topic, self.partition, self.key, self.value, self.timestamp, self.headers)


Produced = Record
Consumed = Record


def _headers(raw: Any) -> tuple[tuple[str, bytes], ...]:
    if not raw:
        return ()
    return tuple((k, v) for k, v in raw)


def produce_keyed(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partitions: int | None = None,
    headers: bool = False,
    key_prefix: str = "k",
    start: int = 0,
    base_timestamp_ms: int | None = None,
    timeout: float | None = None,
) -> list[Produced]:
    """Produce ``n`` keyed records and return them with the partition, offset and timestamp each
    landed at (from delivery reports), in production order. ``timeout`` (default 30 s plus 20 ms
    a record) bounds the delivery: one record per produce request is slow on a loaded machine
    (at a load of 28 on 2 cores, 2,289 of 5,000 records in 30 s).

    Record i (``start <= i < start + n``): key ``f"{key_prefix}{i}"``, value ``f"value-{i}"``,
    timestamp ``base_timestamp_ms + i`` (CreateTime), partition ``i % partitions`` when
    ``partitions`` is given (else the default partitioner), headers ``[("i", b"<i>"),
    ("src", b"helpers")]`` when ``headers``.
    """
    base = int(time.time() * 1000) if base_timestamp_ms is None else base_timestamp_ms
    # One record per produce batch: Tansu answers ListOffsets(latest) with the last batch's
    # base offset + 1, which is the true end only when that batch holds one record.
    # Idempotent, as Kafka's clients are by default: a retried first request (a topic just
    # created on Kafka may answer NOT_LEADER once) must not land behind the records after it.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "batch.num.messages": 1,
         "enable.idempotence": True, **_QUIET}
    )
    reports: dict[int, Any] = {}
    errors: list[str] = []

    def on_delivery(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                reports[i] = msg

        return cb

    sent: dict[int, tuple[bytes, bytes, int, tuple[tuple[str, bytes], ...]]] = {}
    for i in range(start, start + n):
        key = f"{key_prefix}{i}".encode()
        value = f"value-{i}".encode()
        hdrs = (("i", str(i).encode()), ("src", b"helpers")) if headers else ()
        kwargs: dict[str, Any] = {"key": key, "value": value, "timestamp": base + i}
        if partitions is not None:
            kwargs["partition"] = i % partitions
        if hdrs:
            kwargs["headers"] = list(hdrs)
        sent[i] = (key, value, base + i, hdrs)
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery(i), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    timeout = 30.0 + 0.02 * n if timeout is None else timeout
    remaining = producer.flush(timeout)
    if remaining:
        raise AssertionError(f"{remaining} records to {topic} not delivered within {timeout}s")
    if errors:
        raise AssertionError("delivery failed: " + "; ".join(errors[:5]))
    out = []
    for i in range(start, start + n):
        msg = reports[i]
        key, value, ts, hdrs = sent[i]
        out.append(Record(topic, msg.partition(), msg.offset(), key, value, ts, hdrs))
    if any(r.offset is None for r in out):
        out = _confirm_unknown_offsets(producer, bootstrap, topic, out, timeout)
    return out


def _confirm_unknown_offsets(producer: Any, bootstrap: str, topic: str, out: list[Produced],
                             timeout: float) -> list[Produced]:
    """Records librdkafka reported delivered without an offset, looked up in the log.

    An idempotent producer reports a retried batch that the broker answered
    DUPLICATE_SEQUENCE_NUMBER as delivered, offset unknown (librdkafka #4438). A clean-clone
    CI run on Kafka 4.0.1 saw such a record of a topic created a moment before missing from
    the log (its partition held the records after it from offset 0 on), so an unknown offset
    is not trusted: the record is looked up by key and, if the log does not hold it, sent
    again (a test expecting it would otherwise wait for a record that was never written).
    """
    unknown = [r for r in out if r.offset is None]
    parts = sorted({r.partition for r in unknown})
    landed = {(c.partition, c.key): c.offset for c in consume_all(bootstrap, topic, partitions=parts)}
    fixed = []
    for r in out:
        if r.offset is None:
            offset = landed.get((r.partition, r.key))
            if offset is None:
                print(f"produce_keyed: {topic}-{r.partition} key {r.key!r} was reported delivered with an "
                      "unknown offset and is not in the log: sending it again", file=sys.stderr)
                again: list[Any] = []
                producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp,
                                 headers=list(r.headers) or None,
                                 on_delivery=lambda err, msg, into=again: into.append((err, msg)))
                if producer.flush(timeout) or not again or again[0][0] is not None or again[0][1].offset() is None:
                    raise AssertionError(f"record {r.key!r} to {topic}-{r.partition} could not be written: {again}")
                offset = again[0][1].offset()
            r = Record(r.topic, r.partition, offset, r.key, r.value, r.timestamp, r.headers)
        fixed.append(r)
    return fixed


def consume_all(
    bootstrap: str,
    topic: str,
    *,
    partitions: Iterable[int] | None = None,
    expected: int | None = None,
    timeout: float = 30.0,
) -> list[Consumed]:
    """Read a topic from the beginning up to the high watermarks seen at the start (or until
    ``expected`` records arrived), without joining a group. Sorted by (partition, offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "groupkafka-helpers-consume-all",  # required by librdkafka, never joined
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **_QUIET,
        }
    )
    try:
        if partitions is None:
            md = consumer.list_topics(topic, timeout=10)
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                raise AssertionError(f"topic {topic} not found: {tmd and tmd.error}")
            partitions = sorted(tmd.partitions)
        parts = list(partitions)
        end: dict[int, int] = {}
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            end[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        records: list[Consumed] = []
        position = dict.fromkeys(parts, -1)

        def done() -> bool:
            if expected is not None:
                return len(records) >= expected
            return all(position[p] + 1 >= end[p] for p in parts)

        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"consume_all({topic}): got {len(records)} records, "
                    f"positions {position}, wanted ends {end} / expected={expected}"
                )
            for msg in consumer.consume(500, timeout=0.2):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                _ts_type, ts = msg.timestamp()
                records.append(
                    Record(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        ts,
                        _headers(msg.headers()),
                    )
                )
                position[msg.partition()] = max(position[msg.partition()], msg.offset())
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the node leading it now (Metadata; -1 while it has no leader)."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=10)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def committed_offsets(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int | Iterable[int],
    *,
    timeout: float = 10.0,
) -> dict[int, int | None]:
    """The group's committed offsets for ``topic`` (None where nothing is committed).

    Uses ``Consumer.committed`` (OffsetFetch) from a consumer that never joins the group, so it
    does not disturb the group and works on the mock (which lacks the group admin APIs).
    ``partitions`` is a count (0..n-1) or the partition numbers.
    """
    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **_QUIET}
    )
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in parts], timeout=timeout)
    finally:
        consumer.close()
    out: dict[int, int | None] = {}
    for tp in tps:
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[tp.partition] = None if tp.offset in (OFFSET_INVALID, -1) else tp.offset
    return out


def recreate_topic(broker: Any, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Delete ``topic`` on the embedded ``broker`` (every record and committed offset gone with
    it) and create it again, empty, with ``partitions``: a topic's real loss, on the session's
    broker (no broker of the test's own to restart). On Apache Kafka and Tansu through the admin
    API, waiting until metadata no longer lists it; on the mock through its own call."""
    if broker.backend == "mock":
        broker.mock.delete_topic(topic)
    else:
        from confluent_kafka.admin import AdminClient

        # auto-creation off: the broker auto-creates a topic a producer-type handle asks about
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False,
                             "log_level": 3})
        admin.delete_topics([topic])[topic].result(timeout)

        def gone() -> bool:
            return topic not in admin.list_topics(timeout=10).topics

        wait_until(gone, timeout, interval=0.3, message=f"topic {topic} deleted")
    broker.topics.pop(topic, None)
    assert broker.create_topic(topic, partitions), f"topic {topic} existed again before it was re-created"


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.1,
    message: str = "condition",
) -> T:
    """Call ``predicate`` until it returns a truthy value (returned) or ``timeout`` passes
    (AssertionError naming ``message`` and the last value or exception)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except AssertionError as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {message} (last: {last!r})"
            )
        time.sleep(interval)


def consumer_conf(
    broker: Any, group: str, conf: Mapping[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """confluent-kafka consumer config for ``broker`` (a DevBroker/ExternalBroker or a bootstrap
    string) with the broker's recommended session timeout, manual commits, earliest reset and the
    ``range`` assignor (the mock aborts when members' first protocols differ: keep them equal).

    Extra settings: ``conf={"key.name": value}`` or keywords with ``_`` for ``.``
    (``enable_auto_commit=True``). With ``group_protocol="consumer"`` (KIP-848) the broker owns
    the session, the heartbeat and the assignor: those three are left out.
    """
    if isinstance(broker, str):
        bootstrap, session_ms, heartbeat_ms = broker, 10000, 1500
    else:
        bootstrap, session_ms = broker.bootstrap, broker.recommended_session_timeout_ms
        heartbeat_ms = getattr(broker, "recommended_heartbeat_interval_ms", session_ms // 6)
    out: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": heartbeat_ms,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "range",
        **_QUIET,
    }
    if conf:
        out.update(conf)
    out.update({(k if k in _UNDERSCORE_KEYS else k.replace("_", ".")): v for k, v in extra.items()})
    if out.get("group.protocol") == "consumer":
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            out.pop(key)
    return out


# ----------------------------------------------------------------------------------------------
# processes (Linux /proc; no psutil)
# ----------------------------------------------------------------------------------------------
def children_of(pid: int) -> set[int]:
    """Live (non-zombie) child pids of ``pid``, from /proc."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == pid and state != "Z":
            out.add(int(entry))
    return out


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_member(broker: Any, group: str, topic: str | None = None, assignor: Any = "range", *,
                 client: Mapping[str, Any] | None = None, **cfg: Any) -> Any:
    """A driver-side group member (not started) with the broker's recommended timeouts: on the
    mock, a leader sync delay (it rejects a follower SyncGroup arriving after the leader's) and a
    short request timeout (it sometimes never answers a SyncGroup). ``cfg``: more
    ``MembershipConfig`` fields (``pattern``, ``group_instance_id``...). ``assignor``: a name or
    spec for the registry, or an ``Assignor`` object."""
    from assignment.base import Assignor
    from assignment.registry import create_assignors
    from spark_groupsource.group.classic_member import GroupMembership, MembershipConfig

    mock = broker.backend == "mock"
    return GroupMembership(
        MembershipConfig(
            group_id=group,
            assignors=(assignor,) if isinstance(assignor, Assignor) else tuple(create_assignors(assignor)),
            topics=(topic,) if topic else (),
            client_config={
                "bootstrap_servers": broker.bootstrap.split(","),
                "api_version": (2, 3),
                "session_timeout_ms": broker.recommended_session_timeout_ms,
                "max_poll_interval_ms": 20_000,
                **({"request_timeout_ms": 5_000} if mock else {}),
                **(client or {}),
            },
            leader_sync_delay_ms=1000 if mock else 0,
            **cfg,
        ),
        drain_timeout_s=5,
    )


class PolledConsumer:
    """A librdkafka group member polled from a thread, recording what it owns (eager or
    cooperative, following its ``partition.assignment.strategy``; KIP-848 is incremental)."""

    def __init__(self, conf: dict, topic: str):
        import threading

        self.owned: set = set()
        self._lock = threading.Lock()
        coop = (conf.get("partition.assignment.strategy") == "cooperative-sticky"
                or conf.get("group.protocol") == "consumer")

        def key(p):
            from assignment.model import TopicPartition as OurTP

            return OurTP(p.topic, p.partition)

        def on_assign(c, parts):
            with self._lock:
                self.owned |= {key(p) for p in parts}
            c.incremental_assign(parts) if coop else c.assign(parts)

        def on_revoke(c, parts):
            with self._lock:
                self.owned -= {key(p) for p in parts}
            c.incremental_unassign(parts) if coop else c.unassign()

        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def snapshot(self) -> set:
        with self._lock:
            return set(self.owned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


#: Kafka's group coordinator (4.x) logs these for classic-group members it removes.
_LEFT = "has left group through explicit `LeaveGroup` request"
_FAILED = "has failed, removing it from the group"
#: Kafka 3.x's (Scala) group coordinator: "Member ... has left group G through explicit
#: `LeaveGroup`; client reason: ..." (its "has failed" line reads as 4.x's)
_LEFT_3X = "has left group {group} through explicit `LeaveGroup`"
LEAVE_GROUP_API_KEY = 13


def kafka_group_departures(broker: Any, group: str) -> tuple[int, int]:
    """(members that left ``group`` with a LeaveGroup, members removed because their session
    expired or they missed the rebalance) from the kafka dev broker's server logs: the broker's
    own account, where a takeover's timing cannot tell the two apart on a loaded machine."""
    left = failed = 0
    for node in broker.info()["nodes"]:
        try:
            with open(node["log"], errors="replace") as f:
                for line in f:
                    if (_LEFT in line and (f"[Group {group}]" in line or f"[GroupId {group}]" in line)
                            or _LEFT_3X.format(group=group) in line):
                        left += 1
                    elif f"in group {group} " in line and _FAILED in line:
                        failed += 1
        except OSError:
            continue
    return left, failed


def kafka_rebalance_reasons(broker: Any, group: str) -> list[str]:
    """Why Kafka's coordinator rebalanced ``group``: its "Preparing to rebalance" lines (with the
    reason the broker gives), in order, from the kafka dev broker's server logs."""
    return kafka_group_log(broker, lambda line: "Preparing to rebalance group" in line and f"group {group} " in line)


def kafka_epoch_bumps(broker: Any, group: str) -> list[str]:
    """A KIP-848 group's rebalances as its coordinator logs them: each bump of the group epoch
    (a member joined, left or changed its subscription) and each member fenced, from the kafka
    dev broker's server logs (node by node: on a cluster not in time order)."""
    tag = f"[GroupId {group}] "
    return kafka_group_log(broker, lambda line: tag in line and ("Bumped group epoch" in line
                                                                 or "fenced from the group" in line))


def kafka_group_log(broker: Any, wanted: Callable[[str], bool]) -> list[str]:
    """The ``wanted`` lines of every node's server log of a kafka dev broker."""
    lines = []
    for node in broker.info()["nodes"]:
        try:
            with open(node["log"], errors="replace") as f:
                lines += [line.strip() for line in f if wanted(line)]
        except OSError:
            continue
    return lines


def run_tree(cmd: list[str], *, timeout: float, **popen: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=...)`` for a command that
    starts a tree of processes (brokers, Spark JVMs, members): past ``timeout`` the whole tree
    is stopped (SIGTERM, then SIGKILL 20 s later), not only its first process, and the error
    carries the output so far (what the run was waiting on)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **popen) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                    out, err = proc.communicate(timeout=grace)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    out, err = "", ""
            raise AssertionError(f"{' '.join(cmd[:4])} ... ran past {timeout:.0f}s and was stopped; "
                                 f"its output:\n{(out or '')[-6000:]}\n{(err or '')[-3000:]}") from None
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def own_kafka_or_skip(what: str) -> None:
    """Skip a test that starts Kafka nodes of its own (``what`` says which) where it cannot:
    GROUPKAFKA_TEST_BOOTSTRAP points the tests at another cluster, or no Kafka is installed."""
    import pytest

    from spark_groupsource.devbroker import kafka_missing

    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP"):
        pytest.skip(f"{what}; GROUPKAFKA_TEST_BOOTSTRAP points tests elsewhere")
    why = kafka_missing()
    if why:
        pytest.skip(f"no Apache Kafka to start: {why}")


#: Connection attempts allowed while a dev Kafka node is down for :data:`OUTAGE_S`: librdkafka's
#: re-bootstrap makes about 35 in 10 s; a client with librdkafka's consumer-group handler made
#: 193-222 (it cancels the reconnect backoff every 50 ms; measured 2026-11-28, Kafka 4.0.1).
OUTAGE_S = 10.0
MAX_OUTAGE_ATTEMPTS = 100


def assert_backs_off_while_down(kafka: Any, capfd: Any, node: int = 1) -> None:
    """Stop ``node`` of a dev Kafka for :data:`OUTAGE_S` and count the connection attempts the
    test's librdkafka clients (configured with ``debug=broker``, which logs each "Connecting
    to ..." on stderr) make meanwhile: at least one, at most :data:`MAX_OUTAGE_ATTEMPTS`. The
    node is started again before the assertion."""
    kafka.stop_node(node)
    capfd.readouterr()
    time.sleep(OUTAGE_S)
    attempts = capfd.readouterr().err.count("Connecting to ")
    kafka.start_node(node)
    assert 0 < attempts <= MAX_OUTAGE_ATTEMPTS, f"{attempts} connection attempts in {OUTAGE_S:.0f}s"


class WaitTimedOut(AssertionError):
    """A bounded wait ran out: a hang, which a test counts as its failure, never as the
    failure it expected (tests/conformance/harness.py's ``failure_of`` lets it through)."""


def bounded_process_all(query: Any, timeout_s: float, label: str) -> None:
    """``processAllAvailable`` with a bounded wait (it has no timeout of its own); a failed
    query raises its error, one that does not catch up within ``timeout_s`` a
    :class:`WaitTimedOut` naming ``label``."""
    import threading

    err: list[BaseException] = []

    def run() -> None:
        try:
            query.processAllAvailable()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            err.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise WaitTimedOut(f"{label} did not catch up within {timeout_s}s")
    if err:
        raise err[0]
