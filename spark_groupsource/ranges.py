"""Offset ranges, the input partitions that carry them, and the pure splitter that plans tasks.

An :class:`OffsetRange` is ``[start, until)`` of one topic-partition. The planner turns the
ranges of a micro-batch (or a batch query) into Spark tasks with :func:`split_ranges`, the
counterpart of Spark's ``KafkaOffsetRangeCalculator``, and wraps each task in a
:class:`RangeInputPartition`, which is pickled to the executor that runs it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

__all__ = ["OffsetRange", "RangeInputPartition", "split_ranges"]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``until`` (exclusive) of one topic-partition."""

    topic: str
    partition: int
    start: int
    until: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.until < self.start:
            raise ValueError(
                f"invalid offset range {self.topic}-{self.partition} [{self.start}, {self.until})"
            )

    @property
    def size(self) -> int:
        """Number of offsets in the range (records, if the partition has no gaps)."""
        return self.until - self.start

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}[{self.start},{self.until})"


@dataclass(frozen=True)
class RangeInputPartition(InputPartition):
    """One Spark task: the ranges it reads, in order, with one consumer.

    ``index`` is the task's position in the plan; it keeps ``repr`` and logs readable and lets
    the planner prefer a stable task for a topic-partition. Only plain values: it is pickled
    once per task.
    """

    index: int
    ranges: tuple[OffsetRange, ...]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


#: A piece of fewer records than this is small: at values of 1 KB or less it reads in about
#: what a task costs a Python source (20-35 ms of a task slot inside Spark; a task of 4,000 x
#: 100 B took 34 ms, the floor's 20: docs/benchmarks.md, "Many partitions, a few thousand
#: records each"). Small pieces share a task (smallRangesPerTask), up to this many records in
#: all, so no task grows past what one such piece would cost anyway.
SMALL_RANGE_RECORDS = 10_000


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    max_partitions: int | None = None,
    small_ranges_per_task: int = 1,
) -> list[list[OffsetRange]]:
    """Plan tasks for ``ranges``: a list of tasks, each the list of ranges one task reads.

    Follows Spark's ``KafkaOffsetRangeCalculator``:

    * empty ranges are dropped; with neither limit set each range is one task;
    * ``max_records_per_partition``: a range larger than it is cut into
      ``ceil(size / max)`` contiguous, near-equal sub-ranges;
    * ``min_partitions``: if there are still fewer tasks than that, large ranges are cut in
      proportion to their share of the total size (a range whose share rounds to one task
      stays whole, and does not count in the share of the others).

    * ``max_partitions`` (maxPartitions; groupkafka's own, like Spark's
      ``spark.sql.files.maxPartitionNum``): with more pieces than that, the pieces are packed
      whole into ``max_partitions`` tasks, the largest first into the task with the fewest
      records so far. A Python source pays tens of milliseconds per task (measured in
      docs/benchmarks.md): 8 ranges of small records in 8 tasks on 2 cores took twice as
      long as in 2.

    * ``small_ranges_per_task`` (smallRangesPerTask; groupkafka's own), when neither
      ``min_partitions`` nor ``max_partitions`` decides the task count: pieces of fewer than
      :data:`SMALL_RANGE_RECORDS` records share a task, up to this many pieces and
      :data:`SMALL_RANGE_RECORDS` records (or ``max_records_per_partition``, if lower) per
      task (:func:`_pack_small`). A topic of many partitions at a modest rate gives a trigger
      one range of a few records per partition: a task each cost a Python source tens of ms.

    Sub-ranges of one range stay in offset order and next to each other; the result depends
    only on the arguments (no randomness, input order kept; a packed task lists its ranges in
    input order).

    >>> split_ranges([OffsetRange("t", 0, 0, 10)], max_records_per_partition=4)
    [[OffsetRange(topic='t', partition=0, start=0, until=3)], \
[OffsetRange(topic='t', partition=0, start=3, until=6)], \
[OffsetRange(topic='t', partition=0, start=6, until=10)]]
    """
    if min_partitions is not None and min_partitions < 1:
        raise ValueError(f"min_partitions must be positive, got {min_partitions}")
    if max_records_per_partition is not None and max_records_per_partition < 1:
        raise ValueError(f"max_records_per_partition must be positive, got {max_records_per_partition}")
    if max_partitions is not None and max_partitions < 1:
        raise ValueError(f"max_partitions must be positive, got {max_partitions}")
    if small_ranges_per_task < 1:
        raise ValueError(f"small_ranges_per_task must be positive, got {small_ranges_per_task}")

    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        pieces = [
            sub
            for r in pieces
            for sub in _divide(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is not None and len(pieces) < min_partitions:
        total = sum(r.size for r in pieces)
        unsplit = [r for r in pieces if _part_count(r.size, total, min_partitions) == 1]
        split_total = total - sum(r.size for r in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        pieces = [
            sub for r in pieces for sub in _divide(r, _part_count(r.size, split_total, split_min))
        ]
    if max_partitions is not None and len(pieces) > max_partitions:
        return _pack(pieces, max_partitions)
    if small_ranges_per_task > 1 and min_partitions is None and max_partitions is None:
        cap = min(SMALL_RANGE_RECORDS, max_records_per_partition or SMALL_RANGE_RECORDS)
        return _pack_small(pieces, small_ranges_per_task, cap)
    return [[r] for r in pieces]


def _pack_small(pieces: list[OffsetRange], per_task: int, cap: int) -> list[list[OffsetRange]]:
    """Small pieces (fewer than ``cap`` records) fill tasks in input order, each task up to
    ``per_task`` pieces and ``cap`` records; a piece that does not fit starts the next task.
    Larger pieces keep a task each. Tasks follow the input order of their first piece."""
    tasks: list[list[OffsetRange]] = []
    open_task: list[OffsetRange] = []
    held = 0
    for piece in pieces:
        if piece.size >= cap:
            tasks.append([piece])
            continue
        if open_task and (len(open_task) >= per_task or held + piece.size > cap):
            open_task, held = [], 0
        if not open_task:
            tasks.append(open_task)
        open_task.append(piece)
        held += piece.size
    return tasks


def _pack(pieces: list[OffsetRange], count: int) -> list[list[OffsetRange]]:
    """Pack whole pieces into ``count`` tasks, longest processing time first: each piece,
    largest first, goes to the task holding the fewest records so far (ties: the lower task).
    Each task lists its pieces, and the tasks follow each other, in input order."""
    loads = [(0, task) for task in range(count)]  # a heap: (records so far, task)
    members: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(pieces)), key=lambda i: (-pieces[i].size, i)):
        load, task = loads[0]
        heapq.heapreplace(loads, (load + pieces[i].size, task))
        members[task].append(i)
    ordered = sorted((sorted(m) for m in members if m), key=lambda m: m[0])
    return [[pieces[i] for i in m] for m in ordered]


def _part_count(size: int, total: int, min_parts: int) -> int:
    """How many tasks a range of ``size`` gets out of ``min_parts`` for ``total`` records."""
    if total <= 0:
        return 1
    # Scala's math.round rounds halves up; Python's round() would round them to even.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _divide(r: OffsetRange, parts: int) -> Sequence[OffsetRange]:
    """Cut ``r`` into ``parts`` contiguous sub-ranges; the later ones take the remainder."""
    parts = max(1, min(parts, r.size))
    if parts == 1:
        return (r,)
    out = []
    remaining, start = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        out.append(OffsetRange(r.topic, r.partition, start, start + this))
        start += this
    return out
