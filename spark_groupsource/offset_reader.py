"""Every broker offset query the driver's planner makes, behind one small interface.

Planning code asks this object for numbers and never talks to Kafka itself, so
the planning functions stay pure and the I/O stays here (Spark's
KafkaOffsetReader plays the same role).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from spark_groupsource.errors import BrokerError

log = logging.getLogger("spark_groupsource.offsets")


class OffsetReader:
    """Watermarks and timestamp lookups through one confluent-kafka client (no group join)."""

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
        """First offset whose timestamp is >= the given ms; None when past the end."""
        if not stamps:
            return {}
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

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        try:
            md = self._client().list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise BrokerError(f"cannot read cluster metadata: {exc.args[0]}") from exc
        return {t: len(md.topics[t].partitions) for t in topics if t in md.topics and md.topics[t].error is None}
