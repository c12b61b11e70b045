"""Per-trigger cost of many small micro-batches: what the driver spends per trigger (planning
and the commit hook) as a ratio to the same run's fetch time.

One query owns a topic of 1,000 partitions (processingTime trigger, noop sink, local[N]) while
a producer writes a few records per trigger to random partitions. Every trigger the driver asks
the group's offsets and the ends of all 1,000 partitions, commits the previous batch, and plans
one task per partition that has new records. From Spark's progress of each batch with data:

  driver: latestOffset (the connector's planning and commit hook) + queryPlanning (input
          partitions) + getBatch + walCommit + commitOffsets (Spark's offset and commit logs)
  fetch:  addBatch (the executors' fetch into the sink)

    python bench/small_batches.py [--partitions 1000] [--rate 3] [--trigger-ms 1000] [--batches 30]
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
from _common import Meter, produce, spark_session  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402

WARMUP_BATCHES = 5
DRIVER_PARTS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "commitOffsets")


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
    """Partitions whose range in the batch's end offset is non-empty (each becomes one task)."""
    end = progress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    return sum(1 for parts in end["ranges"].values() for lo, hi in parts.values() if hi > lo)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=3.0, help="records/s produced (default 3)")
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=30, help="measured batches with data, after the warm-up")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--backend", default="mock", choices=["mock", "tansu"])
    args = ap.parse_args(argv)
    spark = spark_session(args.cores)
    topic = "small"
    with DevBroker(args.backend, topics={topic: args.partitions}) as broker:
        produce(broker.bootstrap, topic, 1, 1, 100)
        stop = threading.Event()
        producer = threading.Thread(target=trickle, args=(broker.bootstrap, topic, args.partitions, args.rate, stop),
                                    daemon=True)
        df = (spark.readStream.format("groupkafka")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("kafka.group.id", f"bench-small-{time.time_ns()}")
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("kafka.session.timeout.ms", str(broker.recommended_session_timeout_ms))
              .load())
        with tempfile.TemporaryDirectory() as ck:
            q = (df.writeStream.format("noop").option("checkpointLocation", ck)
                 .trigger(processingTime=f"{args.trigger_ms} milliseconds").start())
            # the first batch reads one record (the group is joined, Python workers start);
            # the trickle starts after it, so no backlog of one task per partition piles up
            first = _wait_batches(q, -1, 1, time.monotonic() + 600)
            producer.start()
            warm = _wait_batches(q, first, WARMUP_BATCHES, time.monotonic() + 600)
            with Meter([broker.pid] if broker.pid else []) as meter:
                _wait_batches(q, warm, args.batches, time.monotonic() + 600)
                progress = [p for p in q.recentProgress if p["batchId"] > warm]
            q.stop()
            stop.set()
            producer.join(30)
        spark.stop()  # before the broker: the workers' cached consumers would retry it
    batches = [p for p in progress if p["numInputRows"] > 0]
    if len(batches) < args.batches:
        print(f"only {len(batches)} batches with data in {meter.wall:.0f}s (time limit): the machine is "
              "too busy, or raise --rate")
        return 1
    rows = [p["numInputRows"] for p in batches]
    tasks = statistics.mean(_partitions_read(p) for p in batches)
    part_ms = {k: statistics.mean(p["durationMs"].get(k, 0) for p in batches) for k in (*DRIVER_PARTS, "addBatch")}
    trigger_ms = statistics.mean(p["durationMs"].get("triggerExecution", 0) for p in batches)
    driver = sum(part_ms[k] for k in DRIVER_PARTS)
    fetch = part_ms["addBatch"]
    print(f"{args.partitions:,} partitions, {len(progress)} triggers in {meter.wall:.0f}s, {len(batches)} with data, "
          f"{statistics.mean(rows):.1f} records per batch (median {statistics.median(rows):.0f}), local[{args.cores}], "
          f"{args.backend}")
    print(f"{'per batch with data (mean ms)':<40}{'ms':>9}")
    for k in DRIVER_PARTS:
        print(f"  driver: {k:<30}{part_ms[k]:>9.1f}")
    print(f"  {'driver total':<38}{driver:>9.1f}")
    print(f"  {'fetch (addBatch)':<38}{fetch:>9.1f}")
    print(f"  {'triggerExecution':<38}{trigger_ms:>9.1f}")
    print(f"{tasks:.1f} partitions with new records per batch (one task each): fetch {fetch / tasks:.0f} ms "
          f"per task")
    print(f"CPU: {meter.cpu / max(1, len(progress)) * 1000:.0f} ms per micro-batch over the measured run "
          f"(Spark JVM, Python workers and the bench process with its producer; broker excluded)")
    print(f"ratio driver (planning + commit) / fetch: {driver / fetch:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
