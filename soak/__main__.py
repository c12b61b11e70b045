"""``python -m soak`` (``make soak``): a long run on a 3-node Apache Kafka cluster with the chaos
harness: two queries and a Java consumer in one group, a producer at a fixed rate, one chaos
fault every ``--fault-every`` minutes (in turn: broker kill -9, member kill -9, rolling
restart, broker SIGSTOP), a sample of every member's processes, checkpoints, triggers and the
group's lag every minute into ``samples.csv``; then the chaos verdict (nothing lost, committed
offsets never back, duplicates within the promise, committed = log end) and the soak's rules
(soak/rules.py: files and threads flat after warm-up, RSS slope and the JVM's live-heap floor
bounded), a table and a plot.

    python -m soak --minutes 15                              # make soak
    python -m soak --minutes 120 --kafka-home ../shared/kafka-latest   # the long run, by hand
    python -m soak --minutes 15 --judge RUN/soak/samples.csv          # the series rules again
    python -m soak --histograms RUN/soak/histograms     # what each driver JVM's live heap grew by

Exit code 0 when every rule held, 1 when one did not, 2 on bad arguments. SIGTERM or SIGINT
stops the run (members, producer, Java consumer, brokers; a second signal kills them at once),
prints the verdict of what ran and exits 143 or 130.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable

from chaos import kafka_faults
from chaos.procs import Interrupt
from chaos.report import table
from chaos.run import Run
from chaos.traffic import java_missing
from soak.probe import Sampler
from soak.rules import (
    default_warmup_s,
    histogram_growth,
    histogram_total_mb,
    judge,
    not_judged,
    read_rows,
    series_table,
    slope_per_hour,
    summary,
    verdict_word,
)

#: a (re)started member's first batch: Spark took 250 s to start one at load 60 on 2 cores (the
#: chaos suite's 240 s bound failed there); a slow start is the machine's, a member never reading is not
READING_S = 900.0


def member_kill9(r: Run, name: str) -> None:
    """kill -9 of the member's process tree and its restart from its checkpoint (as driver_kill9)."""
    r.kill9(r.members[name])
    r.sleep(2)
    r.wait_reading(r.start(name), timeout=READING_S)


#: the faults in turn: name -> what it does to the run (the k-th member fault hits "a" or "b")
FAULTS: dict[str, Callable[[Run, int], None]] = {
    "broker_kill9": lambda r, k: kafka_faults.crash_leader(r, down_s=20),
    "member_kill9": lambda r, k: member_kill9(r, "ab"[k % 2]),
    "rolling_restart": lambda r, k: kafka_faults.restart_each_broker(r),
    "broker_sigstop": lambda r, k: kafka_faults.freeze_leader(r),
}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=15.0, help="length of the run once every member reads")
    p.add_argument("--fault-every", type=float, default=10.0, metavar="MINUTES", help="one fault this often")
    p.add_argument("--faults", default=",".join(FAULTS), help=f"the faults in turn (of {', '.join(FAULTS)})")
    p.add_argument("--rate", type=float, default=200.0, help="records per second")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--sample-every", type=float, default=60.0, metavar="SECONDS")
    p.add_argument("--warmup", type=float, default=None, metavar="MINUTES",
                   help="samples of each series this long after its first are not judged (default: a fifth "
                   "of the run, 2 to 15 minutes)")
    p.add_argument("--kafka-home", metavar="DIR", help="the Apache Kafka installation (default: as make chaos-kafka)")
    p.add_argument("--workdir", help="where the run's directory goes (default: a new temp dir)")
    p.add_argument("--judge", metavar="CSV", help="judge a run's samples.csv again (the series rules only: the "
                   "chaos row is in its verdict.json) and exit; --minutes or --warmup as in that run")
    p.add_argument("--histograms", metavar="DIR", help="each driver JVM's live heap at each class histogram "
                   "of a run (its histograms/ directory), its slope, and the classes whose live bytes grew most "
                   "between its first and last histogram, and exit")
    p.add_argument("--quiet-timeout", type=float, default=300.0,
                   help="seconds to wait after production for the commits to reach the log end")
    return p.parse_args(argv)


def _print_histogram_growth(folder: str) -> int:
    """Per driver JVM incarnation: its live heap at each kept histogram (seconds into the run from
    the file name) with their least-squares slope, and the classes that grew most from its first
    histogram to its last."""
    by_owner: dict[str, list[str]] = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".txt"):
            by_owner.setdefault(name.rsplit("-", 1)[0], []).append(name)
    for owner, names in by_owner.items():
        texts = []
        for name in names:
            with open(os.path.join(folder, name)) as f:
                texts.append(f.read())
        live = [(float(name.rsplit("-", 1)[1][:-4]), histogram_total_mb(text)) for name, text in zip(names, texts, strict=True)]
        points = [(t, mb) for t, mb in live if mb is not None]
        slope = slope_per_hour(points)
        print(f"{owner}: live heap " + ", ".join(f"{mb:.1f} MB at {t / 60:.0f} min" for t, mb in points)
              + ("" if slope is None else f"; slope {slope:+.1f} MB/h"))
        if len(names) < 2:
            continue
        print(f"  grew most, {names[0]} -> {names[-1]}:")
        for cls, nbytes, n in histogram_growth(texts[0], texts[-1]):
            print(f"  {nbytes / 2**20:+9.2f} MB {n:+9d}  {cls}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        print(f"--faults: unknown {unknown} (known: {', '.join(FAULTS)})", file=sys.stderr)
        return 2
    warmup_s = 60.0 * args.warmup if args.warmup is not None else default_warmup_s(args.minutes)
    if args.histograms:
        return _print_histogram_growth(args.histograms)
    if args.judge:
        verdicts = judge(read_rows(args.judge), warmup_s)
        print(series_table(verdicts))
        failed = [v for v in verdicts if v.judged and not v.ok]
        print(f"\nseries rules (warm-up {warmup_s / 60:g} min): "
              + verdict_word(not failed, [f"{v.subject} {v.metric}: {v.what}" for v in failed], not_judged(verdicts),
                             "held"))
        return 1 if failed else 0
    from chaos.__main__ import use_kafka_home
    from spark_groupsource.devbroker import DevBrokerError, kafka_missing

    try:
        label = use_kafka_home(args.kafka_home) if args.kafka_home else None
    except DevBrokerError as exc:
        print(f"--kafka-home: {exc}", file=sys.stderr)
        return 2
    missing = kafka_missing() or java_missing()
    if missing:
        print(f"soak: needs Apache Kafka and its java-consumer.sh: {missing}", file=sys.stderr)
        return 2
    if label is None:
        from spark_groupsource.devbroker._kafka import check

        label = check().removeprefix("kafka: OK ")
    stop = Interrupt().install()  # a verdict of what ran, nothing left running
    workdir = args.workdir or tempfile.mkdtemp(prefix="groupkafka-soak-")
    print(f"soak: {args.minutes:g} min, a fault every {args.fault_every:g} min ({', '.join(faults)}), "
          f"{args.rate:g} records/s, {label}, 3 nodes; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
          flush=True)
    r = Run("soak", workdir, partitions=args.partitions, brokers=3, backend="kafka")
    stop.hurry = r.kill_all
    csv_path = os.path.join(r.dir, "samples.csv")
    print(f"soak: run directory {r.dir}", flush=True)
    r.member_args = {"max_seconds": args.minutes * 60 + 3600, "progress_dir": r.dir}
    sampler = Sampler(r, csv_path, args.sample_every)
    error: BaseException | None = None
    done: list[str] = []
    try:
        r.produce(rate=args.rate, seconds=args.minutes * 60 + 3600)
        a, b = r.start("a"), r.start("b")
        r.plain_member("c")
        r.wait_reading(a, timeout=READING_S)
        r.wait_reading(b, timeout=READING_S)
        sampler.start()
        start = time.monotonic()
        r.event(f"soak: every member reads; {args.minutes:g} min from now")
        next_fault = start + 60 * args.fault_every
        while time.monotonic() < start + 60 * args.minutes:
            if time.monotonic() >= next_fault:
                name = faults[len(done) % len(faults)]
                sampler.mark(name)
                r.event(f"soak: fault {len(done) + 1}: {name}")
                print(f"soak: {(time.monotonic() - start) / 60:.1f} min: {name}", flush=True)
                FAULTS[name](r, sum(1 for d in done if d == name))
                done.append(name)
                next_fault += 60 * args.fault_every
            time.sleep(1)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported in the verdict; finish stops everything
        error = exc
    if sampler.started:
        with contextlib.suppress(Exception):  # the rounds already written are judged
            sampler.sample_once()
        sampler.close()
    try:
        row = r.finish(args.quiet_timeout, error)
    except KeyboardInterrupt:  # the first signal came during the stop itself: nothing to judge
        r.kill_all()
        r.broker.stop()
        print(f"soak: stopped by {stop.name} while stopping; no verdict (run directory {r.dir})", flush=True)
        return stop.exit_code
    verdicts = judge(read_rows(csv_path), warmup_s)
    failed = [v for v in verdicts if v.judged and not v.ok]
    ok = row.ok and row.reached_end is True and not failed
    print()
    print(table([row]))
    print()
    print(series_table(verdicts))
    print()
    for k, v in summary(read_rows(csv_path)).items():
        print(f"- {k}: {v:g}")
    png = os.path.join(r.dir, "soak.png")
    try:
        from soak.plot import plot

        plot(csv_path, png)
        print(f"\nplot: {png} (again: .venv/bin/python -m soak.plot {csv_path})")
    except Exception as exc:  # noqa: BLE001 - the verdict stands without the plot
        print(f"\nplot failed: {type(exc).__name__}: {exc}")
    reasons = ([*row.reasons] + (["committed offsets did not reach the log end"] if row.reached_end is not True else [])
               + [f"{v.subject} {v.metric}: {v.what}" for v in failed])
    unjudged = not_judged(verdicts)
    with open(os.path.join(r.dir, "verdict.json"), "w") as f:
        json.dump({"ok": ok, "minutes": args.minutes, "faults": done, "warmup_s": warmup_s, "kafka": label,
                   "row": row.to_json(), "reasons": reasons, "not_judged": unjudged,
                   "series": [{**v.__dict__, "what": v.what} for v in verdicts]}, f, indent=1)
    print(f"\nsoak: {verdict_word(ok, reasons, unjudged)} ({len(done)} faults: {', '.join(done) or '-'}; "
          f"warm-up {warmup_s / 60:g} min; {sampler.rounds} sample rounds; {row.elapsed_s:.0f} s in all); "
          f"samples {csv_path}")
    return stop.exit_code or (0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
