"""librdkafka's prefetch, as the executors' fetchers configure it, on Apache Kafka.

A fetcher reads a range and stops at its end; librdkafka keeps fetching ahead of it and decodes
(decompresses, parses) every record it fetched, used or not. ``fetcher_config`` bounds that
(``queued.min.messages`` 20,000 records, ``queued.max.messages.kbytes`` 4 MiB, whichever comes
first; see the comments there): this checks on a real broker that each bound stops what an
assigned partition fetches ahead of a reader that stopped (the record bound for small records,
the byte bound for large ones), and that librdkafka did fetch ahead up to the bound.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spark_groupsource.config import fetcher_config, parse_stream_options

pytestmark = pytest.mark.integration

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


def _topic_of(kafka_broker: Any, unique_name: Any, records: int, value: bytes) -> str:
    topic = unique_name("prefetch")
    kafka_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # the producer's own queue is full: let it deliver
                producer.poll(0.1)
    assert producer.flush(60) == 0
    return topic


def test_small_records_are_fetched_ahead_only_up_to_the_record_bound(kafka_broker: Any, unique_name: Any) -> None:
    topic = _topic_of(kafka_broker, unique_name, 150_000, b"x" * 100)
    fetched = _fetched_ahead(kafka_broker.bootstrap, topic)
    # 20,000 records plus a fetch in flight (up to 1 MiB, about 10,000 of 100 B): 27,000 on an
    # idle machine (2026-11-27, Kafka 4.0.1). The 4 MiB bound alone let 45,000 through (librdkafka
    # counts about 95 B a record), librdkafka's own bounds (100,000 records, 64 MiB) 109,000.
    assert fetched < 38_000, fetched
    # and the fetcher did run ahead, so the bound, not a slow start, is what stopped it
    assert fetched > 15_000, fetched


def test_large_records_are_fetched_ahead_only_up_to_the_byte_bound(kafka_broker: Any, unique_name: Any) -> None:
    topic = _topic_of(kafka_broker, unique_name, 30_000, b"x" * 1000)
    fetched = _fetched_ahead(kafka_broker.bootstrap, topic)
    # 4 MiB of 1 KB records is 4,194 plus a fetch in flight (up to 1 MiB, about 1,000); the
    # record bound (20,000) would let five times as many through
    assert fetched < 8_000, fetched
    assert fetched > 3_000, fetched


def test_a_long_ranges_fetcher_fetches_ahead_up_to_its_deeper_bound(kafka_broker: Any, unique_name: Any) -> None:
    """The depth and fetch size a task of long ranges gets (spark_groupsource/executor/prefetch.py)
    are what librdkafka then holds: more than the 4 MiB bound lets through, at most 16 MiB and
    one 8 MiB fetch."""
    from spark_groupsource.executor.prefetch import (
        LONG_RANGE_FETCH_BYTES,
        LONG_RANGE_PREFETCH_KBYTES,
    )

    topic = _topic_of(kafka_broker, unique_name, 40_000, b"x" * 1000)
    fetched = _fetched_ahead(kafka_broker.bootstrap, topic,
                             **{"kafka.queued.max.messages.kbytes": str(LONG_RANGE_PREFETCH_KBYTES),
                                "kafka.max.partition.fetch.bytes": str(LONG_RANGE_FETCH_BYTES)})
    # 16 MiB of 1 KB records is 16,777, plus a fetch in flight (8 MiB, about 8,400)
    assert fetched < 27_500, fetched
    assert fetched > 9_000, fetched
