"""A Schema Registry beside a Kafka dev broker: Karapace 3.16.0 from ``../shared/karapace``.

Karapace keeps its schemas in the broker's ``_schemas`` topic, so it runs only beside the kafka
backend. The share (``../shared/karapace`` next to the checkout, or ``$GROUPKAFKA_KARAPACE``, or
``--karapace-home``) holds the source tarball and its ``install.sh``/``start.sh``; it is
installed once into a cache venv (``$GROUPKAFKA_KARAPACE_VENV``, default
``~/.cache/groupkafka/karapace-3.16.0``; about 15 s the first time, from PyPI wheels) and
started with ``start.sh`` on a free port. The command's ``--schema-registry`` and the tests'
``schema_registry`` fixture both run it through :class:`Karapace`.

``start.sh`` backgrounds Karapace inside a bash script, so neither a parent-death signal nor a
signal to the script alone reaches Karapace itself: it runs under a small guard process that
leads their process group and stops the whole group when its stdin (a pipe from the owner)
closes, which happens however the owner ends, ``kill -9`` included.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ._ports import listen_port
from .errors import DevBrokerError

#: A copy of the share to use instead of ../shared/karapace.
KARAPACE_HOME_ENV = "GROUPKAFKA_KARAPACE"
#: Where the share is installed (made on first use).
KARAPACE_VENV_ENV = "GROUPKAFKA_KARAPACE_VENV"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED_KARAPACE = _PROJECT_ROOT.parent / "shared" / "karapace"
_SHARE_FILES = ("install.sh", "start.sh", "karapace-3.16.0-src.tar.gz")

#: The guard: leads the process group of start.sh and Karapace, stops the group (SIGTERM, then
#: SIGKILL after 15 s) on stdin EOF or SIGTERM, and exits with start.sh's code.
_GUARD = r"""
import os, signal, subprocess, sys, threading
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def eof():
    sys.stdin.buffer.read()
    done.set()
def exited():
    child.wait()
    done.set()
threading.Thread(target=eof, daemon=True).start()
threading.Thread(target=exited, daemon=True).start()
done.wait()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if child.poll() is None:
    os.killpg(0, signal.SIGTERM)
    try:
        child.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(0, signal.SIGKILL)
sys.exit(child.returncode or 0)
"""


def karapace_share(home: str | os.PathLike[str] | None = None) -> Path:
    """The share to run: ``home``, else ``$GROUPKAFKA_KARAPACE``, else ../shared/karapace."""
    explicit = str(home or "").strip()
    return Path(explicit or os.environ.get(KARAPACE_HOME_ENV, "").strip() or SHARED_KARAPACE)


def karapace_venv() -> Path:
    return Path(os.environ.get(KARAPACE_VENV_ENV, "").strip()
                or Path.home() / ".cache" / "groupkafka" / "karapace-3.16.0")


def missing_file(home: str | os.PathLike[str] | None = None) -> tuple[Path, str] | None:
    """(the share, the first file of it that is missing), or None when it is complete."""
    share = karapace_share(home)
    for name in _SHARE_FILES:
        if not (share / name).exists():
            return share, name
    return None


def karapace_missing(home: str | os.PathLike[str] | None = None) -> str | None:
    """Why Karapace cannot be run from the share (a file of it missing), or None."""
    missing = missing_file(home)
    if missing is None:
        return None
    return f"no Karapace at {missing[0]} ({missing[1]} missing; set {KARAPACE_HOME_ENV})"


def command_missing(home: str | None) -> str | None:
    """The command's error when ``--schema-registry`` has no share to run, naming what to set."""
    missing = missing_file(home)
    if missing is None:
        return None
    where = f"--karapace-home {home}" if home else (
        f"{KARAPACE_HOME_ENV}={missing[0]}" if os.environ.get(KARAPACE_HOME_ENV, "").strip() else str(missing[0]))
    return (f"--schema-registry needs Karapace, not found at {where} ({missing[1]} missing); pass "
            f"--karapace-home DIR or set {KARAPACE_HOME_ENV} to a copy of ../shared/karapace "
            f"({', '.join(_SHARE_FILES)})")


def install(share: Path, venv: Path) -> None:
    """Install the share into ``venv`` unless done already (``.installed`` marks a finished
    install, so a broken one is made again); a lock beside it keeps two installs apart."""
    marker = venv / ".installed"
    if marker.exists():
        return
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another process installed it while we waited
            return
        shutil.rmtree(venv, ignore_errors=True)
        res = subprocess.run(["bash", str(share / "install.sh"), str(venv)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, timeout=600, check=False)
        if res.returncode != 0:
            tail = " | ".join(res.stderr.strip().splitlines()[-3:])
            raise DevBrokerError(f"Karapace install from {share} into {venv} failed "
                                 f"(exit {res.returncode}): {tail}; set {KARAPACE_VENV_ENV} to "
                                 f"another directory to install it there")
        marker.write_text("karapace 3.16.0\n")


class Karapace:
    """One Karapace beside the broker at ``bootstrap``: ``start()``, ``stop()`` and ``start()``
    again on the same port; ``url`` once started."""

    def __init__(self, bootstrap: str, workdir: str | os.PathLike[str],
                 home: str | os.PathLike[str] | None = None, port: int | None = None):
        missing = karapace_missing(home)
        if missing:
            raise DevBrokerError(missing)
        self.share = karapace_share(home)
        self.venv = karapace_venv()
        self.bootstrap = bootstrap
        self.workdir = Path(workdir)
        self.port = port or listen_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "karapace.log"

    def _log_tail(self, size: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-size:]
        return ""

    def start(self, timeout_s: float = 90.0) -> None:
        """Install if needed, start, and return once Karapace is ready and primary (start.sh's
        ``SR_URL=`` line), else stop it and raise with the end of its log."""
        install(self.share, self.venv)
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-c", _GUARD, "bash", str(self.share / "start.sh"), str(self.venv),
               self.bootstrap, str(self.port), str(self.workdir)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        output: list[str] = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:  # start.sh exited
                break
            if line.startswith("SR_URL="):
                return
            output.append(line.strip())
        log = self._log_tail() or " | ".join(output[-5:])
        self.stop()
        raise DevBrokerError(f"Karapace did not become ready on port {self.port} within "
                             f"{timeout_s:.0f}s: {log}")

    def died(self) -> str | None:
        """A reason if Karapace exited without being stopped, else None."""
        if self.proc is not None and self.proc.poll() is not None:
            tail = self._log_tail(600).strip().splitlines()[-1:]
            return (f"Karapace exited unexpectedly (code {self.proc.returncode})"
                    + (f": {tail[0]}" if tail else f"; see {self.log_path}"))
        return None

    def stop(self) -> None:
        """Stop Karapace (the guard stops its whole group on EOF), SIGKILL to the group after
        20 s; return once its port is free (at most 5 s more)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.1)
