"""``kafka.client.rack``: the fetchers read from the replica in their own rack (KIP-392).

Three Kafka nodes, each in a rack of its own, with the brokers' rack-aware replica selector; a
partition replicated on all three. A fetcher told the rack of a follower must be sent there by
the leader and read every record from it. librdkafka's own fetch log says which broker
delivered each record; both fetch paths (the native one consumes without a group, confluent-kafka's
assigns) are checked.
"""

from __future__ import annotations

import re
import time

import pytest

from helpers import own_kafka_or_skip, partition_leaders, produce_keyed
from spark_groupsource.config import fetcher_config, parse_stream_options
from spark_groupsource.executor import native
from spark_groupsource.executor.fetch import _POOL, fetch_range
from spark_groupsource.ranges import OffsetRange

pytestmark = pytest.mark.integration

RECORDS = 300


@pytest.fixture(scope="module")
def racked_cluster():
    from spark_groupsource.devbroker._kafka import KafkaCluster
    from spark_groupsource.devbroker._server import _new_admin, admin_create_topic

    own_kafka_or_skip("starts a Kafka cluster of its own")
    cluster = KafkaCluster(3, config={
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
        racks=["rack-1", "rack-2", "rack-3"])
    try:
        cluster.start(timeout=240)
        admin = _new_admin(cluster.bootstrap)
        for path in ("native", "python"):
            admin_create_topic(admin, f"racked-{path}", 1, 60, replication_factor=3)
        yield cluster
    finally:
        _POOL.clear()
        cluster.close()


def _in_sync(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Until all three replicas are in sync: a follower serves reads only up to its high watermark."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        part = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if len(part.isrs) == 3:
            return
        time.sleep(0.5)
    pytest.fail(f"{topic}: replicas not in sync within {timeout:.0f}s")


@pytest.mark.parametrize("path", ["native", "python"])
def test_a_fetcher_reads_from_the_replica_in_its_rack(racked_cluster, path, capfd):
    if path == "native" and native.unavailable_reason():
        pytest.skip(f"the native fetch path: {native.unavailable_reason()}")
    topic = f"racked-{path}"
    bootstrap = racked_cluster.bootstrap
    produce_keyed(bootstrap, topic, RECORDS, partitions=1)
    _in_sync(bootstrap, topic)
    leader = partition_leaders(bootstrap, topic)[0]
    follower = 1 if leader != 1 else 2
    opts = parse_stream_options({"kafka.bootstrap.servers": bootstrap, "kafka.group.id": "racked-g",
                                 "subscribe": topic, "kafka.client.rack": f"rack-{follower}"})
    # debug=fetch: librdkafka logs the records each broker's Fetch responses delivered
    cfg = {**fetcher_config(opts), "debug": "fetch"}
    capfd.readouterr()
    try:
        batches = list(fetch_range(cfg, OffsetRange(topic, 0, 0, RECORDS), include_headers=False,
                                   fail_on_data_loss=True, max_records_per_batch=1000,
                                   poll_timeout_ms=60_000, fetcher=path))
    finally:
        _POOL.clear()  # the fetcher logs at debug level: closed while its output is captured
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(RECORDS))
    log = capfd.readouterr().err
    # "127.0.0.1:PORT/<node id>: Enqueue 299 message(s) (3667 bytes, 299 ops) on racked-native [0]
    # fetch queue": which broker each record came from. (Not the Fetch requests at offsets above 0:
    # when the follower's first answer holds all the records, the fetcher may close before it
    # asks again, and no such request is logged; CI at 7c3a34f met that under load.)
    delivered: dict[int, int] = {}
    for node, count in re.findall(rf"/(\d+): Enqueue (\d+) message\(s\) [^\n]* on {topic} \[0\] fetch queue", log):
        delivered[int(node)] = delivered.get(int(node), 0) + int(count)
    assert set(delivered) == {follower} and delivered[follower] >= RECORDS, (leader, follower, delivered)
