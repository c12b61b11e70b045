"""Partition lists that keep the leader's compact form and build TopicPartitions only on demand.

A leader round at a million partitions cannot afford a TopicPartition object per
partition three times over (decode, validate, encode). These two read-only
sequences stand in for the ``tuple[TopicPartition, ...]`` fields of the public
dataclasses: code that iterates, compares or hashes them sees TopicPartitions,
while the assignors, the validator and the encoder read the compact form:

* ``WirePartitions``: owned partitions as decoded, per topic entry a name and
  its partition numbers (what ``Subscription.owned_partitions`` holds after
  ``decode_members``);
* ``IndexedPartitions``: sorted partition numbers of a ``PartitionSpace`` (what
  the sticky assignors put in ``MemberAssignment.partitions``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import add, lt
from typing import Any, Protocol

from assignment.model import TopicPartition


class PartitionSpace(Protocol):
    """What these views need of ``assignment._index.PartitionSpace`` (named here so that
    ``_index`` may import this module without a cycle)."""

    cache: dict[str, Any]
    offset_by_topic: dict[str, int]
    count_by_topic: dict[str, int]

    def offset_count(self, topic: str) -> tuple[int, int] | None: ...

    def partition_table(self) -> Sequence[TopicPartition]: ...


class _LazyPartitions(Sequence[TopicPartition]):
    __slots__ = ("_tuple",)

    def _build(self) -> tuple[TopicPartition, ...]:
        raise NotImplementedError

    def materialize(self) -> tuple[TopicPartition, ...]:
        t = self._tuple
        if t is None:
            t = self._tuple = self._build()
        return t

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self.materialize())

    def __getitem__(self, k):  # type: ignore[override]
        return self.materialize()[k]

    def __contains__(self, tp: object) -> bool:
        return tp in self.materialize()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _LazyPartitions):
            other = other.materialize()
        if isinstance(other, tuple):
            return self.materialize() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.materialize())

    def __repr__(self) -> str:
        return repr(self.materialize())

    def __add__(self, other):
        return self.materialize() + tuple(other)


class WirePartitions(_LazyPartitions):
    """``[topic, [partition...]]`` entries exactly as a member encoded them.

    ``flat`` holds the partition numbers when every entry has exactly one (the
    common shape after a round-robin-like assignment); ``parts`` otherwise.
    """

    __slots__ = ("topics", "parts", "flat", "_n")

    def __init__(self, topics: list[str], parts: list[tuple[int, ...]] | None, n: int,
                 flat: tuple[int, ...] | None = None) -> None:
        self.topics = topics
        self.parts = parts
        self.flat = flat
        self._n = n
        self._tuple = None

    def __len__(self) -> int:
        return self._n

    def entries(self) -> list[tuple[int, ...]]:
        if self.parts is None:
            self.parts = list(zip(self.flat or ()))
        return self.parts

    def _build(self) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(t, p) for t, ps in zip(self.topics, self.entries(), strict=True)
                     for p in ps)

    def indices(self, space: PartitionSpace) -> list[int]:
        """Partition numbers in ``space`` (entries outside it are dropped), in wire order."""
        flat = self.flat
        if flat is not None and flat:
            # members listing the same topics share one list: look its offsets up once
            memo = space.cache.setdefault("wire_offsets", {})
            hit = memo.get(id(self.topics))
            if hit is None or hit[0] is not self.topics:
                offs = list(map(space.offset_by_topic.get, self.topics))
                counts = None if None in offs else list(map(space.count_by_topic.__getitem__, self.topics))
                hit = memo[id(self.topics)] = (self.topics, offs, counts)
            _, offs, counts = hit
            if counts is not None and min(flat) >= 0 and all(map(lt, flat, counts)):
                return list(map(add, offs, flat))
        get = space.offset_count
        out: list[int] = []
        ext = out.extend
        for t, ps in zip(self.topics, self.entries(), strict=True):
            on = get(t)
            if on is None:
                continue
            off, n = on
            ext(off + p for p in ps if 0 <= p < n)
        return out


class IndexedPartitions(_LazyPartitions):
    """Sorted partition numbers of one ``PartitionSpace``: TopicPartition order."""

    __slots__ = ("space", "idx")

    def __init__(self, space: PartitionSpace, idx: list[int]) -> None:
        self.space = space
        self.idx = idx
        self._tuple = None

    def __len__(self) -> int:
        return len(self.idx)

    def _build(self) -> tuple[TopicPartition, ...]:
        return tuple(map(self.space.partition_table().__getitem__, self.idx))
