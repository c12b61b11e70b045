"""The driver's offset reader on a 3-node Apache Kafka cluster whose partition leader crashes.

Found by the chaos suite's broker_crash on Kafka: after ``kill -9`` of the broker leading a
partition, leadership moved to another node with a new leader epoch, and every ListOffsets of
the driver's (long-lived) librdkafka admin client was answered FENCED_LEADER_EPOCH until the
query's 120 s outage bound failed it. The reader must read the offsets of every partition again
soon after the controller has elected new leaders, and again after the node is back.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from assignment.model import TopicPartition
from helpers import own_kafka_or_skip, partition_leaders, produce_keyed

pytestmark = [pytest.mark.integration, pytest.mark.extended(why="a 3-node cluster, ~110 s; make chaos-kafka crashes its nodes too")]

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster() -> Any:
    from spark_groupsource.devbroker import DevBroker

    own_kafka_or_skip("needs an embedded 3-node Kafka cluster")
    b = DevBroker("kafka", brokers=3).start()
    try:
        yield b
    finally:
        b.stop()


def within(t0: float) -> str:
    return f"{time.monotonic() - t0:.0f}s"


def test_offsets_readable_again_after_the_leader_crashes_and_returns(cluster, unique_name):
    from spark_groupsource.planning.offset_reader import OffsetReader, RetryPolicy

    topic = unique_name("crash")
    cluster.create_topic(topic, PARTITIONS)
    produce_keyed(cluster.bootstrap, topic, 60, partitions=PARTITIONS)
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = OffsetReader({"bootstrap.servers": cluster.bootstrap, "log_level": 0},
                          policy=RetryPolicy(num_retries=0, request_timeout_ms=3000))
    try:
        assert set(reader.try_watermarks(parts).found) == set(parts)  # the client knows every leader
        victim = Counter(partition_leaders(cluster.bootstrap, topic).values()).most_common(1)[0][0]
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


def test_executor_reads_give_up_at_once_once_the_whole_cluster_was_silent_past_the_bound(cluster, unique_name):
    """Every node killed while an executor reads: the first task waits brokerOutageTimeoutMs and
    fails naming it; after that a retried task, and a task of another partition, each in a new
    Python worker (one whose task raised exits), fail at their first check instead of waiting
    the bound (plus a 10 s watermark query) again. Found by chaos cluster_down_long on
    Kafka: 6 partitions' tasks on one core, each attempt waiting the bound, kept the query alive
    for minutes after its member had given up."""
    from spark_groupsource.config import FETCHER_PLACEHOLDER_GROUP
    from spark_groupsource.errors import BrokerError
    from spark_groupsource.executor import fetch
    from spark_groupsource.executor.silence import ClusterSilence
    from spark_groupsource.ranges import OffsetRange

    topic = unique_name("down")
    cluster.create_topic(topic, PARTITIONS)
    produce_keyed(cluster.bootstrap, topic, 60, partitions=PARTITIONS)
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": FETCHER_PLACEHOLDER_GROUP,
              "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error",
              "log_level": 0}
    bound_ms = 8000

    def read(partition: int) -> tuple[float, str]:
        t0 = time.monotonic()
        with pytest.raises(BrokerError, match=f"bootstrap servers {cluster.bootstrap}.*brokerOutageTimeoutMs") as err:
            for _ in fetch.read_partition(config, [OffsetRange(topic, partition, 10, 20)], include_headers=False,
                                          fail_on_data_loss=True, max_records_per_batch=100,
                                          poll_timeout_ms=120_000, outage_timeout_ms=bound_ms):
                pass
        return time.monotonic() - t0, str(err.value)

    nodes = sorted(int(n["id"]) for n in cluster.kafka.nodes())
    fetch._UNREACHABLE.clear()
    ClusterSilence(cluster.bootstrap).answered()
    for n in nodes:
        cluster.kafka.kill_node(n)
    try:
        first, _ = read(0)
        assert first >= bound_ms / 1000, f"the first task gave up after {first:.1f}s, before the bound"
        fetch._UNREACHABLE.clear()  # a failed task's Python worker exits: the next one is new
        retried, msg = read(0)
        fetch._UNREACHABLE.clear()
        other, _ = read(3)
        print(f"whole cluster down: first task {first:.1f}s, its retry {retried:.1f}s, another partition {other:.1f}s")
        # before: each waited the bound again, at least 1 s + a 10 s watermark query
        assert retried < bound_ms / 1000 and other < bound_ms / 1000, (first, retried, other)
    finally:
        cluster.kafka.start_nodes(nodes, timeout=120)
