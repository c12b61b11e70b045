"""What the benchmarks share: the Spark session, producing test records, CPU accounting.

CPU-seconds are read from /proc (Linux): a process's own user+system time plus that of its
children it has reaped, summed over a process tree (and, by :class:`Meter`, of processes that
exited unreaped). Spark's JVM, its Python daemon, the workers
it forks and the streaming source's runner are all descendants of the bench process; the dev
broker is too, and is left out (it is the server, not the reader).
"""

from __future__ import annotations

import glob
import os
import random
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_TICK = os.sysconf("SC_CLK_TCK")


def spark_kafka_jars() -> tuple[list[str], str | None]:
    """Spark's own Kafka source (``format("kafka")``): its jars from ``lib/spark-kafka/`` plus
    ``lib/clients/kafka-clients-*.jar`` of the shared Kafka (``$GROUPKAFKA_KAFKA_HOME``, else,
    or where that one has none, ``../shared/kafka``: Spark's source does not depend on the
    broker's release, and ../shared/kafka-latest ships no copy), or ``([], why not)`` when they
    are not there."""
    from spark_groupsource.devbroker._kafka import KAFKA_HOME_ENV, SHARED_KAFKA

    homes = [h for h in (os.environ.get(KAFKA_HOME_ENV, "").strip(), SHARED_KAFKA) if h]
    for home in homes:
        source = sorted(glob.glob(os.path.join(home, "lib", "spark-kafka", "*.jar")))
        clients = sorted(glob.glob(os.path.join(home, "lib", "clients", "kafka-clients-*.jar")))
        if source and clients:
            return source + clients, None
    return [], (f"Spark's own Kafka source jars not found under {' or '.join(homes)} (want lib/spark-kafka/*.jar "
                f"and lib/clients/kafka-clients-*.jar; see ../shared/kafka/README.md)")


def spark_session(cores: int, jars: Iterable[str] = (), conf: dict[str, str] | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               # the benches count a query's records from its progress: Spark keeps the last 100
               # reports by default, and a read of more triggers than that came out short
               .config("spark.sql.streaming.numRecentProgressUpdates", "100000"))
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


def _stat(pid: int) -> tuple[int, int, float, float] | None:
    """(parent pid, start time in ticks, own CPU seconds, CPU seconds of reaped children) of
    one process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, int(fields[19]), (utime + stime) / _TICK, (cutime + cstime) / _TICK


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


_SIGCHLD_BIT = 1 << (17 - 1)  # SIGCHLD is 17 on Linux


def _ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD: its children are then reaped by the kernel, and what
    they used is added to nobody's reaped-children time (PySpark's daemon does this)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    except OSError:
        pass
    return False


@dataclass(frozen=True)
class _Seen:
    """One process of the tree at one reading: its part, own and reaped CPU seconds, and
    whether its parent lets the kernel reap it (then its time vanishes when it exits)."""

    kind: str
    own: float
    reaped: float
    autoreaped: bool

    def by_kind(self) -> dict[str, float]:
        # what exited children used: those of the bench, of Spark's JVM and of its Python
        # daemon are Python processes (workers, the source's runner, the bench's readers)
        reaped_kind = "python" if self.kind in ("bench", "jvm", "python") else self.kind
        out = {self.kind: self.own}
        out[reaped_kind] = out.get(reaped_kind, 0.0) + self.reaped
        return out


def _tree(root: int, exclude: Iterable[int] = ()) -> dict[tuple[int, int], _Seen]:
    """``root`` and every live descendant, skipping ``exclude`` and their trees, keyed by
    (pid, start time) so that a reused pid is another process."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (s := _stat(int(name))) is not None:
            stats[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in stats.items():
        children.setdefault(ppid, []).append(pid)
    skip, todo, seen = set(exclude), [(root, False)], {}
    while todo:
        pid, autoreaped = todo.pop()
        if pid in skip or pid not in stats:
            continue
        _, started, own, reaped = stats[pid]
        seen[(pid, started)] = _Seen(_kind(pid, root), own, reaped, autoreaped)
        kids = children.get(pid, ())
        if kids:
            ignores = _ignores_sigchld(pid)
            todo.extend((kid, ignores) for kid in kids)
    return seen


def _sum_by_kind(processes: Iterable[_Seen], sign: float = 1.0,
                 total: dict[str, float] | None = None) -> dict[str, float]:
    total = total if total is not None else {"bench": 0.0, "jvm": 0.0, "python": 0.0, "other": 0.0}
    for p in processes:
        for kind, seconds in p.by_kind().items():
            total[kind] += sign * seconds
    return total


def tree_cpu_by_kind(root: int, exclude: Iterable[int] = ()) -> dict[str, float]:
    """CPU seconds of ``root`` and every live descendant, skipping ``exclude`` and their trees,
    per :func:`_kind`. A process that exited was counted into its parent's reaped-children
    time, unless its parent ignores SIGCHLD (:class:`Meter` keeps those); reaped time counts
    as Python's (Spark's JVM only starts Python processes), so a worker or runner that exits
    between two readings stays on the Python side."""
    return _sum_by_kind(_tree(root, exclude).values())


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle since boot (every core, every process:
    the broker, a neighbour, the kernel), from /proc/stat; idle and iowait do not count."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


def tree_cpu_seconds(root: int, exclude: Iterable[int] = ()) -> float:
    """CPU seconds of ``root`` and every live descendant, skipping ``exclude`` and their trees."""
    return sum(tree_cpu_by_kind(root, exclude).values())


class Meter:
    """Wall and CPU seconds of this process's tree (less ``exclude``) between start and stop;
    ``by_kind``: the CPU split into the bench process, Spark's JVM and Spark's Python processes.

    Two readings of the tree are not enough: PySpark's daemon ignores SIGCHLD, so a worker it
    forked (idle ones are stopped after a minute) or a streaming source's runner that exits
    takes its CPU out of the tree. A runner ending after the previous query left its whole
    life's CPU out of the next reader's reading: Spark's source came out at -1.10 CPU-s per
    million records (bench/steady_state.py, 2026-11-27 08:24 UTC). So a thread reads the tree
    every ``interval`` seconds too, and a process that vanished unreaped counts with what it had
    used at its last reading (its CPU after that reading is lost: workers and runners are
    stopped while idle). The thread's own CPU is taken off the bench's.

    ``machine``: the CPU seconds the whole machine was busy meanwhile (the broker and anything
    else on it included): on a small machine whose broker shares the cores, what the tree could
    not have had."""

    def __init__(self, exclude: Iterable[int] = (), interval: float = 0.1):
        self.exclude = tuple(exclude)
        self.interval = interval
        self.wall = self.cpu = self.machine = 0.0
        self.by_kind: dict[str, float] = {}

    def __enter__(self) -> Meter:
        self._first = _tree(os.getpid(), self.exclude)
        self._last = dict(self._first)
        self._stop = threading.Event()
        self._sampler_cpu = 0.0
        self._thread = threading.Thread(target=self._sample, name="bench-meter", daemon=True)
        self._thread.start()
        self._t0 = time.perf_counter()
        self._machine0 = machine_busy_seconds()
        return self

    def _sample(self) -> None:
        t0 = time.thread_time()
        while not self._stop.wait(self.interval):
            self._last.update(_tree(os.getpid(), self.exclude))
        self._sampler_cpu = time.thread_time() - t0

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.machine = machine_busy_seconds() - self._machine0
        self._stop.set()
        self._thread.join()
        end = _tree(os.getpid(), self.exclude)
        total = _sum_by_kind(end.values())
        _sum_by_kind((self._first[k] for k in end if k in self._first), -1.0, total)
        gone = [k for k in self._last if k not in end]
        # gone and reaped by its parent: its time moved into the parent's, counted above
        _sum_by_kind((self._first[k] for k in gone if k in self._first), -1.0, total)
        # gone unreaped: what it had used at its last reading
        _sum_by_kind((self._last[k] for k in gone if self._last[k].autoreaped), 1.0, total)
        total["bench"] -= self._sampler_cpu
        self.by_kind = total
        self.cpu = sum(total.values())


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
