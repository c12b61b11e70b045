"""`make demo`: one consumer group, seen.

A dev broker and a producer writing continuously; query A (groupkafka, cooperative-sticky)
joins the group; query B (another Spark process) joins the same group; a plain librdkafka
consumer joins; B stops; the consumer leaves. Each step waits for the group to settle, then
for ``--dwell`` seconds. Afterwards the run is rendered from what the members recorded:

  ownership.png  partitions by time, coloured by owner, rebalances marked, lag per member beneath
  summary.txt    records produced, read by each member, lost, duplicates, ownership per phase
  data.json      the recorded events, intervals, lag samples and counts behind both

    python -m demo [--out build/demo] [--dwell 20] [--rate 200] [--partitions 6] [--backend mock]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from demo import timeline as tl
from demo.workload import LagSampler, PlainConsumer, SeqProducer
from spark_groupsource.devbroker import DevBroker
from spark_groupsource.logs import LOG_LEVEL_ENV

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = ("A", "B", "consumer")


class DemoError(RuntimeError):
    """A step of the demo did not happen within its time limit."""


@dataclass(frozen=True)
class DemoConfig:
    out: Path
    partitions: int = 6
    rate: float = 200.0  # records/s
    dwell_s: float = 20.0  # steady time after each step settled
    backend: str = "mock"
    session_ms: int = 10_000
    step_timeout_s: float = 240.0  # a Spark process starting on a loaded 2-core machine is slow


def wait_for(check: Callable[[], bool], timeout: float, what: str, alive: Callable[[], None] = lambda: None) -> float:
    """Poll ``check`` until true; returns when it became true. ``alive`` raises if a member died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        if check():
            return time.time()
        time.sleep(0.25)
    raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")


class QueryProcess:
    """One Spark query (``python -m demo.member``) in its own process group, stderr to a log."""

    def __init__(self, cfg: DemoConfig, name: str, bootstrap: str, topic: str, group: str):
        self.name, self.group, self.topic = name, group, topic
        self.log_path = cfg.out / f"{name}.log"
        options = {"assignor": "cooperative-sticky", "kafka.auto.offset.reset": "earliest",
                   "kafka.session.timeout.ms": str(cfg.session_ms), "kafka.heartbeat.interval.ms": "1000"}
        if cfg.backend == "mock":
            # it rejects a follower SyncGroup arriving after the leader's, and sometimes never
            # answers a SyncGroup (time out and rejoin sooner): the same settings as the tests
            options |= {"leaderSyncDelayMs": "1000", "kafka.request.timeout.ms": "5000"}
        cmd = [sys.executable, "-m", "demo.member", "--bootstrap", bootstrap, "--topic", topic,
               "--group", group, "--name", name, "--out", str(cfg.out)]
        for k, v in options.items():
            cmd += ["-o", f"{k}={v}"]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               LOG_LEVEL_ENV: "INFO", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.exited_at: float | None = None

    def events(self) -> list[tl.OwnershipEvent]:
        with open(self.log_path, errors="replace") as f:
            return tl.parse_connector_log(f, self.name, self.group, self.topic)

    def owned(self) -> frozenset[int]:
        return tl.owned_now(self.events())

    def has_read(self) -> bool:
        rows = self.log_path.with_name(f"{self.name}.rows.jsonl")
        return rows.exists() and rows.stat().st_size > 0

    def check_alive(self) -> None:
        if self.exited_at is None and self.proc.poll() is not None:
            raise DemoError(f"query {self.name} exited early with code {self.proc.returncode}; "
                            f"see {self.log_path}")

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM to the member's Python process: it stops the query (the runner leaves the
        group) and exits. Its whole process group is killed if it does not within ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.exited_at is None:
            self.exited_at = time.time()
        self._log.close()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)


def run(cfg: DemoConfig) -> dict:
    """Run the scenario; returns the recorded data (also written to ``data.json``)."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    for old in cfg.out.glob("*"):  # an earlier run's files and query checkpoints
        if old.is_dir() and old.name.endswith(".checkpoint"):
            shutil.rmtree(old)
        elif old.is_file():
            old.unlink()
    topic, group = "demo", f"demo-{uuid.uuid4().hex[:8]}"
    everything = frozenset(range(cfg.partitions))
    phases: list[tuple[float, str]] = []
    queries: dict[str, QueryProcess] = {}
    consumer: PlainConsumer | None = None
    error: str | None = None

    def alive() -> None:
        for q in queries.values():
            q.check_alive()

    def owned() -> dict[str, frozenset[int]]:
        out = {name: q.owned() for name, q in queries.items() if q.exited_at is None}
        if consumer is not None and not any(e.kind == "left" for e in consumer.events):
            out["consumer"] = frozenset(consumer.owned)
        return out

    def split_among(names: Sequence[str], reading: str | None = None) -> Callable[[], bool]:
        """The partitions are split among ``names`` only (each owns some, none twice), and
        ``reading`` (a member that just joined) has read records since."""
        def check() -> bool:
            now = owned()
            sets = [now.get(n, frozenset()) for n in names]
            others = [s for n, s in now.items() if n not in names]
            split = (all(sets) and frozenset().union(*sets) == everything
                     and sum(map(len, sets)) == cfg.partitions and not any(others))
            if reading == "consumer":
                return split and bool(consumer and consumer.reads)
            return split and (reading is None or queries[reading].has_read())
        return check

    def step(label: str) -> None:
        phases.append((time.time(), label))
        print(f"[{time.strftime('%H:%M:%S')}] {label}", flush=True)

    with DevBroker(cfg.backend, topics={topic: cfg.partitions}) as broker:
        producer = SeqProducer(broker.bootstrap, topic, cfg.partitions, cfg.rate).start()
        sampler = LagSampler(broker.bootstrap, topic, group, cfg.partitions).start()
        t_start = time.time()
        try:
            step("A starts")
            queries["A"] = QueryProcess(cfg, "A", broker.bootstrap, topic, group)
            wait_for(split_among(["A"], "A"), cfg.step_timeout_s, "query A to own every partition and read", alive)
            time.sleep(cfg.dwell_s)

            step("B starts")
            queries["B"] = QueryProcess(cfg, "B", broker.bootstrap, topic, group)
            wait_for(split_among(["A", "B"], "B"), cfg.step_timeout_s,
                     "A and B to split the partitions and B to read", alive)
            time.sleep(cfg.dwell_s)

            step("consumer joins")
            consumer = PlainConsumer(broker.bootstrap, topic, group, session_ms=cfg.session_ms).start()
            wait_for(split_among(["A", "B", "consumer"], "consumer"), cfg.step_timeout_s,
                     "A, B and the consumer to split the partitions and the consumer to read", alive)
            time.sleep(cfg.dwell_s)

            step("B stops")
            queries["B"].stop()
            wait_for(split_among(["A", "consumer"]), cfg.step_timeout_s,
                     "A and the consumer to take B's partitions", alive)
            time.sleep(cfg.dwell_s)

            step("consumer leaves")
            consumer.stop()
            wait_for(split_among(["A"]), cfg.step_timeout_s, "A to own every partition again", alive)
            time.sleep(cfg.dwell_s)

            step("producer stops")
            producer.stop()

            def caught_up() -> bool:
                s = sampler.samples[-1:] or [None]
                return s[0] is not None and all(s[0].committed.get(p) == e for p, e in s[0].ends.items())

            wait_for(caught_up, cfg.step_timeout_s, "the group to commit every record", alive)
            time.sleep(1.0)
        except DemoError as exc:
            error = str(exc)
            print(f"demo: {error}", file=sys.stderr)
        finally:
            producer.stop()
            if consumer is not None and not any(e.kind == "left" for e in consumer.events):
                consumer.stop()
            for q in queries.values():
                q.stop()
            t_end = time.time()
            sampler.stop()
    data = analyse(cfg, topic, group, t_start, t_end, phases, queries, consumer, producer, sampler)
    data["error"] = error
    (cfg.out / "data.json").write_text(json.dumps(data, indent=1))
    return data


def analyse(cfg, topic, group, t_start, t_end, phases, queries, consumer, producer, sampler) -> dict:
    events = [e for q in queries.values() for e in q.events()] + (consumer.events if consumer else [])
    exits = {name: q.exited_at for name, q in queries.items() if q.exited_at is not None}
    ivals = tl.intervals(events, t_end, exits)
    reads: dict[str, list[tuple[float, int]]] = {}
    progress: dict[str, list[dict]] = {}
    for name in queries:
        reads[name] = [(r["t"], r["seq"]) for r in _jsonl(cfg.out / f"{name}.rows.jsonl")]
        progress[name] = _jsonl(cfg.out / f"{name}.progress.jsonl")
    if consumer is not None:
        reads["consumer"] = list(consumer.reads)
    stats = tl.read_stats(producer.delivered, reads)
    outside = tl.planned_outside_ownership(progress, ivals, topic)
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "topic": topic, "group": group, "t_start": t_start, "t_end": t_end,
        "phases": phases,
        "events": [{"t": e.t, "member": e.member, "kind": e.kind, "partitions": sorted(e.partitions)}
                   for e in sorted(events, key=lambda e: e.t)],
        "intervals": [asdict(i) for i in ivals],
        "exits": exits,
        "rebalances": tl.changes(events),
        "stats": {**asdict(stats), "lost": list(stats.lost)},
        "producer_errors": producer.errors,
        "batches": {m: len(p) for m, p in progress.items()},
        "planned_outside_ownership": outside,
        "lag": tl.lag_by_member(sampler.samples, ivals, [m for m in MEMBERS if m in reads]),
        "lag_sample_errors": sampler.errors,
        "samples": [{"t": x.t, "committed": x.committed, "ends": x.ends} for x in sampler.samples],
    }


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a kill; what it held is counted as not read
    return out


def summary_text(data: dict) -> str:
    s, t0 = data["stats"], data["t_start"]
    cfg = data["config"]
    names = {"A": "query A", "B": "query B", "consumer": "librdkafka consumer"}
    ivals = [tl.Interval(**i) for i in data["intervals"]]
    lines = [
        f"groupkafka demo: group {data['group']}, topic {data['topic']} ({cfg['partitions']} partitions), "
        f"{cfg['backend']} broker, {datetime.fromtimestamp(t0, UTC):%Y-%m-%d %H:%M} UTC",
        f"duration: {data['t_end'] - t0:.0f} s; ownership changes: {len(data['rebalances'])}",
        f"records produced: {s['produced']:,} (at {cfg['rate']:.0f}/s)",
        "read by: " + ", ".join(f"{names.get(m, m)} {n:,}" for m, n in s["read_by"].items()),
        f"lost: {len(s['lost'])}",
        f"duplicates: {s['duplicates']:,}" + (
            " (read again after a handover: " + ", ".join(f"{names.get(m, m)} {n:,}" for m, n in s["duplicates_by"].items()) + ")"
            if s["duplicates"] else ""),
        f"micro-batches planned outside the query's ownership: {len(data['planned_outside_ownership'])}",
        "ownership at the end of each phase:",
    ]
    phases = data["phases"]
    for i, (t, label) in enumerate(phases):
        until = phases[i + 1][0] if i + 1 < len(phases) else data["t_end"]
        at = until - 0.5
        who: dict[str, list[int]] = {}
        for p in range(cfg["partitions"]):
            who.setdefault(tl.owner_at(ivals, p, at) or "nobody", []).append(p)
        desc = "  ".join(f"{names.get(m, m)}: {','.join(map(str, ps))}" for m, ps in sorted(who.items()))
        lines.append(f"  {t - t0:6.1f} s  {label:<16} {desc}")
    if data.get("error"):
        lines.append(f"FAILED: {data['error']}")
    return "\n".join(lines) + "\n"


def render(data: dict, path: Path) -> None:
    from demo.plot import render as draw

    s = data["stats"]
    title = (f"group {data['group']}: {s['produced']:,} records produced, "
             + ", ".join(f"{m} read {n:,}" for m, n in s["read_by"].items())
             + f"; lost {len(s['lost'])}, duplicates {s['duplicates']}")
    draw(path, t0=data["t_start"], partitions=data["config"]["partitions"],
         ivals=[tl.Interval(**i) for i in data["intervals"]], phases=data["phases"],
         rebalances=data["rebalances"], lag=data["lag"], title=title,
         members=[m for m in MEMBERS if m in s["read_by"]])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "demo")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=200.0, help="records/s (default 200)")
    ap.add_argument("--dwell", type=float, default=20.0, help="seconds of steady state per step (default 20)")
    ap.add_argument("--backend", default="mock", choices=["mock", "tansu"])
    ap.add_argument("--session-ms", type=int, default=None,
                    help="group session timeout (default 10000 on the mock, 6000 on tansu)")
    args = ap.parse_args(argv)
    cfg = DemoConfig(out=args.out.resolve(), partitions=args.partitions, rate=args.rate, dwell_s=args.dwell,
                     backend=args.backend,
                     session_ms=args.session_ms or (10_000 if args.backend == "mock" else 6_000))
    data = run(cfg)
    text = summary_text(data)
    (cfg.out / "summary.txt").write_text(text)
    render(data, cfg.out / "ownership.png")
    print(text, end="")
    print(f"picture: {cfg.out / 'ownership.png'}\nsummary: {cfg.out / 'summary.txt'}\n"
          f"data:    {cfg.out / 'data.json'}")
    return 1 if data["error"] or data["stats"]["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
