"""librdkafka's prefetch, as the executors' fetchers configure it, on Apache Kafka.

A fetcher reads a range and stops at its end; librdkafka keeps fetching ahead of it and decodes
(decompresses, parses) every record it fetched, used or not. ``fetcher_config`` bounds that
(``queued.max.messages.kbytes`` 4 MiB, see the comment there): this checks on a real broker that
the setting bounds what an assigned partition fetches ahead of a reader that stopped, and that
librdkafka did fetch ahead up to the bound.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spark_groupsource.config import fetcher_config, parse_stream_options

pytestmark = pytest.mark.integration

RECORDS = 150_000
VALUE = b"x" * 100
SETTLE_S = 3.0


def _fetched_ahead(bootstrap: str, topic: str, **options: str) -> int:
    """Records librdkafka fetched (its ``rxmsgs``) for a reader that took 1,000 and stopped."""
    opts = parse_stream_options({"kafka.bootstrap.servers": bootstrap, "kafka.group.id": "prefetch-test",
                                 "subscribe": topic, **options})
    seen: list[int] = []
    consumer = Consumer({**fetcher_config(opts), "log_level": 3, "statistics.interval.ms": 100,
                         "stats_cb": lambda text: seen.append(json.loads(text)["rxmsgs"])})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 1_000 and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(1_000 - got, timeout=1.0) if m.error() is None])
        assert got == 1_000
        time.sleep(SETTLE_S)  # librdkafka fetches ahead while nobody consumes, up to its bound
        # statistics queue up behind the fetched records; pausing drops those (and stops fetching)
        consumer.pause([TopicPartition(topic, 0)])
        del seen[:]
        while len(seen) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert seen, "no statistics from librdkafka"
        return max(seen)
    finally:
        consumer.close()


def test_a_stopped_reader_is_fetched_ahead_only_up_to_the_bound(kafka_broker: Any, unique_name: Any) -> None:
    topic = unique_name("prefetch")
    kafka_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:  # the producer's own queue is full: let it deliver
                producer.poll(0.1)
    assert producer.flush(60) == 0
    fetched = _fetched_ahead(kafka_broker.bootstrap, topic)
    # 4 MiB of 100 B records (librdkafka counts about 95 B each) plus a fetch in flight: 45,000
    # on an idle machine. librdkafka's own bounds (100,000 records, 64 MiB) give 109,000 here
    # (measured 2026-11-26 on Kafka 4.3.1, with kafka.queued.max.messages.kbytes=65536).
    assert fetched < 70_000, fetched
    # and the fetcher did run ahead, so the bound, not a slow start, is what stopped it
    assert fetched > 20_000, fetched
