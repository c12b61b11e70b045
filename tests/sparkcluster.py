"""Spark processes outside the test process, for the deployment tests: a standalone cluster
(Master and Worker from pyspark's ``spark-class``), a Spark Connect server, spark-submit
applications, and a venv holding the wheel built from this checkout.

Every process starts in a session of its own and is stopped with its whole process tree
(SIGTERM, then SIGKILL), so a failing test leaves no JVM or Python worker behind.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from helpers import children_of
from spark_groupsource.devbroker._ports import listen_port

ROOT = Path(__file__).resolve().parents[1]
#: pyspark's launch scripts, installed next to the test interpreter by ``pip install pyspark``.
SPARK_BIN = Path(sys.executable).parent
#: Set for every Spark process: without it pyspark's scripts ask PYSPARK_DRIVER_PYTHON (or
#: python3 from PATH) where pyspark is, and a Python without pyspark leaves it empty.
SPARK_HOME = str(Path(importlib.util.find_spec("pyspark").origin).parent)
#: What the wheel is built from: the files pyproject.toml packages (copied, so that building
#: leaves no build/ or *.egg-info in the checkout).
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "README.md", "pyspark_groupkafka.py", "spark_groupsource",
                 "assignment")
#: Set to 1 to install the wheel's dependencies into the venv from the index/pip cache
#: (measured 78 s on 2 loaded cores, 2026-11-26) instead of sharing the test venv's copies.
FULL_INSTALL_ENV = "GROUPKAFKA_DEPLOY_FULL_INSTALL"
#: A built wheel to deploy instead of building one (``make dist-check``: the release's own wheel)
WHEEL_ENV = "GROUPKAFKA_TEST_WHEEL"
T = TypeVar("T")


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    found, todo = set(), [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Proc:
    """A child process in its own session, its output in ``log``; ``stop()`` ends its tree."""

    def __init__(self, name: str, cmd: Sequence[str], log: Path, *, env: Mapping[str, str],
                 cwd: Path) -> None:
        self.name, self.log = name, log
        self._out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            list(cmd), stdout=self._out, stderr=subprocess.STDOUT, env=dict(env), cwd=cwd,
            start_new_session=True,
        )
        self.pid = self.popen.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.name} ({self.log}) ---\n" + self.text()[-chars:]

    def wait_for(self, needle: str, timeout: float) -> None:
        """Until ``needle`` shows in the output; AssertionError with the log if the process
        exits first or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.popen.returncode}) before {needle!r}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {needle!r} within {timeout}s\n{self.tail()}")
            time.sleep(0.2)

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the session, then SIGKILL whatever of the tree is left (also processes that
        made a process group of their own, such as pyspark.daemon)."""
        tree = {self.pid} | descendants(self.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for pid in tree:
                if sig == signal.SIGKILL and alive(pid):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            try:
                self.popen.wait(grace if sig == signal.SIGTERM else 10)
            except subprocess.TimeoutExpired:
                continue
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 10)
            while any(alive(p) for p in tree) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not any(alive(p) for p in tree):
                break
        self._out.close()


def spark_env(python: str | Path, **extra: str) -> dict[str, str]:
    """Environment for a Spark process whose Python (driver and workers) is ``python``, with
    nothing of this checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE")}
    env.update({"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python),
                "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1", **extra})
    return env


# ----------------------------------------------------------------------------------------------
# The wheel and its venv
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WheelVenv:
    root: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"


def build_wheel(dest: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the checkout's packaged files, or the wheel that
    GROUPKAFKA_TEST_WHEEL names."""
    given = os.environ.get(WHEEL_ENV, "").strip()
    if given:
        wheel = Path(given).resolve()
        assert wheel.is_file() and wheel.name.startswith("spark_groupsource-"), f"{WHEEL_ENV}={given}: no such wheel"
        return wheel
    src = dest / "src"
    src.mkdir(parents=True)
    # the native extension is built by the wheel's own build, never copied from the checkout
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    for name in WHEEL_SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    out = dest / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(src)], 300)
    wheels = list(out.glob("spark_groupsource-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def make_venv(dest: Path, wheel: Path) -> WheelVenv:
    """A venv on the base interpreter of this one with ``wheel`` installed.

    By default the wheel goes in with ``--no-deps`` and the third-party packages come from
    this venv's site-packages through a path line in a ``.pth`` file: a path line puts that
    directory on sys.path without running the ``.pth`` files in it, so the editable install
    of the checkout (``__editable__.*.pth``) does not leak in. ``pip check`` then proves the
    wheel's declared dependencies are all satisfied. With GROUPKAFKA_DEPLOY_FULL_INSTALL=1
    the dependencies are installed too (pinned by constraints.txt)."""
    root = dest / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    _run([str(base), "-m", "venv", "--without-pip", str(root)], 120)
    py = root / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60).strip())
    pip = [sys.executable, "-m", "pip", "--python", str(py), "--disable-pip-version-check"]
    if os.environ.get(FULL_INSTALL_ENV) == "1":
        _run([*pip, "install", "--quiet", "-c", str(ROOT / "constraints.txt"), str(wheel)], 900)
    else:
        shared = Path(_run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60).strip())
        (site / "zz_shared_dependencies.pth").write_text(f"{shared}\n")
        _run([*pip, "install", "--quiet", "--no-deps", str(wheel)], 300)
    _run([*pip, "check"], 120)
    return WheelVenv(root, wheel)


def _run(cmd: Sequence[str], timeout: float) -> str:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd="/")
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


# ----------------------------------------------------------------------------------------------
# Standalone cluster
# ----------------------------------------------------------------------------------------------
@dataclass
class StandaloneCluster:
    """One Master and one Worker (``cores`` cores); executors are JVMs the Worker starts."""

    master: Proc
    worker: Proc
    url: str

    def executor_pids(self) -> set[int]:
        """The executor JVMs (CoarseGrainedExecutorBackend) running under the Worker."""
        return {p for p in children_of(self.worker.pid) if "CoarseGrainedExecutorBackend" in cmdline(p)}

    def logs(self) -> str:
        return self.master.tail() + "\n" + self.worker.tail()


@contextmanager
def standalone_cluster(workdir: Path, *, cores: int = 2, memory: str = "2g", start_timeout: float = 180,
                       meanwhile: Callable[[], T] | None = None) -> Iterator[tuple[StandaloneCluster, T | None]]:
    """Master and Worker, started together (the Worker retries until the Master is up);
    ``meanwhile()`` runs while their JVMs start and its result is yielded with the cluster.
    The daemons get no PYSPARK_PYTHON: each application brings its own."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in spark_env(sys.executable).items() if not k.startswith("PYSPARK_")}
    spark_class = str(SPARK_BIN / "spark-class")
    port = listen_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[Proc] = []
    try:
        master = Proc("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(port), "--webui-port", str(listen_port())],
                      workdir / "master.log", env=env, cwd=workdir)
        procs.append(master)
        worker = Proc("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--cores", str(cores), "--memory", memory, "--webui-port", str(listen_port()),
                                 "--work-dir", str(workdir / "work"), url],
                      workdir / "worker.log", env=env, cwd=workdir)
        procs.append(worker)
        extra = meanwhile() if meanwhile is not None else None
        master.wait_for("I have been elected leader", start_timeout)
        worker.wait_for("Successfully registered with master", start_timeout)
        yield StandaloneCluster(master, worker, url), extra
    finally:
        for p in reversed(procs):
            p.stop()


def spark_submit_cmd(master: str, python: str | Path, *args: str, conf: Mapping[str, str] | None = None) -> list[str]:
    """spark-submit in client mode, driver and executors on ``python``."""
    settings = {
        "spark.pyspark.python": str(python), "spark.pyspark.driver.python": str(python),
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "2",
        **(conf or {}),
    }
    cmd = [str(SPARK_BIN / "spark-submit"), "--master", master]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, *args]


# ----------------------------------------------------------------------------------------------
# Spark Connect
# ----------------------------------------------------------------------------------------------
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@contextmanager
def connect_server(workdir: Path, python: str | Path, *, master: str = "local[2]",
                   start_timeout: float = 180) -> Iterator[str]:
    """A Spark Connect server whose Python (data source runner, workers) is ``python``;
    yields its ``sc://`` URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = listen_port()
    cmd = spark_submit_cmd(master, python, "--class", CONNECT_SERVER_CLASS, "--name", "groupkafka-connect-test",
                           conf={"spark.connect.grpc.binding.address": "127.0.0.1",
                                 "spark.connect.grpc.binding.port": str(port)})
    server = Proc("connect-server", cmd, workdir / "connect-server.log", env=spark_env(python), cwd=workdir)
    try:
        server.wait_for("Spark Connect server started", start_timeout)
        yield f"sc://127.0.0.1:{port}"
    except BaseException:
        sys.stderr.write(server.tail(8000) + "\n")
        raise
    finally:
        server.stop()
