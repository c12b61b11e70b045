"""The benchmarks' CPU accounting (bench/_common.py): a process tree's CPU seconds from /proc,
children included, excluded subtrees left out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from _common import Meter, per_million, tree_cpu_by_kind, tree_cpu_seconds  # noqa: E402

#: /proc reports CPU in clock ticks (10 ms); process_time, which the burner counts, is finer
TICK = 0.011
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux only)")


def test_a_child_that_ran_and_exited_counts_in_the_tree():
    with Meter() as m:
        subprocess.run([sys.executable, "-c", BURN.format(s=0.4)], check=True)
    assert 0.4 - TICK <= m.cpu < 5.0
    assert m.wall >= 0.4


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


def test_per_million():
    assert per_million(2.5, 500_000) == 5.0


def test_the_split_by_kind_keeps_python_children_under_python_live_or_exited():
    with Meter() as m:
        subprocess.run([sys.executable, "-c", BURN.format(s=0.4)], check=True)
    # an exited child is reaped into its parent's time, which counts as Python's
    assert m.by_kind["python"] >= 0.4 - TICK
    assert abs(sum(m.by_kind.values()) - m.cpu) < 1e-9
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4) + "print('burnt', flush=True)\n"
                              "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "burnt"
        assert tree_cpu_by_kind(os.getpid())["python"] >= 0.4 - TICK
    finally:
        child.kill()
        child.wait(30)
