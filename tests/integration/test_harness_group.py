"""A two-member confluent-kafka consumer group splits partitions and rebalances, on each broker."""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from helpers import consumer_conf, produce_keyed, wait_until


def _owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_member_group_splits_and_rebalances(broker, new_topic, unique_name):
    topic, group = new_topic(8), unique_name("group")
    produced = produce_keyed(broker.bootstrap, topic, 80, partitions=8)
    all_parts = set(range(8))

    members = [Consumer(consumer_conf(broker, group, client_id=f"m{i}")) for i in range(2)]
    seen: list[set[tuple[int, int]]] = [set(), set()]
    try:
        for c in members:
            c.subscribe([topic])

        def poll_all(timeout: float = 0.05) -> None:
            for i, c in enumerate(members):
                for msg in c.consume(100, timeout=timeout):
                    if msg.error() is None:
                        seen[i].add((msg.partition(), msg.offset()))

        def split() -> tuple[set[int], set[int]] | None:
            poll_all()
            a, b = _owned(members[0]), _owned(members[1])
            if a and b and not a & b and a | b == all_parts:
                return a, b
            return None

        a, b = wait_until(split, timeout=40, interval=0.0, message="a disjoint 2-member split")
        assert len(a) == len(b) == 4  # range over 8 partitions, 2 members

        # both members fetch: together they see every record
        wait_until(
            lambda: (poll_all(), len(seen[0] | seen[1]) == len(produced))[1],
            timeout=20,
            interval=0.0,
            message="the members to consume all records",
        )
        assert seen[0] | seen[1] == {(p.partition, p.offset) for p in produced}

        # one member leaves: the other takes over all partitions
        leaver = members.pop(1)
        leaver.close()
        survivor = members[0]

        def took_over() -> bool:
            survivor.consume(100, timeout=0.05)
            return _owned(survivor) == all_parts

        t0 = time.monotonic()
        wait_until(took_over, timeout=40, interval=0.0, message="the survivor to own all 8")
        assert time.monotonic() - t0 < 30
    finally:
        for c in members:
            c.close()
