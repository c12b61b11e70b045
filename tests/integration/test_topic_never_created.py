"""No client of ours creates a topic (issue 52): a topic an operator deletes while a query reads it
stays deleted on a broker with ``auto.create.topics.enable=true`` (Kafka's default, and the test
Kafka's: the dev broker does not change it), as it does under Spark's own Kafka source.

Before the fix two clients re-created it within a second of the deletion: the driver's classic
member (kafka-python sends its Metadata requests with ``allow_auto_topic_creation=true`` whatever
its consumer is told) and the offset reader's librdkafka AdminClient (a producer-type handle,
whose ``allow.auto.create.topics`` defaults to true)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from test_stream_support import (
    assert_exactly,
    process_all,
    produce,
    stop,
    stream,
    table_name,
    to_memory,
)

#: How long a deleted topic is watched: many metadata refreshes at the 1 s the queries ask for
WATCH_S = 12.0
#: Every client's metadata refresh, short so that a re-creation shows within the watch
FAST_METADATA = {"kafka.metadata.max.age.ms": "1000", "kafka.topic.metadata.refresh.interval.ms": "1000"}


def _admin(broker: Any) -> AdminClient:
    # the test's own client must not create the topic either (an AdminClient is a producer-type
    # librdkafka handle: its allow.auto.create.topics defaults to true)
    return AdminClient({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False,
                        "log_level": 3})


def _topic_id(admin: AdminClient, topic: str) -> str | None:
    """The topic's id, None while it does not exist (asked with a whole-cluster Metadata request
    first, which never creates a topic)."""
    if topic not in admin.list_topics(timeout=10).topics:
        return None
    try:
        desc = admin.describe_topics(TopicCollection([topic]), request_timeout=10)[topic].result(timeout=15)
    except KafkaException:
        return None  # deleted in between
    return str(desc.topic_id)


def _delete_and_watch(admin: AdminClient, topic: str, query: Any = None) -> None:
    """Delete ``topic``, then watch it for WATCH_S: fails as soon as it exists under a new id."""
    before = _topic_id(admin, topic)
    assert before is not None, f"{topic} should exist before the deletion"
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    deleted_at = time.monotonic()
    while time.monotonic() - deleted_at < WATCH_S:
        now = _topic_id(admin, topic)
        if now is not None and now != before:
            pytest.fail(f"topic {topic} was re-created {time.monotonic() - deleted_at:.1f}s after its deletion "
                        f"(id {before} -> {now}): a client of the reader asked for it with auto-creation allowed")
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed after the deletion: {query.exception()}")
        time.sleep(0.3)
    assert _topic_id(admin, topic) is None, f"{topic} still exists {WATCH_S:g}s after its deletion"


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_deleted_topic_stays_deleted_under_a_stream(spark, kafka_broker, unique_name, tmp_path, protocol):
    """A stream with ``failOnDataLoss=false`` whose topic is deleted while it runs: the topic is
    never re-created (both group protocols), and the query goes on."""
    topic = unique_name("gone")
    kafka_broker.create_topic(topic, 2)
    records = produce(kafka_broker.bootstrap, topic, 6, 2)
    name = table_name(unique_name)
    options = {"startingOffsets": "earliest", "failOnDataLoss": "false", **FAST_METADATA}
    if protocol == "consumer":  # the broker sets the session and heartbeat: no broker_options
        df = (spark.readStream.format("groupkafka")
              .options(**{"kafka.bootstrap.servers": kafka_broker.bootstrap, "kafka.group.id": unique_name("g"),
                          "subscribe": topic, "kafka.group.protocol": "consumer", **options}).load())
    else:
        df = stream(spark, kafka_broker, topic, unique_name("g"), **options)
    q = to_memory(df, name, str(tmp_path / "ck"))
    try:
        process_all(q)
        assert_exactly(spark, name, records)
        _delete_and_watch(_admin(kafka_broker), topic, q)
        assert q.isActive and q.exception() is None
    finally:
        stop(q)


@pytest.mark.parametrize("coordinated", [False, True], ids=["plain", "group-coordinated"])
def test_a_batch_read_of_a_deleted_topic_does_not_create_it(spark, kafka_broker, unique_name, coordinated):
    """A batch read (plain: the offset reader and the fetchers; ``groupCoordinated``: the classic
    member too) planned after its topic was deleted leaves it deleted, whatever it answers."""
    topic = unique_name("gone")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker.bootstrap, topic, 4, 2)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic,
               "failOnDataLoss": "false", "startingOffsets": "earliest", **FAST_METADATA}
    if coordinated:
        options |= {"groupCoordinated": "true", "kafka.group.id": unique_name("g"),
                    "kafka.session.timeout.ms": str(kafka_broker.recommended_session_timeout_ms)}
    df = spark.read.format("groupkafka").options(**options).load()
    assert df.count() == 4
    admin = _admin(kafka_broker)
    before = _topic_id(admin, topic)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    for _ in range(2):  # twice: each action plans again
        try:
            spark.read.format("groupkafka").options(**options).load().count()
        except Exception:  # noqa: BLE001 - refusing to read a missing topic is fine; creating it is not
            pass
    now = _topic_id(admin, topic)
    assert now is None or now == before, f"the batch read re-created {topic} (id {before} -> {now})"
