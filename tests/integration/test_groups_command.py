"""``python -m spark_groupsource.groups`` against real brokers: a librdkafka consumer that is
in the group and has committed; the command runs from outside the checkout."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition
from test_stream_support import produce

from helpers import consumer_conf, group_member, wait_until
from javaclient import JavaConsumer


def _members(out: str) -> list[dict[str, str]]:
    """The members table: one dict per member (CONSUMER-ID, GROUP-INSTANCE-ID, HOST,
    CLIENT-ID, #PARTITIONS, ASSIGNMENT)."""
    lines = out.split("Members, as the broker reports them:", 1)[1].splitlines()[1:]
    head = next((i for i, line in enumerate(lines) if line.startswith("CONSUMER-ID")), None)
    if head is None:
        return []
    names = lines[head].split()
    return [dict(zip(names, line.split(maxsplit=len(names) - 1), strict=True))
            for line in lines[head + 1:] if line.strip()]


def _rows(out: str, group: str) -> dict[int, tuple[str, str, str]]:
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if cells[:1] == [group]:
            rows[int(cells[2])] = (cells[3], cells[4], cells[5])
    return rows


def test_groups_command_shows_offsets_lag_and_members(broker, new_topic, unique_name, tmp_path):
    topic, group = new_topic(3), unique_name("g")
    produce(broker.bootstrap, topic, 12, 3)  # 4 records per partition
    c = Consumer(consumer_conf(broker, group))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), "the consumer never joined the group"
        c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 2), TopicPartition(topic, 2, 3)],
                 asynchronous=False)
        started = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", broker.bootstrap,
                            "--group", group, "--timeout", "5"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        took = time.monotonic() - started
    finally:
        c.close()
    assert r.returncode == 0, r.stderr
    assert _rows(r.stdout, group) == {0: ("1", "4", "3"), 1: ("2", "4", "2"), 2: ("3", "4", "1")}, r.stdout
    assert "TOTAL-LAG 6" in r.stdout
    if broker.backend == "mock":  # librdkafka's mock has no DescribeGroups: said, not hidden
        assert "Members: not available: the broker did not answer DescribeGroups" in r.stdout
        assert took < 60
    else:
        assert "Members, as the broker reports them:" in r.stdout and "state STABLE" in r.stdout, r.stdout
        if broker.backend == "kafka":  # DescribeGroups in full: the librdkafka consumer and its 3 partitions
            (m,) = _members(r.stdout)
            assert (m["CLIENT-ID"], m["#PARTITIONS"], m["ASSIGNMENT"]) == ("rdkafka", "3", f"{topic}(0,1,2)"), r.stdout
            assert m["HOST"].endswith("127.0.0.1") and m["GROUP-INSTANCE-ID"] == "-"
            # the partition rows name the owner
            assert {line.split()[6] for line in r.stdout.splitlines() if line.startswith(group)} == {m["CONSUMER-ID"]}
        if broker.backend == "external":  # Tansu's answer lists no members
            assert "CONSUMER-ID" in r.stdout.split("Members")[1]


def test_groups_command_members_table_our_member_and_a_java_consumer(kafka_broker, unique_name, tmp_path):
    """Apache Kafka answers DescribeGroups with every member: our driver's member (kafka-python,
    static here) and a Java consumer (kafka-clients 4.0.1) in one classic group, each with its
    client id, host, instance id and assignment; the partition rows name their owner."""
    b = kafka_broker
    topic, group = unique_name("t"), unique_name("g")
    b.create_topic(topic, 4)
    produce(b.bootstrap, topic, 8, 4)
    ours = group_member(b, group, topic, client={"client_id": "groupkafka-driver"}, group_instance_id="etl-0")
    ours.start()
    java = None
    try:
        assert ours.wait_for_assignment(60), ours.describe()
        java = JavaConsumer(b.bootstrap, group, [topic], client_id="java-peer", assignment_strategy="range",
                            start=True)

        def split():
            s = ours.snapshot()
            return len(s.owned) == 2 and not s.rebalancing and len(java.owned()) == 2
        wait_until(split, 60, interval=0.1, message="a 2+2 split between our member and the Java consumer")
        r = subprocess.run([sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", b.bootstrap,
                            "--group", group, "--timeout", "5"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        mine = sorted(tp.partition for tp in ours.snapshot().owned)
        theirs = sorted(p for _, p in java.owned())
    finally:
        if java is not None:
            java.close()
        ours.close()
    assert r.returncode == 0, r.stderr
    assert "state STABLE, protocol range" in r.stdout, r.stdout
    by_client = {m["CLIENT-ID"]: m for m in _members(r.stdout)}
    assert set(by_client) == {"groupkafka-driver", "java-peer"}, r.stdout
    ours_row, java_row = by_client["groupkafka-driver"], by_client["java-peer"]
    assert ours_row["ASSIGNMENT"] == f"{topic}({','.join(map(str, mine))})", r.stdout
    assert java_row["ASSIGNMENT"] == f"{topic}({','.join(map(str, theirs))})", r.stdout
    assert ours_row["GROUP-INSTANCE-ID"] == "etl-0" and java_row["GROUP-INSTANCE-ID"] == "-"
    assert ours_row["CONSUMER-ID"].startswith("etl-0-") and java_row["CONSUMER-ID"].startswith("java-peer-")
    assert all(m["HOST"].endswith("127.0.0.1") and m["#PARTITIONS"] == "2" for m in by_client.values())
    print(r.stdout)


def test_groups_command_only_named_topics_and_partitions_without_commits(broker, new_topic, unique_name, tmp_path):
    topic, other, group = new_topic(2), new_topic(1), unique_name("g")
    produce(broker.bootstrap, topic, 4, 2)
    produce(broker.bootstrap, other, 3, 1)
    c = Consumer(consumer_conf(broker, group))
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(other, 0, 1)], asynchronous=False)
    finally:
        c.close()
    r = subprocess.run([sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", broker.bootstrap,
                        "--group", group, "--topic", topic, "--timeout", "5"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _rows(r.stdout, group) == {0: ("2", "2", "0"), 1: ("-", "2", "-")}, r.stdout
    assert other not in r.stdout
