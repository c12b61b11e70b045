"""What the benchmarks share: the Spark session, producing test records, CPU accounting.

CPU-seconds are read from /proc (Linux): a process's own user+system time plus that of its
children it has reaped, summed over a process tree. Spark's JVM, its Python daemon, the workers
it forks and the streaming source's runner are all descendants of the bench process; the dev
broker is too, and is left out (it is the server, not the reader).
"""

from __future__ import annotations

import glob
import os
import random
import sys
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, Producer, TopicPartition

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_TICK = os.sysconf("SC_CLK_TCK")


def spark_kafka_jars() -> tuple[list[str], str | None]:
    """Spark's own Kafka source (``format("kafka")``): its jars from ``lib/spark-kafka/`` plus
    ``lib/clients/kafka-clients-*.jar`` of the shared Kafka (``$GROUPKAFKA_KAFKA_HOME`` or
    ``../shared/kafka``), or ``([], why not)`` when they are not there."""
    from spark_groupsource.devbroker._kafka import KAFKA_HOME_ENV, SHARED_KAFKA

    home = os.environ.get(KAFKA_HOME_ENV, "").strip() or SHARED_KAFKA
    source = sorted(glob.glob(os.path.join(home, "lib", "spark-kafka", "*.jar")))
    clients = sorted(glob.glob(os.path.join(home, "lib", "clients", "kafka-clients-*.jar")))
    if not source or not clients:
        return [], (f"Spark's own Kafka source jars not found under {home} (want lib/spark-kafka/*.jar and "
                    f"lib/clients/kafka-clients-*.jar; see ../shared/kafka/README.md)")
    return source + clients, None


def spark_session(cores: int, jars: Iterable[str] = (), conf: dict[str, str] | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    jars = list(jars)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def produce(bootstrap: str, topic: str, n: int, partitions: int, value_size: int, start: int = 0,
            compression: str = "none") -> None:
    """``n`` records of ``value_size`` bytes, round-robin over the partitions, in large batches
    compressed with ``compression`` (the topic keeps the producer's codec: Kafka's default
    ``compression.type=producer``)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3,
                  "compression.codec": compression})
    # hex text: compresses about 2:1 (a value of one repeated byte would make lz4 look free)
    rng = random.Random(value_size)
    values = [rng.randbytes((value_size + 1) // 2).hex()[:value_size].encode() for _ in range(256)]
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, value=values[i & 255], key=b"k%d" % i, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered to {topic}")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, CPU seconds of reaped children) of one process, None if
    it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime) / _TICK, (cutime + cstime) / _TICK


def _kind(pid: int, root: int) -> str:
    """Which part of the tree a process is: the bench process itself, Spark's JVM, a Python
    process Spark started (daemon, workers, the streaming source's runner), or other."""
    if pid == root:
        return "bench"
    try:
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except OSError:
        return "other"
    return "jvm" if comm == "java" else "python" if comm.startswith("python") else "other"


def tree_cpu_by_kind(root: int, exclude: Iterable[int] = ()) -> dict[str, float]:
    """CPU seconds of ``root`` and every live descendant, skipping ``exclude`` and their trees,
    per :func:`_kind`. A process that exited was counted into its parent's reaped-children
    time, so the difference of two readings is the tree's CPU in between (less whatever an
    unreaped zombie used); reaped time counts as Python's (Spark's JVM only starts Python
    processes), so a worker or runner that exits between two readings stays on the Python side."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (s := _stat(int(name))) is not None:
            stats[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    skip, todo = set(exclude), [root]
    total = {"bench": 0.0, "jvm": 0.0, "python": 0.0, "other": 0.0}
    while todo:
        pid = todo.pop()
        if pid in skip or pid not in stats:
            continue
        _, own, reaped = stats[pid]
        kind = _kind(pid, root)
        total[kind] += own
        # what exited children used: those of the bench, of Spark's JVM and of its Python
        # daemon are Python processes (workers, the source's runner, the bench's readers)
        total["python" if kind in ("bench", "jvm", "python") else kind] += reaped
        todo.extend(children.get(pid, ()))
    return total


def tree_cpu_seconds(root: int, exclude: Iterable[int] = ()) -> float:
    """CPU seconds of ``root`` and every live descendant, skipping ``exclude`` and their trees."""
    return sum(tree_cpu_by_kind(root, exclude).values())


class Meter:
    """Wall and CPU seconds of this process's tree (less ``exclude``) between start and stop;
    ``by_kind``: the CPU split into the bench process, Spark's JVM and Spark's Python processes."""

    def __init__(self, exclude: Iterable[int] = ()):
        self.exclude = tuple(exclude)
        self.wall = self.cpu = 0.0
        self.by_kind: dict[str, float] = {}

    def __enter__(self) -> Meter:
        self._cpu0 = tree_cpu_by_kind(os.getpid(), self.exclude)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        end = tree_cpu_by_kind(os.getpid(), self.exclude)
        self.by_kind = {k: end[k] - self._cpu0[k] for k in end}
        self.cpu = sum(self.by_kind.values())


def per_million(cpu_s: float, records: int) -> float:
    return cpu_s / records * 1e6


def load_average() -> str:
    """The machine's 1/5/15-minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


SPARK, OURS, FLOOR = "spark kafka", "groupkafka", "python source floor"


def side_by_side_readers(backend: str) -> tuple[list[str], list[str]] | None:
    """The readers to compare on ``backend`` and the jars of Spark's own source; None (after
    saying why) when the kafka backend cannot run here."""
    from spark_groupsource.devbroker import kafka_missing

    if backend == "kafka" and (why := kafka_missing()):
        print(f"SKIPPED the side-by-side against Spark's own Kafka source: {why}. "
              "Run with --backend mock for groupkafka alone.")
        return None
    jars, why = spark_kafka_jars() if backend == "kafka" else ([], "the mock backend runs groupkafka alone")
    if why:
        print(f"Spark's own Kafka source is left out: {why}")
    return ([SPARK, OURS] if jars else [OURS]), jars


def count_only(bootstrap: str, topic: str, partitions: int, group: str = "bench-count") -> int:
    """Every record of ``topic`` through librdkafka, counted and dropped (the ceiling)."""
    # librdkafka's default prefetch (queued.min.messages=100000) held one consumer of 8
    # partitions to 5.4 s for 1M x 100 B on Kafka 4.0.1, below what groupkafka's fetchers
    # reach; with a deeper queue 1.5 s at the same CPU: a ceiling again
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "queued.min.messages": 1_000_000})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof = 0, set()
    try:
        while len(eof) < partitions:
            for m in c.consume(10000, timeout=1.0):
                if m.error():
                    eof.add(m.partition())
                else:
                    got += 1
    finally:
        c.close()
    return got
