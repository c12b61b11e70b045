"""Processes the suite starts: Spark members (each in its own session and process group), and
the faults applied to them. Only pids found under a process this suite started, or in the
session of one, are signalled. And how the suite ends on SIGTERM and SIGINT (:class:`Interrupt`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[3])


def in_session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (a member and a Java consumer each start one: their
    JVMs and pyspark's daemons stay in it when re-parented, after the process that started
    them is gone)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[0] != "Z" and st[2] == sid:
                out.append(int(entry))
    return out


def follow_parent(every_s: float = 1.0) -> threading.Thread:
    """SIGTERM this process once its parent is gone: a member runs in a session of its own, so
    when the harness is killed -9 (no stop of its own) nothing else ends it, and it read on."""
    ppid = os.getppid()

    def watch() -> None:
        while os.getppid() == ppid:
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGTERM)

    t = threading.Thread(target=watch, daemon=True, name="follow-parent")
    t.start()
    return t


def cmdline(pid: int) -> str:
    """The process's command line, arguments joined by spaces ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> list[int]:
    """Live descendants of ``root`` (breadth first), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[0] != "Z":
                children.setdefault(st[1], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(0), []):
            out.append(kid)
            todo.append(kid)
    return out


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


@dataclass
class Member:
    """One Spark query process (``python -m chaos.member``)."""

    name: str
    incarnation: int
    proc: subprocess.Popen
    log_path: str
    started: float = field(default_factory=time.monotonic)
    ended_by_suite: bool = False  # stopped or killed by the suite, or an awaited exit
    unexpected_exit: int | None = None  # exit code when the process ended by itself

    @property
    def owner(self) -> str:
        return f"{self.name}-{self.incarnation}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def family(self) -> list[int]:
        """The member, its JVM, and the Python processes under it (pyspark's daemon moves
        itself into its own process group, so a killpg alone would miss it)."""
        kin = [self.pid, *descendants(self.pid)] if self.running() else descendants(self.pid)
        return kin + [p for p in self.session() if p not in kin]

    def session(self) -> list[int]:
        """The live processes of the member's session. None once its pid names another process:
        Linux keeps a pid's number while a session of that id has a process, so a reaped member
        whose number is in use again has no session left (the one of that id is someone else's)."""
        if self.proc.returncode is not None and alive(self.pid):
            return []
        return in_session(self.pid)

    def signal_all(self, sig: int) -> list[int]:
        pids = self.family()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return pids

    def kill9(self, timeout: float = 20.0) -> None:
        self.ended_by_suite = True
        pids = self.signal_all(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        deadline = time.monotonic() + timeout
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM: the query stops and leaves the group; SIGKILL if it does not exit in time."""
        self.ended_by_suite = True
        family = self.family()  # once the member exits, its children are re-parented
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        kin = [p for p in family if p != self.pid]
        deadline = time.monotonic() + 10  # the JVM and pyspark's daemon follow within seconds
        while any(alive(p) for p in kin) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in kin:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return self.proc.returncode

    def sweep(self) -> list[int]:
        """SIGKILL what is left in the member's session once it has exited (a JVM or a pyspark
        daemon it left behind); returns their pids."""
        if self.running():
            return []
        left = self.session()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return left

    def python_workers(self) -> list[int]:
        """Executor Python workers: the processes forked by the daemon of ``pyspark.worker``
        (not the planner's daemons, not the streaming source runner where the group member lives)."""
        pids = descendants(self.pid)
        daemons = [p for p in pids if cmdline(p).split()[-1:] == ["pyspark.worker"]
                   and "pyspark.daemon" in cmdline(p)
                   and "pyspark.daemon" not in cmdline((_stat(p) or ("", 0))[1])]
        return [w for d in daemons for w in descendants(d)]


def start_member(name: str, incarnation: int, *, bootstrap: str, topic: str, group: str, out: str,
                 checkpoint: str, options: dict[str, str], log_dir: str, trigger: str = "500 milliseconds",
                 max_seconds: float = 900.0, progress_dir: str | None = None) -> Member:
    """``progress_dir``: where the member appends its query progress (``<owner>.progress.jsonl``)."""
    owner = f"{name}-{incarnation}"
    log_path = os.path.join(log_dir, f"{owner}.log")
    cmd = [sys.executable, "-m", "chaos.member", "--name", name, "--incarnation", str(incarnation),
           "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--out", out,
           "--checkpoint", checkpoint, "--trigger", trigger, "--max-seconds", str(max_seconds)]
    for k, v in options.items():
        cmd += ["--option", f"{k}={v}"]
    if progress_dir is not None:
        cmd += ["--progress", os.path.join(progress_dir, f"{owner}.progress.jsonl")]
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["GROUPKAFKA_LOG_LEVEL"] = "INFO"  # rebalances, acquisitions, commits, data loss: in the log
    env["GROUPKAFKA_CLIENT_LOG_LEVEL"] = "INFO"  # the group client's connections and join rounds too
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    log = open(log_path, "ab")  # noqa: SIM115 - the child owns it
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=_ROOT, start_new_session=True)
    finally:
        log.close()
    return Member(name, incarnation, proc, log_path)


class Interrupt:
    """SIGTERM and SIGINT end a run as Ctrl-C does: the first raises KeyboardInterrupt in the
    main thread, where the harness stops what it started (members told to leave, the producer
    stopped, the brokers closed) and says what ran; each later one calls ``hurry`` (kill -9 what
    is still running) and lets that stop finish. A run started in the background has SIGINT
    ignored, and a plain SIGTERM used to end the harness alone: its members run in sessions of
    their own and kept reading (2026-12-06, the soak; 2026-12-07, a chaos member)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.hurry: Callable[[], None] | None = None

    def install(self) -> Interrupt:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
            raise KeyboardInterrupt(self.name)
        if self.hurry is not None:
            self.hurry()

    @property
    def name(self) -> str:
        """SIGTERM or SIGINT; empty if none came."""
        return "" if self.signum is None else signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by the signal (143 for SIGTERM, 130 for SIGINT); 0 if none came."""
        return 0 if self.signum is None else 128 + self.signum
