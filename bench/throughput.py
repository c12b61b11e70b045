"""Read throughput of a groupkafka streaming query against two plain confluent-kafka readers,
all measured in the same run on the same records.

  count-only ceiling:  one confluent-kafka consumer that only counts records (what one client
                       gets out of this broker; on the mock, the broker is the limit);
  hand-made reader:    as many processes as the query has cores (local[N]), each consuming its
                       share of the partitions and building the same Arrow batches the connector
                       builds (what a user could write by hand with the same hardware);
  groupkafka:          a streaming query, Trigger.AvailableNow, into the noop sink, local[N];
                       whole run (start, group join, micro-batches, commit) and inside
                       micro-batches (Spark's triggerExecution: planning, fetch, sink).

Prints records/s and CPU-seconds per million records for each (CPU of every process involved,
the broker excluded; see _common.py), and the query's ratios to both baselines. Ratios, not
seconds, because these machines are noisy.

    python bench/throughput.py [--records 500000] [--partitions 16] [--cores 2] [--backend mock]

The mock keeps about 5 MB per partition (older records are deleted, like retention), so the
defaults keep each partition under that. Tansu reports a partition's end as its last produce
batch's base offset + 1, so the bench runs on the mock by default.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Meter, per_million, produce, spark_session  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402
from spark_groupsource.schema import arrow_schema  # noqa: E402


@dataclass(frozen=True)
class Result:
    label: str
    seconds: float
    records: int
    cpu_s: float | None

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def _consumer(bootstrap: str, topic: str, parts: list[int]) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-baseline", "log_level": 3,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    return c


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread, librdkafka's included
    return r.ru_utime + r.ru_stime


def _read_share(bootstrap: str, topic: str, parts: list[int], arrow: bool, barrier, out) -> None:
    """One reader process: consume ``parts`` to their end, counting or building Arrow batches
    of up to 10,000 rows; reports (start, end, CPU seconds, records) through ``out``."""
    c = _consumer(bootstrap, topic, parts)
    schema = arrow_schema(False)
    barrier.wait()
    cpu0, t0 = _cpu_self(), time.time()
    got, eof = 0, set()
    while len(eof) < len(parts):
        msgs = c.consume(10000, timeout=1.0)
        if not arrow:
            for m in msgs:
                if m.error():
                    eof.add(m.partition())
                else:
                    got += 1
            continue
        keys, values, tps, ps, offs, ts, tts = [], [], [], [], [], [], []
        for m in msgs:
            if m.error():
                eof.add(m.partition())
                continue
            keys.append(m.key())
            values.append(m.value())
            tps.append(m.topic())
            ps.append(m.partition())
            offs.append(m.offset())
            t, stamp = m.timestamp()
            ts.append(stamp * 1000)
            tts.append(t - 1 if t else 0)
        if keys:
            pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(tps, pa.string()),
                 pa.array(ps, pa.int32()), pa.array(offs, pa.int64()),
                 pa.array(ts, pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array(tts, pa.int32())],
                schema=schema)
            got += len(keys)
    out.put((t0, time.time(), _cpu_self() - cpu0, got))
    c.close()


def plain_readers(bootstrap: str, topic: str, partitions: int, processes: int, n: int, arrow: bool,
                  label: str) -> Result:
    """``processes`` reader processes started together (a barrier), partitions dealt round-robin;
    the time is from the first start to the last finish."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    shares = [[p for p in range(partitions) if p % processes == i] for i in range(processes)]
    procs = [ctx.Process(target=_read_share, args=(bootstrap, topic, s, arrow, barrier, out)) for s in shares]
    for p in procs:
        p.start()
    reports = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    got = sum(r[3] for r in reports)
    assert got == n, f"{label} read {got} of {n}"
    return Result(label, max(r[1] for r in reports) - min(r[0] for r in reports), got,
                  sum(r[2] for r in reports))


def groupkafka(spark, bootstrap: str, topic: str, n: int, session_ms: int, exclude: list[int],
               cores: int) -> tuple[Result, Result]:
    """The whole run (``start()`` to termination) and the part inside micro-batches."""
    df = (spark.readStream.format("groupkafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("kafka.group.id", f"bench-{time.time_ns()}")
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("kafka.session.timeout.ms", str(session_ms))
          .load())
    with tempfile.TemporaryDirectory() as ck, Meter(exclude) as m:
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
    progress = q.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"]) / 1000
    assert rows == n, f"groupkafka read {rows} of {n}"
    return (Result(f"groupkafka AvailableNow -> noop, local[{cores}]", m.wall, n, m.cpu),
            Result("  inside micro-batches", in_batches, n, None))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--cores", type=int, default=2, help="the query's local[N] and the hand-made reader's processes")
    ap.add_argument("--backend", default="mock", choices=["mock", "tansu"])
    args = ap.parse_args(argv)
    spark = spark_session(args.cores)
    topic, n = "bench", args.records
    with DevBroker(args.backend, topics={topic: args.partitions}) as broker:
        t0 = time.perf_counter()
        produce(broker.bootstrap, topic, n, args.partitions, args.value_size)
        print(f"prepared {n:,} records x {args.value_size} B in {args.partitions} partitions "
              f"on {args.backend} in {time.perf_counter() - t0:.1f}s")
        exclude = [broker.pid] if broker.pid else []
        session = broker.recommended_session_timeout_ms
        groupkafka(spark, broker.bootstrap, topic, n, session, exclude, args.cores)  # warm-up
        ceiling = plain_readers(broker.bootstrap, topic, args.partitions, 1, n, False,
                                "confluent-kafka count-only, 1 process (ceiling)")
        hand = plain_readers(broker.bootstrap, topic, args.partitions, args.cores, n, True,
                             f"confluent-kafka -> Arrow, {args.cores} processes")
        whole, inside = groupkafka(spark, broker.bootstrap, topic, n, session, exclude, args.cores)
        spark.stop()  # before the broker: the workers' cached consumers would retry it
    print(f"{'reader':<52}{'seconds':>9}{'records/s':>12}{'CPU-s/M rec':>13}")
    for r in (ceiling, hand, whole, inside):
        cpu = f"{per_million(r.cpu_s, r.records):>13.2f}" if r.cpu_s is not None else f"{'':>13}"
        print(f"{r.label:<52}{r.seconds:>9.2f}{r.rate:>12,.0f}{cpu}")
    print(f"ratio groupkafka / hand-made reader: whole run {whole.rate / hand.rate:.2f}, "
          f"inside micro-batches {inside.rate / hand.rate:.2f} (goal >= 0.8)")
    print(f"ratio groupkafka / count-only ceiling: whole run {whole.rate / ceiling.rate:.2f}, "
          f"inside micro-batches {inside.rate / ceiling.rate:.2f}")
    print(f"CPU per record, groupkafka / hand-made reader: "
          f"{whole.cpu_s / hand.cpu_s:.2f} (the query's includes Spark's JVM and Python workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
