"""The clock-step shim (chaos/clockstep.c) on real processes: Python and the JVM see their wall
clock stepped forward and back within 100 ms of the file's change, their monotonic clocks and
sleeps untouched (the host's CLOCK_MONOTONIC, which the test process reads unshimmed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from chaos import clockstep

pytestmark = pytest.mark.skipif(clockstep.missing() is not None, reason=str(clockstep.missing()))

PY_CHILD = """
import sys, time
for _ in sys.stdin:
    m = time.monotonic()
    time.sleep(0.15)
    print(time.time(), time.monotonic(), time.monotonic() - m, flush=True)
"""

JAVA_CHILD = """
public class Child {
    public static void main(String[] a) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        while (in.readLine() != null) {
            long m = System.nanoTime();
            Thread.sleep(150);
            long n = System.nanoTime();
            System.out.println(System.currentTimeMillis() / 1000.0 + " " + n / 1e9 + " " + (n - m) / 1e9);
        }
    }
}
"""


def _steps(cmd: list[str], tmp_path, start_timeout: float) -> list[tuple[int, float, float, float]]:
    """(offset, child's wall - ours, child's monotonic - ours, child's sleep) for each step."""
    lib = clockstep.build(str(tmp_path / "lib"))
    offset_file = str(tmp_path / "offset")
    clockstep.step(offset_file, 0)
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **clockstep.env(lib, offset_file)})
    seen = []
    try:
        for offset in (0, 300, -300, -180, 0):
            clockstep.step(offset_file, offset)
            child.stdin.write("go\n")
            child.stdin.flush()
            line = child.stdout.readline()  # the first answer waits for the JVM to compile and start
            assert line, f"the child exited: {cmd}"
            wall, mono, slept = (float(x) for x in line.split())
            seen.append((offset, wall - time.time(), mono - time.monotonic(), slept))
    finally:
        child.stdin.close()
        child.wait(timeout=start_timeout)
    return seen


def _check(seen) -> None:
    for offset, wall_diff, mono_diff, slept in seen:
        # the answer was read after the child's clock read: ours is later by the pipe's latency
        assert offset - 5 < wall_diff <= offset + 0.01, (offset, wall_diff)
        assert -5 < mono_diff <= 0.01, (offset, mono_diff)  # monotonic: the host's, never stepped
        assert 0.14 < slept < 5, (offset, slept)  # a sleep sleeps its time, whatever the wall clock


def test_python_wall_clock_steps_monotonic_and_sleep_untouched(tmp_path):
    _check(_steps([sys.executable, "-c", PY_CHILD], tmp_path, 30))


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_jvm_current_time_millis_steps_nano_time_untouched(tmp_path):
    src = tmp_path / "Child.java"
    src.write_text(JAVA_CHILD)
    _check(_steps(["java", str(src)], tmp_path, 60))


def test_without_the_file_the_offset_is_zero(tmp_path):
    lib = clockstep.build(str(tmp_path / "lib"))
    out = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True,
                         env={**os.environ, **clockstep.env(lib, str(tmp_path / "absent"))}, check=True)
    assert abs(float(out.stdout) - time.time()) < 5


RDKAFKA_CHILD = """
import time
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": "127.0.0.1:9", "log_level": 0})
m = time.monotonic()
try:
    admin.list_topics(timeout=3)
except Exception:
    pass
print(time.monotonic() - m, flush=True)
"""

THREAD_CHILD = """
import threading, time
m = time.monotonic()
threading.Event().wait(0.5)
print(time.monotonic() - m, flush=True)
"""


@pytest.mark.parametrize("offset", [0, 480, -480])
@pytest.mark.parametrize("child", ["librdkafka", "threading"])
def test_timed_waits_keep_their_length_after_a_step(tmp_path, offset, child):
    """Finding 18: librdkafka waits on C11 cnd_timedwait with a deadline from the wall clock it
    reads; before the shim put such deadlines back on the kernel's clock, a 3 s list_topics did
    not return within 40 s at +480 s. After a step, a timed wait lasts its time, as after a real
    NTP step."""
    pytest.importorskip("confluent_kafka")
    lib = clockstep.build(str(tmp_path / "lib"))
    offset_file = str(tmp_path / "offset")
    clockstep.step(offset_file, offset)
    code = RDKAFKA_CHILD if child == "librdkafka" else THREAD_CHILD
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **clockstep.env(lib, offset_file)}, check=True)
    took = float(out.stdout.split()[-1])
    want = 3.0 if child == "librdkafka" else 0.5
    assert want - 0.05 < took < want + 20, (child, offset, took)
