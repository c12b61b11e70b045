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


def test_freezes_once_and_later_garbage_is_still_collected() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
