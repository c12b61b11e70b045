"""Every broker offset query the driver's planner makes, behind one small interface.

Planning code asks this object for numbers and never talks to Kafka itself, so
the planning functions stay pure and the I/O stays here (Spark's
KafkaOffsetReader plays the same role).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from spark_groupsource.errors import BrokerError

log = logging.getLogger("spark_groupsource.offsets")


class OffsetReader:
    """Watermarks, timestamp lookups, metadata and a group's committed offsets through
    confluent-kafka clients that never join a group (reading commits disturbs nobody)."""

    def __init__(self, config: Mapping[str, object], timeout_s: float = 30.0):
        self._config = dict(config)
        self._timeout = timeout_s
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._config)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, end) per partition; the end respects the configured isolation level."""
        out = {}
        client = self._client()
        for tp in sorted(partitions):
            try:
                low, high = client.get_watermark_offsets(CkTP(tp.topic, tp.partition), timeout=self._timeout, cached=False)
            except KafkaException as exc:
                raise BrokerError(f"cannot read the offsets of {tp}: {exc.args[0]}") from exc
            out[tp] = (low, high)
        return out

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: hi for tp, (_, hi) in self.watermarks(partitions).items()}

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: lo for tp, (lo, _) in self.watermarks(partitions).items()}

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset whose timestamp is >= the given ms; None when past the end.

        The broker's ListOffsets answer is checked against the records around it: some
        Kafka-protocol brokers answer timestamp lookups wrongly (librdkafka's mock cluster always
        says "none", the Tansu snapshot always says 0). Each answer costs at most two one-record
        fetches to check; a wrong one is replaced by a binary search over the partition (exact
        when timestamps grow with offsets, as with LogAppendTime).
        """
        if not stamps:
            return {}
        found = self._broker_for_timestamps(stamps)
        marks = self.watermarks(stamps)
        probe = _RecordProbe(self._config, self._timeout)
        try:
            out = {}
            for tp, ts in sorted(stamps.items()):
                low, high = marks[tp]
                answer = found.get(tp)
                if not probe.confirms(tp, ts, answer, low, high):
                    searched = probe.search(tp, ts, low, high)
                    log.warning(
                        "broker answered offset %s for %s at timestamp %d; records say %s "
                        "(the broker does not implement ListOffsets by timestamp)",
                        answer, tp, ts, searched,
                    )
                    answer = searched
                out[tp] = answer
            return out
        finally:
            probe.close()

    def _broker_for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        query = [CkTP(tp.topic, tp.partition, ts) for tp, ts in sorted(stamps.items())]
        try:
            found = self._client().offsets_for_times(query, timeout=self._timeout)
        except KafkaException as exc:
            raise BrokerError(f"cannot look offsets up by timestamp: {exc.args[0]}") from exc
        out: dict[TopicPartition, int | None] = {}
        for ck in found:
            if ck.error is not None:
                raise BrokerError(f"cannot look up {ck.topic}-{ck.partition} by timestamp: {ck.error}")
            out[TopicPartition(ck.topic, ck.partition)] = ck.offset if ck.offset >= 0 else None
        return out

    def topics(self) -> dict[str, int]:
        """Every topic of the cluster with its partition count."""
        try:
            md = self._client().list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise BrokerError(f"cannot read cluster metadata: {exc.args[0]}") from exc
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None and t.partitions}

    def committed(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed), read with OffsetFetch
        from a client that does not join the group."""
        parts = sorted(partitions)
        if not parts:
            return {}
        client = Consumer({**self._config, "group.id": group})
        try:
            found = client.committed([CkTP(tp.topic, tp.partition) for tp in parts], timeout=self._timeout)
        except KafkaException as exc:
            raise BrokerError(f"cannot read the committed offsets of group {group!r}: {exc.args[0]}") from exc
        finally:
            client.close()
        out: dict[TopicPartition, int | None] = {}
        for ck in found:
            if ck.error is not None:
                raise BrokerError(f"cannot read the committed offset of {ck.topic}-{ck.partition}: {ck.error}")
            out[TopicPartition(ck.topic, ck.partition)] = ck.offset if ck.offset >= 0 else None
        return out

    def __enter__(self) -> OffsetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RecordProbe:
    """Reads single records to check or search timestamp lookups (driver side, rarely used)."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float):
        self._consumer = Consumer({**dict(config), "enable.partition.eof": True})
        self._timeout = timeout_s
        self._cache: dict[tuple[TopicPartition, int], tuple[int, int] | None] = {}

    def close(self) -> None:
        self._consumer.close()

    def first_at(self, tp: TopicPartition, offset: int, high: int) -> tuple[int, int] | None:
        """(offset, timestamp ms) of the first record at or after ``offset``; None if none."""
        if offset >= high:
            return None
        key = (tp, offset)
        if key in self._cache:
            return self._cache[key]
        self._consumer.assign([CkTP(tp.topic, tp.partition, offset)])
        deadline = time.monotonic() + self._timeout
        result = None
        while time.monotonic() < deadline:
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise BrokerError(f"cannot read {tp} at {offset}: {msg.error()}")
            result = (msg.offset(), msg.timestamp()[1])
            break
        else:
            raise BrokerError(f"no record of {tp} at or after {offset} within {self._timeout:.0f}s")
        self._consumer.unassign()
        self._cache[key] = result
        return result

    def confirms(self, tp: TopicPartition, ts: int, answer: int | None, low: int, high: int) -> bool:
        if answer is None:
            if high <= low:
                return True
            last = self.first_at(tp, high - 1, high)
            return last is None or last[1] < ts
        if answer < low or answer > high:
            return False
        at = self.first_at(tp, answer, high)
        if at is None or at[1] < ts:
            return False
        if answer > low:
            before = self.first_at(tp, answer - 1, high)
            if before is not None and before[0] < answer and before[1] >= ts:
                return False
        return True

    def search(self, tp: TopicPartition, ts: int, low: int, high: int) -> int | None:
        lo, hi = low, high
        while lo < hi:
            mid = (lo + hi) // 2
            rec = self.first_at(tp, mid, high)
            if rec is not None and rec[1] >= ts:
                hi = mid
            else:
                lo = (rec[0] + 1) if rec is not None else high
        rec = self.first_at(tp, lo, high)
        return rec[0] if rec is not None else None
