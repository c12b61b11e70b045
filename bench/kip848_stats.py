"""What the KIP-848 member's statistics callback costs as its partitions grow (issue 53).

The member (``kafka.group.protocol=consumer``) asks librdkafka for its statistics every
``statistics.interval.ms`` (1 s by default, ``group/consumer_member.py`` TOUCH_STATS_MS) to say
when it loses touch with its coordinator (``group/touch.py``). librdkafka's statistics hold an
object per partition of every topic the client knows, so the JSON grows with the subscription.
This runs a one-node Apache Kafka with one topic per size in ``--partitions``, a confluent-kafka
Consumer configured as the member configures its own (group.protocol=consumer, the same
``stats_cb`` work: parse, then :class:`LibrdkafkaCoordinator`.observe) subscribed to it, and
prints per size: the statistics' bytes, the callback's time per call and the share of one core
it takes at the interval.

    python bench/kip848_stats.py [--partitions 100,2000,10000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from confluent_kafka import Consumer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import load_average  # noqa: E402
from many_partitions import create_topics  # noqa: E402

from spark_groupsource.devbroker import DevBroker, kafka_missing  # noqa: E402
from spark_groupsource.group.consumer_member import TOUCH_STATS_MS  # noqa: E402
from spark_groupsource.group.touch import LibrdkafkaCoordinator, parse_stats  # noqa: E402


def measure(bootstrap: str, topic: str, seconds: float, interval_ms: int = TOUCH_STATS_MS) -> dict[str, float]:
    """One consumer's statistics over ``seconds`` after its assignment, and the process's CPU
    (librdkafka's threads included) over them; ``interval_ms`` 0: no statistics, the baseline."""
    raws: list[str] = []
    ours: list[float] = []
    view = LibrdkafkaCoordinator()
    answers: list[tuple[bool, str]] = []
    assigned: list[int] = []

    def on_assign(_consumer, parts) -> None:
        assigned.append(len(parts))

    def on_stats(raw: str) -> None:
        if not assigned:  # before the assignment the statistics hold no partition yet
            return
        t = time.perf_counter()
        answers.append(view.observe(parse_stats(raw)))  # what the member's callback does
        ours.append(time.perf_counter() - t)
        raws.append(raw)  # judged after the measured window, off its CPU

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"stats-{topic}-{time.time_ns()}",
                  "group.protocol": "consumer", "statistics.interval.ms": interval_ms,
                  "stats_cb": on_stats, "enable.auto.commit": False, "log_level": 3})
    try:
        c.subscribe([topic], on_assign=on_assign)
        t0 = time.monotonic()
        while not assigned and time.monotonic() - t0 < 300:
            c.poll(0.2)
        if not assigned:
            raise SystemExit(f"{topic}: no assignment within 300 s")
        assign_s = time.monotonic() - t0
        cpu0, t0 = time.process_time(), time.monotonic()
        deadline = t0 + seconds
        while time.monotonic() < deadline:
            c.poll(0.2)
        cpu_pct = 100 * (time.process_time() - cpu0) / (time.monotonic() - t0)
    finally:
        c.close()
    if not interval_ms:
        return {"assigned": sum(assigned), "assign_s": assign_s, "cpu_pct": cpu_pct}
    whole, reference = [], LibrdkafkaCoordinator()
    for raw, answer in zip(raws, answers, strict=True):
        t = time.perf_counter()
        full = json.loads(raw)
        whole.append(time.perf_counter() - t)
        if reference.observe(full) != answer:  # the parsed parts must give the whole's answer
            raise SystemExit(f"{topic}: parse_stats gave {answer}, the whole JSON {reference.observe(full)}")
    interval_s = interval_ms / 1000.0
    return {"cpu_pct": cpu_pct, "assigned": sum(assigned), "assign_s": assign_s, "calls": len(raws),
            "bytes": statistics.median(len(r) for r in raws),
            "json_ms": 1000 * statistics.median(whole), "ours_ms": 1000 * statistics.median(ours),
            "json_core_pct": 100 * statistics.median(whole) / interval_s,
            "ours_core_pct": 100 * statistics.median(ours) / interval_s}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", default="100,2000,10000")
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args(argv)
    missing = kafka_missing(None)
    if missing:
        print(f"kip848_stats: no Apache Kafka here ({missing}); nothing measured")
        return 0
    os.environ.setdefault("GROUPKAFKA_KAFKA_HEAP_OPTS", "-Xmx1g -Xms256m")
    sizes = [int(n) for n in args.partitions.split(",")]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load_average()}")
    print("| partitions (assigned) | statistics bytes | json.loads of all: ms (share of a core) | "
          "the member's callback: ms (share of a core) | calls | process CPU, statistics on / off |")
    print("|---|---|---|---|---|---|")
    with DevBroker("kafka", startup_timeout=600) as broker:
        for n in sizes:
            topic = f"stats{n}"
            create_topics(broker.bootstrap, {topic: n})
            r = measure(broker.bootstrap, topic, args.seconds)
            off = measure(broker.bootstrap, topic, args.seconds, interval_ms=0)
            print(f"| {n:,} ({r['assigned']:,} after {r['assign_s']:.1f} s) | {r['bytes']:,.0f} | "
                  f"{r['json_ms']:.1f} ({r['json_core_pct']:.2f}%) | {r['ours_ms']:.2f} ({r['ours_core_pct']:.2f}%) | "
                  f"{r['calls']} | {r['cpu_pct']:.1f}% / {off['cpu_pct']:.1f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
