"""Steady-state read speed: what a long-running stream pays per record once start-up is paid,
groupkafka against Spark's own Kafka source (``format("kafka")``) and the Python source floor
(``format("benchfloor")``, _floor_source.py), side by side in one Spark session.

Marginal cost: every reader reads a topic of N records and one of 5N records
(``Trigger.AvailableNow`` -> ``noop``, ``startingOffsets=earliest``, the same
``maxOffsetsPerTrigger``); the difference of the two is what the extra 4N records cost, with the
query's fixed start-up (runner process, group join, first plan, final commit) cancelled out.
A warm-up round of every reader comes first and is not counted; then ``--rounds`` rounds, the
order of the readers flipping every round; per reader and topic the best (least wall, least
CPU) of the rounds is taken:

  records/s          4N / (wall(5N) - wall(N))
  CPU-s per million  (CPU(5N) - CPU(N)) / 4N, of the bench's process tree (Spark's JVM, its
                     Python daemon, workers and the streaming source's runner; see _common.py)
  JVM/M, Py/M        the same CPU split: Spark's JVM, and its Python processes (the bench's own
                     process counts in neither)
  cores busy         (CPU(5N) - CPU(N)) / (wall(5N) - wall(N)): 2.0 is a local[2] session
                     with both cores working all the time
  broker CPU         the same difference for the broker's process (the server, left out above)
  machine            the whole machine's busy cores over the same difference (every process:
                     the broker, the bench, anything else running): near the machine's cores,
                     no core sat idle, whatever the tree's own "cores busy"

Per workload a second table: where a trigger's wall goes, from Spark's progress (``durationMs``)
of the 5N read of each reader's fastest round, in milliseconds per trigger with data:
``latestOffset`` (the source's plan on the driver: for groupkafka also the group commit of the
batch before), ``walCommit`` and ``commitOffsets`` (Spark's offset and commit logs, the same
for every reader), ``queryPlanning``, ``addBatch`` (the tasks), the rest, and the whole trigger.
While the logs are written no task runs: what no reader can turn into busy cores. The
sustained run below prints the same per batch.

Then a sustained run (``--sustained-s``, 0 to skip): each Kafka reader in turn runs a
``processingTime`` query (1 s, ``startingOffsets=latest``) while a producer process writes as
fast as it can (on 2 cores it takes one; the backlog grows when the reader is the slower);
reported over the batches after the first with data (the first pays the query's start), from
Spark's progress: records per second of wall clock (what the stream kept up with: at most
``--max-offsets-per-trigger`` per 1 s interval) and per second of batch execution (what the
reader needed, the idle rest of an interval left out), and what the producer wrote.

    python bench/steady_state.py [--sizes 100,1000,10000] [--codecs none,lz4] [--rounds 3]
                                 [--n 400000] [--partitions 8] [--cores 2]
                                 [--max-offsets-per-trigger 250000] [--sustained-s 60]
                                 [--readers spark,groupkafka,groupkafka-packed,floor]
                                 [--backend kafka] [--conf KEY=VALUE ...]

``groupkafka-packed`` is groupkafka with ``maxPartitions`` set to ``--cores``: a batch's ranges
packed into one task per core (docs/options.md advises it for small records; Spark's source
has no such option: a task per partition). ``--readers`` may add ``groupkafka-python``: groupkafka on the pure-Python fetch path
(``fetcher=python``, confluent-kafka's Consumer), and ``groupkafka-before``: that path with
librdkafka's own fetch.queue.backoff.ms (1,000 ms), the fetchers before issue 27; to show, side
by side in one run, what the native path and the fetchers' settings change. ``direct`` is the
direct-fetch bound (_direct_source.py): the same topic read with Fetch requests of its own and a
C record parser, no client library; uncompressed workloads only, a yardstick like the floor.

``--n`` is N at 100 B values; larger values get fewer records (the same bytes, at least 20,000).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from statistics import mean

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    FLOOR,
    OURS,
    SPARK,
    Meter,
    load_average,
    per_million,
    produce,
    side_by_side_readers,
    spark_session,
    tree_cpu_seconds,
)
from _direct_source import compile_parser  # noqa: E402
from _direct_source import register as register_direct  # noqa: E402
from _floor_source import register as register_floor  # noqa: E402
from throughput import Run  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402

#: groupkafka on the pure-Python fetch path, and that path with the fetchers' librdkafka settings
#: before issue 27 (librdkafka's defaults)
PYTHON_PATH = "groupkafka, python path"
BEFORE = "groupkafka, py+rdkafka dflt"
#: groupkafka with maxPartitions set to the session's cores (filled in by main()): the ranges of a
#: batch packed into one task per core, as docs/options.md advises for small records
PACKED = "groupkafka, maxPartitions"
#: PACKED with the options of ``--tuned`` on top (filled in by main()): a setting under trial
TUNED = "groupkafka, packed+tuned"
VARIANT_OPTIONS = {PYTHON_PATH: {"fetcher": "python"},
                   BEFORE: {"fetcher": "python", "kafka.fetch.queue.backoff.ms": "1000"},
                   PACKED: {}, TUNED: {}}
#: the direct-fetch bound (_direct_source.py): Kafka read without a client library's per-record work
DIRECT = "direct fetch bound"
READER_NAMES = {"spark": SPARK, "direct": DIRECT, "groupkafka": OURS, "floor": FLOOR, "groupkafka-python": PYTHON_PATH,
                "groupkafka-before": BEFORE, "groupkafka-packed": PACKED, "groupkafka-tuned": TUNED}


#: Spark's phases of a micro-batch (its progress's ``durationMs``), in the order a trigger runs them
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets")


def trigger_phases(progress: list[dict]) -> tuple[tuple[str, float], ...]:
    """Mean milliseconds per trigger with data of each of :data:`PHASES`, then ``other`` (the
    rest of ``triggerExecution``) and ``trigger`` (all of it); empty without such a trigger."""
    with_data = [p for p in progress if p.get("numInputRows")]
    if not with_data:
        return ()
    out = [(k, mean(p["durationMs"].get(k, 0) for p in with_data)) for k in PHASES]
    total = mean(p["durationMs"].get("triggerExecution", 0) for p in with_data)
    return (*out, ("other", max(0.0, total - sum(v for _, v in out))), ("trigger", total))


@dataclass(frozen=True)
class Sample:
    """One query: records read, wall seconds, CPU seconds of Spark's tree (and of its JVM and
    its Python processes apart), of the broker and of the whole machine; ms per trigger by
    Spark's phase (:func:`trigger_phases`)."""

    records: int
    wall: float
    cpu: float
    broker_cpu: float = 0.0
    jvm_cpu: float = 0.0
    python_cpu: float = 0.0
    machine_cpu: float = 0.0
    phases: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Marginal:
    """What the records between a small and a large read cost."""

    records: int
    wall: float
    cpu: float
    broker_cpu: float
    jvm_cpu: float = 0.0
    python_cpu: float = 0.0
    machine_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.records / self.wall if self.wall > 0 else float("inf")

    @property
    def cpu_per_million(self) -> float:
        return per_million(self.cpu, self.records)

    @property
    def broker_per_million(self) -> float:
        return per_million(self.broker_cpu, self.records)

    @property
    def jvm_per_million(self) -> float:
        return per_million(self.jvm_cpu, self.records)

    @property
    def python_per_million(self) -> float:
        return per_million(self.python_cpu, self.records)

    @property
    def cores_busy(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else float("inf")

    @property
    def machine_busy(self) -> float:
        """The whole machine's busy cores while the extra records were read."""
        return self.machine_cpu / self.wall if self.wall > 0 else float("inf")


def best_sample(samples: list[Sample]) -> Sample:
    """The best of the rounds of one reader on one topic: least wall, least CPU (each on its
    own: a round slowed by a neighbour's load should not hide a good CPU reading)."""
    if not samples:
        raise ValueError("no samples")
    records = {s.records for s in samples}
    if len(records) != 1:
        raise ValueError(f"samples of different sizes: {sorted(records)}")
    least = min(samples, key=lambda s: s.cpu)  # its JVM / Python split, so the two add up to its CPU
    fastest = min(samples, key=lambda s: s.wall)  # the machine's busy cores over that wall
    return Sample(samples[0].records, fastest.wall, least.cpu,
                  min(s.broker_cpu for s in samples), least.jvm_cpu, least.python_cpu, fastest.machine_cpu,
                  fastest.phases)


def marginal(small: Sample, large: Sample) -> Marginal:
    """The cost of the records ``large`` read beyond ``small`` (negative differences, a
    noisy machine's, are kept: they show the measurement is not to be trusted)."""
    extra = large.records - small.records
    if extra <= 0:
        raise ValueError(f"the large read ({large.records}) must hold more records than the small ({small.records})")
    return Marginal(extra, large.wall - small.wall, large.cpu - small.cpu, large.broker_cpu - small.broker_cpu,
                    large.jvm_cpu - small.jvm_cpu, large.python_cpu - small.python_cpu,
                    large.machine_cpu - small.machine_cpu)


def records_for(value_size: int, n_at_100: int) -> int:
    """N for ``value_size``-byte values: the bytes of ``n_at_100`` records of 100 B, at least 20,000."""
    return max(20_000, n_at_100 * 100 // max(1, value_size))


def sustained_rate(progress: list[dict]) -> tuple[int, float, int, float]:
    """(records, busy seconds, batches, wall seconds) of a processingTime query's progress after
    its first batch with data (the first pays the query's start). Busy: the batches' own
    ``triggerExecution``, what the reader needed; wall: from the start of the second batch with
    data to the end of the last, the time between triggers included, what the stream kept up
    with (a batch that ends before its interval leaves the rest of it idle, so the wall rate is
    at most ``maxOffsetsPerTrigger`` per interval)."""
    rest = after_first_batch(progress)
    if not rest:
        return 0, 0.0, 0, 0.0
    records = sum(p["numInputRows"] for p in rest)
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in rest) / 1000
    last = rest[-1]
    wall = (_started(last) + last["durationMs"].get("triggerExecution", 0) / 1000) - _started(rest[0])
    return records, busy, len(rest), wall


def after_first_batch(progress: list[dict]) -> list[dict]:
    """A processingTime query's progress reports with data after the first such (which pays
    the query's start): what the sustained figures are taken over."""
    return [p for p in progress if p.get("numInputRows")][1:]


def _started(report: dict) -> float:
    """When a progress report's trigger began (its ``timestamp``, ISO 8601 in UTC), in seconds."""
    return datetime.fromisoformat(report["timestamp"].replace("Z", "+00:00")).timestamp()


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


# -- the runs ------------------------------------------------------------------------------------
def limited(reader, args):
    """``maxOffsetsPerTrigger`` on a reader, unless ``--max-offsets-per-trigger`` is 0 (no limit:
    an AvailableNow read is then one trigger, the set-up issue 27's figures came from)."""
    if args.max_offsets_per_trigger > 0:
        return reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    return reader


def kafka_reader(spark, reader: str, broker, topic: str, starting: str, args, group_prefix: str):
    """The stream reader of Spark's source, groupkafka or a groupkafka variant on ``topic``."""
    r = (spark.readStream.format("kafka" if reader == SPARK else "groupkafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
         .option("startingOffsets", starting))
    r = limited(r, args)
    if reader in (OURS, *VARIANT_OPTIONS):
        r = (r.option("kafka.group.id", f"{group_prefix}-{time.time_ns()}")
             .option("kafka.session.timeout.ms", str(broker.recommended_session_timeout_ms))
             .options(**VARIANT_OPTIONS.get(reader, {})))
    return r


def query(spark, reader: str, broker, topic: str, n: int, args, value_size: int) -> Run:
    """One AvailableNow query of ``reader`` over the whole topic into the noop sink."""
    if reader == DIRECT:
        r = limited(spark.readStream.format("benchdirect").option("rows", str(n))
                    .option("partitions", str(args.partitions)).option("bootstrap", broker.bootstrap)
                    .option("topic", topic).option("library", args.direct_library), args)
    elif reader == FLOOR:
        r = limited(spark.readStream.format("benchfloor").option("rows", str(n))
                    .option("partitions", str(args.partitions)).option("valueSize", str(value_size)), args)
    else:
        r = kafka_reader(spark, reader, broker, topic, "earliest", args, "bench")
    df = r.load()
    load = load_average()
    with tempfile.TemporaryDirectory() as ck, Meter([broker.pid] if broker.pid else []) as m:
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    if rows != n:
        raise AssertionError(f"{reader} read {rows} of {n}")
    return Run(reader, n, m.wall, 0.0, 0.0, 0, m.cpu, load, m.by_kind["jvm"], m.by_kind["python"], m.machine,
               trigger_phases(q.recentProgress))


def _settle(spark) -> None:
    """Collect the JVM's garbage of the runs before and let its threads go quiet, so that a
    short run does not pay for the long run before it (the N read followed another reader's 5N
    read: its CPU came out above the 5N read's, the marginal CPU negative)."""
    spark.sparkContext._jvm.java.lang.System.gc()
    time.sleep(1.0)


def _measured(spark, reader, broker, topic, n, args, size) -> Sample:
    _settle(spark)
    for attempt in range(1, 4):
        b0 = tree_cpu_seconds(broker.pid) if broker.pid else 0.0
        try:
            run = query(spark, reader, broker, topic, n, args, size)
            break
        except Exception as exc:  # noqa: BLE001 - on a loaded machine Spark's runner may time out connecting
            if attempt == 3 or ("failed to connect back" not in str(exc) and "CANNOT_OPEN_SOCKET" not in str(exc)):
                raise
            print(f"  ({reader}: Spark's Python runner did not connect back in time (machine load "
                  f"{load_average()}); again)")
    b1 = tree_cpu_seconds(broker.pid) if broker.pid else 0.0
    return Sample(n, run.wall, run.cpu or 0.0, b1 - b0, run.jvm, run.python, run.machine, run.phases)


def _workload(spark, broker, readers, size, codec, args, warm: bool) -> dict[str, Marginal]:
    n = records_for(size, args.n)
    small, large = f"ss-{size}-{codec}-n", f"ss-{size}-{codec}-5n"
    t0 = time.perf_counter()
    broker.create_topic(small, args.partitions)
    broker.create_topic(large, args.partitions)
    produce(broker.bootstrap, small, n, args.partitions, size, compression=codec)
    produce(broker.bootstrap, large, 5 * n, args.partitions, size, compression=codec)
    print(f"\n{size} B, {codec}: N = {n:,} and 5N = {5 * n:,} records (produced in {time.perf_counter() - t0:.1f}s); "
          f"load {load_average()}")
    if warm:  # JVM classes, Python workers, each side's first consumers: not counted
        for reader in readers:
            _measured(spark, reader, broker, small, n, args, size)
    samples: dict[tuple[str, int], list[Sample]] = {}
    for rnd in range(args.rounds):
        for reader in (readers if rnd % 2 == 0 else readers[::-1]):
            for topic, count in ((small, n), (large, 5 * n)):
                samples.setdefault((reader, count), []).append(_measured(spark, reader, broker, topic, count, args, size))
    out = {}
    print(f"  {'reader':<22}{'wall N':>8}{'wall 5N':>9}{'rec/s':>12}{'CPU-s/M':>9}{'JVM/M':>7}{'Py/M':>7}{'cores':>7}"
          f"{'broker/M':>10}{'machine':>9}   rounds (wall N / 5N)")
    larges: dict[str, Sample] = {}
    for reader in readers:
        small_best, large_best = best_sample(samples[(reader, n)]), best_sample(samples[(reader, 5 * n)])
        larges[reader] = large_best
        m = marginal(small_best, large_best)
        out[reader] = m
        rounds = " ".join(f"{a.wall:.1f}/{b.wall:.1f}" for a, b in zip(samples[(reader, n)], samples[(reader, 5 * n)],
                                                                      strict=True))
        print(f"  {reader:<22}{small_best.wall:>8.2f}{large_best.wall:>9.2f}"
              f"{m.rate:>12,.0f}{m.cpu_per_million:>9.2f}{m.jvm_per_million:>7.2f}{m.python_per_million:>7.2f}"
              f"{m.cores_busy:>7.2f}{m.broker_per_million:>10.2f}{m.machine_busy:>9.2f}   {rounds}")
    _print_phases(larges)
    return out


def _print_phases(large: dict[str, Sample]) -> None:
    """Where a trigger's wall went in each reader's fastest 5N read (ms per trigger with data)."""
    names = [name for name, _ in next((s.phases for s in large.values() if s.phases), ())]
    if not names:
        return
    print(f"  {'ms per trigger (5N, fastest round)':<36}" + "".join(f"{k:>14}" for k in names))
    for reader, sample in large.items():
        by = dict(sample.phases)
        print(f"  {reader:<36}" + "".join(f"{by.get(k, float('nan')):>14.1f}" for k in names))


def _produce_until(bootstrap: str, topic: str, partitions: int, size: int, stop_at: float, out) -> None:
    """A producer process writing as fast as it can until ``stop_at`` (time.time())."""
    written = 0
    while time.time() < stop_at:
        produce(bootstrap, topic, 200_000, partitions, size, start=written)
        written += 200_000
    out.put(written)


def _sustained(spark, broker, reader, topic, size, args) -> tuple[int, float, int, float, int, tuple]:
    """A processingTime query reading while a producer writes: :func:`sustained_rate`'s
    (records, busy seconds, batches, wall seconds), how many records the producer wrote meanwhile, and
    where those batches' wall went (:func:`trigger_phases`)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    producer = ctx.Process(target=_produce_until,
                           args=(broker.bootstrap, topic, args.partitions, size, time.time() + args.sustained_s, out))
    r = kafka_reader(spark, reader, broker, topic, "latest", args, "bench-sustained")
    with tempfile.TemporaryDirectory() as ck:
        q = (r.load().writeStream.format("noop").option("checkpointLocation", ck)
             .trigger(processingTime="1 second").start())
        time.sleep(5)  # the query's start, its first (empty) batches
        producer.start()
        written = out.get(timeout=args.sustained_s + 300)
        producer.join(60)
        progress = q.recentProgress
        q.stop()
    return (*sustained_rate(progress), written, trigger_phases(after_first_batch(progress)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000", help="value bytes, comma-separated")
    ap.add_argument("--codecs", default="none,lz4", help="producer compression, comma-separated (none, lz4, zstd)")
    ap.add_argument("--rounds", type=int, default=3, help="counted rounds per reader (best of); >= 1")
    ap.add_argument("--n", type=int, default=400_000, help="N at 100 B values (the small read; the large is 5N)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--cores", type=int, default=2, help="the Spark session's local[N]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=250_000,
                    help="the same for every reader; 0: none, each read one trigger (issue 27's set-up)")
    ap.add_argument("--sustained-s", type=float, default=60.0, help="seconds of the processingTime run; 0: skip it")
    ap.add_argument("--readers", default="spark,groupkafka,groupkafka-packed,floor", help=f"of {', '.join(READER_NAMES)}")
    ap.add_argument("--backend", default="kafka", choices=["kafka", "mock"])
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session of every reader (repeatable), e.g. "
                         "spark.python.unix.domain.socket.enabled=true")
    ap.add_argument("--tuned", action="append", default=[], metavar="KEY=VALUE",
                    help="a groupkafka option of the groupkafka-tuned reader (repeatable): groupkafka-packed "
                         "with these on top, to compare a setting side by side")
    args = ap.parse_args(argv)
    extra_conf = dict(c.split("=", 1) for c in args.conf)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    wanted = [READER_NAMES[r.strip()] for r in args.readers.split(",") if r.strip()]
    VARIANT_OPTIONS[PACKED] = {"maxPartitions": str(args.cores)}
    VARIANT_OPTIONS[TUNED] = {**VARIANT_OPTIONS[PACKED], **dict(t.split("=", 1) for t in args.tuned)}
    chosen = side_by_side_readers(args.backend)
    if chosen is None:
        return 0
    available, jars = chosen
    args.direct_library = compile_parser() if DIRECT in wanted else None
    if DIRECT in wanted and args.direct_library is None:
        wanted.remove(DIRECT)
    readers = [r for r in wanted if r in available or r in (FLOOR, DIRECT, *VARIANT_OPTIONS)]
    # Spark's Python processes connect back within 15 s by default: on a machine loaded by others
    # the streaming runner missed it and the query failed
    spark = spark_session(args.cores, jars if SPARK in readers else (),
                          {"spark.python.authenticate.socketTimeout": "120s", **extra_conf})
    register_floor(spark)
    register_direct(spark)
    limit = f"{args.max_offsets_per_trigger:,}" if args.max_offsets_per_trigger > 0 else "none (a read is one trigger)"
    print(f"steady state, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {args.backend} broker, "
          f"{args.partitions} partitions, local[{args.cores}], AvailableNow -> noop, maxOffsetsPerTrigger="
          f"{limit}, warm-up then best of {args.rounds}, order alternating; "
          f"load {load_average()}" + (f"; Spark settings {extra_conf}" if extra_conf else ""))
    results = []
    with DevBroker(args.backend, topics={}) as broker:
        first = True
        for codec in codecs:
            for size in sizes:
                # the direct-fetch bound parses uncompressed batches only
                here = [r for r in readers if r != DIRECT or codec == "none"]
                results.append((size, codec, _workload(spark, broker, here, size, codec, args, warm=first)))
                first = False
        sustained = {}
        kafka_readers = [r for r in readers if r in (SPARK, OURS, PACKED, TUNED)]
        if args.sustained_s > 0 and kafka_readers:
            size = sizes[0]
            print(f"\nsustained: processingTime 1 s, startingOffsets=latest, {args.sustained_s:.0f}s per reader while a "
                  f"producer process writes {size} B records (none) as fast as it can; load {load_average()}")
            for reader in kafka_readers:
                topic = f"ss-sustained-{''.join(c if c.isalnum() else '-' for c in reader)}"
                broker.create_topic(topic, args.partitions)
                recs, busy, batches, wall, written, phases = _sustained(spark, broker, reader, topic, size, args)
                sustained[reader] = recs / busy if busy else 0.0
                print(f"  {reader:<22}{recs:>12,} records in {batches} batches: {recs / wall if wall else 0:,.0f} "
                      f"records/s of wall clock ({wall:.1f}s), {sustained[reader]:,.0f} per second of batch "
                      f"execution ({busy:.1f}s); producer {written / args.sustained_s:,.0f}/s; load {load_average()}")
                print("    ms per batch: " + ", ".join(f"{k} {v:.0f}" for k, v in phases))
        spark.stop()
    print(f"\nsummary (marginal, best of {args.rounds}; load at the end {load_average()})")
    print(f"  {'workload':<14}{'reader':<22}{'rec/s':>12}{'x Spark':>9}{'CPU-s/M':>9}{'x Spark':>9}{'cores':>7}"
          f"{'broker/M':>10}{'machine':>9}")
    for size, codec, by in results:
        theirs = by.get(SPARK)
        for reader, m in by.items():
            rel_rate = f"{ratio(m.rate, theirs.rate):.2f}x" if theirs else "-"
            rel_cpu = f"{ratio(m.cpu_per_million, theirs.cpu_per_million):.2f}x" if theirs else "-"
            print(f"  {f'{size} B {codec}':<14}{reader:<22}{m.rate:>12,.0f}{rel_rate:>9}{m.cpu_per_million:>9.2f}"
                  f"{rel_cpu:>9}{m.cores_busy:>7.2f}{m.broker_per_million:>10.2f}{m.machine_busy:>9.2f}")
    for reader in (OURS, PACKED, TUNED):
        if SPARK in sustained and reader in sustained:
            print(f"  sustained {reader} / Spark's source, per second of batch execution: "
                  f"{ratio(sustained[reader], sustained[SPARK]):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
