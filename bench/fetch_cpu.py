"""CPU per record of the executors' fetch path alone, without Spark: how much of a query's
CPU is ours (librdkafka, building Arrow batches) and how much is Spark's hand-off (the Python
worker writing Arrow IPC to the JVM, the JVM turning Arrow into rows), which this cannot reach.

In this one process, on the same topic, best of ``--rounds``:

  count-only:         a confluent-kafka consumer that only counts (librdkafka + Message objects);
  read_partition:     spark_groupsource.executor.fetch.read_partition over ranges of ``--range-size``
                      offsets of each partition, one after the other, as tasks do, with the
                      fetchers' own configuration (the Arrow batches built and dropped), on
                      the pure-Python path (confluent-kafka's Consumer) and the native one;
  + Arrow IPC:        the same, each batch also written as an Arrow IPC stream (what Spark's
                      Python worker does with it before the JVM sees it);
  --compare K=V:      the native read_partition again with these options on top (repeatable),
                      in the same rounds: an A/B of a fetch setting.

Besides this process's CPU, the broker's (its process tree) per million records read: what a
fetch setting costs the cluster.

    python bench/fetch_cpu.py [--records 1000000] [--value-size 100] [--compression none]
                              [--partitions 8] [--rounds 3] [--profile] [--backend kafka]
                              [--range-size 31250] [--option K=V ...] [--compare K=V ...]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import count_only, load_average, per_million, produce, tree_cpu_seconds  # noqa: E402

from spark_groupsource.config import fetcher_config, parse_stream_options, prefetch_adapts  # noqa: E402
from spark_groupsource.devbroker import DevBroker, kafka_missing  # noqa: E402
from spark_groupsource.executor import fetch as fetch_module  # noqa: E402
from spark_groupsource.executor.fetch import read_partition  # noqa: E402
from spark_groupsource.ranges import OffsetRange  # noqa: E402


def _cpu() -> float:
    return time.process_time()  # every thread of this process: librdkafka's included


def fetch(bootstrap: str, topic: str, ends: dict[int, int], ipc: bool, range_size: int,
          options: dict[str, str], fetcher: str = "native") -> int:
    """Every partition in ranges of ``range_size`` offsets, one read_partition (a task) each."""
    opts = parse_stream_options({"kafka.bootstrap.servers": bootstrap, "kafka.group.id": "bench-fetch",
                                 "subscribe": topic, **options})
    config = {**fetcher_config(opts), "log_level": 3}
    got = 0
    sink = pa.BufferOutputStream() if ipc else None
    tasks = [OffsetRange(topic, p, lo, min(lo + range_size, end)) for p, end in sorted(ends.items())
             for lo in range(0, end, range_size)]
    for rng in tasks:
        writer = None
        for batch in read_partition(config, [rng], include_headers=False, fail_on_data_loss=True,
                                    max_records_per_batch=opts.max_records_per_arrow_batch,
                                    max_bytes_per_batch=opts.max_bytes_per_arrow_batch, poll_timeout_ms=60_000,
                                    fetcher=fetcher, adapt_prefetch=prefetch_adapts(opts)):
            got += batch.num_rows
            if sink is not None:
                writer = writer or pa.ipc.new_stream(sink, batch.schema)
                writer.write_batch(batch)
        if writer is not None:
            writer.close()
            sink = pa.BufferOutputStream()
    return got


def broker_cpu(broker: DevBroker) -> float:
    """CPU-seconds of the dev broker's process tree (0 for a broker without a process here)."""
    return tree_cpu_seconds(broker.pid) if broker.pid else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--range-size", type=int, default=31_250,
                    help="offsets per task (default: throughput.py's maxOffsetsPerTrigger over 8 partitions)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a groupkafka option for the fetchers, e.g. kafka.queued.min.messages=20000")
    ap.add_argument("--compare", action="append", default=[], metavar="KEY=VALUE",
                    help="also the native read_partition with this option on top (repeatable)")
    ap.add_argument("--profile", action="store_true", help="cProfile one read_partition pass; print the top 25")
    ap.add_argument("--backend", default="kafka", choices=["kafka", "mock"])
    args = ap.parse_args(argv)
    if args.backend == "kafka" and (why := kafka_missing()):
        print(f"SKIPPED: {why}. Run with --backend mock.")
        return 0
    topic, n = "fetch", args.records
    options = dict(o.split("=", 1) for o in args.option)
    with DevBroker(args.backend, topics={topic: args.partitions}) as broker:
        produce(broker.bootstrap, topic, n, args.partitions, args.value_size, compression=args.compression)
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-fetch", "log_level": 3})
        ends = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(args.partitions)}
        probe.close()
        readers = {"count-only (librdkafka + Message objects)": lambda: count_only(broker.bootstrap, topic,
                                                                                   args.partitions),
                   "read_partition, python -> Arrow batches": lambda: fetch(
                       broker.bootstrap, topic, ends, False, args.range_size, options, "python"),
                   "read_partition, native -> Arrow batches": lambda: fetch(
                       broker.bootstrap, topic, ends, False, args.range_size, options, "native"),
                   "read_partition, native -> Arrow + IPC stream": lambda: fetch(
                       broker.bootstrap, topic, ends, True, args.range_size, options, "native")}
        if args.compare:
            compared = {**options, **dict(o.split("=", 1) for o in args.compare)}
            readers["read_partition, native, --compare"] = lambda: fetch(
                broker.bootstrap, topic, ends, False, args.range_size, compared, "native")
        best: dict[str, tuple[float, float, float]] = {}
        loads = []
        for _ in range(args.rounds):
            for label, run in readers.items():
                loads.append(load_average())
                fetch_module._POOL.clear()  # each reader's fetchers its own
                c0, b0, t0 = _cpu(), broker_cpu(broker), time.perf_counter()
                got = run()
                cpu, bcpu, wall = _cpu() - c0, broker_cpu(broker) - b0, time.perf_counter() - t0
                assert got == n, f"{label} read {got} of {n}"
                old = best.get(label, (1e9, 1e9, 1e9))
                best[label] = (min(old[0], cpu), min(old[1], bcpu), min(old[2], wall))
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(fetch, broker.bootstrap, topic, ends, False, args.range_size, options)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        fetch_module._POOL.clear()  # before the broker stops: pooled fetchers would retry it
    print(f"{n:,} records x {args.value_size} B, {args.compression}, {args.partitions} partitions on {args.backend}; "
          f"best of {args.rounds}; load (1/5/15 min) from {loads[0]} to {load_average()}")
    if args.compare:
        print(f"  --compare: {' '.join(args.compare)}")
    print(f"  {'reader':<46}{'CPU-s/M rec':>12}{'broker/M':>10}{'wall s':>9}")
    for label, (cpu, bcpu, wall) in best.items():
        print(f"  {label:<46}{per_million(cpu, n):>12.2f}{per_million(bcpu, n):>10.2f}{wall:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
