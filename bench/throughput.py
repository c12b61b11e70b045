"""Read throughput and CPU per record of groupkafka against Spark's own Kafka source
(``format("kafka")``), side by side in one run on the same records, plus a count-only ceiling.

Each workload is one topic (same partitions for every reader); in each round the two readers
run one after the other in the same Spark session (``local[N]``), ``Trigger.AvailableNow`` into
the ``noop`` sink, with the same ``maxOffsetsPerTrigger`` and ``startingOffsets=earliest``; the
order flips every round so that a drift in the machine's load hits both. Best of ``--rounds``.

  count-only ceiling:  one confluent-kafka consumer that only counts records (what one client
                       gets out of this broker);
  Spark's source:      ``format("kafka")``, its jars from ../shared/kafka/lib/spark-kafka/ and
                       lib/clients/ (skipped, saying so, when they are missing);
  groupkafka:          ``format("groupkafka")``;
  Python source floor: ``format("benchfloor")`` (_floor_source.py), a Python streaming source
                       that yields the same rows from memory: what Spark itself costs any
                       Python data source (its per-query runner, the Python workers, the Arrow
                       hand-off), so the bound on what groupkafka can reach.

Per reader: the whole run (``start()`` to termination: group join, first plan, final commit),
the time inside the micro-batches' ``addBatch`` (the executors' fetch into the sink) and the
CPU seconds per million records of the bench's process tree (Spark's JVM, its Python workers,
the streaming source's runner; the broker excluded, see _common.py), and how much of it was
Spark's JVM and how much Spark's Python processes. Ratios are groupkafka over
Spark's source: throughput (higher is better), CPU per record (lower is better). The load
average is printed with every run: figures from a loaded machine are noise, not results.

    python bench/throughput.py [--workloads 100,1k,100-lz4,1k-lz4] [--scale 1.0] [--rounds 2]
                               [--partitions 8] [--cores 2] [--max-offsets-per-trigger 250000]
                               [--backend kafka]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    FLOOR,
    OURS,
    SPARK,
    Meter,
    count_only,
    load_average,
    per_million,
    produce,
    side_by_side_readers,
    spark_session,
)
from _floor_source import register as register_floor  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402

#: name -> (value bytes, records at --scale 1, producer compression)
WORKLOADS = {
    "100": (100, 1_000_000, "none"),
    "1k": (1000, 300_000, "none"),
    "100-lz4": (100, 1_000_000, "lz4"),
    "1k-lz4": (1000, 300_000, "lz4"),
}


@dataclass(frozen=True)
class Run:
    reader: str
    records: int
    wall: float  # start() to termination
    add_batch: float  # sum of addBatch over the batches with data
    triggers: float  # sum of triggerExecution over every batch
    batches: int
    cpu: float | None
    load: str
    jvm: float = 0.0  # CPU seconds of Spark's JVM
    python: float = 0.0  # CPU seconds of Spark's Python processes (workers, the source's runner)
    machine: float = 0.0  # CPU seconds the whole machine was busy (broker and all)
    phases: tuple[tuple[str, float], ...] = ()  # ms per trigger by Spark's phase (steady_state.trigger_phases)

    @property
    def rate(self) -> float:
        return self.records / self.wall

    @property
    def batch_rate(self) -> float:
        return self.records / self.add_batch

    @property
    def outside(self) -> float:
        """Seconds of the run outside micro-batches: start, group join, final commit, stop."""
        return self.wall - self.triggers


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread, librdkafka's included
    return r.ru_utime + r.ru_stime


def _count_all(bootstrap: str, topic: str, partitions: int, out) -> None:
    cpu0, t0 = _cpu_self(), time.perf_counter()
    got = count_only(bootstrap, topic, partitions, group="bench-ceiling")
    out.put((time.perf_counter() - t0, _cpu_self() - cpu0, got))


def ceiling(bootstrap: str, topic: str, partitions: int, n: int, load: str) -> Run:
    """One confluent-kafka consumer (its own process) counting every record of the topic."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_count_all, args=(bootstrap, topic, partitions, out))
    proc.start()
    wall, cpu, got = out.get(timeout=600)
    proc.join(60)
    assert got == n, f"count-only read {got} of {n}"
    return Run("librdkafka count-only", n, wall, wall, wall, 0, cpu, load)


def query(spark, reader: str, bootstrap: str, topic: str, n: int, max_offsets: int, session_ms: int,
          exclude: list[int], partitions: int, value_size: int) -> Run:
    """One AvailableNow query of ``reader`` over the whole topic into the noop sink."""
    if reader == FLOOR:
        r = (spark.readStream.format("benchfloor").option("rows", str(n)).option("partitions", str(partitions))
             .option("valueSize", str(value_size)).option("maxOffsetsPerTrigger", str(max_offsets)))
    else:
        r = (spark.readStream.format("kafka" if reader == SPARK else "groupkafka")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(max_offsets)))
    if reader == OURS:
        r = r.option("kafka.group.id", f"bench-{time.time_ns()}").option("kafka.session.timeout.ms", str(session_ms))
    df = r.load()
    load = load_average()
    with tempfile.TemporaryDirectory() as ck, Meter(exclude) as m:
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
    progress = q.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == n, f"{reader} read {rows} of {n}"
    with_data = [p for p in progress if p["numInputRows"]]
    add_batch = sum(p["durationMs"].get("addBatch", 0) for p in with_data) / 1000
    triggers = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return Run(reader, n, m.wall, add_batch, triggers, len(with_data), m.cpu, f"{load} -> {load_average()}",
               m.by_kind["jvm"], m.by_kind["python"])


def best(runs: list[Run]) -> dict[str, float]:
    """Best of the rounds, per measure (fastest whole run, fastest addBatch, least CPU)."""
    return {"wall": min(r.wall for r in runs), "rate": max(r.rate for r in runs),
            "batch_rate": max(r.batch_rate for r in runs), "outside": min(r.outside for r in runs),
            "cpu_m": min(per_million(r.cpu, r.records) for r in runs)}


def _print_runs(runs: list[Run]) -> None:
    print(f"  {'reader':<24}{'whole s':>9}{'rec/s':>11}{'addBatch s':>12}{'rec/s':>11}{'outside s':>11}"
          f"{'batches':>9}{'CPU-s/M':>9}{'of it JVM':>10}{'Python':>8}   load (1/5/15 min) before -> after")
    for r in runs:
        print(f"  {r.reader:<24}{r.wall:>9.2f}{r.rate:>11,.0f}{r.add_batch:>12.2f}{r.batch_rate:>11,.0f}"
              f"{r.outside:>11.2f}{r.batches:>9}{per_million(r.cpu, r.records):>9.2f}"
              f"{per_million(r.jvm, r.records):>10.2f}{per_million(r.python, r.records):>8.2f}   {r.load}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every workload's record count")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each reader per workload (best of)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--cores", type=int, default=2, help="the Spark session's local[N]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=250_000, help="the same for both readers")
    ap.add_argument("--backend", default="kafka", choices=["kafka", "mock"],
                    help="kafka (Apache Kafka from ../shared/kafka; the default) or mock (groupkafka only)")
    args = ap.parse_args(argv)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    chosen = side_by_side_readers(args.backend)
    if chosen is None:
        return 0
    readers, jars = chosen
    spark = spark_session(args.cores, jars)
    register_floor(spark)
    readers = [*readers, FLOOR]
    topics = {f"bench-{w}": args.partitions for w in names}
    summary, floors = [], []
    with DevBroker(args.backend, topics=topics) as broker:
        exclude = [broker.pid] if broker.pid else []
        session = broker.recommended_session_timeout_ms
        print(f"{args.backend} broker, {args.partitions} partitions per topic, local[{args.cores}], both readers: "
              f"Trigger.AvailableNow -> noop, startingOffsets=earliest, maxOffsetsPerTrigger="
              f"{args.max_offsets_per_trigger:,}; best of {args.rounds}, order alternating")
        for i, w in enumerate(names):
            size, count, codec = WORKLOADS[w]
            n, topic = max(1, int(count * args.scale)), f"bench-{w}"
            t0 = time.perf_counter()
            produce(broker.bootstrap, topic, n, args.partitions, size, compression=codec)
            print(f"\n{w}: {n:,} records x {size} B, {codec} (produced in {time.perf_counter() - t0:.1f}s)")
            if i == 0:  # warm-up: JVM classes, Python workers, the first consumer of each side
                for reader in readers:
                    query(spark, reader, broker.bootstrap, topic, n, args.max_offsets_per_trigger, session, exclude,
                          args.partitions, size)
            runs = [ceiling(broker.bootstrap, topic, args.partitions, n, load_average())]
            for rnd in range(args.rounds):
                for reader in (readers if rnd % 2 == 0 else readers[::-1]):
                    runs.append(query(spark, reader, broker.bootstrap, topic, n, args.max_offsets_per_trigger,
                                      session, exclude, args.partitions, size))
            _print_runs(runs)
            ours = best([r for r in runs if r.reader == OURS])
            if SPARK in readers:
                theirs = best([r for r in runs if r.reader == SPARK])
                ratios = (ours["rate"] / theirs["rate"], ours["batch_rate"] / theirs["batch_rate"],
                          ours["cpu_m"] / theirs["cpu_m"])
                summary.append((w, n, size, codec, ours, theirs, ratios))
                print(f"  groupkafka / Spark's source (best of {args.rounds}): throughput whole run {ratios[0]:.2f}x, "
                      f"inside addBatch {ratios[1]:.2f}x, CPU per record {ratios[2]:.2f}x "
                      f"(goal: throughput >= 1.5x, CPU <= 0.8x); outside micro-batches "
                      f"{ours['outside']:.2f}s vs {theirs['outside']:.2f}s")
            ceil = runs[0].rate
            floor = best([r for r in runs if r.reader == FLOOR])
            floors.append((w, ours, floor))
            print(f"  groupkafka whole run / count-only ceiling: {ours['rate'] / ceil:.2f}")
            print(f"  groupkafka / Python source floor: whole run {ours['rate'] / floor['rate']:.2f}, inside addBatch "
                  f"{ours['batch_rate'] / floor['batch_rate']:.2f}, CPU per record {ours['cpu_m'] / floor['cpu_m']:.2f}"
                  f"x; outside micro-batches {ours['outside']:.2f}s vs {floor['outside']:.2f}s")
        spark.stop()  # before the broker: the workers' cached consumers would retry it
    if summary:
        print(f"\nsummary, groupkafka / Spark's source, best of {args.rounds} (load at the end: {load_average()})")
        print(f"  {'workload':<10}{'records':>11}{'rec/s ours':>12}{'rec/s Spark':>13}{'whole':>8}{'addBatch':>10}"
              f"{'CPU/rec':>9}{'goal met':>10}")
        for w, n, _size, _codec, ours, theirs, (whole, inside, cpu) in summary:
            met = "yes" if whole >= 1.5 and cpu <= 0.8 else "no"
            print(f"  {w:<10}{n:>11,}{ours['rate']:>12,.0f}{theirs['rate']:>13,.0f}{whole:>7.2f}x{inside:>9.2f}x"
                  f"{cpu:>8.2f}x{met:>10}")
        print(f"  geometric mean of whole-run ratios: {statistics.geometric_mean([s[6][0] for s in summary]):.2f}x")
        print("\nthe Python source floor (no Kafka: Spark's own cost of a Python streaming source) / Spark's source,"
              " and groupkafka / the floor")
        print(f"  {'workload':<10}{'floor rec/s':>13}{'floor/Spark whole':>19}{'CPU/rec':>9}"
              f"{'ours/floor whole':>18}{'addBatch':>10}{'CPU/rec':>9}")
        theirs_by = {w: theirs for w, _n, _s, _c, _o, theirs, _r in summary}
        for w, ours, floor in floors:
            theirs = theirs_by[w]
            print(f"  {w:<10}{floor['rate']:>13,.0f}{floor['rate'] / theirs['rate']:>18.2f}x"
                  f"{floor['cpu_m'] / theirs['cpu_m']:>8.2f}x{ours['rate'] / floor['rate']:>17.2f}x"
                  f"{ours['batch_rate'] / floor['batch_rate']:>9.2f}x{ours['cpu_m'] / floor['cpu_m']:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
