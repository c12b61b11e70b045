"""Assignment time at scale for the built-in exclusive assignors.

    python bench/assignors.py            # 1,000,000 partitions (a few minutes)
    python bench/assignors.py --quick    # 100,000 partitions

Scenarios (partition counts follow the Java client's AbstractStickyAssignorTest):
  (a) uniform:     500 topics x 2,000 partitions, 2,000 members, all subscribed to all
                   (testLargeAssignmentAndGroupWithUniformSubscription, KAFKA-12464)
  (b) non-uniform: 500 topics x 2,000 partitions, 1,000 members, the last member
                   subscribed to one topic only (KAFKA-13514 style)
Each assignor runs a fresh assignment, then a rebalance with one member removed
and everyone's previous ownership reported (owned partitions + generation).
"baseline" is, in the same run, the time to build every TopicPartition once:
the ratio column is robust to a noisy machine.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assignment import (  # noqa: E402
    ClusterMetadata,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    validate_assignment,
)

PUBLISHED = """\
Published reference figures (other implementations, other machines):
  Java StickyAssignor, (a) 1M partitions / 2,000 consumers uniform:     ~1.4 s  (KAFKA-12464)
  Java StickyAssignor, (b) 1M partitions non-uniform subscriptions:     ~16 s   (KAFKA-13514)
  librdkafka cooperative-sticky: ~5,000 partitions assigned within 30 s"""


def scenario(uniform: bool, topics: int, partitions: int, members: int):
    names = [f"topic-{i:04d}" for i in range(topics)]
    cluster = ClusterMetadata({t: partitions for t in names})
    subs = {}
    for i in range(members):
        m = f"consumer-{i:05d}"
        ts = tuple(names) if uniform or i < members - 1 else (names[0],)
        subs[m] = Subscription(m, ts)
    return cluster, subs


def baseline(cluster: ClusterMetadata) -> float:
    t0 = time.perf_counter()
    parts = [TopicPartition(t, p) for t, n in cluster.partitions_per_topic.items() for p in range(n)]
    dt = time.perf_counter() - t0
    del parts
    return dt


def timed(assignor, cluster, subs):
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        a = assignor.assign(cluster, subs)
        return a, time.perf_counter() - t0
    finally:
        gc.enable()


def rebalance_input(subs, first, generation=1):
    drop = sorted(subs)[len(subs) // 2]
    return {
        m: Subscription(m, s.topics, None, first[m].partitions, generation)
        for m, s in subs.items()
        if m != drop
    }


def moved(before, after) -> int:
    old = {tp: m for m, v in before.items() for tp in v.partitions}
    return sum(1 for m, v in after.items() for tp in v.partitions if old.get(tp, m) != m)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100,000 partitions instead of 1,000,000")
    ap.add_argument("--validate", action="store_true", help="also validate every assignment")
    args = ap.parse_args()
    topics = 50 if args.quick else 500
    sizes = [("(a) uniform", True, topics, 2000, 200 if args.quick else 2000),
             ("(b) non-uniform", False, topics, 2000, 100 if args.quick else 1000)]
    assignors = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]

    header = f"{'scenario':<16} {'assignor':<19} {'run':<10} {'partitions':>10} {'members':>7} " \
             f"{'seconds':>8} {'baseline':>8} {'ratio':>6} {'moved':>8}"
    print(header)
    print("-" * len(header))
    for label, uniform, nt, np_, nm in sizes:
        cluster, subs = scenario(uniform, nt, np_, nm)
        total = nt * np_
        for cls in assignors:
            base = baseline(cluster)
            first, t_fresh = timed(cls(), cluster, subs)
            print(f"{label:<16} {cls.name:<19} {'fresh':<10} {total:>10,} {nm:>7} "
                  f"{t_fresh:>8.2f} {base:>8.2f} {t_fresh / base:>6.1f} {'':>8}", flush=True)
            if args.validate:
                validate_assignment(cls.name, cluster, subs, first)
            nxt = rebalance_input(subs, first)
            base = baseline(cluster)
            second, t_reb = timed(cls(), cluster, nxt)
            print(f"{label:<16} {cls.name:<19} {'rebalance':<10} {total:>10,} {nm - 1:>7} "
                  f"{t_reb:>8.2f} {base:>8.2f} {t_reb / base:>6.1f} {moved(first, second):>8,}",
                  flush=True)
            if args.validate and cls is not CooperativeStickyAssignor:
                validate_assignment(cls.name, cluster, nxt, second)
            del first, second, nxt
    print()
    print(PUBLISHED)


if __name__ == "__main__":
    main()
