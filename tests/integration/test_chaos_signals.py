"""``python -m chaos`` stopped from outside (a CI timeout's SIGTERM, an operator's Ctrl-C): it
ends every process it started, its Spark members' included (each runs in a session of its own,
so nothing else takes them down), prints the scenario's row and exits with the signal's code. A
member left reading after the harness was gone was seen on 2026-12-07."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from chaos.procs import cmdline, descendants, in_session
from helpers import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.integration  # starts its own broker and a Spark member

SCENARIO = "driver_kill9"  # a member from the start, on the mock
#: Until the member's JVM runs, or until it reads (Spark's start-up and the group's first
#: assignment: 155 s at load 35 on 2 cores, 2026-12-07): set-up waits, not properties.
UP_S = {"starting": 300.0, "reading": 600.0}
#: From the signal to the harness's exit: its stop (production ended, the member stopped or,
#: with a second signal, killed, the samplers closed, the broker stopped, the verdict). Measured
#: 4.6 s (member starting) and 7.6 s (member reading) at load 35, 2026-12-07.
EXIT_S = 120.0
#: After the harness exited, until nothing of its run is left (nothing should be by then).
LEFT_S = 15.0


def _members(workdir: str) -> list[int]:
    """The run's member processes (``chaos.member`` with a sink under ``workdir``)."""
    return [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
            if "chaos.member" in cmdline(p) and workdir in cmdline(p)]


def _left(sessions: set[int], pids: set[int]) -> list[str]:
    alive = {p for s in sessions for p in in_session(s)} | {p for p in pids if os.path.exists(f"/proc/{p}")
                                                            and cmdline(p)}
    return [f"{p}: {cmdline(p)[:120]}" for p in sorted(alive) if cmdline(p)]


@pytest.mark.extended(why="a member that reads takes Spark's start-up and the group's first assignment (~1-3 min); "
                          "the SIGTERM case keeps the same clean-up in CI", only={"times": [2]})
@pytest.mark.parametrize(("sig", "times", "member"), [(signal.SIGTERM, 1, "starting"), (signal.SIGINT, 2, "reading")],
                         ids=["sigterm-member-starting", "sigint-twice-member-reading"])
def test_a_signal_ends_every_process_of_the_run(tmp_path, sig: int, times: int, member: str):
    """SIGTERM once while the member's Spark starts (the member exits at once, the scenario is
    stopped as at its end), or Ctrl-C twice while it reads (the first stops the query, the second
    kills what is left): the harness exits with 128 + the signal, prints the scenario's row, and
    no process of its run is left: none in its session (the broker's host) or a member's (the
    member, its JVM, pyspark's daemons and workers), none of its descendants seen before the
    signal."""
    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP"):
        pytest.skip("the chaos scenarios start their own embedded brokers")
    workdir = str(tmp_path / "w")
    log = open(tmp_path / "chaos.log", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "--broker", "mock", "--only", SCENARIO,
                             "--workdir", workdir], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    sessions, seen = {proc.pid}, set()

    def output() -> str:
        log.flush()
        log.seek(0)
        return log.read()

    def events() -> str:
        with contextlib.suppress(OSError), open(os.path.join(workdir, SCENARIO, "events.log")) as f:
            return f.read()
        return ""

    try:
        def ready() -> bool:
            assert proc.poll() is None, f"the harness exited with {proc.returncode} first:\n{output()[-4000:]}"
            if member == "reading":
                return "a-1 is reading" in events()
            return any(cmdline(p).split(" ", 1)[0].endswith("/java") for m in _members(workdir)
                       for p in descendants(m))

        wait_until(ready, timeout=UP_S[member], interval=0.5, message=f"the member {member}")
        members = _members(workdir)
        assert members, output()[-4000:]
        sessions |= set(members)
        seen = {p for s in sessions for p in in_session(s)} | set(descendants(proc.pid))
        for i in range(times):
            if i:
                time.sleep(1.0)
            os.kill(proc.pid, sig)
        started = time.monotonic()
        try:
            code = proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the harness still ran {EXIT_S:.0f}s after {times} {sig.name}:\n{output()[-4000:]}")
        print(f"MEASURED: {times} {sig.name}, member {member}: the harness exited "
              f"{time.monotonic() - started:.1f}s later with {code}; {len(seen)} processes of the run before")
        text = output()
        assert code == 128 + sig, text[-4000:]
        left: list[str] = []

        def all_gone() -> bool:
            left[:] = _left(sessions, seen)
            return not left

        wait_until(all_gone, timeout=LEFT_S, interval=0.5,
                   message=f"no process of the run left {LEFT_S:.0f}s after the harness exited ({left})")
        assert f"chaos: stopped by {sig.name}; 0 scenarios not run" in text, text[-4000:]
        rows = [line for line in text.splitlines() if line.startswith(f"| {SCENARIO} |")]
        assert len(rows) == 2 and all(r.endswith("|") for r in rows), text[-4000:]  # both tables
        assert rows[0].endswith("| **FAIL** |"), rows[0]
        assert f"- {SCENARIO}: stopped by {sig.name} before its end" in text, text[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in {p for s in sessions for p in in_session(s)}:  # all started by this test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        log.close()
