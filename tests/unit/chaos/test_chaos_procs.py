"""How the chaos harness ends what it started (chaos/procs.py): SIGTERM and SIGINT stop a run
(:class:`Interrupt`), and what a member leaves in its session once it has exited is swept. Real
signals and real processes; no broker, no Spark."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from chaos.procs import Interrupt, Member, alive, in_session
from helpers import wait_until


@pytest.fixture
def handlers():
    """Pytest's own SIGTERM and SIGINT handlers, back after the test."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


@pytest.mark.parametrize(("first", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_first_signal_stops_the_run_and_later_ones_hurry_its_stop(handlers, first, code):
    stop = Interrupt().install()
    hurried: list[bool] = []
    stop.hurry = lambda: hurried.append(True)
    assert (stop.exit_code, stop.name) == (0, "")
    with pytest.raises(KeyboardInterrupt, match=first.name):
        os.kill(os.getpid(), first)
        signal.sigtimedwait([], 0.5)  # delivered: the handler has run by now
    assert hurried == []
    for later in (signal.SIGTERM, signal.SIGINT):
        os.kill(os.getpid(), later)  # no raise: the stop under way goes on, only quicker
        signal.sigtimedwait([], 0.5)
    assert hurried == [True, True]
    assert (stop.exit_code, stop.name) == (code, first.name)


def _member_leaving_a_child(tmp_path) -> tuple[Member, int]:
    """A member process in a session of its own that exits at once and leaves a child behind
    (as a member's JVM or pyspark's daemon outlives a killed member)."""
    proc = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child = int(proc.stdout.readline())
    proc.wait(30)
    proc.stdout.close()
    return Member("a", 1, proc, str(tmp_path / "a-1.log")), child


def test_what_a_member_left_in_its_session_is_swept(tmp_path):
    m, child = _member_leaving_a_child(tmp_path)
    try:
        assert in_session(m.pid) == [child] and m.session() == [child]
        assert child in m.family()  # re-parented: no longer a descendant, still in its session
        assert m.sweep() == [child]
        wait_until(lambda: not alive(child), timeout=10, message=f"the swept process {child} gone")
        assert m.session() == [] and m.sweep() == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_running_member_is_not_swept(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    m = Member("a", 1, proc, str(tmp_path / "a-1.log"))
    try:
        assert m.sweep() == [] and alive(proc.pid)
    finally:
        proc.kill()
        proc.wait(30)


def test_a_session_id_whose_number_names_another_process_is_not_the_members(tmp_path):
    """Reaped, and its pid alive again: Linux reuses a pid's number only once no session of that
    id is left, so the session of that id is someone else's and must not be signalled. (Crafted:
    a live session leader whose Popen says it was reaped.)"""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        m = Member("a", 1, other, str(tmp_path / "a-1.log"))
        other.returncode = 0  # as if the member had exited and been reaped, its number now `other`'s
        assert in_session(other.pid) == [other.pid]
        assert m.session() == [] and m.sweep() == [] and m.family() == []
        assert alive(other.pid)
    finally:
        os.kill(other.pid, signal.SIGKILL)
        os.waitpid(other.pid, 0)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
#: A harness stand-in: starts a child that follows it (as chaos.member does), prints its pid, waits.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[3]], cwd=sys.argv[2], start_new_session=True)
print(child.pid, flush=True)
time.sleep(300)
"""
CHILD = """
import signal, sys, time
from chaos.procs import follow_parent
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
follow_parent(0.1)
open(sys.argv[1], "w").close()
time.sleep(300)
"""


def test_a_member_ends_when_its_harness_is_killed(tmp_path):
    """A member runs in a session of its own: killed -9, the harness cannot stop it, so it
    follows its parent (chaos.procs.follow_parent) and stops as on a SIGTERM."""
    ready = tmp_path / "following"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, ROOT, str(ready)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    child = int(parent.stdout.readline())
    try:
        wait_until(ready.exists, timeout=60, message="the child following its parent")
        time.sleep(1.0)  # ten of its looks at its parent
        assert alive(child), "the child ended while its parent lived"
        parent.kill()
        parent.wait(10)
        wait_until(lambda: not alive(child), timeout=10, message=f"the child {child} ended after its parent's kill -9")
    finally:
        for pid in (parent.pid, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        parent.stdout.close()
