"""Wall-clock steps for chosen processes: our LD_PRELOAD shim (``chaos/clockstep.c``).

The shim offsets CLOCK_REALTIME, gettimeofday() and time() by the seconds written in a file and
leaves monotonic clocks and sleeps alone, as an NTP step does, and hands waits on absolute
CLOCK_REALTIME deadlines to the kernel on its own clock (finding 18); processes started with
:func:`env` in their environment (and their children: the JVM, its Python workers) see a step
within 100 ms of :func:`step`. Built here with the system ``cc`` because Debian's libfaketime
0.9.10 breaks Python's ``time.sleep`` when told not to fake the monotonic clock.
"""

from __future__ import annotations

import os
import shutil
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clockstep.c")


class ClockStepError(RuntimeError):
    """The shim cannot be built here (no C compiler, or it failed)."""


def missing() -> str | None:
    """Why the shim cannot be built here, or None."""
    if shutil.which("cc") is None:
        return "no C compiler (cc) to build chaos/clockstep.c (Debian: apt-get install -y gcc)"
    return None


def build(out_dir: str) -> str:
    """Compile the shim into ``out_dir`` (again only when the source is newer) and return its path."""
    why = missing()
    if why:
        raise ClockStepError(why)
    os.makedirs(out_dir, exist_ok=True)
    lib = os.path.join(out_dir, "libclockstep.so")
    if os.path.exists(lib) and os.path.getmtime(lib) >= os.path.getmtime(SOURCE):
        return lib
    tmp = lib + f".{os.getpid()}.tmp"
    proc = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wall", "-o", tmp, SOURCE, "-ldl", "-lpthread"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClockStepError(f"cc failed building {SOURCE}: {proc.stderr.strip()}")
    os.replace(tmp, lib)
    return lib


def env(lib: str, offset_file: str) -> dict[str, str]:
    """The environment that puts a process (and its children) on the stepped wall clock."""
    preload = " ".join(p for p in (lib, os.environ.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, "CLOCKSTEP_FILE": offset_file}


def step(offset_file: str, offset_s: int) -> None:
    """Set the processes' wall clock to real time plus ``offset_s`` seconds (atomically)."""
    tmp = offset_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{int(offset_s):+d}\n")
    os.replace(tmp, offset_file)
