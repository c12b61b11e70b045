"""A real Schema Registry for the tests: Karapace 3.16.0 from ../shared/karapace beside the
``kafka_broker`` (issue 55).

Installed once into a cache folder (``GROUPKAFKA_KARAPACE_VENV``, default
``~/.cache/groupkafka/karapace-3.16.0``; about 15 s the first time, from PyPI wheels) with the
share's ``install.sh``, started with its ``start.sh`` on a free port; the tests skip with the
reason when ``../shared/karapace`` is absent.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
KARAPACE_SHARE = Path(os.environ.get("GROUPKAFKA_KARAPACE", REPO.parent / "shared" / "karapace"))
VENV = Path(os.environ.get("GROUPKAFKA_KARAPACE_VENV",
                           Path.home() / ".cache" / "groupkafka" / "karapace-3.16.0"))


def karapace_missing() -> str | None:
    for name in ("install.sh", "start.sh", "karapace-3.16.0-src.tar.gz"):
        if not (KARAPACE_SHARE / name).exists():
            return f"no Karapace at {KARAPACE_SHARE} ({name} missing; set GROUPKAFKA_KARAPACE)"
    return None


def _install() -> None:
    """Into VENV itself (a venv's scripts name their interpreter by path); ``.installed`` marks
    a finished install, so a broken one is made again."""
    marker = VENV / ".installed"
    if marker.exists():
        return
    subprocess.run(["rm", "-rf", str(VENV)], check=True)
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(KARAPACE_SHARE / "install.sh"), str(VENV)], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    marker.write_text("karapace 3.16.0\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Karapace:
    """One Karapace process; ``stop()`` and ``start()`` again on the same port."""

    def __init__(self, bootstrap: str, workdir: Path):
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> None:
        self.proc = subprocess.Popen(
            ["bash", str(KARAPACE_SHARE / "start.sh"), str(VENV), self.bootstrap, str(self.port), str(self.workdir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("SR_URL="):
                return
            if time.monotonic() > deadline:
                break
        log = (self.workdir / "karapace.log").read_text()[-3000:] if (self.workdir / "karapace.log").exists() else ""
        self.stop()
        raise RuntimeError(f"Karapace did not become ready on port {self.port}: {log}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None
        # the port is free once the listener is gone
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.1)

    def client(self) -> Any:
        """A fresh confluent-kafka client (its get_latest_version is cached per client)."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url})


@pytest.fixture(scope="session")
def schema_registry(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Karapace]:
    """Karapace beside the session's Kafka broker (skips without ../shared/karapace)."""
    missing = karapace_missing()
    if missing:
        pytest.skip(missing)
    _install()
    sr = Karapace(kafka_broker.bootstrap, tmp_path_factory.mktemp("karapace"))
    sr.start()
    try:
        yield sr
    finally:
        sr.stop()
