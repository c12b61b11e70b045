"""The library API: :class:`DevBroker`, :class:`MockControl` and :class:`ExternalBroker`."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from ._server import (
    BACKENDS,
    TOPIC_TIMEOUT_S,
    _new_admin,
    admin_create_topic,
    anonymous_log,
    parse_broker_config,
    read_tail,
    validate_args,
    wait_for_cluster,
)
from .errors import DevBrokerError

#: Session timeouts (ms) that work and keep tests fast. Tansu's JoinGroup parks for
#: session.timeout/2, so 6 s there. The mock ignores the rebalance timeout and holds a rebalance's
#: join window open for up to session timeout - 1 s, so a short one keeps rebalances fast
#: (2-member split + rebalance: 2.9 s at 3000 ms vs 6.0 s at 6000 ms).
#: Kafka: rebalances do not wait on the session timeout; 6 s detects a dead member quickly.
RECOMMENDED_SESSION_TIMEOUT_MS = {"mock": 3000, "kafka": 6000, "tansu": 6000, "external": 10000}

#: How long a kafka host may take, after its own start-up time ran out, to stop the nodes it
#: started and keep their logs before it reports why (``KafkaCluster._discard_nodes``: 20 s).
_KAFKA_CLEANUP_S = 45.0
#: How the hosting process's timed steps start in its log (``_server._LogFileHandler``).
_STEP_PREFIX = "devbroker "

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _normalize_topics(topics: Mapping[str, int] | None) -> dict[str, int]:
    if topics is None:
        return {}
    if not isinstance(topics, Mapping):
        raise DevBrokerError(
            f"topics must be a mapping name -> partitions, got {type(topics).__name__}"
        )
    return dict(topics)


class DevBroker:
    """An embedded Kafka-protocol broker for development and tests.

    ``backend`` is ``"kafka"`` (Apache Kafka in KRaft mode, ``brokers`` nodes; crash, stop and
    freeze single nodes through :attr:`kafka`), ``"mock"`` (librdkafka's mock cluster, with fault
    injection through :attr:`mock`) or ``"tansu"`` (the Tansu broker). Either way the broker lives
    in a child process (``python -m spark_groupsource.devbroker --control``) driven over its
    stdin/stdout; it exits, taking its brokers with it, when this process closes the pipe or dies.

    >>> with DevBroker("mock", topics={"demo": 8}) as b:
    ...     b.bootstrap  # "127.0.0.1:PORT"
    """

    def __init__(
        self,
        backend: str,
        brokers: int = 1,
        topics: Mapping[str, int] | None = None,
        *,
        port: int | None = None,
        initial_rebalance_delay_ms: int = 100,
        startup_timeout: float = 120.0,
        broker_config: Mapping[str, str] | None = None,
        kafka_home: str | None = None,
    ):
        topic_map = _normalize_topics(topics)
        self.broker_config = parse_broker_config(dict(broker_config or {}))
        validate_args(backend, brokers, port, list(topic_map.items()), self.broker_config, kafka_home)
        #: the Kafka installation given (kafka backend; None: $GROUPKAFKA_KAFKA_HOME or ../shared/kafka)
        self.kafka_home = kafka_home
        self.backend = backend
        self.brokers = brokers
        self.port = port
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.startup_timeout = startup_timeout
        self.recommended_session_timeout_ms = RECOMMENDED_SESSION_TIMEOUT_MS[backend]
        self.recommended_heartbeat_interval_ms = max(100, self.recommended_session_timeout_ms // 6)
        self._initial_topics = topic_map
        self.topics: dict[str, int] = {}
        self.bootstrap: str = ""
        self.mock: MockControl | None = None
        self.kafka: KafkaControl | None = None
        self._log_fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._lock = threading.RLock()
        self._ids = itertools.count(1)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> DevBroker:
        with self._lock:
            if self.alive:
                return self
            self._spawn()
            self.topics = dict(self._initial_topics)
            self.mock = MockControl(self) if self.backend == "mock" else None
            self.kafka = KafkaControl(self) if self.backend == "kafka" else None
            return self

    def _spawn(self) -> None:
        self._close_log()
        self._log_fd = anonymous_log(f"groupkafka-devbroker-{self.backend}-")
        cmd = [
            sys.executable,
            "-m",
            "spark_groupsource.devbroker",
            "--control",
            "--backend",
            self.backend,
            "--brokers",
            str(self.brokers),
            "--log-file",
            "-",  # its stderr: our anonymous log file
            "--initial-rebalance-delay-ms",
            str(self.initial_rebalance_delay_ms),
        ]
        if self.port is not None:
            cmd += ["--port", str(self.port)]
        if self.backend == "kafka":
            cmd += ["--startup-timeout", str(self.startup_timeout)]
        for key, value in self.broker_config.items():
            cmd += ["--broker-config", f"{key}={value}"]
        if self.kafka_home is not None:
            cmd += ["--kafka-home", self.kafka_home]
        for name, partitions in self._initial_topics.items():
            cmd += ["--topic", f"{name}:{partitions}"]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_fd,
            env=env,
            close_fds=True,
        )
        self._buf = b""
        try:
            # A kafka host keeps to startup_timeout itself and then says why; the margin covers
            # its clean-up (stopping the nodes, keeping their logs) so that its reason arrives.
            line = self._readline(self.startup_timeout + (_KAFKA_CLEANUP_S if self.backend == "kafka" else 0))
        except DevBrokerError:
            self._kill()
            raise
        if not line.startswith("BOOTSTRAP="):
            self._kill()
            raise DevBrokerError(f"{self.backend} broker: unexpected first line {line!r}")
        self.bootstrap = line.split("=", 1)[1]

    def stop(self) -> None:
        """Shut the broker down (idempotent). Waits for the child process to exit."""
        with self._lock:
            proc, self._proc = self._proc, None
            self.mock = None
            self.kafka = None
            if proc is None:
                self._close_log()
                return
            with contextlib.suppress(OSError):
                if proc.stdin:
                    proc.stdin.close()  # EOF: the child shuts the broker down and exits
            try:
                proc.wait(timeout=50)  # a kafka cluster's clean stop may take 20 s
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if proc.stdout:
                proc.stdout.close()
            self._close_log()

    def _close_log(self) -> None:
        fd, self._log_fd = self._log_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def restart(self) -> DevBroker:
        """Stop, then start a fresh broker (new bootstrap, only the constructor's topics)."""
        self.stop()
        return self.start()

    def ensure_running(self) -> bool:
        """Restart the broker if its process died (e.g. a mock rd_assert abort). True if restarted."""
        with self._lock:
            if self.alive:
                return False
            self._kill()
            self.start()
            return True

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the hosting child process."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def __enter__(self) -> DevBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"DevBroker({self.backend!r}, brokers={self.brokers}, {state}, bootstrap={self.bootstrap!r})"

    def __reduce__(self) -> Any:
        raise TypeError("DevBroker cannot be pickled; pass .bootstrap instead")

    # -- operations ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, *, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        """Create a topic and wait until metadata shows it. Returns False if it already existed
        (with the same partition count; another count raises DevBrokerError)."""
        created = self.call("create_topic", timeout=timeout + 30, name=name, partitions=partitions,
                            topic_timeout=timeout)
        self.topics[name] = partitions
        return bool(created)

    def info(self) -> dict[str, Any]:
        return self.call("info")

    @property
    def log_path(self) -> str | None:
        """A path to read the hosting process's log (its stderr and tansu's output) from while
        this object holds it open. The file itself is unlinked, so nothing is left behind."""
        return None if self._log_fd is None else f"/proc/{os.getpid()}/fd/{self._log_fd}"

    def log_tail(self, max_chars: int = 4000) -> str:
        """The end of the hosting process's log (kept until stop() or the next start())."""
        return "" if self._log_fd is None else read_tail(self._log_fd, max_chars)

    def call(self, op: str, timeout: float = 60.0, **args: Any) -> Any:
        """Send one control request to the hosting process and return its result."""
        with self._lock:
            proc = self._proc
            if proc is None:
                raise DevBrokerError(f"{self.backend} broker is not running (call start())")
            if proc.poll() is not None:
                raise DevBrokerError(self._death_message())
            rid = next(self._ids)
            data = (json.dumps({"id": rid, "op": op, "args": args}) + "\n").encode()
            try:
                assert proc.stdin is not None
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise DevBrokerError(self._death_message()) from None
            while True:
                resp = json.loads(self._readline(timeout))
                if resp.get("id") == rid:
                    break
            if not resp.get("ok"):
                raise DevBrokerError(resp.get("error") or f"{op} failed")
            return resp.get("result")

    def _death_message(self) -> str:
        proc = self._proc
        code = proc.poll() if proc is not None else None
        hint = ""
        if code in (-6, 134):
            hint = " (SIGABRT: the mock's rd_assert, e.g. group members with different first protocols)"
        tail = [ln for ln in self.log_tail(2000).splitlines() if ln.strip()]
        last = f"; last log line: {tail[-1].strip()}" if tail else ""
        return f"{self.backend} broker process exited with code {code}{hint}{last}"

    def _readline(self, timeout: float) -> str:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevBrokerError(self._timeout_message(timeout))
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # EOF: the child exited
                proc.wait(timeout=10)
                raise DevBrokerError(self._startup_or_death_message())
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode().strip()

    def _timeout_message(self, timeout: float) -> str:
        """The hosting process's last log lines go into the error: the log itself is an unlinked
        file that is gone once this broker is stopped, which is what a caller does next."""
        lines = [ln.rstrip() for ln in self.log_tail(3000).splitlines() if ln.strip()][-12:]
        tail = "; its log ends:\n  " + "\n  ".join(lines) if lines else "; its log is empty"
        return f"{self.backend} broker did not answer within {timeout:.0f}s{tail}"

    def _startup_or_death_message(self) -> str:
        if not self.bootstrap:
            lines = self.log_tail(4000).splitlines()
            for ln in reversed(lines):
                if ln.startswith("devbroker: error: "):
                    # the host's timed steps say where a failed start spent its time
                    steps = [s.strip() for s in lines if s.startswith(_STEP_PREFIX)][-8:]
                    where = "; its steps:\n  " + "\n  ".join(steps) if steps else ""
                    return ln[len("devbroker: error: ") :].strip() + where
        return self._death_message()


class MockControl:
    """Fault injection for a mock :class:`DevBroker`; each call runs in the hosting process.

    Broker ids run from 1 to ``brokers``; -1 means all brokers where librdkafka allows it.
    """

    def __init__(self, broker: DevBroker):
        self._broker = broker

    def _call(self, op: str, **args: Any) -> Any:
        return self._broker.call(op, **args)

    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        """The next ``len(errors)`` requests with ``api_key`` fail with these codes, in order."""
        self._call("push_request_errors", api_key=int(api_key), errors=[int(e) for e in errors])

    def push_broker_request_error(self, broker_id: int, api_key: int, error: int, rtt_ms: int = 0) -> None:
        """The next request with ``api_key`` to broker ``broker_id`` fails with ``error``; its
        response is held back ``rtt_ms``. The broker acts at once (a fencing error on a
        ConsumerGroupHeartbeat drops the member), the client learns it only after the delay."""
        self._call("push_broker_request_error", broker_id=int(broker_id), api_key=int(api_key),
                   error=int(error), rtt_ms=int(rtt_ms))

    def broker_pending_errors(self, broker_id: int, api_key: int) -> int:
        """How many errors pushed with :meth:`push_broker_request_error` no request has used yet."""
        return int(self._call("broker_pending_errors", broker_id=int(broker_id), api_key=int(api_key)))

    def clear_request_errors(self, api_key: int) -> None:
        self._call("clear_request_errors", api_key=int(api_key))

    def broker_down(self, broker_id: int) -> None:
        """Disconnect the broker and refuse connections (no leader change)."""
        self._call("broker_down", broker_id=int(broker_id))

    def broker_up(self, broker_id: int) -> None:
        self._call("broker_up", broker_id=int(broker_id))

    def set_rtt(self, broker_id: int, ms: int) -> None:
        self._call("set_rtt", broker_id=int(broker_id), ms=int(ms))

    def set_rack(self, broker_id: int, rack: str) -> None:
        self._call("set_rack", broker_id=int(broker_id), rack=str(rack))

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its records (then ``DevBroker.create_topic`` may recreate it, for
        example with more partitions: the mock implements no CreatePartitions; Apache Kafka
        does, and tests that grow a topic use it there)."""
        self._call("delete_topic", name=name)
        self._broker.topics.pop(name, None)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete the partition's records below ``before_offset`` (the log start moves there),
        as retention would."""
        self._call("delete_records", topic=topic, partition=int(partition), before_offset=int(before_offset))

    def set_coordinator(self, group_id: str, broker_id: int) -> None:
        self._call("set_coordinator", group_id=group_id, broker_id=int(broker_id))

    def set_group_initial_rebalance_delay_ms(self, ms: int) -> None:
        self._call("set_group_initial_rebalance_delay_ms", ms=int(ms))

    def set_group_consumer_session_timeout_ms(self, ms: int) -> None:
        """KIP-848 (``group.protocol=consumer``) groups: the broker-owned session timeout
        (the mock's default is 30000; members created afterwards use the new value)."""
        self._call("set_group_consumer_session_timeout_ms", ms=int(ms))

    def set_group_consumer_heartbeat_interval_ms(self, ms: int) -> None:
        """KIP-848 groups: the heartbeat interval the broker hands its members (default 3000)."""
        self._call("set_group_consumer_heartbeat_interval_ms", ms=int(ms))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Limit the advertised version range of an API (-1, -1 disables it)."""
        self._call(
            "set_apiversion",
            api_key=int(api_key),
            min_version=int(min_version),
            max_version=int(max_version),
        )

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        self._call(
            "set_partition_leader", topic=topic, partition=int(partition), broker_id=int(broker_id)
        )

    def set_topic_error(self, topic: str, error: int) -> None:
        """Error returned for the topic in Metadata responses (0 clears it)."""
        self._call("set_topic_error", topic=topic, error=int(error))

    def start_request_tracking(self) -> None:
        self._call("start_request_tracking")

    def stop_request_tracking(self) -> None:
        """Stop tracking; already tracked requests stay until :meth:`clear_requests`."""
        self._call("stop_request_tracking")

    def clear_requests(self) -> None:
        self._call("clear_requests")

    def requests(self) -> list[tuple[int, int]]:
        """Tracked requests as ``(broker_id, api_key)``, oldest first."""
        return [(int(b), int(k)) for b, k in self._call("requests")]


class KafkaControl:
    """Faults of a real cluster for a kafka :class:`DevBroker`: stop, crash, freeze and restart
    single nodes (ids 1..brokers). A restarted node keeps its ports and data."""

    def __init__(self, broker: DevBroker):
        self._broker = broker

    def nodes(self) -> list[dict[str, Any]]:
        """Per node: ``id``, ``port``, ``controller_port``, ``pid`` (None while down), ``log``."""
        return list(self._broker.info()["nodes"])

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """A clean stop (controlled shutdown), as in a rolling restart."""
        self._broker.call("kafka_stop_node", timeout=timeout + 40, node_id=int(node_id), wait_s=float(timeout))

    def kill_node(self, node_id: int) -> None:
        """``kill -9`` of the node's JVM: a crash."""
        self._broker.call("kafka_signal_node", node_id=int(node_id), sig="SIGKILL")

    def freeze_node(self, node_id: int) -> None:
        """SIGSTOP: the JVM stops answering, as in a long GC pause."""
        self._broker.call("kafka_signal_node", node_id=int(node_id), sig="SIGSTOP")

    def thaw_node(self, node_id: int) -> None:
        self._broker.call("kafka_signal_node", node_id=int(node_id), sig="SIGCONT")

    def start_node(self, node_id: int, timeout: float = 90.0) -> None:
        """Start a stopped or killed node again; returns once it serves Metadata."""
        self._broker.call("kafka_start_node", timeout=timeout + 30, node_id=int(node_id), wait_s=float(timeout))

    def start_nodes(self, node_ids: list[int], timeout: float = 90.0) -> None:
        """Start several nodes at once (after the whole cluster went down: one node alone has no
        controller quorum); returns once all of them serve Metadata."""
        self._broker.call("kafka_start_nodes", timeout=timeout + 30, node_ids=[int(n) for n in node_ids],
                          wait_s=float(timeout))


class ExternalBroker:
    """An already running cluster, with the same interface as :class:`DevBroker`."""

    backend = "external"
    mock = None

    def __init__(self, bootstrap: str, *, session_timeout_ms: int | None = None):
        if not bootstrap or not bootstrap.strip():
            raise DevBrokerError("external bootstrap servers are empty")
        self.bootstrap = bootstrap.strip()
        self.recommended_session_timeout_ms = (
            session_timeout_ms or RECOMMENDED_SESSION_TIMEOUT_MS["external"]
        )
        self.recommended_heartbeat_interval_ms = max(100, self.recommended_session_timeout_ms // 6)
        self.topics: dict[str, int] = {}
        self._admin: Any = None
        self.brokers = None

    def start(self) -> ExternalBroker:
        if self._admin is None:
            self._admin = _new_admin(self.bootstrap)
            try:
                wait_for_cluster(self._admin, 30.0, lambda: None)
            except DevBrokerError as exc:
                self._admin = None
                raise DevBrokerError(f"external cluster {self.bootstrap}: {exc}") from None
        return self

    def stop(self) -> None:
        self._admin = None

    @property
    def alive(self) -> bool:
        return True

    def ensure_running(self) -> bool:
        return False

    def create_topic(self, name: str, partitions: int, *, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        self.start()
        created = admin_create_topic(self._admin, name, partitions, timeout)
        self.topics[name] = partitions
        return created

    def __enter__(self) -> ExternalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ExternalBroker({self.bootstrap!r})"


__all__ = [
    "BACKENDS",
    "DevBroker",
    "ExternalBroker",
    "KafkaControl",
    "MockControl",
    "RECOMMENDED_SESSION_TIMEOUT_MS",
]
