"""The benchmarks' CPU accounting (bench/_common.py): a process tree's CPU seconds from /proc,
children included, excluded subtrees left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))
from _common import machine_busy_seconds, per_million, tree_cpu_by_kind, tree_cpu_seconds  # noqa: E402

#: /proc reports CPU in clock ticks (10 ms); process_time, which the burner counts, is finer
TICK = 0.011
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux only)")


def _meter_a_burning_child(seconds: float) -> dict:
    """A Meter around a child that burns ``seconds`` of CPU and exits, measured in a new
    interpreter whose tree holds nothing else. The pytest worker's own tree also holds the
    Spark and broker processes of earlier tests, which exit whenever they do and take their
    CPU out of the tree's sum (a clean-clone CI run at 2e0364f measured -0.02 s around a
    0.4 s child)."""
    return _meter_around(BURN.format(s=seconds))


def _meter_around(child: str) -> dict:
    """A Meter, in a new interpreter, around a child process running ``child`` (Python)."""
    code = (f"import json, subprocess, sys\nsys.path.insert(0, {str(BENCH)!r})\n"
            "from _common import Meter\n"
            "with Meter() as m:\n"
            f"    subprocess.run([sys.executable, '-c', {child!r}], check=True)\n"
            "print(json.dumps({'cpu': m.cpu, 'wall': m.wall, 'by_kind': m.by_kind, 'machine': m.machine}))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_a_child_that_ran_and_exited_counts_in_the_tree():
    m = _meter_a_burning_child(0.4)
    assert 0.4 - TICK <= m["cpu"] < 5.0
    assert m["wall"] >= 0.4


def test_a_live_child_counts_unless_excluded():
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4) + "print('burnt', flush=True)\n"
                              "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "burnt"
        me = os.getpid()
        # Without the child first: the rest of the tree (brokers, Spark) keeps burning between
        # the two readings, which then only adds to the difference instead of eating into it.
        without = tree_cpu_seconds(me, exclude=[child.pid])
        assert tree_cpu_seconds(me) - without >= 0.4 - TICK
    finally:
        child.kill()
        child.wait(30)


def test_the_machine_counts_what_the_tree_burnt_and_never_more_than_its_cores_allow():
    m = _meter_a_burning_child(0.4)
    slack = 2 * TICK * os.cpu_count()  # /proc/stat counts each core in whole ticks
    # the whole machine was busy at least as long as the child (other processes only add)
    assert m["machine"] >= m["cpu"] - slack
    assert m["machine"] <= m["wall"] * os.cpu_count() + slack


def test_machine_busy_seconds_only_grows():
    first = machine_busy_seconds()
    assert 0 < first <= machine_busy_seconds()


def test_per_million():
    assert per_million(2.5, 500_000) == 5.0


def test_the_split_by_kind_keeps_python_children_under_python_live_or_exited():
    m = _meter_a_burning_child(0.4)
    # an exited child is reaped into its parent's time, which counts as Python's
    assert m["by_kind"]["python"] >= 0.4 - TICK
    assert abs(sum(m["by_kind"].values()) - m["cpu"]) < 1e-9
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4) + "print('burnt', flush=True)\n"
                              "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "burnt"
        assert tree_cpu_by_kind(os.getpid())["python"] >= 0.4 - TICK
    finally:
        child.kill()
        child.wait(30)


def test_a_child_reaped_by_the_kernel_still_counts():
    """PySpark's daemon ignores SIGCHLD: a worker it forked takes its CPU out of the tree when
    it exits (nobody's reaped-children time gets it). The Meter keeps what it had used."""
    burner = BURN.format(s=0.4) + "time.sleep(0.5)\n"  # idle at the end, as a stopped worker
    parent = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
              f"child = subprocess.Popen([sys.executable, '-c', {burner!r}])\n"
              "while True:\n"
              "    try:\n"
              "        with open(f'/proc/{child.pid}/stat'): pass\n"
              "    except OSError:\n"
              "        break\n"
              "    time.sleep(0.05)\n"
              "time.sleep(0.3)\n")
    assert 0.4 - TICK <= _meter_around(parent)["cpu"] < 5.0
