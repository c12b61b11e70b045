"""Read throughput of a groupkafka streaming query against plain confluent-kafka, same run.

Prepares one topic on a dev broker, then measures
  baseline: one confluent-kafka consumer reading every record into Arrow batches
            (the same column building the connector does), and
  groupkafka: a streaming query, Trigger.AvailableNow, into the noop sink,
and prints records/s for both and their ratio (goal: >= 0.8). Ratios, not seconds,
because these machines are noisy.

    python bench/throughput.py [--records 500000] [--partitions 16] [--backend mock]

The mock keeps about 5 MB per partition (older records are deleted, like retention),
so the defaults keep each partition under that. Tansu reports a partition's end as
its last produce batch's base offset + 1, so the bench runs on the mock by default.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from spark_groupsource.devbroker import DevBroker  # noqa: E402
from spark_groupsource.schema import arrow_schema  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, partitions: int, value_size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"v" * value_size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"k%d" % i, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def baseline(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    """Plain confluent-kafka: consume everything and build Arrow batches of 10k rows."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-baseline",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    schema = arrow_schema(False)
    got, eof = 0, set()
    t0 = time.perf_counter()
    while got < n and len(eof) < partitions:
        msgs = c.consume(10000, timeout=1.0)
        keys, values, tps, parts, offs, ts, tts = [], [], [], [], [], [], []
        for m in msgs:
            if m.error():
                eof.add(m.partition())
                continue
            keys.append(m.key())
            values.append(m.value())
            tps.append(m.topic())
            parts.append(m.partition())
            offs.append(m.offset())
            t, stamp = m.timestamp()
            ts.append(stamp * 1000)
            tts.append(t - 1 if t else 0)
        if keys:
            pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(tps, pa.string()),
                 pa.array(parts, pa.int32()), pa.array(offs, pa.int64()),
                 pa.array(ts, pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array(tts, pa.int32())],
                schema=schema)
            got += len(keys)
    elapsed = time.perf_counter() - t0
    c.close()
    assert got == n, f"baseline read {got} of {n}"
    return elapsed


def groupkafka(spark, bootstrap: str, topic: str, n: int, session_ms: int) -> tuple[float, float]:
    """Seconds from ``start()`` to termination, and the part spent inside micro-batches
    (Spark's triggerExecution: planning, the executors' fetch and the sink)."""
    df = (spark.readStream.format("groupkafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("kafka.group.id", f"bench-{time.time_ns()}")
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("kafka.session.timeout.ms", str(session_ms))
          .load())
    with tempfile.TemporaryDirectory() as ck:
        t0 = time.perf_counter()
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
        elapsed = time.perf_counter() - t0
        progress = q.recentProgress
        rows = sum(p["numInputRows"] for p in progress)
        in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"]) / 1000
    assert rows == n, f"groupkafka read {rows} of {n}"
    return elapsed, in_batches


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--backend", default="mock", choices=["mock", "tansu"])
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    topic = "bench"
    with DevBroker(args.backend, topics={topic: args.partitions}) as broker:
        t0 = time.perf_counter()
        produce(broker.bootstrap, topic, args.records, args.partitions, args.value_size)
        print(f"prepared {args.records:,} records x {args.value_size} B in {args.partitions} partitions "
              f"on {args.backend} in {time.perf_counter() - t0:.1f}s")
        groupkafka(spark, broker.bootstrap, topic, args.records, broker.recommended_session_timeout_ms)  # warm-up
        base = baseline(broker.bootstrap, topic, args.partitions, args.records)
        ours, in_batches = groupkafka(spark, broker.bootstrap, topic, args.records,
                                      broker.recommended_session_timeout_ms)
    spark.stop()
    b_rate, o_rate = args.records / base, args.records / ours
    print(f"{'reader':<44}{'seconds':>9}{'records/s':>14}")
    print(f"{'confluent-kafka -> Arrow (baseline, 1 thread)':<44}{base:>9.2f}{b_rate:>14,.0f}")
    print(f"{'groupkafka AvailableNow -> noop (local[2])':<44}{ours:>9.2f}{o_rate:>14,.0f}")
    print(f"{'  of which inside micro-batches':<44}{in_batches:>9.2f}")
    print(f"ratio groupkafka / baseline: {o_rate / b_rate:.2f} (goal >= 0.8; includes query start, "
          f"group join and commit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
