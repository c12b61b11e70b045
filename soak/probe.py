"""What the soak samples every minute, from /proc, the checkpoints, the members' progress files
and the group: I/O only (the rules are in soak/rules.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

from chaos.procs import Member, cmdline, descendants
from chaos.run import Run
from soak.rules import Sample, histogram_total_mb, percentile, write_rows

RUNNER_MODULE = "python_streaming_source_runner"


@dataclass(frozen=True)
class ProcStats:
    rss_mb: float
    fds: int
    threads: int


def parse_status(text: str) -> tuple[float, int]:
    """(VmRSS in MB, Threads) from /proc/PID/status."""
    rss_kb, threads = 0, 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss_kb / 1024.0, threads


def proc_stats(pid: int) -> ProcStats | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            rss, threads = parse_status(f.read())
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return ProcStats(rss, fds, threads)


def jvm_class_histogram(pid: int, timeout: float = 60.0) -> str | None:
    """``jcmd PID GC.class_histogram``: a full GC, then the live objects by class, counted in one
    safepoint. Its total is the sample's live heap (:func:`soak.rules.histogram_total_mb`); its
    rows name what grows where the floor rises. ``GC.heap_info`` read right after a full GC (the
    probe until 2026-12-06) also counts what the JVM allocated in the fraction of a second
    between the two jcmd calls: 71-95 MB on a soak's driver whose histograms, taken just before,
    counted 62-63 MB. None without jcmd or an answer."""
    jcmd = _jcmd()
    if not jcmd:
        return None
    try:
        return subprocess.run([jcmd, str(pid), "GC.class_histogram"], capture_output=True, text=True,
                              timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _jcmd() -> str | None:
    return shutil.which("jcmd") or (os.path.join(os.environ["JAVA_HOME"], "bin", "jcmd")
                                    if os.environ.get("JAVA_HOME") else None)


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def roles(m: Member) -> dict[str, list[int]]:
    """The member's processes by role: ``driver_py`` (the member's own Python, PySpark's
    driver), ``driver_jvm`` (SparkSubmit), ``runner`` (the stream's Python runner, where the
    group member lives: the processes running pyspark's streaming source runner, the children
    of its daemon if it runs under one), ``workers`` (executor Python workers), ``planners`` (the
    daemons of the Python data source's planning modules, lookup/create/plan_data_source_read,
    and what they forked)."""
    family = descendants(m.pid)
    lines = {p: cmdline(p) for p in family}
    jvm = [p for p, c in lines.items() if "org.apache.spark.deploy.SparkSubmit" in c]
    runner = [p for p, c in lines.items() if RUNNER_MODULE in c
              and not (RUNNER_MODULE in lines.get(_parent(p), "") and "pyspark.daemon" in lines.get(_parent(p), ""))]
    runner = [k for p in runner for k in ([q for q in family if _parent(q) == p] if "pyspark.daemon" in lines[p]
                                          else [p])]
    planners = [p for p, c in lines.items() if "pyspark.daemon" in c and c.split()[-1:] != ["pyspark.worker"]
                and RUNNER_MODULE not in c]
    return {"driver_py": [m.pid], "driver_jvm": jvm, "runner": runner, "workers": m.python_workers(),
            "planners": planners}


def dir_stats(path: str) -> tuple[int, int]:
    """(bytes, files) under ``path``."""
    size = files = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            try:
                size += os.path.getsize(os.path.join(root, n))
                files += 1
            except OSError:
                pass
    return size, files


def _count(path: str) -> int:
    """Batch files in a checkpoint log directory (``offsets``, ``commits``), .crc files left out."""
    try:
        return sum(1 for n in os.listdir(path) if not n.startswith("."))
    except OSError:
        return 0


class ProgressTail:
    """The trigger durations a member wrote to its progress file since the last read."""

    def __init__(self, path: str):
        self.path, self.pos = path, 0

    def read(self) -> list[float]:
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                chunk = f.read()
        except OSError:
            return []
        complete = chunk[: chunk.rfind("\n") + 1]
        self.pos += len(complete.encode())
        out = []
        for line in complete.splitlines():
            ms = json.loads(line).get("triggerMs")
            if ms is not None:
                out.append(float(ms))
        return out


class Sampler:
    """Every ``interval`` s on its own thread: each live member's processes, checkpoints and
    trigger p99, and the group's lag; appended to ``csv_path``. Faults are marked with
    :meth:`mark`."""

    def __init__(self, run: Run, csv_path: str, interval: float = 60.0, histogram_every: int = 10):
        self.run, self.csv_path, self.interval = run, csv_path, interval
        #: every this many rounds, each driver JVM's class histogram into histograms/ (0: never)
        self.histogram_every = histogram_every
        self._tails: dict[str, ProgressTail] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)
        self.rounds = 0
        with open(csv_path, "w", newline="") as f:
            write_rows(f, [], header=True)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _write(self, samples: list[Sample]) -> None:
        with self._lock, open(self.csv_path, "a", newline="") as f:
            write_rows(f, samples, header=False)

    def mark(self, fault: str) -> None:
        self._write([self._sample("fault", fault, 1.0)])

    def _sample(self, subject: str, metric: str, value: float) -> Sample:
        return Sample(time.monotonic() - self.run.t0, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      subject, metric, value)

    def sample_once(self) -> None:
        out: list[Sample] = []
        for m in list(self.run.members.values()):
            if not m.running():
                continue
            for role, pids in roles(m).items():
                stats = [s for s in (proc_stats(p) for p in pids) if s is not None]
                if role in ("workers", "planners"):
                    out.append(self._sample(f"{m.owner}/{role}", "count", len(stats)))
                if not stats:
                    continue
                if role == "driver_jvm":  # RSS read again after the histogram's full GC
                    texts = [t for t in (jvm_class_histogram(p) for p in pids) if t]
                    live = [mb for mb in map(histogram_total_mb, texts) if mb is not None]
                    if live:
                        out.append(self._sample(f"{m.owner}/{role}", "live_heap_mb", sum(live)))
                    if self.histogram_every and self.rounds % self.histogram_every == 0:
                        self._keep_histograms(m.owner, texts)
                    stats = [s for s in (proc_stats(p) for p in pids) if s is not None]
                out += [self._sample(f"{m.owner}/{role}", "rss_mb", sum(s.rss_mb for s in stats)),
                        self._sample(f"{m.owner}/{role}", "fds", sum(s.fds for s in stats)),
                        self._sample(f"{m.owner}/{role}", "threads", sum(s.threads for s in stats))]
            ck = os.path.join(self.run.dir, f"ck-{m.name}")
            size, files = dir_stats(ck)
            out += [self._sample(f"{m.name}/checkpoint", "bytes", size),
                    self._sample(f"{m.name}/checkpoint", "files", files),
                    self._sample(f"{m.name}/checkpoint", "offset_files", _count(os.path.join(ck, "offsets")))]
            tail = self._tails.setdefault(m.owner, ProgressTail(os.path.join(self.run.dir,
                                                                             f"{m.owner}.progress.jsonl")))
            durations = tail.read()
            out.append(self._sample(f"{m.owner}/trigger", "batches", len(durations)))
            p99 = percentile(durations, 99)
            if p99 is not None:
                out.append(self._sample(f"{m.owner}/trigger", "p99_ms", p99))
        marks = self.run.sampler.watermarks()
        committed = dict(self.run.sampler.last)
        if marks:
            end = sum(hi for _lo, hi in marks.values())
            done = sum(committed.get(p, lo) for p, (lo, _hi) in marks.items())
            out += [self._sample("group", "log_end", end), self._sample("group", "committed", done),
                    self._sample("group", "lag", end - done)]
        self._write(out)
        self.rounds += 1

    def _keep_histograms(self, owner: str, texts: list[str]) -> None:
        """``histograms/<owner>-<seconds into the run>.txt``: ``python -m soak --histograms DIR``
        compares each owner's first and last."""
        folder = os.path.join(self.run.dir, "histograms")
        os.makedirs(folder, exist_ok=True)
        at = int(time.monotonic() - self.run.t0)
        for text in texts:
            with open(os.path.join(folder, f"{owner}-{at:06d}.txt"), "w") as f:
                f.write(text)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # noqa: BLE001 - one failed round is reported, the next one runs
                self.run.event(f"soak sampler: {type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
