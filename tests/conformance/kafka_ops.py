"""What the ported Spark tests do to the broker (KafkaTestUtils' sendMessages, addPartitions,
deleteTopic, withTransactionalProducer...), with confluent-kafka, each waiting for its effect."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from helpers import wait_until

_QUIET = {"log_level": 3}


def admin(bootstrap: str) -> AdminClient:
    # a librdkafka AdminClient is a producer-type handle, which would let the broker
    # auto-create a topic it asks about (the dev broker keeps Kafka's auto-creation on)
    return AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False, **_QUIET})


def partition_count(bootstrap: str, topic: str) -> int | None:
    """The topic's partition count (None: no such topic), from a Metadata request for all
    topics, which never creates one."""
    md = admin(bootstrap).list_topics(timeout=10)
    t = md.topics.get(topic)
    return None if t is None or t.error is not None else len(t.partitions)


def create_topic(bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None) -> None:
    a = admin(bootstrap)  # held until the future resolves (a destroyed handle fails it)
    a.create_topics([NewTopic(topic, partitions, 1, config=dict(config or {}))])[topic].result(30)
    wait_until(lambda: partition_count(bootstrap, topic) == partitions, 30, message=f"topic {topic} created")


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """KafkaTestUtils.addPartitions: grow ``topic`` to ``total`` partitions."""
    a = admin(bootstrap)
    a.create_partitions([NewPartitions(topic, total)])[topic].result(30)
    wait_until(lambda: partition_count(bootstrap, topic) == total, 30, message=f"{topic} at {total} partitions")


def delete_topic(bootstrap: str, topic: str) -> None:
    """KafkaTestUtils.deleteTopic: delete and wait until metadata no longer lists it."""
    a = admin(bootstrap)
    a.delete_topics([topic])[topic].result(30)
    wait_until(lambda: partition_count(bootstrap, topic) is None, 30,
               message=f"topic {topic} to stay deleted (a client asking for its metadata with "
                       "auto-creation allowed brings it back: the broker auto-creates topics)")


def delete_records(bootstrap: str, topic: str, before: Mapping[int, int]) -> None:
    """Move each partition's log start to ``before[p]``, as retention would (DeleteRecords)."""
    a = admin(bootstrap)
    futs = a.delete_records([TopicPartition(topic, p, o) for p, o in before.items()])
    for f in futs.values():
        f.result(30)


def watermarks(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "conformance-watermarks", **_QUIET})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
    finally:
        c.close()


def send(bootstrap: str, topic: str, vals: Sequence[str | bytes | None], *, partition: int | None = None,
         keys: Sequence[str | bytes | None] | None = None, timestamp: int | None = None,
         headers: Sequence[Sequence[tuple[str, bytes]] | None] | None = None,
         spread: int | None = None, partitions: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """KafkaTestUtils.sendMessages: one record per value (None: a null value), into
    ``partition``, or ``partitions[i]``, or round-robin over ``spread`` partitions, or where the
    default partitioner puts them (keys None: sticky). Returns (partition, offset) per record,
    in order."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 1, "allow.auto.create.topics": False, **_QUIET})
    out: list[Any] = [None] * len(vals)
    errors: list[str] = []

    def cb(i: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                out[i] = (msg.partition(), msg.offset())
        return done

    for i, v in enumerate(vals):
        kw: dict[str, Any] = {}
        part = (partitions[i] if partitions is not None else partition if partition is not None
                else i % spread if spread else None)
        if part is not None:
            kw["partition"] = part
        if timestamp is not None:
            kw["timestamp"] = timestamp
        if headers is not None and headers[i] is not None:
            kw["headers"] = list(headers[i])
        key = keys[i] if keys is not None else None
        p.produce(topic, value=v.encode() if isinstance(v, str) else v,
                  key=key.encode() if isinstance(key, str) else key, on_delivery=cb(i), **kw)
    left = p.flush(60)
    assert not left and not errors, f"send to {topic}: {left} undelivered, errors {errors[:3]}"
    return out


@contextmanager
def transactional_producer(bootstrap: str) -> Iterator[Producer]:
    """KafkaTestUtils.withTransactionalProducer."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"conformance-{uuid.uuid4().hex[:8]}",
                  "acks": "all", "linger.ms": 1, "allow.auto.create.topics": False, **_QUIET})
    p.init_transactions(30)
    try:
        yield p
    finally:
        p.flush(30)


def send_in_transaction(p: Producer, topic: str, vals: Sequence[str], *, commit: bool, partition: int = 0) -> None:
    p.begin_transaction()
    for v in vals:
        p.produce(topic, value=v.encode(), partition=partition)
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(30)


def wait_end_offset(bootstrap: str, topic: str, partition: int, at_least: int) -> None:
    """KafkaTestUtils.waitUntilOffsetAppears."""
    wait_until(lambda: watermarks(bootstrap, topic, [partition])[partition][1] >= at_least, 30,
               message=f"{topic}-{partition} end offset >= {at_least}")


def now_ms() -> int:
    return int(time.time() * 1000)


def set_topic_config(bootstrap: str, topic: str, config: Mapping[str, str]) -> None:
    """Set topic-level configs (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    a = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()])
    for f in a.incremental_alter_configs([res]).values():
        f.result(30)
