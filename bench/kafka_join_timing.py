"""Side by side: KIP-848 join timing of our member and a librdkafka peer on Kafka 4.0.1 vs
4.3.1 (assignment batching, KIP-1263), both dev brokers at once, rounds alternating.

    .venv/bin/python bench/kafka_join_timing.py [ROUNDS]

Per round: our member alone owns all 4 partitions (s after start), the joining peer's target
assignment visible in ConsumerGroupDescribe, the 2 + 2 split settled (s after the peer
subscribed); then the medians. See docs/kafka-versions.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from spark_groupsource.devbroker import DevBroker
from spark_groupsource.group.consumer_member import (
    ConsumerProtocolConfig,
    ConsumerProtocolMembership,
)

_SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared")
HOMES = {"4.0.1": os.path.join(_SHARED, "kafka"), "4.3.1": os.path.join(_SHARED, "kafka-latest")}


def peer_target(admin: AdminClient, group: str, client_id: str) -> set[int] | None:
    d = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=6)
    for m in d.members:
        if m.client_id == client_id:
            return {tp.partition for tp in (m.target_assignment.topic_partitions if m.target_assignment else [])}
    return None


def one_round(b: Any, admin: AdminClient) -> tuple[float, float | None, float]:
    topic, group = "t-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    b.create_topic(topic, 4)
    m = ConsumerProtocolMembership(ConsumerProtocolConfig(group_id=group, topics=(topic,), client_config={
        "bootstrap.servers": b.bootstrap, "log_level": 3}, rebalance_timeout_ms=20000), drain_timeout_s=15)
    t0 = time.monotonic()
    m.start()
    while len(m.snapshot().owned) < 4:
        time.sleep(0.02)
    t_first = time.monotonic() - t0
    owned_peer: set[int] = set()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "client.id": "peer", "log_level": 0})
    t1 = time.monotonic()
    c.subscribe([topic], on_assign=lambda _c, parts: owned_peer.update(p.partition for p in parts))
    t_target = None
    try:
        while True:
            c.poll(0.05)
            if t_target is None and peer_target(admin, group, "peer"):
                t_target = time.monotonic() - t1
            s = m.snapshot()
            if len(owned_peer) == 2 and len(s.owned) == 2 and not s.revoking:
                break
            if time.monotonic() - t1 > 60:
                raise RuntimeError("no 2 + 2 split within 60 s")
        return t_first, t_target, time.monotonic() - t1
    finally:
        c.close()
        m.close()


def main(rounds: int) -> None:
    brokers = {v: DevBroker("kafka", kafka_home=h).start() for v, h in HOMES.items()}
    admins = {v: AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0}) for v, b in brokers.items()}
    results: dict[str, list[tuple[float, float | None, float]]] = {v: [] for v in HOMES}
    try:
        for r in range(rounds):
            for v in HOMES:
                results[v].append(one_round(brokers[v], admins[v]))
                print(v, r, [None if x is None else round(x, 2) for x in results[v][-1]], flush=True)
    finally:
        for b in brokers.values():
            b.stop()
    for v, rows in results.items():
        med = [statistics.median([row[i] for row in rows if row[i] is not None]) for i in range(3)]
        print(f"{v}: medians: our member owns all 4 {med[0]:.2f}s; the joiner's target visible {med[1]:.2f}s; "
              f"2 + 2 split settled {med[2]:.2f}s (n={len(rows)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
