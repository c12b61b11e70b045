"""The Java reference consumer (the broker's own kafka-clients version) as a test participant.

Wraps ``java-consumer.sh`` (see ../shared/kafka/README.md): a JSON-lines consumer CLI that
prints ``start``, ``assigned``/``revoked``/``lost`` (with ``generation`` and ``member_id``),
``records`` (per-partition offset ranges), ``commit``, ``closing``, ``closed`` and ``error``
events. :class:`JavaConsumer` starts it as a subprocess in its own process group, parses the
events in a reader thread and exposes what the consumer owned, read and committed; every wait is
bounded and fails with the consumer's recent events and stderr. :class:`JavaConsumers` is a
registry whose :meth:`~JavaConsumers.close_all` (called from a fixture's finalizer) kills
whatever is still running, also when the test failed.

The script is ``GROUPKAFKA_JAVA_CONSUMER`` when set; else the ``java-consumer.sh`` of the Kafka
installation serving the bootstrap (tests/conftest.py registers each embedded Kafka broker's home
with :func:`register_kafka_home`, so a test on 4.3.1 runs the 4.3.1 client); else the one in
``$GROUPKAFKA_KAFKA_HOME`` (the dev broker's default Kafka); else
``<project>/../shared/kafka/java-consumer.sh``. Where it (or ``java``) is missing,
:func:`require_java_consumer` skips the test saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

JAVA_CONSUMER_ENV = "GROUPKAFKA_JAVA_CONSUMER"
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JAVA_CONSUMER = os.path.normpath(
    os.path.join(_PROJECT_ROOT, "..", "shared", "kafka", "java-consumer.sh"))

#: Bound of every wait unless the caller gives one (the JVM alone takes 1-2 s to start).
DEFAULT_TIMEOUT_S = 60.0


#: bootstrap servers of an embedded Kafka -> its installation (whose java-consumer.sh to run)
_KAFKA_HOMES: dict[str, str] = {}


def register_kafka_home(bootstrap: str, home: str) -> None:
    """Java consumers of ``bootstrap`` run ``home``'s java-consumer.sh (the same Kafka version)."""
    _KAFKA_HOMES[bootstrap] = home


def java_consumer_script(bootstrap: str | None = None) -> str:
    override = os.environ.get(JAVA_CONSUMER_ENV, "").strip()
    if override:
        return override
    home = _KAFKA_HOMES.get(bootstrap or "") or os.environ.get("GROUPKAFKA_KAFKA_HOME", "").strip()
    return os.path.join(home, "java-consumer.sh") if home else DEFAULT_JAVA_CONSUMER


def java_consumer_missing(bootstrap: str | None = None) -> str | None:
    """Why the Java consumer cannot run here, or None."""
    script = java_consumer_script(bootstrap)
    if not os.path.isfile(script):
        return f"no Java consumer CLI at {script} (set {JAVA_CONSUMER_ENV} to its java-consumer.sh)"
    if not os.access(script, os.X_OK):
        return f"{script} is not executable"
    if shutil.which("java") is None:
        return "no `java` on PATH (the Java consumer CLI needs Java 17+)"
    return None


def require_java_consumer(bootstrap: str | None = None) -> str:
    """The script's path; skips the calling test when it cannot run."""
    import pytest

    missing = java_consumer_missing(bootstrap)
    if missing:
        pytest.skip(missing)
    return java_consumer_script(bootstrap)


def parse_tp(name: str) -> tuple[str, int]:
    """``"topic-3"`` -> ``("topic", 3)`` (topic names may contain ``-``)."""
    topic, _, p = name.rpartition("-")
    return topic, int(p)


@dataclass(frozen=True)
class Assignment:
    """One rebalance callback: ``kind`` is assigned, revoked or lost; ``partitions`` what it
    added or took away, ``assignment`` the whole assignment after it (assigned events only)."""

    kind: str
    generation: int
    member_id: str
    partitions: frozenset[tuple[str, int]]
    assignment: frozenset[tuple[str, int]] | None
    t_s: float


@dataclass(frozen=True)
class Commit:
    reason: str  # poll, revoke or close
    ok: bool
    offsets: Mapping[tuple[str, int], int]
    generation: int
    error: str | None


class JavaConsumerError(AssertionError):
    pass


class JavaConsumer:
    """``java-consumer.sh`` in a group. Start with :meth:`start` (or the constructor's
    ``start=True``); stop cleanly with :meth:`stop` (SIGTERM: revocation, final commit, leave),
    or :meth:`kill` it. All state accessors are thread-safe copies."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: Iterable[str],
        *,
        assignment_strategy: str | None = None,
        group_protocol: str = "classic",
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        max_poll_interval_ms: int | None = None,
        group_instance_id: str | None = None,
        poll_ms: int = 200,
        commit: str = "sync",
        duration_s: float = 0,
        auto_offset_reset: str = "earliest",
        client_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        extra_args: Iterable[str] = (),
        name: str = "java",
        start: bool = False,
    ):
        self.script = require_java_consumer(bootstrap)
        self.name, self.group = name, group
        args = [self.script, "--bootstrap", bootstrap, "--group", group, "--topics", ",".join(topics),
                "--group-protocol", group_protocol, "--duration-s", str(duration_s),
                "--poll-ms", str(poll_ms), "--commit", commit, "--auto-offset-reset", auto_offset_reset]
        for flag, value in (("--assignment-strategy", assignment_strategy),
                            ("--session-timeout-ms", session_timeout_ms),
                            ("--heartbeat-interval-ms", heartbeat_interval_ms),
                            ("--max-poll-interval-ms", max_poll_interval_ms),
                            ("--group-instance-id", group_instance_id),
                            ("--client-id", client_id)):
            if value is not None:
                args += [flag, str(value)]
        for k, v in (properties or {}).items():
            args += ["--property", f"{k}={v}"]
        self.args = args + list(extra_args)
        self.proc: subprocess.Popen[str] | None = None
        self._stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in _cleanup
            mode="w+", prefix=f"java-consumer-{name}-", suffix=".log", delete=False)
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._reader: threading.Thread | None = None
        self._eof = False
        self.started_at: float | None = None
        if start:
            self.start()

    # ---- process ---------------------------------------------------------------------------
    def start(self) -> JavaConsumer:
        if self.proc is not None:
            raise RuntimeError(f"{self.name} already started")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     start_new_session=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"javaclient-{self.name}")
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["_mono"] = time.monotonic()
            with self._cond:
                self._events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (clean close: revocation, final commit, LeaveGroup) and wait; SIGKILL after
        ``timeout``. Returns the exit code."""
        if self.proc is None:
            return None
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._join_reader()
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL the process group (no leave, no commit)."""
        if self.proc is None:
            return None
        self._signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._join_reader()
        return self.proc.returncode

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(10)

    def close(self) -> None:
        """Whatever state it is in: stop it (kill if SIGTERM does not end it soon)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop(timeout=15)
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        with contextlib.suppress(OSError):
            self._stderr.close()
            os.unlink(self._stderr.name)

    def __enter__(self) -> JavaConsumer:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- events ----------------------------------------------------------------------------
    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._events if kind is None or e.get("event") == kind]

    def history(self) -> list[Assignment]:
        """Every assigned/revoked/lost callback, in order."""
        out = []
        for e in self.events():
            kind = e.get("event")
            if kind not in ("assigned", "revoked", "lost"):
                continue
            whole = e.get("assignment")
            out.append(Assignment(kind, int(e.get("generation", -1)), e.get("member_id") or "",
                                  frozenset(map(parse_tp, e.get("partitions", ()))),
                                  frozenset(map(parse_tp, whole)) if whole is not None else None,
                                  float(e.get("t_s", 0.0))))
        return out

    def owned(self) -> frozenset[tuple[str, int]]:
        """What the consumer owns now, following its callbacks."""
        owned: set[tuple[str, int]] = set()
        for a in self.history():
            if a.kind == "assigned":
                owned = set(a.assignment) if a.assignment is not None else owned | a.partitions
            else:
                owned -= a.partitions
        return frozenset(owned)

    def generation(self) -> int:
        """The generation of the latest rebalance callback (-1 before the first)."""
        h = self.history()
        return h[-1].generation if h else -1

    def assigned_generations(self) -> list[int]:
        """Generations of the assigned callbacks, in order (Java calls onPartitionsAssigned
        once per completed generation, with an empty set when nothing was added)."""
        return [a.generation for a in self.history() if a.kind == "assigned"]

    def member_id(self) -> str:
        h = self.history()
        return h[-1].member_id if h else ""

    def read_ranges(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, first, last) of every poll's records, inclusive, in order."""
        out = []
        for e in self.events("records"):
            counts = e.get("per_partition", {})
            for name, (first, last) in e.get("offset_ranges", {}).items():
                topic, p = parse_tp(name)
                if counts.get(name, last - first + 1) != last - first + 1:
                    raise JavaConsumerError(f"{self.name}: a poll of {name} with gaps: {e}")
                out.append((topic, p, int(first), int(last)))
        return out

    def offsets_read(self) -> Counter[tuple[str, int, int]]:
        """How often each (topic, partition, offset) was returned by poll()."""
        c: Counter[tuple[str, int, int]] = Counter()
        for topic, p, first, last in self.read_ranges():
            c.update((topic, p, o) for o in range(first, last + 1))
        return c

    def record_count(self) -> int:
        return sum(int(e.get("count", 0)) for e in self.events("records"))

    def commits(self) -> list[Commit]:
        out = []
        for e in self.events("commit"):
            out.append(Commit(e.get("reason", ""), bool(e.get("ok")),
                              {parse_tp(k): int(v) for k, v in (e.get("offsets") or {}).items()},
                              int(e.get("generation", -1)), e.get("error")))
        return out

    def errors(self) -> list[dict[str, Any]]:
        """``error`` events and failed commits."""
        return [e for e in self.events() if e.get("event") == "error"
                or (e.get("event") == "commit" and not e.get("ok"))]

    def closed_cleanly(self) -> bool:
        return bool(self.events("closed"))

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            with open(self._stderr.name) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def describe(self, events: int = 12) -> str:
        rc = self.proc.poll() if self.proc is not None else None
        recent = [{k: v for k, v in e.items() if k not in ("_mono", "config", "member_id")}
                  for e in self.events()[-events:]]
        return (f"{self.name} (pid {self.proc.pid if self.proc else None}, exit {rc}) owns "
                f"{sorted(self.owned())} gen {self.generation()}; recent events {recent}; "
                f"stderr tail:\n{self.stderr_tail()}")

    # ---- waits -----------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[JavaConsumer], T], timeout: float = DEFAULT_TIMEOUT_S,
                 message: str = "condition") -> T:
        """Wait (woken by each event, re-checked at least every 0.2 s) until ``predicate(self)``
        is truthy and return it; JavaConsumerError after ``timeout`` or when the process ends
        first."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self)
            if value:
                return value
            with self._cond:
                ended = self._eof
            if ended:
                value = predicate(self)
                if value:
                    return value
                raise JavaConsumerError(f"{self.name} ended before {message}: {self.describe()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise JavaConsumerError(f"timed out after {timeout}s waiting for {message}: {self.describe()}")
            with self._cond:
                self._cond.wait(min(0.2, left))

    def wait_event(self, kind: str, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        return self.wait_for(lambda j: (j.events(kind) or [None])[-1], timeout, f"a {kind!r} event")

    def wait_assigned(self, timeout: float = DEFAULT_TIMEOUT_S, nonempty: bool = True) -> frozenset:
        """Wait for a first assignment (non-empty unless ``nonempty=False``); returns it."""
        def check(j: JavaConsumer) -> Any:
            if not any(a.kind == "assigned" for a in j.history()):
                return None
            owned = j.owned()
            return owned if owned or not nonempty else (owned or True)

        got = self.wait_for(check, timeout, "an assignment")
        return got if isinstance(got, frozenset) else frozenset()

    def wait_read(self, want: Mapping[tuple[str, int], int], timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Wait until it has read every offset below ``want[(topic, partition)]``."""
        def check(j: JavaConsumer) -> bool:
            got: dict[tuple[str, int], int] = {}
            for topic, p, _first, last in j.read_ranges():
                got[(topic, p)] = max(got.get((topic, p), 0), last + 1)
            return all(got.get(tp, 0) >= end for tp, end in want.items())

        self.wait_for(check, timeout, f"records up to {dict(want)}")

    def wait_exit(self, timeout: float = DEFAULT_TIMEOUT_S) -> int:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise JavaConsumerError(f"{self.name} still running after {timeout}s: {self.describe()}") from exc
        self._join_reader()
        return rc


class JavaConsumers:
    """Every Java consumer a test started; :meth:`close_all` in a finalizer ends them all."""

    def __init__(self, bootstrap: str, **defaults: Any):
        self.bootstrap, self.defaults = bootstrap, defaults
        self.started: list[JavaConsumer] = []

    def start(self, group: str, topics: Iterable[str], **kw: Any) -> JavaConsumer:
        kw = {**self.defaults, **kw}
        kw.setdefault("name", f"java-{len(self.started) + 1}")
        j = JavaConsumer(self.bootstrap, group, topics, **kw)
        self.started.append(j)
        return j.start()

    def close_all(self) -> None:
        for j in reversed(self.started):
            with contextlib.suppress(Exception):
                j.close()
        for j in self.started:  # belt and braces: nothing survives the test
            if j.proc is not None and j.proc.poll() is None:
                j.kill()
