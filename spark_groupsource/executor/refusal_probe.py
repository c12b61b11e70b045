"""Ask a fresh client whether a silent partition is refused to us (its topic's READ revoked).

librdkafka reports a Fetch refused with TOPIC_AUTHORIZATION_FAILED once per partition and
handle (``rktp_last_error``, cleared only by a Fetch that succeeds), and a handle that learns
of the topic after the revocation gets the refusal in its Metadata answer and then fetches
nothing, reporting nothing. Either way a range reader on a pooled fetcher sees silence and
would wait ``kafkaConsumer.pollTimeoutMs`` (measured on Kafka 4.3.1: 30 s of 30 s, both fetch
paths, where a fetcher that had read the partition before failed in 0.1 s). A new handle asks
again: its Metadata request is refused when DESCRIBE went with READ, its Fetch when only READ
did.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

__all__ = ["refused_fetch"]

_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED


def refused_fetch(config: dict[str, Any], topic: str, partition: int, offset: int,
                  timeout_s: float) -> str | None:
    """The broker's refusal (text) when a new client may not read ``topic``'s ``partition`` at
    ``offset``, else None (readable, or no answer within ``timeout_s``: not ours to judge).
    ``config`` carries secrets: never logged."""
    consumer = Consumer({**config, "enable.partition.eof": False})
    try:
        until = time.monotonic() + timeout_s
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        except KafkaException:
            return None  # no answer: the outage rules decide
        if meta is not None and meta.error is not None and meta.error.code() == _DENIED:
            return f"Metadata refused: {meta.error.str()}"
        try:
            consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=False,
                                           timeout=max(0.1, until - time.monotonic()))
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == _DENIED:
                return f"ListOffsets refused: {err.str()}"
            return None  # unreachable or unknown: the outage rules decide
        consumer.assign([TopicPartition(topic, partition, offset)])
        while time.monotonic() < until:
            msg = consumer.poll(min(0.2, max(0.0, until - time.monotonic())))
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                return None  # a record: the partition is readable
            if err.code() == _DENIED:
                return f"Fetch refused: {err.str()}"
        return None
    finally:
        consumer.close()
