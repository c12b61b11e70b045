"""freeze_once in a fresh interpreter (freezing this test process would outlive the test)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc, weakref
from spark_groupsource.executor.heap import freeze_once
gc.disable()  # no automatic collection may muddle what the freeze did
assert gc.get_freeze_count() == 0
class Cycle:
    pass
a = Cycle(); a.me = a; before = weakref.ref(a); del a  # cyclic garbage from before the freeze
assert freeze_once() is True
assert before() is None, "garbage from before the freeze was frozen, not collected"
frozen = gc.get_freeze_count()
assert frozen > 1000, frozen
assert freeze_once() is False and gc.get_freeze_count() == frozen
b = Cycle(); b.me = b; after = weakref.ref(b); del b  # made after the freeze
gc.collect()
assert after() is None, "garbage made after the freeze was not collected"
print("ok")
"""


def _passes(script: str) -> None:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_freezes_once_and_later_garbage_is_still_collected() -> None:
    _passes(SCRIPT)


SETTLED = """
import gc, sys, weakref
from spark_groupsource.executor.heap import freeze_once, freeze_settled
gc.disable()
class Cycle:
    pass
assert freeze_once() is True
first = gc.get_freeze_count()
# what a first task imports after the freeze at its start (PySpark's output path: pandas & co.)
assert "tarfile" not in sys.modules
import tarfile
late = [o for o in gc.get_objects() if getattr(o, "__module__", None) == "tarfile"]
assert late, "the import made no tracked objects"
del late
assert freeze_settled() is True
assert gc.get_freeze_count() > first
assert not [o for o in gc.get_objects() if getattr(o, "__module__", None) == "tarfile"], \\
    "the late import's objects are still in the collected generations"
assert freeze_settled() is False and freeze_once() is False
""" + SCRIPT[SCRIPT.index("b = Cycle()"):]  # garbage made after the freezes is still collected


def test_the_end_of_the_first_read_freezes_what_the_task_imported() -> None:
    _passes(SETTLED)
