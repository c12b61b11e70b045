"""The leader's cluster snapshot reads replica racks through kafka-python's public metadata API."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer

from assignment.model import TopicPartition
from helpers import wait_until
from spark_groupsource.devbroker import DevBroker
from spark_groupsource.group.assignor_bridge import cluster_snapshot

pytestmark = pytest.mark.integration


def test_replica_racks_of_each_partition() -> None:
    with DevBroker("mock", brokers=3) as b:
        for node, rack in ((1, "r1"), (2, "r2"), (3, "r3")):
            b.mock.set_rack(node, rack)
        b.create_topic("racked", 3)
        for p in range(3):
            b.mock.set_partition_leader("racked", p, p + 1)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap.split(","), api_version=(2, 3))
        try:
            c.partitions_for_topic("racked")  # fetches the topic's metadata
            cluster = c._client.cluster  # test-only: the metadata the membership's client holds
            snap = wait_until(lambda: (s := cluster_snapshot(cluster, {"racked"})).partition_racks and s,
                              timeout=30, interval=0.2, message="rack metadata")
        finally:
            c.close()
    assert snap.partitions_per_topic == {"racked": 3}
    # the mock replicates every partition on every broker (replication factor = brokers)
    assert snap.partition_racks == {TopicPartition("racked", p): frozenset({"r1", "r2", "r3"}) for p in range(3)}
