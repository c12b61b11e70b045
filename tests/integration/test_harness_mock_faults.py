"""Fault injection on the mock broker reaches real clients; the mock's aborts stay isolated."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from helpers import committed_offsets, consumer_conf, produce_keyed, wait_until
from spark_groupsource.devbroker import DevBroker, DevBrokerError

pytestmark = pytest.mark.integration  # some tests start their own DevBroker, no fixture

OFFSET_COMMIT, METADATA, PRODUCE, FETCH = 8, 3, 0, 1
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 10, 11, 14
REBALANCE_IN_PROGRESS = 27


def _join(c: Consumer, timeout: float = 20) -> None:
    wait_until(
        lambda: (c.poll(0.05), bool(c.assignment()))[1],
        timeout=timeout,
        interval=0.0,
        message="the consumer to get an assignment",
    )


def _first_record(c: Consumer, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None:
            return msg
    raise AssertionError("no record consumed")


def test_injected_offset_commit_error_reaches_the_client(mock_broker, unique_name):
    topic, group = unique_name("topic"), unique_name("group")
    mock_broker.create_topic(topic, 4)
    produce_keyed(mock_broker.bootstrap, topic, 8, partitions=4)
    c = Consumer(consumer_conf(mock_broker, group))
    try:
        c.subscribe([topic])
        msg = _first_record(c)
        mock_broker.mock.push_request_errors(OFFSET_COMMIT, [REBALANCE_IN_PROGRESS])
        with pytest.raises(KafkaException) as info:
            c.commit(message=msg, asynchronous=False)
        assert info.value.args[0].code() == KafkaError.REBALANCE_IN_PROGRESS

        # the error was consumed by that one request: the retry commits
        wait_until(
            lambda: c.commit(message=msg, asynchronous=False) or True,
            timeout=15,
            interval=0.2,
            message="a commit after the injected error",
        )
        committed = committed_offsets(mock_broker.bootstrap, group, topic, 4)
        assert committed[msg.partition()] == msg.offset() + 1
    finally:
        mock_broker.mock.clear_request_errors(OFFSET_COMMIT)
        c.close()


def test_broker_down_then_up(mock_broker, unique_name):
    topic = unique_name("topic")
    mock_broker.create_topic(topic, 2)
    conf = {
        "bootstrap.servers": mock_broker.bootstrap,
        "message.timeout.ms": 1500,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
        "log_level": 0,  # connection-refused noise is the point here
    }
    p = Producer(conf)
    results: list = []
    try:
        mock_broker.mock.broker_down(1)
        p.produce(topic, b"while-down", partition=0, on_delivery=lambda e, m: results.append(e))
        p.flush(10)
        assert results and results[0] is not None
        assert results[0].code() in (KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT)
        with pytest.raises(KafkaException):
            p.list_topics(timeout=1)
    finally:
        mock_broker.mock.broker_up(1)

    results.clear()
    p.produce(topic, b"after-up", partition=0, on_delivery=lambda e, m: results.append(e))
    assert p.flush(15) == 0
    assert results == [None]


def test_request_tracking_shows_api_keys(mock_broker, unique_name):
    topic, group = unique_name("topic"), unique_name("group")
    mock_broker.create_topic(topic, 2)
    mock = mock_broker.mock
    mock.start_request_tracking()
    mock.clear_requests()
    try:
        produce_keyed(mock_broker.bootstrap, topic, 4, partitions=2)
        c = Consumer(consumer_conf(mock_broker, group))
        try:
            c.subscribe([topic])
            msg = _first_record(c)
            c.commit(message=msg, asynchronous=False)
        finally:
            c.close()
    finally:
        mock.stop_request_tracking()
    requests = mock.requests()
    keys = {api_key for _broker_id, api_key in requests}
    assert {
        PRODUCE,
        METADATA,
        FETCH,
        FIND_COORDINATOR,
        JOIN_GROUP,
        SYNC_GROUP,
        OFFSET_COMMIT,
    } <= keys
    assert {broker_id for broker_id, _ in requests} == {1}
    # stopped: new traffic is not recorded, old entries stay until cleared
    produce_keyed(mock_broker.bootstrap, topic, 1)
    assert len(mock.requests()) == len(requests)
    mock.clear_requests()
    assert mock.requests() == []


def test_coordinator_placement_and_rtt_on_a_three_broker_mock(unique_name):
    group = unique_name("group")
    with DevBroker("mock", brokers=3, topics={"t3": 6}) as b:
        assert len(b.bootstrap.split(",")) == 3
        b.mock.set_coordinator(group, 2)
        b.mock.set_partition_leader("t3", 0, 3)
        b.mock.start_request_tracking()
        c = Consumer(consumer_conf(b, group))
        try:
            c.subscribe(["t3"])
            _join(c)
        finally:
            c.close()
        joins = {bid for bid, key in b.mock.requests() if key == JOIN_GROUP}
        assert joins == {2}

        b.mock.set_rtt(-1, 300)  # every broker answers 300 ms late
        p = Producer({"bootstrap.servers": b.bootstrap, "log_level": 3})
        t0 = time.monotonic()
        p.produce("t3", b"slow", partition=0)
        assert p.flush(10) == 0
        assert time.monotonic() - t0 >= 0.3


def test_mock_abort_is_isolated_from_the_test_process(unique_name):
    """Members with different first protocols make the mock rd_assert/abort(): only its
    hosting process dies, and the API says why."""
    group = unique_name("group")
    b = DevBroker("mock", topics={"t": 4}).start()
    members = []
    try:
        c1 = Consumer(consumer_conf(b, group, log_level=0))
        members.append(c1)
        c1.subscribe(["t"])
        _join(c1)
        c2 = Consumer(
            consumer_conf(b, group, partition_assignment_strategy="roundrobin", log_level=0)
        )
        members.append(c2)
        c2.subscribe(["t"])

        def died() -> bool:
            for c in members:
                c.poll(0.05)
            return not b.alive

        wait_until(died, timeout=20, interval=0.0, message="the mock to abort")
        assert b.returncode in (-6, 134)
        with pytest.raises(DevBrokerError, match="SIGABRT"):
            b.create_topic("x", 1)
        assert b.ensure_running() is True  # restarts a fresh broker
        assert b.alive and b.create_topic("x", 1)
    finally:
        for c in members:
            c.close()
        b.stop()
    assert not b.alive


def test_delete_records_moves_the_log_start(mock_broker, unique_name):
    """``delete_records`` acts like retention: the partition's log start moves up, the end
    stays, and a reader from the beginning gets only the records left."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    topic = unique_name("topic")
    mock_broker.create_topic(topic, 2)
    produce_keyed(mock_broker.bootstrap, topic, 40, partitions=2)
    mock_broker.mock.delete_records(topic, 0, 15)
    c = Consumer(consumer_conf(mock_broker, unique_name("g")))
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (15, 20)
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 20)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert _first_record(c).offset() == 15
    finally:
        c.close()
    with pytest.raises(DevBrokerError, match="delete_records"):
        mock_broker.mock.delete_records(topic, 0, 99)  # beyond the end
