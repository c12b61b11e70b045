"""``python -m spark_groupsource.groups`` against real brokers: a librdkafka consumer that is
in the group and has committed; the command runs from outside the checkout."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition
from test_stream_support import produce

from helpers import consumer_conf


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
        if broker.backend == "external":  # Tansu's answer lists no members
            assert "CONSUMER-ID" in r.stdout.split("Members")[1]


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
