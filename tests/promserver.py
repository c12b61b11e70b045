"""A real Prometheus server for tests: Debian's ``prometheus`` binary run as a plain process
(never its system service), scraping given targets every second into a temporary TSDB, on an
ephemeral loopback port; queried through its HTTP API. ``make setup`` installs the package
where it can (root with apt-get); elsewhere :func:`missing` says why tests skip.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def missing() -> str | None:
    """Why no Prometheus can run here (None: both binaries are on PATH)."""
    if PROMETHEUS is None or PROMTOOL is None:
        return ("Debian's prometheus package (prometheus, promtool) is not installed: `make setup` installs it "
                "when run as root with apt-get, or apt-get install prometheus")
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """``with Prometheus(["127.0.0.1:9464"], tmp_path) as prom: prom.query("up")``."""

    def __init__(self, targets: list[str], workdir: Path, rule_files: list[Path] = ()):
        self.targets, self.workdir, self.rule_files = targets, workdir, list(rule_files)
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Prometheus:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def log(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def start(self, timeout: float = 60.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [{"job_name": "groupkafka", "static_configs": [{"targets": self.targets}]}],
        }))
        self.port = free_port()
        with open(self.workdir / "prometheus.log", "wb") as out:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready within {timeout}s: {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: (labels, value) per series."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def value(self, expr: str) -> float | None:
        """The value of an instant query that yields at most one series."""
        found = self.query(expr)
        assert len(found) <= 1, found
        return found[0][1] if found else None

    def samples(self, selector: str, window: str = "15m") -> list[float]:
        """Every sample of one series over the last ``window``, oldest first."""
        data = self.api("query", query=f"{selector}[{window}]")
        assert data["resultType"] == "matrix" and len(data["result"]) <= 1, data
        return [float(v) for _, v in data["result"][0]["values"]] if data["result"] else []

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.api("alerts")["alerts"] if a["state"] == "firing"}


def promtool(*args: str) -> subprocess.CompletedProcess:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
