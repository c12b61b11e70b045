"""Dense integer numbering of partitions, so big groups avoid per-partition objects.

Partition ``p`` of the ``k``-th topic (topics sorted by name) is number
``offset[k] + p``; number order is therefore TopicPartition order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import repeat
from operator import floordiv, mod

from assignment._compact import IndexedPartitions, WirePartitions
from assignment.model import TopicPartition


@lru_cache(maxsize=8192)
def topic_partitions(topic: str, n: int) -> tuple[TopicPartition, ...]:
    """Shared immutable TopicPartition values: rebalances reuse them instead of rebuilding."""
    return tuple(TopicPartition(topic, p) for p in range(n))


class PartitionSpace:
    __slots__ = ("topics", "offsets", "counts", "total", "_offset_of", "_topic_of", "_part_of",
                 "_table", "cache",
                 "offset_by_topic", "count_by_topic", "equal_count")

    def __init__(self, partitions_per_topic: Mapping[str, int], topics: Iterable[str]) -> None:
        self.topics = sorted({t for t in topics if partitions_per_topic.get(t, 0) > 0})
        self.counts = [partitions_per_topic[t] for t in self.topics]
        self.offsets = []
        off = 0
        for n in self.counts:
            self.offsets.append(off)
            off += n
        self.total = off
        self._offset_of = {t: (o, n) for t, o, n in zip(self.topics, self.offsets, self.counts, strict=True)}
        self._topic_of: list[int] | None = None
        self._part_of: list[int] | None = None
        self._table: list[TopicPartition] | None = None
        self.cache: dict[str, object] = {}  # derived data other modules keep per space
        self.offset_by_topic = dict(zip(self.topics, self.offsets, strict=True))
        self.count_by_topic = dict(zip(self.topics, self.counts, strict=True))
        # the partition count of every topic when they are all equal (else 0)
        self.equal_count = self.counts[0] if self.counts and len(set(self.counts)) == 1 else 0

    def offset_count(self, topic: str) -> tuple[int, int] | None:
        """(first number, partition count) of ``topic``, or None if not in this space."""
        return self._offset_of.get(topic)

    def topics_of(self, idx: list[int]):
        """Topic numbers of the partition numbers ``idx`` (an iterator; C loops)."""
        n = self.equal_count
        if n:  # equal counts: plain arithmetic, no lookups
            return map(floordiv, idx, repeat(n))
        return map(self.topic_of().__getitem__, idx)

    def partitions_of(self, idx: list[int]):
        """Partition numbers within their topics of the partition numbers ``idx`` (an iterator)."""
        n = self.equal_count
        if n:
            return map(mod, idx, repeat(n))
        return map(self.part_of().__getitem__, idx)

    def topic_of(self) -> list[int]:
        """Per partition number, its topic's position in ``topics`` (built once, in C loops)."""
        if self._topic_of is None:
            out: list[int] = []
            for k, n in enumerate(self.counts):
                out += [k] * n
            self._topic_of = out
        return self._topic_of

    def part_of(self) -> list[int]:
        """Per partition number, its partition number within its topic."""
        if self._part_of is None:
            # one int object per partition number, shared by all topics: compact in memory
            base = list(range(max(self.counts, default=0)))
            out: list[int] = []
            for n in self.counts:
                out += base[:n]
            self._part_of = out
        return self._part_of

    def partition_table(self) -> list[TopicPartition]:
        """Every TopicPartition in number order (shared values; built once, on demand)."""
        if self._table is None:
            out: list[TopicPartition] = []
            for t, n in zip(self.topics, self.counts, strict=True):
                out += topic_partitions(t, n)
            self._table = out
        return self._table

    def index(self, tp: TopicPartition) -> int:
        """The number of ``tp``, or -1 if it is not in this space."""
        on = self._offset_of.get(tp.topic)
        if on is None or not 0 <= tp.partition < on[1]:
            return -1
        return on[0] + tp.partition

    def indices(self, tps: Iterable[TopicPartition]) -> list[int]:
        if isinstance(tps, WirePartitions):
            return tps.indices(self)
        if isinstance(tps, IndexedPartitions) and tps.space is self:
            return list(tps.idx)
        get = self._offset_of.get
        out = []
        for tp in tps:
            on = get(tp.topic)
            if on is not None and 0 <= tp.partition < on[1]:
                out.append(on[0] + tp.partition)
        return out

    def topic_range(self, topic: str) -> range:
        on = self._offset_of.get(topic)
        return range(on[0], on[0] + on[1]) if on else range(0)

    def has_topic(self, topic: str) -> bool:
        return topic in self._offset_of

    def partition(self, i: int) -> TopicPartition:
        import bisect

        k = bisect.bisect_right(self.offsets, i) - 1
        return topic_partitions(self.topics[k], self.counts[k])[i - self.offsets[k]]

    def member_indices(self, owner: list[int], n_members: int, skip: set[int] | None = None
                       ) -> list[list[int]]:
        """Per member (by number) its partition numbers in ascending order, from an owner array."""
        outs: list[list[int]] = [[] for _ in range(n_members)]
        appends = [o.append for o in outs]
        if skip:
            for i, m in enumerate(owner):
                if m >= 0 and i not in skip:
                    appends[m](i)
        else:
            for i, m in enumerate(owner):
                if m >= 0:
                    appends[m](i)
        return outs
