"""The driver's offset reader on a 3-node Apache Kafka cluster whose partition leader crashes.

Found by the chaos suite's broker_crash on Kafka: after ``kill -9`` of the broker leading a
partition, leadership moved to another node with a new leader epoch, and every ListOffsets of
the driver's (long-lived) librdkafka admin client was answered FENCED_LEADER_EPOCH until the
query's 120 s outage bound failed it. The reader must read the offsets of every partition again
soon after the controller has elected new leaders, and again after the node is back.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest

from assignment.model import TopicPartition
from helpers import produce_keyed

pytestmark = pytest.mark.integration

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster() -> Any:
    from spark_groupsource.devbroker import DevBroker, kafka_missing

    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP"):
        pytest.skip("needs an embedded 3-node Kafka cluster; GROUPKAFKA_TEST_BOOTSTRAP points tests elsewhere")
    why = kafka_missing()
    if why:
        pytest.skip(f"no Apache Kafka for a 3-node cluster: {why}")
    b = DevBroker("kafka", brokers=3).start()
    try:
        yield b
    finally:
        b.stop()


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=10)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def within(t0: float) -> str:
    return f"{time.monotonic() - t0:.0f}s"


def test_offsets_readable_again_after_the_leader_crashes_and_returns(cluster, unique_name):
    from spark_groupsource.offset_reader import OffsetReader, RetryPolicy

    topic = unique_name("crash")
    cluster.create_topic(topic, PARTITIONS)
    produce_keyed(cluster.bootstrap, topic, 60, partitions=PARTITIONS)
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = OffsetReader({"bootstrap.servers": cluster.bootstrap, "log_level": 0},
                          policy=RetryPolicy(num_retries=0, request_timeout_ms=3000))
    try:
        assert set(reader.try_watermarks(parts).found) == set(parts)  # the client knows every leader
        victim = Counter(_leaders(cluster.bootstrap, topic).values()).most_common(1)[0][0]
        cluster.kafka.kill_node(victim)
        t0 = time.monotonic()

        last: list[Any] = []

        def all_answered(within_s: float, what: str) -> None:
            deadline = time.monotonic() + within_s
            while True:
                got = reader.try_watermarks(parts)
                last[:] = [got.missing, {tp.partition: hi for tp, (_, hi) in got.found.items()}]
                if set(got.found) == set(parts):
                    return
                assert time.monotonic() < deadline, f"{what}: not every partition's offsets readable: {last}"
                time.sleep(0.5)

        all_answered(60, f"{within(t0)} after broker {victim} was killed")
        after_kill = time.monotonic() - t0
        cluster.kafka.start_node(victim, timeout=120)
        all_answered(60, f"with broker {victim} back")
        assert sum(last[1].values()) == 60, last
        print(f"broker {victim} killed: offsets of all {PARTITIONS} partitions readable again after {after_kill:.1f}s")
    finally:
        reader.close()
