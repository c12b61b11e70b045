"""Security on a 3-node Apache Kafka cluster (tests/secure_kafka.py with ``brokers=3``).

On one secured node every connection goes to the same broker: the bootstrap, the group
coordinator and every partition's leader. Here they are three brokers, and each connection the
query opens to another one (the driver's member to its coordinator, the executors' fetchers to
the leaders, the offset reader, the commit) must carry the same security settings: SASL_SSL with
SCRAM-SHA-512, a user with only the ACLs docs/security.md lists, the query told one node only.
Then the coordinator's node is killed under a running query: the member finds the new
coordinator and the fetchers the new leaders, logging in again, and nothing is lost or read twice.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator

import pytest
from secure_kafka import SecureKafka, jaas, start_or_skip
from test_security_kafka import (
    CONSUMER_PROTOCOL,
    GROUP_TIMEOUTS,
    assert_no_secrets,
    checkpoint_text,
    ends,
    group_timeouts,
    read_and_commit,
    wait_group_committed,
)
from test_stream_support import assert_exactly, produce, stop, table_name, to_memory, wait_rows

from helpers import committed_offsets, partition_leaders, wait_until
from spark_groupsource.backfill import BackfillPlan
from spark_groupsource.devbroker import group_coordinator
from tlsfiles import STORE_PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.extended(why="a secured 3-node cluster, ~260 s; CI keeps the one-node security tests")]

NODES = 3
PARTITIONS = 6
USER = "carol"  # SCRAM-SHA-512, not a super user: only the ACLs a test grants
#: The node a query is told of (bootstrap.servers), in the tests that give it one node only.
BOOTSTRAP_NODE = 1


@pytest.fixture(scope="module")
def cluster3() -> Iterator[SecureKafka]:
    sk = start_or_skip(brokers=NODES)
    try:
        _create_offsets_topic(sk)
        yield sk
    finally:
        sk.close()


def _create_offsets_topic(sk: SecureKafka) -> None:
    """The first FindCoordinator creates ``__consumer_offsets``; group placement is read from it.
    Until the new topic's partitions are loaded the OffsetFetch is answered NOT_COORDINATOR (or
    COORDINATOR_LOAD_IN_PROGRESS), which ``committed()`` does not retry: asked again."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": sk.admin_bootstrap, "group.id": "warm-up", "log_level": 0})

    def answered() -> bool:
        try:
            return bool(c.committed([TopicPartition("warm-up", 0)], timeout=10))
        except KafkaException as exc:
            raise AssertionError(str(exc)) from exc  # wait_until asks again, and reports the last

    try:
        wait_until(answered, timeout=90, interval=0.5, message="an OffsetFetch answered")
    finally:
        c.close()


def scram_options(sk: SecureKafka, bootstrap: str) -> tuple[dict[str, str], list[str]]:
    line = jaas("SCRAM-SHA-512", USER)
    return {"kafka.bootstrap.servers": bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": line,
            "kafka.ssl.truststore.location": sk.pki.truststore_p12, "kafka.ssl.truststore.password": STORE_PASSWORD,
            "kafka.ssl.truststore.type": "PKCS12"}, [line, STORE_PASSWORD]


def spread_topic(sk: SecureKafka, topic: str) -> None:
    """A topic whose partitions have leaders on every node (Kafka places them round-robin)."""
    sk.create_topic(topic, PARTITIONS)
    wait_until(lambda: set(partition_leaders(sk.admin_bootstrap, topic).values()) == set(range(1, NODES + 1)),
               timeout=30, interval=0.3, message=f"leaders of {topic} on all {NODES} nodes")


def group_away_from(sk: SecureKafka, base: str, node_id: int) -> str:
    """A group name whose coordinator is not on ``node_id`` (Kafka places a group by its name)."""
    for i in range(64):
        group = f"{base}-{i}"
        if group_coordinator(sk.admin_bootstrap, group) != node_id:
            return group
    raise AssertionError(f"no group name {base}-N placed away from node {node_id}")


def granted_topic_and_group(sk: SecureKafka, unique_name, prefix: str) -> tuple[str, str]:
    """A spread topic and a group coordinated away from the bootstrap node, with READ on both."""
    topic = unique_name(prefix)
    spread_topic(sk, topic)
    group = group_away_from(sk, unique_name("g"), BOOTSTRAP_NODE)
    sk.grant(f"User:{USER}", "TOPIC", topic, "READ")
    sk.grant(f"User:{USER}", "GROUP", group, "READ")
    return topic, group


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_stream_told_one_node_reads_every_leader_and_commits_to_a_coordinator_elsewhere(
        spark, cluster3, protocol, unique_name, tmp_path):
    sk = cluster3
    topic, group = granted_topic_and_group(sk, unique_name, "sec3")
    records = produce(sk.admin_bootstrap, topic, 60, PARTITIONS)
    security, secrets = scram_options(sk, sk.node_listener("SASLSSL", BOOTSTRAP_NODE))
    options = {**security, **(CONSUMER_PROTOCOL if protocol == "consumer" else {})}
    name, checkpoint = table_name(unique_name), str(tmp_path / "cp")

    progress = read_and_commit(spark, sk, options, topic, group, records, name, checkpoint)

    assert_exactly(spark, name, records)
    assert_no_secrets(secrets, progress=progress, checkpoint=checkpoint_text(checkpoint))


def test_a_batch_read_and_a_coordinated_backfill_told_one_node(spark, cluster3, unique_name):
    sk = cluster3
    topic, group = granted_topic_and_group(sk, unique_name, "bf3")
    records = produce(sk.admin_bootstrap, topic, 60, PARTITIONS)
    security, _ = scram_options(sk, sk.node_listener("SASLSSL", BOOTSTRAP_NODE))
    options = {**security, "subscribe": topic}
    want = sorted((r.partition, r.offset) for r in records)

    got = spark.read.format("groupkafka").options(**options).load().select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in got) == want
    with BackfillPlan.resolve({**options, **GROUP_TIMEOUTS, "kafka.group.id": group, "groupCoordinated": "true"},
                              settle_s=1.0) as plan:
        got = plan.read(spark).select("partition", "offset").collect()
        assert sorted((r.partition, r.offset) for r in got) == want
        plan.commit()
    assert committed_offsets(sk.admin_bootstrap, group, topic, PARTITIONS) == ends(records)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_secured_stream_rides_through_a_crash_of_its_coordinators_node(
        spark, cluster3, protocol, unique_name, tmp_path):
    """kill -9 of the node hosting the group's coordinator (and leading some partitions) while
    the query reads: the member logs in to the new coordinator, the fetchers to the new leaders,
    records written after the crash are read, each record once, and the group commits them."""
    sk = cluster3
    topic, group = granted_topic_and_group(sk, unique_name, "crash3")
    security, _ = scram_options(sk, sk.listener("SASLSSL"))  # every node, as users list them
    member = CONSUMER_PROTOCOL if protocol == "consumer" else {}
    df = spark.readStream.format("groupkafka").options(
        **security, **member, **group_timeouts(member), subscribe=topic,
        **{"kafka.group.id": group, "kafka.auto.offset.reset": "earliest"}).load()
    name = table_name(unique_name)
    records = produce(sk.admin_bootstrap, topic, 60, PARTITIONS)
    query = to_memory(df, name, str(tmp_path / "cp"))
    victim = None
    try:
        wait_rows(spark, name, len(records), query=query)
        wait_group_committed(sk, group, topic, ends(records), timeout=60)
        victim = group_coordinator(sk.admin_bootstrap, group)
        led = Counter(partition_leaders(sk.admin_bootstrap, topic).values())[victim]
        sk.cluster.signal_node(victim, signal.SIGKILL)
        records += produce(sk.admin_bootstrap, topic, 60, PARTITIONS, start=60, timeout=120)
        moved_to = group_coordinator(sk.admin_bootstrap, group, timeout=60, not_on=victim)
        wait_rows(spark, name, len(records), timeout=180, query=query)
        wait_group_committed(sk, group, topic, ends(records), timeout=180)
        print(f"{protocol}: killed node {victim} (coordinator, leader of {led} partitions); "
              f"coordinator now on node {moved_to}; progress: "
              f"{json.dumps(query.lastProgress, default=str)[:300]}")
    finally:
        stop(query)
        if victim is not None:
            sk.cluster.start_node(victim, timeout=120)
    assert_exactly(spark, name, records)

