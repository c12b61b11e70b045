"""The driver's committed-offset reads while the group coordinator moves or loads (the mock
answers OffsetFetch with the errors Kafka gives then). librdkafka's admin client died of a
NULL dereference on such an answer, so the reads run in a child process: a crash is a failed
exit, not a lost test session."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from helpers import consumer_conf
from spark_groupsource.planning.offset_reader import OffsetReader, RetryPolicy

OFFSET_FETCH, FIND_COORDINATOR = 9, 10
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, GROUP_AUTHORIZATION_FAILED = 15, 16, 30

READ = """
import json, sys
from assignment.model import TopicPartition
from spark_groupsource.planning.offset_reader import OffsetReader
bootstrap, group, topic = sys.argv[1:4]
with OffsetReader({"bootstrap.servers": bootstrap}) as reader:
    got = reader.committed(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
print(json.dumps({tp.partition: off for tp, off in got.items()}))
"""


@pytest.mark.parametrize("errors", [[NOT_COORDINATOR], [COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR]],
                         ids=["not-coordinator", "not-available-then-not-coordinator"])
def test_committed_offsets_are_read_through_a_coordinator_change(mock_broker, unique_name, errors):
    topic, group = unique_name("t"), unique_name("g")
    mock_broker.create_topic(topic, 2)
    c = Consumer(consumer_conf(mock_broker, group))
    try:
        c.commit(offsets=[CkTP(topic, 0, 7)], asynchronous=False)
    finally:
        c.close()
    mock_broker.mock.push_request_errors(OFFSET_FETCH, errors)
    try:
        child = subprocess.run([sys.executable, "-c", READ, mock_broker.bootstrap, group, topic],
                               capture_output=True, text=True, timeout=120)
    finally:
        mock_broker.mock.clear_request_errors(OFFSET_FETCH)
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-3000:]}"
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {"0": 7, "1": None}


def test_a_group_the_principal_may_not_describe_is_named_at_once(mock_broker, unique_name):
    """The coordinator lookup refused (no DESCRIBE on the group): said at once, not after the
    consumer's timeouts."""
    topic, group = unique_name("t"), unique_name("g")
    mock_broker.create_topic(topic, 1)
    policy = RetryPolicy(num_retries=1, retry_interval_ms=100, request_timeout_ms=10_000)
    mock_broker.mock.push_request_errors(FIND_COORDINATOR, [GROUP_AUTHORIZATION_FAILED] * 4)
    started = time.monotonic()
    try:
        with OffsetReader({"bootstrap.servers": mock_broker.bootstrap}, policy=policy) as reader, \
                pytest.raises(Exception, match="GROUP_AUTHORIZATION_FAILED"):
            reader.committed(group, [TopicPartition(topic, 0)])
    finally:
        mock_broker.mock.clear_request_errors(FIND_COORDINATOR)
    assert time.monotonic() - started < 10, "the refusal waited out a request timeout"
