"""Per-trigger driver cost of many small micro-batches, groupkafka against Spark's own Kafka
source (``format("kafka")``) side by side in one run.

A topic of 1,000 partitions gets a few records per trigger (a producer thread writes ``--rate``
records/s to random partitions throughout). Each reader in turn runs a query (processingTime
trigger, startingOffsets=latest, noop sink, local[N], the same Spark session); the order flips
every round; best of ``--rounds``. Every trigger groupkafka's driver asks the ends of all 1,000
partitions, commits the previous batch to the group and plans a range per partition with new
records (up to smallRangesPerTask small ranges per task); Spark's source lists the ends of all
partitions and plans a task per range. From Spark's
progress of each batch with data (mean ms):

  source driver:  latestOffset (the source's planning; groupkafka's group commit too when the
                  previous batch's commit is still to do) + walCommit (Spark's offset log, during
                  which Spark calls the source's commit of the previous batch)
  driver total:   the above + queryPlanning (input partitions) + getBatch + commitOffsets
  fetch:          addBatch (the executors' fetch into the sink)

A third reader, the Python source floor (``format("benchfloor")``, _floor_source.py: no Kafka,
offsets of as many partitions, rows at the same rate from memory), shows what Spark itself
spends per trigger on any Python streaming source (the runner's round trips, its offset logs).

    python bench/small_batches.py [--partitions 1000] [--rate 3] [--trigger-ms 1000] [--batches 20]
                                  [--rounds 2] [--backend kafka] [--max-partitions N]
                                  [--variant KEY=VALUE,...] [--readers spark,groupkafka,floor]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    FLOOR,
    OURS,
    SPARK,
    Meter,
    load_average,
    produce,
    side_by_side_readers,
    spark_session,
)
from _floor_source import register as register_floor  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402

WARMUP_BATCHES = 5
DRIVER_PARTS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "commitOffsets")
#: from latestOffset to the end of the commit, Spark's own planning (queryPlanning) excluded:
#: latestOffset (the source's planning; groupkafka commits the previous batch to the group
#: there), getBatch, walCommit (Spark's offset log; Spark calls the source's commit of the
#: previous batch in it) and commitOffsets (Spark's commit log)
SOURCE_PARTS = ("latestOffset", "getBatch", "walCommit", "commitOffsets")
#: groupkafka with ``--max-partitions`` (a reader only when that is given)
PACKED = "groupkafka, maxPartitions"
#: groupkafka with the options of ``--variant`` (a reader only when that is given)
VARIANT = "groupkafka with "


def trickle(bootstrap: str, topic: str, partitions: int, rate: float, stop: threading.Event) -> None:
    """``rate`` records/s of 100 B to random partitions until ``stop``."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    rng, sent, t0 = random.Random(7), 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - t0) * rate)
        for i in range(sent, due):
            p.produce(topic, value=b"v" * 100, key=b"k%d" % i, partition=rng.randrange(partitions))
        sent = max(sent, due)
        p.poll(0.02)
    p.flush(30)


def _wait_batches(q, after: int, n: int, deadline: float) -> int:
    """Wait until ``n`` batches with data completed after batch ``after``; the last one's id."""
    while time.monotonic() < deadline:
        done = sorted(p["batchId"] for p in q.recentProgress if p["batchId"] > after and p["numInputRows"])
        if len(done) >= n:
            return done[n - 1]
        time.sleep(1.0)
    return max((p["batchId"] for p in q.recentProgress), default=after)


def _partitions_read(progress: dict) -> int:
    """Partitions with new records in the batch (a range each): groupkafka's end offset
    holds the ranges; Spark's source has ``{topic: {partition: offset}}`` at start and end."""
    src = progress["sources"][0]
    start, end = (json.loads(x) if isinstance(x, str) else x for x in (src["startOffset"], src["endOffset"]))
    if "o" in end:  # the Python source floor: a position per partition
        return sum(1 for lo, hi in zip(start["o"], end["o"], strict=True) if hi > lo)
    if "ranges" in end:
        return sum(1 for parts in end["ranges"].values() for lo, hi in parts.values() if hi > lo)
    return sum(1 for t, parts in end.items() for p, hi in parts.items() if hi > (start or {}).get(t, {}).get(p, hi))


def measure(spark, reader: str, bootstrap: str, topic: str, batches: int, trigger_ms: int, session_ms: int,
            exclude: list[int], partitions: int, rate: float, max_partitions: int | None = None) -> dict:
    """Run ``reader``'s query (processingTime trigger, startingOffsets=latest, noop sink) while
    the trickle goes on: wait for its first batch with data and the warm-up, then measure
    ``batches`` batches with data."""
    if reader == FLOOR:  # no Kafka: the same partitions and rate, rows from memory
        r = (spark.readStream.format("benchfloor").option("partitions", str(partitions)).option("rate", str(rate))
             .option("valueSize", "100"))
    else:
        r = (spark.readStream.format("kafka" if reader == SPARK else "groupkafka")
             .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "latest"))
    if reader in (OURS, PACKED) or reader.startswith(VARIANT):
        r = (r.option("kafka.group.id", f"bench-small-{time.time_ns()}")
             .option("kafka.session.timeout.ms", str(session_ms)))
    if reader == PACKED:
        r = r.option("maxPartitions", str(max_partitions))
    if reader.startswith(VARIANT):
        for key, value in (kv.split("=", 1) for kv in reader[len(VARIANT):].split(",")):
            r = r.option(key, value)
    df = r.load()
    with tempfile.TemporaryDirectory() as ck:
        q = (df.writeStream.format("noop").option("checkpointLocation", ck)
             .trigger(processingTime=f"{trigger_ms} milliseconds").start())
        try:
            first = _wait_batches(q, -1, 1, time.monotonic() + 600)
            warm = _wait_batches(q, first, WARMUP_BATCHES, time.monotonic() + 600)
            load = load_average()
            with Meter(exclude) as meter:
                _wait_batches(q, warm, batches, time.monotonic() + 600)
                progress = [p for p in q.recentProgress if p["batchId"] > warm]
        finally:
            spark.sparkContext.setLogLevel("OFF")  # stop() interrupts a running task: a stack trace, no fault
            q.stop()
            spark.sparkContext.setLogLevel("ERROR")
    with_data = [p for p in progress if p["numInputRows"] > 0]
    if len(with_data) < batches:
        raise SystemExit(f"{reader}: only {len(with_data)} batches with data in {meter.wall:.0f}s (time limit): "
                         "the machine is too busy, or raise --rate")
    part_ms = {k: statistics.mean(p["durationMs"].get(k, 0) for p in with_data) for k in (*DRIVER_PARTS, "addBatch")}
    return {
        "reader": reader, "load": f"{load} -> {load_average()}", "triggers": len(progress), "batches": len(with_data),
        "rows": statistics.mean(p["numInputRows"] for p in with_data),
        "ranges": statistics.mean(_partitions_read(p) for p in with_data),
        "parts": part_ms, "driver": sum(part_ms[k] for k in DRIVER_PARTS),
        "source": sum(part_ms[k] for k in SOURCE_PARTS),
        "trigger": statistics.mean(p["durationMs"].get("triggerExecution", 0) for p in with_data),
        # a process that left the tree without being reaped into it (seen once: an earlier
        # query's runner) takes its CPU with it and can make the difference negative
        "cpu_ms": meter.cpu / max(1, len(progress)) * 1000 if meter.cpu >= 0 else float("nan"), "wall": meter.wall,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=3.0, help="records/s produced (default 3)")
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=20, help="measured batches with data per run, after the warm-up")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each reader (best of), order alternating")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--backend", default="kafka", choices=["kafka", "mock"],
                    help="kafka (Apache Kafka from ../shared/kafka; the default) or mock (groupkafka only)")
    ap.add_argument("--max-partitions", type=int, default=None,
                    help="adds groupkafka with this maxPartitions as a reader")
    ap.add_argument("--variant", default=None, metavar="KEY=VALUE[,KEY=VALUE]",
                    help="adds groupkafka with these options as a reader, e.g. smallRangesPerTask=1")
    ap.add_argument("--readers", default="spark,groupkafka,floor",
                    help="of spark, groupkafka, floor (groupkafka with maxPartitions comes with --max-partitions); "
                         "at higher --rate Spark's source may be too slow to measure (docs/benchmarks.md)")
    args = ap.parse_args(argv)
    names = {"spark": SPARK, "groupkafka": OURS, "floor": FLOOR}
    unknown = [r for r in args.readers.split(",") if r.strip() not in names]
    if unknown:
        ap.error(f"--readers: unknown {', '.join(unknown)}; choose from {', '.join(names)}")
    wanted = [names[r.strip()] for r in args.readers.split(",")]
    chosen = side_by_side_readers(args.backend)
    if chosen is None:
        return 0
    available, jars = chosen
    readers = [r for r in wanted if r in (*available, FLOOR)]
    if OURS in wanted and args.max_partitions:
        readers.insert(readers.index(OURS) + 1, PACKED)
    if OURS in wanted and args.variant:
        readers.insert(readers.index(OURS) + 1, VARIANT + args.variant)
    spark = spark_session(args.cores, jars if SPARK in readers else ())
    register_floor(spark)
    topic = "small"
    runs = []
    with DevBroker(args.backend, topics={topic: args.partitions}) as broker:
        produce(broker.bootstrap, topic, 1, 1, 100)
        stop = threading.Event()
        producer = threading.Thread(target=trickle, args=(broker.bootstrap, topic, args.partitions, args.rate, stop),
                                    daemon=True)
        producer.start()
        exclude = [broker.pid] if broker.pid else []
        try:
            for rnd in range(args.rounds):
                for reader in (readers if rnd % 2 == 0 else readers[::-1]):
                    runs.append(measure(spark, reader, broker.bootstrap, topic, args.batches, args.trigger_ms,
                                        broker.recommended_session_timeout_ms, exclude, args.partitions, args.rate,
                                        args.max_partitions))
        finally:
            stop.set()
            producer.join(30)
            spark.stop()  # before the broker: the workers' cached consumers would retry it
    print(f"{args.partitions:,} partitions on {args.backend}, {args.rate:g} records/s to random partitions, "
          f"processingTime {args.trigger_ms} ms, startingOffsets=latest, local[{args.cores}], noop sink; "
          f"per run {args.batches} batches with data after {WARMUP_BATCHES} warm-up, best of {args.rounds}")
    cols = (*DRIVER_PARTS, "addBatch")
    print(f"  {'reader (mean ms per batch with data)':<38}" + "".join(f"{k:>15}" for k in cols)
          + f"{'to commit':>12}{'driver':>9}{'trigger':>9}{'rec/batch':>10}{'ranges':>7}{'CPU ms/trig':>12}"
          "   load (1/5/15 min) before -> after")
    for r in runs:
        print(f"  {r['reader']:<38}" + "".join(f"{r['parts'][k]:>15.1f}" for k in cols)
              + f"{r['source']:>12.1f}{r['driver']:>9.1f}{r['trigger']:>9.1f}{r['rows']:>10.1f}{r['ranges']:>7.1f}"
              f"{r['cpu_ms']:>12.0f}   {r['load']}")
    best = {reader: {k: min((r[k] for r in runs if r["reader"] == reader and r[k] == r[k]), default=float("nan"))
                     for k in ("source", "driver", "trigger", "cpu_ms")}
            for reader in readers}
    if OURS not in best:
        return 0
    ours = best[OURS]
    print(f"groupkafka best: per-trigger driver cost from latestOffset to the end of the commit (queryPlanning "
          f"excluded) {ours['source']:.0f} ms, driver total {ours['driver']:.0f} ms, trigger {ours['trigger']:.0f} ms")
    if SPARK in best:
        theirs = best[SPARK]
        print(f"ratio groupkafka / Spark's source, best of {args.rounds}: driver cost (queryPlanning excluded) "
              f"{ours['source'] / theirs['source']:.2f}x (goal <= 1), driver total "
              f"{ours['driver'] / theirs['driver']:.2f}x, whole trigger {ours['trigger'] / theirs['trigger']:.2f}x, "
              f"CPU per trigger {ours['cpu_ms'] / theirs['cpu_ms']:.2f}x")
        if PACKED in best:
            packed = best[PACKED]
            print(f"ratio groupkafka maxPartitions={args.max_partitions} / Spark's source: driver cost "
                  f"{packed['source'] / theirs['source']:.2f}x, whole trigger {packed['trigger'] / theirs['trigger']:.2f}x, "
                  f"CPU per trigger {packed['cpu_ms'] / theirs['cpu_ms']:.2f}x")
    if PACKED in best:
        packed = best[PACKED]
        print(f"groupkafka maxPartitions={args.max_partitions} / groupkafka: whole trigger "
              f"{packed['trigger'] / ours['trigger']:.2f}x, CPU per trigger {packed['cpu_ms'] / ours['cpu_ms']:.2f}x")
    for reader in readers:
        if reader.startswith(VARIANT):
            other = best[reader]
            print(f"{reader} / groupkafka: whole trigger {other['trigger'] / ours['trigger']:.2f}x, "
                  f"CPU per trigger {other['cpu_ms'] / ours['cpu_ms']:.2f}x")
    if FLOOR not in best:
        return 0
    floor = best[FLOOR]
    print(f"the Python source floor (offsets of {args.partitions:,} partitions, no Kafka): driver cost (queryPlanning "
          f"excluded) {floor['source']:.0f} ms, driver total {floor['driver']:.0f} ms; groupkafka / floor "
          f"{ours['source'] / floor['source']:.2f}x"
          + (f", floor / Spark's source {floor['source'] / best[SPARK]['source']:.2f}x" if SPARK in best else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
