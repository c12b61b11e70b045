"""The whole leader round (decode + assign + validate + encode) at scale, and a session check.

    python bench/leader_round.py              # 100,000 and 1,000,000 partitions (several minutes)
    python bench/leader_round.py --quick      # 100,000 only
    python bench/leader_round.py --session    # only the session check on the mock broker

Group: T topics x 2,000 partitions, 2,000 members subscribed to all (cooperative-sticky).
  fresh:     2,000 members join with nothing owned
  rebalance: one member left; 1,999 rejoin with their owned partitions and generation
             (the issue #9 measurement: 32 MB of subscriptions at 1M partitions)
Columns: seconds per phase of ``assignment.leader.lead_round`` (the leader's code path), and in
the same run two yardsticks for a noisy, shared machine:
  baseline   building every TopicPartition of the group once (as bench/assignors.py)
  reference  the same round through the field-by-field reference functions (decode_subscription,
             TopicPartition tuples, the generic validator and writer): the pre-#9 pipeline
Phases are CPU seconds of this process (time.process_time), the best of --repeat runs; the
reference runs once. The session check reports wall time.

Session check: a GroupMembership leads a cooperative-sticky group on the mock dev broker
(librdkafka consumers as the other members) and reports the leader's round time, whether the
rebalance completed within the session timeout, and whether any member lost its session.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assignment import (  # noqa: E402
    ClusterMetadata,
    CooperativeStickyAssignor,
    MemberAssignment,
    Subscription,
    TopicPartition,
    validate_assignment,
)
from assignment.leader import PHASES, lead_round  # noqa: E402
from assignment.protocol import (  # noqa: E402
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
)

PARTITIONS = 2000
MEMBERS = 2000
# CPU seconds of this process: on an idle machine the same as wall time for this single-threaded
# work, and far less disturbed than wall time when other jobs share the cores.
CLOCK = time.process_time


def group(topics: int):
    names = tuple(f"topic-{i:04d}" for i in range(topics))
    cluster = ClusterMetadata({t: PARTITIONS for t in names})
    ids = [f"consumer-{i:05d}" for i in range(MEMBERS)]
    return names, cluster, ids


def fresh_metadata(names, ids) -> dict[str, bytes]:
    ud = encode_cooperative_user_data(-1)
    return {m: encode_subscription(Subscription(m, names, ud)) for m in ids}


def rebalance_metadata(names, cluster, ids) -> dict[str, bytes]:
    first = lead_round(CooperativeStickyAssignor(), fresh_metadata(names, ids), {},
                       lambda t, r: cluster)
    from assignment.protocol import decode_assignment

    drop = ids[len(ids) // 2]
    ud = encode_cooperative_user_data(1)
    out = {}
    for m in ids:
        if m == drop:
            continue
        owned = decode_assignment(first.assignments[m]).partitions
        out[m] = encode_subscription(Subscription(m, names, ud, owned, 1))
    return out


def best_round(meta, cluster, repeat: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(repeat):
        gc.collect()
        r = lead_round(CooperativeStickyAssignor(), meta, {}, lambda t, racks: cluster, CLOCK)
        for k, v in r.seconds.items():
            best[k] = min(best.get(k, v), v)
        del r
    return best


def reference_round(meta, cluster) -> float:
    """The round through the reference functions only (no bulk decoder, no compact lists)."""
    gc.collect()
    t0 = CLOCK()
    subs = {}
    for m, d in meta.items():
        s = decode_subscription(m, d)
        subs[m] = s
    a = CooperativeStickyAssignor()
    res = a.assign(cluster, subs)
    res = {m: MemberAssignment(tuple(v.partitions), v.user_data) for m, v in res.items()}
    validate_assignment(a.name, cluster, subs, res, cooperative=True)
    for v in res.values():
        encode_assignment(v)
    return CLOCK() - t0


def baseline(cluster: ClusterMetadata) -> float:
    gc.collect()
    t0 = CLOCK()
    parts = [TopicPartition(t, p) for t, n in cluster.partitions_per_topic.items() for p in range(n)]
    dt = CLOCK() - t0
    del parts
    return dt


def table(sizes: list[int], repeat: int, reference: bool) -> None:
    head = (f"{'run':<10} {'partitions':>10} {'members':>7} {'MB in':>6} "
            + " ".join(f"{p:>8}" for p in PHASES) + f" {'round':>7} {'baseline':>8} {'ratio':>6}"
            + (f" {'reference':>9} {'speedup':>7}" if reference else ""))
    print(f"CPU seconds (time.process_time); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    print(head)
    print("-" * len(head))
    for topics in sizes:
        names, cluster, ids = group(topics)
        for run in ("fresh", "rebalance"):
            meta = fresh_metadata(names, ids) if run == "fresh" else rebalance_metadata(names, cluster, ids)
            mb = sum(map(len, meta.values())) / 1e6
            best = best_round(meta, cluster, repeat)
            total = sum(best[p] for p in PHASES if p != "metadata")
            base = baseline(cluster)
            line = (f"{run:<10} {topics * PARTITIONS:>10,} {len(meta):>7} {mb:>6.1f} "
                    + " ".join(f"{best[p]:>8.3f}" for p in PHASES)
                    + f" {total:>7.3f} {base:>8.3f} {total / base:>6.1f}")
            if reference:
                ref = reference_round(meta, cluster)
                line += f" {ref:>9.2f} {ref / total:>6.1f}x"
            print(line, flush=True)
            del meta
    print("round = decode + assign + validate + encode (metadata is the caller's lookup, here a dict)")


def _members(bootstrap: str, group_id: str, names: list[str], n: int, session_ms: int,
             seconds: float) -> None:
    """The other members: librdkafka consumers polling in their own process (own GIL)."""
    from confluent_kafka import Consumer

    cs = [Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                    "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": session_ms, "log_level": 3, "client.id": f"member-{i}"})
          for i in range(n)]
    for c in cs:
        c.subscribe(names)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in cs:
            c.poll(0.02)
    for c in cs:
        c.close()


def session_check(topics: int, partitions: int, consumers: int, session_ms: int) -> None:
    """A GroupMembership leads a cooperative-sticky group of librdkafka members on the mock."""
    import multiprocessing

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from assignment.registry import create_assignors
    from spark_groupsource.devbroker import DevBroker
    from spark_groupsource.group.classic_member import GroupMembership, MembershipConfig

    rounds: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            msg = record.getMessage()
            if "leader assigned group" in msg:
                rounds.append(msg)

    logging.getLogger("spark_groupsource.membership").addHandler(Grab())
    logging.getLogger("spark_groupsource.membership").setLevel(logging.INFO)
    names = [f"big-{i:03d}" for i in range(topics)]
    total = topics * partitions
    share = {total // (consumers + 1), -(-total // (consumers + 1))}
    with DevBroker("mock") as broker:
        for t in names:
            broker.create_topic(t, partitions)
        group_id = f"leader-session-{os.getpid()}"
        leader = GroupMembership(MembershipConfig(
            group_id=group_id, assignors=tuple(create_assignors("cooperative-sticky")),
            topics=tuple(names),
            client_config={"bootstrap_servers": broker.bootstrap.split(","), "api_version": (2, 3),
                           "session_timeout_ms": session_ms, "max_poll_interval_ms": 60_000,
                           "request_timeout_ms": 5_000},
            leader_sync_delay_ms=1000), drain_timeout_s=5)
        leader.start()
        print(f"session check: {topics} topics x {partitions} partitions ({total:,}), leader + "
              f"{consumers} librdkafka members (another process) on the mock, session timeout "
              f"{session_ms} ms", flush=True)
        child = None
        try:
            deadline = time.monotonic() + 120
            while not leader.snapshot().owned and time.monotonic() < deadline:
                time.sleep(0.2)
            first = leader.snapshot()
            print(f"  leader alone owns {len(first.owned):,} partitions; the others join", flush=True)
            child = multiprocessing.get_context("spawn").Process(
                target=_members, args=(broker.bootstrap, group_id, names, consumers, session_ms, 200.0),
                daemon=True)
            start = time.monotonic()
            child.start()
            settled = None
            stable_since = None
            last_gen = None
            while time.monotonic() < start + 180:
                s = leader.snapshot()
                ok = not s.rebalancing and len(s.owned) in share
                if ok and s.generation == last_gen:
                    stable_since = stable_since or time.monotonic()
                    if time.monotonic() - stable_since >= 3:
                        settled = stable_since - start
                        break
                else:
                    stable_since = None
                last_gen = s.generation
                time.sleep(0.1)
            last = leader.snapshot()
            for r in rounds:
                print("  " + r)
            same = last.member_id == first.member_id
            print(f"  settled (leader holds its share, same generation for 3 s) after {settled:.1f} s"
                  if settled is not None else "  did not settle within 180 s")
            print(f"  leader kept its member id (no session lost): {same}; generation "
                  f"{first.generation} -> {last.generation}; {len(rounds)} leader rounds")
            longest = max((_round_seconds(r) for r in rounds), default=0.0)
            ok = same and settled is not None and longest * 1000 < session_ms
            print(f"  longest leader round {longest:.3f} s (wall) vs session timeout "
                  f"{session_ms / 1000:.1f} s: {'OK' if ok else 'AT RISK'}", flush=True)
        finally:
            if child is not None and child.is_alive():
                child.terminate()  # our own child, by its handle
                child.join(10)
            leader.close()


def _round_seconds(msg: str) -> float:
    # "... in 0.123 s (decode ...)"
    try:
        return float(msg.rsplit(" in ", 1)[1].split(" s", 1)[0])
    except (IndexError, ValueError):
        return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100,000 partitions only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true", help="skip the reference pipeline")
    ap.add_argument("--session", action="store_true", help="only the session check")
    ap.add_argument("--session-topics", type=int, default=10)
    ap.add_argument("--session-partitions", type=int, default=1000)
    ap.add_argument("--session-members", type=int, default=4)
    ap.add_argument("--session-timeout-ms", type=int, default=10_000)
    ap.add_argument("--no-session", action="store_true", help="skip the session check")
    args = ap.parse_args()
    if not args.session:
        table([50] if args.quick else [50, 500], args.repeat, not args.no_reference)
        print(flush=True)
    if not args.no_session:
        session_check(args.session_topics, args.session_partitions, args.session_members,
                      args.session_timeout_ms)


if __name__ == "__main__":
    main()
