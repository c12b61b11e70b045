"""The demo's non-Spark actors, each on its own thread in the orchestrator: a producer writing
sequence-numbered records at a steady rate, a plain librdkafka (confluent-kafka) group member,
and a sampler of the group's committed offsets and the partitions' end offsets."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from demo.timeline import OwnershipEvent, Sample

_QUIET = {"log_level": 3}


class SeqProducer:
    """Writes record ``n`` (key and value: ``str(n)``) to partition ``n % partitions`` at ``rate``
    records/s, and keeps the sequence numbers whose delivery the broker confirmed. One record
    per produce request: Tansu reports a partition's end as its last batch's base offset + 1."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float):
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer: Producer | None = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                  "batch.num.messages": 1, **_QUIET})
        self.delivered: list[int] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demo-producer")

    def start(self) -> SeqProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered.append(int(msg.value()))

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                n = self.sent
                try:
                    self.producer.produce(self.topic, key=str(n).encode(), value=str(n).encode(),
                                          partition=n % self.partitions, on_delivery=self._on_delivery)
                except BufferError:
                    break
                self.sent += 1
            self.producer.poll(0.02)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop producing and wait for the delivery reports (idempotent)."""
        self._stop.set()
        self._thread.join(timeout)
        if self.producer is None:
            return
        left = self.producer.flush(timeout)
        if left:
            self.errors.append(f"{left} records not delivered within {timeout}s")
        self.producer = None  # no reconnect attempts once the broker is gone


class PlainConsumer:
    """A librdkafka group member (same group, same assignor) polled on its own thread. Records
    its rebalance callbacks as ownership events and what it read; commits after every poll and
    before giving partitions up."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, name: str = "consumer",
                 strategy: str = "cooperative-sticky", session_ms: int = 6000):
        self.name, self.topic = name, topic
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
            "session.timeout.ms": session_ms, "heartbeat.interval.ms": max(100, session_ms // 6),
            **_QUIET,
        })
        self.events: list[OwnershipEvent] = []
        self.reads: list[tuple[float, int]] = []
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demo-consumer")

    def _assigned(self, _c: Any, parts: list[TopicPartition]) -> None:
        got = frozenset(tp.partition for tp in parts)
        self.owned |= got
        if got:
            self.events.append(OwnershipEvent(time.time(), self.name, "assigned", got))

    def _revoked(self, c: Any, parts: list[TopicPartition], kind: str = "revoked") -> None:
        gone = frozenset(tp.partition for tp in parts)
        if kind == "revoked" and parts:
            self._commit(c)
        self.owned -= gone
        if gone:
            self.events.append(OwnershipEvent(time.time(), self.name, kind, gone))

    def _commit(self, c: Any) -> None:
        try:
            c.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed since the last commit, or fenced: the next owner re-reads

    def start(self) -> PlainConsumer:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=lambda c, p: self._revoked(c, p, "lost"))
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            msgs = self.consumer.consume(500, timeout=0.2)
            now = time.time()
            got = [int(m.value()) for m in msgs if m.error() is None]
            self.reads.extend((now, n) for n in got)
            if got:
                self._commit(self.consumer)

    def stop(self, timeout: float = 30.0) -> None:
        """Leave the group: commit, then close (LeaveGroup; the revoke callback runs)."""
        self._stop.set()
        self._thread.join(timeout)
        self._commit(self.consumer)
        self.consumer.close()
        self.events.append(OwnershipEvent(time.time(), self.name, "left"))


class LagSampler:
    """Every ``interval`` seconds: the group's committed offsets (OffsetFetch; this client never
    subscribes, so it never joins the group) and each partition's end offset."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int, interval: float = 0.5):
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.client = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                "enable.auto.commit": False, **_QUIET})
        self.samples: list[Sample] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demo-lag")

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def sample(self) -> Sample:
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        committed = {tp.partition: (tp.offset if tp.offset >= 0 else None)
                     for tp in self.client.committed(tps, timeout=5)}
        ends = {tp.partition: self.client.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps}
        return Sample(time.time(), committed, ends)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.samples.append(self.sample())
            except KafkaException:
                self.errors += 1  # counted and shown in the summary; the next sample goes on

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()
