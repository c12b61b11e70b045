"""The harness talks to real brokers: records survive a produce/consume round trip."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from helpers import (
    Record,
    _confirm_unknown_offsets,
    committed_offsets,
    consume_all,
    consumer_conf,
    produce_keyed,
    wait_until,
)


def test_produce_consume_round_trip(broker, new_topic):
    topic = new_topic(8)
    produced = produce_keyed(broker.bootstrap, topic, 40, partitions=8, headers=True)

    assert [p.partition for p in produced] == [i % 8 for i in range(40)]
    for part in range(8):  # offsets are dense per partition, in production order
        assert [p.offset for p in produced if p.partition == part] == list(range(5))

    consumed = consume_all(broker.bootstrap, topic)
    assert sorted(r.content for r in consumed) == sorted(p.content for p in produced)
    assert {(r.partition, r.offset) for r in consumed} == {
        (p.partition, p.offset) for p in produced
    }
    assert consumed[0].headers == (("i", b"0"), ("src", b"helpers"))


def test_default_partitioner_and_key_prefix(broker, new_topic):
    topic = new_topic(3)
    produced = produce_keyed(broker.bootstrap, topic, 12, key_prefix="user-", start=100)
    assert [p.key for p in produced] == [f"user-{i}".encode() for i in range(100, 112)]
    # keyed records: the same key always lands on the same partition
    again = produce_keyed(broker.bootstrap, topic, 12, key_prefix="user-", start=100)
    assert [p.partition for p in again] == [p.partition for p in produced]
    assert len(consume_all(broker.bootstrap, topic)) == 24


def test_committed_offsets_read_back(broker, new_topic, unique_name):
    topic, group = new_topic(4), unique_name("group")
    produce_keyed(broker.bootstrap, topic, 8, partitions=4)
    assert committed_offsets(broker.bootstrap, group, topic, 4) == dict.fromkeys(range(4))

    c = Consumer(consumer_conf(broker, group))
    try:
        c.commit(
            offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 3, 1)],
            asynchronous=False,
        )
    finally:
        c.close()
    got = wait_until(
        lambda: (o := committed_offsets(broker.bootstrap, group, topic, 4))[0] == 2 and o,
        timeout=10,
        message="committed offsets to show",
    )
    assert got == {0: 2, 1: None, 2: None, 3: 1}


def test_an_unknown_delivery_offset_is_looked_up_or_the_record_sent_again(broker, new_topic):
    """A record librdkafka reported delivered with no offset is found in the log by key; one
    the log does not hold is written again, so the test's expectations match the log."""
    from confluent_kafka import Producer

    topic = new_topic(2)
    produced = produce_keyed(broker.bootstrap, topic, 4, partitions=2)
    in_log = produced[1]
    never_written = Record(topic, 1, None, b"lost-1", b"value-lost", in_log.timestamp)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    unknown = [Record(in_log.topic, in_log.partition, None, in_log.key, in_log.value, in_log.timestamp),
               never_written]
    fixed = _confirm_unknown_offsets(producer, broker.bootstrap, topic, unknown, 30)
    assert fixed[0] == in_log
    assert (fixed[1].partition, fixed[1].offset, fixed[1].key) == (1, 2, b"lost-1")
    assert {(r.partition, r.offset, r.key) for r in consume_all(broker.bootstrap, topic)} >= {
        (r.partition, r.offset, r.key) for r in fixed}
