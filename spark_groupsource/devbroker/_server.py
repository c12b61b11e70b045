"""The broker-hosting process: the ``python -m spark_groupsource.devbroker`` command.

It runs in two modes:

* command mode (a user or a test runs it): start a broker, create the topics, print exactly one
  line ``BOOTSTRAP=<host:port,...>`` and serve until SIGTERM/SIGINT, then shut down (exit 0).
  With ``--schema-registry`` (kafka only) a Karapace Schema Registry runs beside the broker
  (:mod:`._karapace`) and a second line ``SCHEMA_REGISTRY=http://host:port`` follows the first
  once it is ready; BOOTSTRAP stays the first line, so readers of one line are unaffected.
* control mode (``--control``, used by :class:`DevBroker`): the same, then serve JSON-line requests on
  stdin (one response line per request on stdout). It exits when stdin closes or its parent process
  changes, so it never outlives the process that started it. SIGINT is ignored there (the parent owns
  the lifetime).

Hosting the mock cluster in this separate process isolates its aborts (``rd_assert``) from the
caller; a tansu broker is a grandchild that gets SIGKILL from the kernel if this process dies.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import gc
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from ._ports import listen_port, port_in_use
from .errors import DevBrokerError

BACKENDS = ("mock", "kafka", "tansu")
STARTUP_TIMEOUT_S = 30.0
TOPIC_TIMEOUT_S = 20.0


# ------------------------------------------------------------------------------------------------
# shared helpers (also used by the in-process external-cluster object)
# ------------------------------------------------------------------------------------------------
def parse_topic_spec(spec: str) -> tuple[str, int]:
    """``NAME:PARTITIONS`` -> (name, partitions)."""
    name, sep, count = spec.rpartition(":")
    if not sep or not name:
        raise DevBrokerError(f"bad topic spec {spec!r}: expected NAME:PARTITIONS, e.g. demo:8")
    try:
        partitions = int(count)
    except ValueError:
        raise DevBrokerError(
            f"bad topic spec {spec!r}: partitions {count!r} is not an integer"
        ) from None
    validate_topic(name, partitions)
    return name, partitions


def validate_topic(name: Any, partitions: Any) -> None:
    if not isinstance(name, str) or not name or len(name) > 249:
        raise DevBrokerError(f"bad topic name {name!r}: 1-249 characters required")
    if name in (".", "..") or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        raise DevBrokerError(
            f"bad topic name {name!r}: use only ASCII letters, digits, '.', '_', '-'"
        )
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise DevBrokerError(f"bad partition count {partitions!r} for topic {name!r}: must be >= 1")


def wait_for_topic(admin: Any, name: str, partitions: int, timeout: float) -> None:
    """Wait until cluster metadata (all topics, so no auto-creation) shows ``name`` complete."""
    deadline = time.monotonic() + timeout
    last = "not listed yet"
    while True:
        try:
            md = admin.list_topics(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            tmd = md.topics.get(name)
            if tmd is not None and tmd.error is None:
                got = len(tmd.partitions)
                leaders_ok = all(p.leader >= 0 for p in tmd.partitions.values())
                if got == partitions and leaders_ok:
                    return
                if got != partitions and got > 0:
                    last = f"metadata shows {got} partitions"
                else:
                    last = "partitions without leaders"
            elif tmd is not None:
                last = f"metadata error {tmd.error}"
        except Exception as exc:  # KafkaException on timeouts while the broker settles
            last = f"metadata request failed: {exc}"
        if time.monotonic() >= deadline:
            raise DevBrokerError(f"topic {name!r} not visible after {timeout:.0f}s ({last})")
        time.sleep(0.05)


def admin_create_topic(admin: Any, name: str, partitions: int, timeout: float,
                       replication_factor: int = 1) -> bool:
    """Create a topic through the Admin API. Returns False if it already existed.

    An existing topic with another partition count is an error.
    """
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    validate_topic(name, partitions)
    deadline = time.monotonic() + timeout
    retried = False
    while True:
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)],
            request_timeout=timeout,
            operation_timeout=timeout,
        )
        created, again = True, False
        try:
            futures[name].result(timeout=timeout + 5)
        except Exception as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                created = retried  # an earlier attempt whose answer was lost may have made it
            elif _transient(err) and time.monotonic() < deadline:
                # a cluster still settling (nodes joining, a connection torn down under load:
                # "Broker handle destroyed", seen on a loaded 3-node start): ask again
                again = True
            else:
                raise DevBrokerError(f"cannot create topic {name!r}: {exc}") from None
        finally:
            # The future keeps the exception, whose traceback keeps this frame: break the cycle so
            # the admin client is not kept alive (with open connections) until a GC pass.
            futures.clear()
        if not again:
            break
        retried = True
        time.sleep(0.5)
    if not created:
        md = admin.list_topics(timeout=timeout)
        tmd = md.topics.get(name)
        if tmd is not None and len(tmd.partitions) != partitions:
            raise DevBrokerError(
                f"topic {name!r} already exists with {len(tmd.partitions)} partitions, "
                f"not {partitions}"
            ) from None
    wait_for_topic(admin, name, partitions, timeout)
    return created


def _transient(err: Any) -> bool:
    """An admin error that a later attempt can get past (retriable, or the client's own
    connection trouble)."""
    if err is None:
        return False
    from confluent_kafka import KafkaError

    return bool(err.retriable()) or err.code() in (
        KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)


def read_tail(fd: int, max_bytes: int = 4000) -> str:
    """The last ``max_bytes`` of a regular file open for reading ("" otherwise)."""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        return os.pread(fd, size - start, start).decode(errors="replace")
    except OSError:
        return ""


def anonymous_log(prefix: str) -> int:
    """A read/write, append-mode temp file that is already unlinked: nothing to clean up, ever
    (readable while open, e.g. as /proc/<pid>/fd/<fd>)."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".log")
    os.unlink(path)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return fd


class _LogFileHandler(logging.Handler):
    """Writes log records to the dev broker's log file (binary, unbuffered), after ``prefix``
    (and the time, with ``timed``: a slow start shows where it spent its time)."""

    def __init__(self, log: IO[bytes], prefix: str = "devbroker admin client: ", timed: bool = False):
        super().__init__()
        self._log = log
        self._prefix = prefix
        self._timed = timed

    def emit(self, record: logging.LogRecord) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created)) + " " if self._timed else ""
        with contextlib.suppress(ValueError, OSError):  # the log closed during shutdown
            self._log.write(f"{self._prefix}{stamp}{record.getMessage()}\n".encode())


def _new_admin(bootstrap: str, log: IO[bytes] | None = None) -> Any:
    """The host's own admin client. With ``log``, librdkafka's log lines go to that file when
    :meth:`_Host.serve_admin_log` polls, not to stderr: the command's stderr carries only its own
    errors, and a broker that stops under a live client (a refused reconnect) is not one."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3, "socket.timeout.ms": 10000}
    if log is not None:
        logger = logging.Logger("groupkafka.devbroker.admin")  # not registered: nothing propagates
        logger.addHandler(_LogFileHandler(log))
        conf["logger"] = logger
    return AdminClient(conf)


# ------------------------------------------------------------------------------------------------
# backends
# ------------------------------------------------------------------------------------------------
class _Host:
    backend = ""
    bootstrap = ""
    _admin: Any = None

    def start(self) -> None:
        raise NotImplementedError

    def create_topic(self, name: str, partitions: int, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        raise NotImplementedError

    def died(self) -> str | None:
        """A reason if the broker is gone, else None."""
        return None

    def serve_admin_log(self) -> None:
        """Hand the admin client's queued log lines to the dev broker's log (they wait for a poll)."""
        admin = self._admin  # close() may drop it meanwhile (this runs on the watch thread)
        if admin is not None:
            admin.poll(0)

    def close(self) -> None:
        raise NotImplementedError

    def info(self) -> dict[str, Any]:
        return {"backend": self.backend, "bootstrap": self.bootstrap, "pid": os.getpid()}


class MockHost(_Host):
    backend = "mock"

    def __init__(self, brokers: int, initial_rebalance_delay_ms: int, log: IO[bytes] | None = None):
        self.brokers = brokers
        self.delay_ms = initial_rebalance_delay_ms
        self.log = log
        self.cluster: Any = None
        self._admin: Any = None

    def start(self) -> None:
        from ._rdkafka_mock import MockCluster

        self.cluster = MockCluster(self.brokers, initial_rebalance_delay_ms=self.delay_ms)
        self.bootstrap = self.cluster.bootstrap
        self._admin = _new_admin(self.bootstrap, self.log)
        wait_for_cluster(self._admin, STARTUP_TIMEOUT_S, lambda: None)

    def create_topic(self, name: str, partitions: int, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        validate_topic(name, partitions)
        rc = self.cluster.create_topic(name, partitions)
        created = rc == 0
        if rc == 36:  # TOPIC_ALREADY_EXISTS
            tmd = self._admin.list_topics(timeout=timeout).topics.get(name)
            if tmd is not None and len(tmd.partitions) != partitions:
                raise DevBrokerError(
                    f"topic {name!r} already exists with {len(tmd.partitions)} partitions, "
                    f"not {partitions}"
                )
        elif rc != 0:
            from ._rdkafka_mock import err_name

            raise DevBrokerError(f"cannot create topic {name!r}: {err_name(rc)} ({rc})")
        wait_for_topic(self._admin, name, partitions, timeout)
        return created

    def close(self) -> None:
        self._admin = None
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            cluster.close()

    def info(self) -> dict[str, Any]:
        return {**super().info(), "brokers": self.brokers}


def _tansu_preexec(pdeathsig: bool) -> Callable[[], None]:
    def preexec() -> None:  # pragma: no cover - runs in the forked child before exec
        # Own process group: a terminal's Ctrl-C reaches only us, and we stop tansu in order
        # (otherwise tansu dies first and we would report it as a crash).
        os.setpgid(0, 0)
        if pdeathsig:  # SIGKILL when the forking thread (our main thread) dies, e.g. kill -9
            with contextlib.suppress(Exception):
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)

    return preexec


class TansuHost(_Host):
    backend = "tansu"

    def __init__(self, port: int | None, log: IO[bytes]):
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._admin: Any = None

    def start(self) -> None:
        from ._tansu import find_tansu

        binary = find_tansu()
        attempts = 1 if self.port else 3
        for attempt in range(attempts):
            port = self.port or listen_port()
            if port_in_use(port):
                if self.port:
                    raise DevBrokerError(f"port {port} is in use on 127.0.0.1")
                continue
            url = f"tcp://127.0.0.1:{port}"
            env = {
                k: v
                for k, v in os.environ.items()
                if k
                not in {
                    "CLUSTER_ID",
                    "LISTENER_URL",
                    "ADVERTISED_LISTENER_URL",
                    "STORAGE_ENGINE",
                    "SCHEMA_REGISTRY",
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                }
            }
            env.setdefault("RUST_LOG", "warn")
            env.setdefault("RUST_BACKTRACE", "0")
            cmd = [
                binary,
                "broker",
                "--cluster-id",
                "groupkafka-dev",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ]
            self.log.write(f"devbroker: starting {' '.join(cmd)}\n".encode())
            self.log.flush()
            on_main = threading.current_thread() is threading.main_thread()
            try:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=self.log,
                    stderr=self.log,
                    env=env,
                    preexec_fn=_tansu_preexec(pdeathsig=on_main),
                )
            except OSError as exc:
                raise DevBrokerError(f"cannot run tansu binary {binary}: {exc}") from exc
            self.bootstrap = f"127.0.0.1:{port}"
            try:
                # an admin client made before tansu listens logs "Connection refused" to stderr
                wait_for_listener(port, STARTUP_TIMEOUT_S, self._raise_if_exited)
                self._admin = _new_admin(self.bootstrap, self.log)
                wait_for_cluster(self._admin, STARTUP_TIMEOUT_S, self._raise_if_exited)
                return
            except DevBrokerError as exc:
                self._stop_proc()
                addr_in_use = "in use" in str(exc).lower()
                if addr_in_use and self.port:
                    raise DevBrokerError(f"port {port} is in use on 127.0.0.1") from None
                if not addr_in_use or attempt == attempts - 1:
                    raise
        raise DevBrokerError("could not find a free port for tansu")

    def _log_tail(self) -> str:
        lines = [ln.strip() for ln in read_tail(self.log.fileno()).splitlines()]
        interesting = [ln for ln in lines if ln and not ln.startswith(("note:", "stack backtrace"))]
        for ln in reversed(interesting):
            if "Err" in ln or "error" in ln.lower() or "panic" in ln:
                return ln
        return interesting[-1] if interesting else ""

    def _raise_if_exited(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise DevBrokerError(
                f"tansu exited during startup (code {self.proc.returncode}): {self._log_tail()}"
            )

    def create_topic(self, name: str, partitions: int, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        return admin_create_topic(self._admin, name, partitions, timeout)

    def died(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return f"tansu exited unexpectedly (code {self.proc.returncode}): {self._log_tail()}"
        return None

    def _stop_proc(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # Tansu waits for open client connections on SIGTERM; memory storage has nothing to save,
        # so do not wait long before SIGKILL.
        proc.terminate()
        try:
            proc.wait(timeout=1.5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def close(self) -> None:
        self._admin = None
        gc.collect()  # destroy admin clients now: their connections delay tansu's shutdown
        self._stop_proc()

    def info(self) -> dict[str, Any]:
        pid = self.proc.pid if self.proc is not None else None
        return {**super().info(), "brokers": 1, "tansu_pid": pid}


class KafkaHost(_Host):
    """Apache Kafka (KRaft), one or more nodes: see :mod:`._kafka`."""

    backend = "kafka"

    def __init__(self, brokers: int, initial_rebalance_delay_ms: int, config: dict[str, str],
                 port: int | None = None, home: str | None = None, log: IO[bytes] | None = None,
                 startup_timeout: float = 120.0):
        from ._kafka import KafkaCluster

        self.cluster = KafkaCluster(brokers, config, initial_rebalance_delay_ms, home=home)
        self.port = port
        self.startup_timeout = startup_timeout
        self.log = log
        self._admin: Any = None

    def start(self) -> None:
        try:
            self.cluster.start(timeout=self.startup_timeout, port=self.port)
        except BaseException:
            self.cluster.close()
            raise
        self.bootstrap = self.cluster.bootstrap
        self._admin = _new_admin(self.bootstrap, self.log)

    def create_topic(self, name: str, partitions: int, timeout: float = TOPIC_TIMEOUT_S) -> bool:
        return admin_create_topic(self._admin, name, partitions, timeout,
                                  replication_factor=self.cluster.replication_factor)

    def died(self) -> str | None:
        return self.cluster.died()

    def close(self) -> None:
        self._admin = None
        gc.collect()  # destroy admin clients now: their connections would only see refusals
        self.cluster.close()

    def info(self) -> dict[str, Any]:
        return {**super().info(), "brokers": self.cluster.brokers, **self.cluster.info()}


def wait_for_listener(port: int, timeout: float, check_alive: Callable[[], None]) -> None:
    """Wait until something accepts TCP connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check_alive()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.05)
    check_alive()
    raise DevBrokerError(f"broker did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def wait_for_cluster(admin: Any, timeout: float, check_alive: Callable[[], None]) -> None:
    """Wait until the broker answers a Metadata request."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        check_alive()
        try:
            md = admin.list_topics(timeout=1.0)
            if md.brokers:
                return
        except Exception as exc:
            last = f": {exc}"
        time.sleep(0.05)
    check_alive()
    raise DevBrokerError(f"broker did not answer Metadata within {timeout:.0f}s{last}")


# ------------------------------------------------------------------------------------------------
# the process
# ------------------------------------------------------------------------------------------------
class _Stop(BaseException):
    """Raised from the SIGTERM/SIGINT handler to unwind the main thread."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        self.exit(2, f"devbroker: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m spark_groupsource.devbroker",
        description="Run a dev broker: librdkafka's mock, Apache Kafka (KRaft) or Tansu.",
        epilog=(
            "Prints one line BOOTSTRAP=host:port,... on stdout once the topics exist (with "
            "--schema-registry a second one, SCHEMA_REGISTRY=http://host:port), then serves "
            "until SIGTERM or SIGINT (exit 0). Errors: one line on stderr; exit 2 for bad "
            "arguments, 1 when the broker cannot start or dies."
        ),
    )
    p.add_argument("--backend", help=f"one of {', '.join(BACKENDS)} (kafka: Apache Kafka from --kafka-home or GROUPKAFKA_KAFKA_HOME)")
    p.add_argument("--brokers", type=int, default=1, help="number of brokers (mock, kafka)")
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create this topic (repeatable)",
    )
    p.add_argument("--port", type=int,
                   help="listen port (tansu; kafka: the first node's; default: a free port)")
    p.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting (kafka only; repeatable), e.g. auto.create.topics.enable=false",
    )
    p.add_argument(
        "--kafka-home",
        metavar="DIR",
        help="the Apache Kafka installation to run (kafka only; a distribution with libs/, or "
             "lib/broker + lib/clients); default: $GROUPKAFKA_KAFKA_HOME, else ../shared/kafka",
    )
    p.add_argument(
        "--initial-rebalance-delay-ms",
        type=int,
        default=100,
        help="group.initial.rebalance.delay.ms (mock, kafka; default 100)",
    )
    p.add_argument(
        "--log-file",
        help="append broker logs to this file, or '-' for stderr (default: an unlinked temp file)",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="kafka: give up when the cluster is not formatted, started and serving within this "
             "time (default 120)",
    )
    p.add_argument(
        "--schema-registry",
        action="store_true",
        help="kafka only: also run a Karapace Schema Registry beside the broker and print "
             "SCHEMA_REGISTRY=http://... after the BOOTSTRAP line",
    )
    p.add_argument(
        "--karapace-home",
        metavar="DIR",
        help="with --schema-registry: the Karapace share to run (install.sh, start.sh, the source "
             "tarball); default: $GROUPKAFKA_KARAPACE, else ../shared/karapace",
    )
    p.add_argument("--check", action="store_true", help="check which backends can be found")
    p.add_argument(
        "--optional",
        default="",
        metavar="BACKEND,...",
        help="with --check: backends whose absence is reported but does not fail the check",
    )
    p.add_argument("--control", action="store_true", help=argparse.SUPPRESS)
    return p


def parse_broker_config(items: list[str] | dict[str, str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (or a dict) -> {k: v}, refusing anything that is not key=value."""
    if not items:
        return {}
    if isinstance(items, dict):
        pairs = list(items.items())
    else:
        pairs = []
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise DevBrokerError(f"bad --broker-config {item!r}: expected KEY=VALUE")
            pairs.append((key, value))
    return {str(k).strip(): str(v).strip() for k, v in pairs}


def validate_args(
    backend: str | None, brokers: int, port: int | None, topics: list[tuple[str, int]],
    broker_config: dict[str, str] | None = None, kafka_home: str | None = None,
    schema_registry: bool = False, karapace_home: str | None = None, control: bool = False,
) -> None:
    if backend is None:
        raise DevBrokerError(f"missing --backend: choose one of {', '.join(BACKENDS)}")
    if backend not in BACKENDS:
        raise DevBrokerError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        raise DevBrokerError(f"brokers must be an integer >= 1, got {brokers!r}")
    if backend == "tansu" and brokers != 1:
        raise DevBrokerError(
            "tansu runs a single broker here (memory storage is per process); use --brokers 1"
        )
    if backend == "mock" and brokers > 16:
        raise DevBrokerError(f"brokers must be <= 16 for the mock, got {brokers}")
    if backend == "kafka" and brokers > 5:
        raise DevBrokerError(f"brokers must be <= 5 for kafka on one machine, got {brokers}")
    if broker_config and backend != "kafka":
        raise DevBrokerError("--broker-config is only supported with kafka")
    if kafka_home is not None and backend != "kafka":
        raise DevBrokerError("--kafka-home is only supported with kafka")
    if kafka_home is not None and not os.path.isdir(kafka_home):
        raise DevBrokerError(f"--kafka-home {kafka_home}: no such directory")
    if schema_registry and backend != "kafka":
        raise DevBrokerError("--schema-registry needs --backend kafka (Karapace keeps its schemas "
                             "in the broker's _schemas topic)")
    if schema_registry and control:
        raise DevBrokerError("--schema-registry is not supported with --control")
    if karapace_home is not None and not schema_registry:
        raise DevBrokerError("--karapace-home is only supported with --schema-registry")
    if port is not None:
        if backend == "mock":
            raise DevBrokerError("--port is not supported with the mock; it picks free ports")
        if not 1 <= port <= 65535:
            raise DevBrokerError(f"port {port} is out of range 1-65535")
    for name, partitions in topics:
        validate_topic(name, partitions)


def run_check(out: IO[str], optional: frozenset[str] = frozenset(), kafka_home: str | None = None) -> int:
    from . import _kafka, _rdkafka_mock, _tansu

    ok = True
    checks: tuple[tuple[str, Callable[[], str]], ...] = (
        ("mock", _rdkafka_mock.check), ("kafka", lambda: _kafka.check(kafka_home)), ("tansu", _tansu.check))
    for name, fn in checks:
        try:
            line = fn()
        except DevBrokerError as exc:
            ok = ok and name in optional
            line = f"{name}: MISSING {exc}"
        print(line, file=out, flush=True)
    return 0 if ok else 1


class _Server:
    def __init__(self, args: argparse.Namespace, topics: list[tuple[str, int]]):
        self.args = args
        self.topics = topics
        self.host: _Host | None = None
        self.registry: Any = None  # a _karapace.Karapace with --schema-registry
        self._registry_dir: str | None = None
        self.exit_code = 0
        self.log: IO[bytes] | None = None

    def _open_log(self) -> IO[bytes]:
        target = self.args.log_file
        if target == "-":
            fd = os.dup(2)
        elif target:
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        else:
            fd = anonymous_log(f"groupkafka-{self.args.backend}-")
        self.log = os.fdopen(fd, "ab", buffering=0)
        return self.log

    def start(self) -> None:
        a = self.args
        log = self._open_log()
        # The hosts' own steps (which node formats, starts, is waited for) go to the log too.
        steps = logging.getLogger("spark_groupsource.devbroker")
        steps.handlers = [_LogFileHandler(log, "devbroker ", timed=True)]  # _client._STEP_PREFIX
        steps.setLevel(logging.INFO)
        steps.propagate = False
        if getattr(a, "schema_registry", False):
            from ._karapace import command_missing

            missing = command_missing(a.karapace_home)
            if missing:  # before a broker starts: say so at once
                raise DevBrokerError(missing)
        if a.backend == "mock":
            self.host = MockHost(a.brokers, a.initial_rebalance_delay_ms, log)
        elif a.backend == "kafka":
            self.host = KafkaHost(a.brokers, a.initial_rebalance_delay_ms,
                                  parse_broker_config(a.broker_config), a.port, a.kafka_home, log,
                                  startup_timeout=a.startup_timeout)
        else:
            self.host = TansuHost(a.port, log)
        self.host.start()
        for name, partitions in self.topics:
            self.host.create_topic(name, partitions)
        if getattr(a, "schema_registry", False):
            self._start_registry(log)

    def _start_registry(self, log: IO[bytes]) -> None:
        from ._karapace import Karapace

        assert self.host is not None
        self._registry_dir = tempfile.mkdtemp(prefix="groupkafka-karapace-")
        self.registry = Karapace(self.host.bootstrap, self._registry_dir, self.args.karapace_home)
        steps = logging.getLogger("spark_groupsource.devbroker")
        steps.info("karapace: starting on port %d (log %s)", self.registry.port, self.registry.log_path)
        started = time.monotonic()
        self.registry.start()
        steps.info("karapace: ready at %s in %.1fs", self.registry.url, time.monotonic() - started)

    def died(self) -> str | None:
        """A reason if the broker or the registry beside it is gone, else None."""
        host = self.host
        reason = host.died() if host is not None else None
        if reason is None and self.registry is not None:
            reason = self.registry.died()
        return reason

    def close(self) -> None:
        registry, self.registry = self.registry, None
        if registry is not None:  # first: Karapace stops cleanly only while its broker runs
            with contextlib.suppress(Exception):
                registry.stop()
        if self._registry_dir is not None:
            shutil.rmtree(self._registry_dir, ignore_errors=True)
            self._registry_dir = None
        host, self.host = self.host, None
        if host is not None:
            host.serve_admin_log()
            host.close()
        if self.log is not None:
            self.log.close()
            self.log = None

    # -- control mode ---------------------------------------------------------------------------
    def dispatch(self, op: str, args: dict[str, Any]) -> Any:
        host = self.host
        assert host is not None
        reason = host.died()
        if reason:
            raise DevBrokerError(reason)
        if op == "ping":
            return "pong"
        if op == "info":
            return host.info()
        if op == "create_topic":
            return host.create_topic(
                args["name"], args["partitions"], args.get("topic_timeout", TOPIC_TIMEOUT_S)
            )
        if op in _KAFKA_OPS:
            if not isinstance(host, KafkaHost):
                raise DevBrokerError(f"operation {op!r} needs the kafka backend")
            return _KAFKA_OPS[op](host.cluster, **args)
        if not isinstance(host, MockHost):
            raise DevBrokerError(f"operation {op!r} needs the mock backend")
        cluster = host.cluster
        if op == "requests":
            return [[b, k] for b, k, _ts in cluster.requests()]
        if op in _MOCK_OPS:
            return getattr(cluster, op)(**args)
        raise DevBrokerError(f"unknown operation {op!r}")


_MOCK_OPS = frozenset(
    {
        "push_request_errors",
        "push_broker_request_error",
        "broker_pending_errors",
        "clear_request_errors",
        "broker_down",
        "broker_up",
        "set_rtt",
        "set_rack",
        "set_coordinator",
        "set_group_initial_rebalance_delay_ms",
        "set_group_consumer_session_timeout_ms",
        "set_group_consumer_heartbeat_interval_ms",
        "set_apiversion",
        "set_partition_leader",
        "set_topic_error",
        "delete_topic",
        "delete_records",
        "start_request_tracking",
        "stop_request_tracking",
        "clear_requests",
    }
)


def _kafka_signal(cluster: Any, node_id: int, sig: str) -> None:
    cluster.signal_node(int(node_id), signal.Signals[sig])


_KAFKA_OPS: dict[str, Callable[..., Any]] = {
    # wait_s: the caller's bound for the node (the control call's own timeout is a client-side
    # read timeout, never sent; before wait_s every start waited the default 90 s)
    "kafka_stop_node": lambda c, node_id, wait_s=60.0: c.stop_node(int(node_id), float(wait_s)),
    "kafka_start_node": lambda c, node_id, wait_s=90.0: c.start_node(int(node_id), True, float(wait_s)),
    "kafka_start_nodes": lambda c, node_ids, wait_s=90.0: c.start_nodes([int(n) for n in node_ids], float(wait_s)),
    "kafka_signal_node": _kafka_signal,
}


def _watch_parent(ppid: int) -> None:
    while True:
        time.sleep(0.25)
        if os.getppid() != ppid:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _watch_broker(server: _Server) -> None:
    while True:
        time.sleep(0.25)
        host = server.host
        if host is None:
            return
        reason = server.died()
        if reason:
            print(f"devbroker: error: {reason}", file=sys.stderr, flush=True)
            server.exit_code = 1
            os.kill(os.getpid(), signal.SIGTERM)
            return
        host.serve_admin_log()


def _serve_control(server: _Server, out: IO[str]) -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rid = None
        try:
            req = json.loads(line)
            rid = req.get("id")
            result = server.dispatch(req["op"], req.get("args") or {})
            resp = {"id": rid, "ok": True, "result": result}
        except DevBrokerError as exc:
            resp = {"id": rid, "ok": False, "error": str(exc)}
        except Exception as exc:  # report, keep serving
            resp = {"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(resp) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check:
        return run_check(sys.stdout, frozenset(b.strip() for b in args.optional.split(",") if b.strip()),
                         args.kafka_home)
    try:
        topics = [parse_topic_spec(spec) for spec in args.topic]
        validate_args(args.backend, args.brokers, args.port, topics,
                      parse_broker_config(args.broker_config), args.kafka_home,
                      args.schema_registry, args.karapace_home, args.control)
    except DevBrokerError as exc:
        print(f"devbroker: error: {exc}", file=sys.stderr, flush=True)
        return 2

    # The protocol channel is a private copy of stdout; fd 1 goes to stderr so that stray writes
    # (from C code or libraries) cannot corrupt it.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def on_signal(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)  # terminal closed: shut down cleanly too
    if args.control:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    else:
        signal.signal(signal.SIGINT, on_signal)

    server = _Server(args, topics)
    # Last resort: never hang on the way out.
    finished = threading.Event()

    def _hard_exit_later() -> None:
        if not finished.wait(45):  # a kafka cluster's clean stop may take 20 s
            os._exit(3)

    try:
        try:
            server.start()
        except Exception as exc:
            reason = str(exc) if isinstance(exc, DevBrokerError) else f"{type(exc).__name__}: {exc}"
            print(f"devbroker: error: {reason}", file=sys.stderr, flush=True)
            server.exit_code = 1
            return 1
        out.write(f"BOOTSTRAP={server.host.bootstrap}\n")  # type: ignore[union-attr]
        if server.registry is not None:
            out.write(f"SCHEMA_REGISTRY={server.registry.url}\n")
        out.flush()
        threading.Thread(target=_watch_broker, args=(server,), daemon=True).start()
        if args.control:
            _serve_control(server, out)  # returns on stdin EOF
        else:
            while True:
                time.sleep(3600)
    except _Stop:
        pass
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        threading.Thread(target=_hard_exit_later, daemon=True).start()
        try:
            server.close()
        finally:
            finished.set()
    return server.exit_code
