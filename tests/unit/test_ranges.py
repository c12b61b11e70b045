"""Offset ranges and the task splitter (Spark's KafkaOffsetRangeCalculator semantics)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pyspark.sql.datasource import InputPartition

from spark_groupsource.ranges import (
    SMALL_RANGE_RECORDS,
    OffsetRange,
    RangeInputPartition,
    split_ranges,
)


def r(p: int, start: int, until: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, p, start, until)


def flat(tasks: list[list[OffsetRange]]) -> list[OffsetRange]:
    return [x for task in tasks for x in task]


def test_offset_range() -> None:
    x = r(3, 10, 25)
    assert x.size == 15 and str(x) == "t-3[10,25)"
    assert r(0, 5, 5).size == 0
    with pytest.raises(ValueError):
        r(0, 5, 4)
    with pytest.raises(ValueError):
        r(0, -1, 4)


def test_input_partition_is_small_and_picklable() -> None:
    p = RangeInputPartition(2, (r(0, 0, 10), r(1, 5, 7)))
    assert isinstance(p, InputPartition)
    assert p.size == 12
    data = pickle.dumps(p)
    assert pickle.loads(data) == p and len(data) < 300
    assert "RangeInputPartition(index=2" in repr(p)


def test_no_limits_one_task_per_non_empty_range() -> None:
    ranges = [r(0, 0, 10), r(1, 5, 5), r(2, 3, 4)]
    assert split_ranges(ranges) == [[r(0, 0, 10)], [r(2, 3, 4)]]
    assert split_ranges([]) == []


def test_max_records_per_partition() -> None:
    assert flat(split_ranges([r(0, 0, 10)], max_records_per_partition=4)) == [
        r(0, 0, 3), r(0, 3, 6), r(0, 6, 10)
    ]
    assert flat(split_ranges([r(0, 0, 4), r(1, 0, 2)], max_records_per_partition=4)) == [
        r(0, 0, 4), r(1, 0, 2)
    ]


def test_min_partitions_splits_large_ranges_proportionally() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite: 3 partitions of sizes 1, 2 and 10000 with
    # minPartitions=3: the small ones stay whole, the big one takes the remaining share.
    ranges = [r(1, 1, 2), r(2, 1, 3), r(3, 1, 10001)]
    assert flat(split_ranges(ranges, min_partitions=3)) == ranges
    # minPartitions=4: the big range is split in two.
    assert flat(split_ranges(ranges, min_partitions=4)) == [
        r(1, 1, 2), r(2, 1, 3), r(3, 1, 5001), r(3, 5001, 10001)
    ]


def test_min_partitions_even_split() -> None:
    assert flat(split_ranges([r(0, 0, 100), r(1, 0, 100)], min_partitions=4)) == [
        r(0, 0, 50), r(0, 50, 100), r(1, 0, 50), r(1, 50, 100)
    ]


def test_min_partitions_already_met_keeps_ranges() -> None:
    ranges = [r(0, 0, 100), r(1, 0, 1)]
    assert flat(split_ranges(ranges, min_partitions=2)) == ranges


def test_both_limits() -> None:
    out = flat(split_ranges([r(0, 0, 10), r(1, 0, 2)], min_partitions=6, max_records_per_partition=5))
    assert all(x.size <= 5 for x in out) and len(out) >= 4


def test_never_more_pieces_than_offsets() -> None:
    assert flat(split_ranges([r(0, 0, 2)], min_partitions=10)) == [r(0, 0, 1), r(0, 1, 2)]


def test_invalid_limits() -> None:
    with pytest.raises(ValueError):
        split_ranges([r(0, 0, 1)], min_partitions=0)
    with pytest.raises(ValueError):
        split_ranges([r(0, 0, 1)], max_records_per_partition=0)
    with pytest.raises(ValueError):
        split_ranges([r(0, 0, 1)], max_partitions=0)


def test_max_partitions_packs_whole_ranges_largest_first() -> None:
    ranges = [r(0, 0, 30), r(1, 0, 10), r(2, 0, 25), r(3, 0, 20), r(4, 0, 5)]
    # largest first into the task with the fewest records so far:
    # 30 -> A (30), 25 -> B (25), 20 -> B (45), 10 -> A (40), 5 -> A (45)
    assert split_ranges(ranges, max_partitions=2) == [
        [r(0, 0, 30), r(1, 0, 10), r(4, 0, 5)],
        [r(2, 0, 25), r(3, 0, 20)],
    ]
    # no more ranges than tasks allowed: one task per range, as without the option
    assert split_ranges(ranges, max_partitions=5) == [[x] for x in ranges]
    assert split_ranges(ranges, max_partitions=1) == [ranges]


def test_max_partitions_packs_the_pieces_other_limits_made() -> None:
    # maxRecordsPerPartition cuts first, then the pieces are packed: never a piece above it
    tasks = split_ranges([r(0, 0, 100), r(1, 0, 10)], max_records_per_partition=40, max_partitions=2)
    assert len(tasks) == 2 and all(p.size <= 40 for p in flat(tasks))
    assert sorted(sum(p.size for p in t) for t in tasks) == [44, 66]  # 34+10, 33+33
    # equal sizes: the tasks take turns, so 8 ranges in 2 tasks hold 4 each
    eight = [r(i, 0, 31_250) for i in range(8)]
    assert [len(t) for t in split_ranges(eight, max_partitions=2)] == [4, 4]


def test_small_ranges_share_tasks_in_input_order() -> None:
    small = [r(i, 0, 3) for i in range(6)]
    cap = SMALL_RANGE_RECORDS
    big, near, tail = r(9, 0, cap), r(10, 0, cap - 10), r(11, 0, 20)
    tasks = split_ranges([*small, big, near, tail], small_ranges_per_task=4)
    # four small pieces per task at most; a task holds at most SMALL_RANGE_RECORDS in all; a
    # range that large keeps a task; the next small piece that does not fit starts a new task
    assert tasks == [small[:4], [*small[4:], near], [big], [tail]]
    # one per task (smallRangesPerTask=1, and the function's default): Spark's source's plan
    assert split_ranges([*small, big], small_ranges_per_task=1) == [[x] for x in [*small, big]]
    assert split_ranges([*small, big]) == [[x] for x in [*small, big]]


def test_ranges_of_a_few_thousand_records_share_tasks() -> None:
    # many partitions at a few thousand records each per trigger (64 x 4,000 at
    # maxOffsetsPerTrigger 256,000): two to a task by default; ranges of 31,250 (8 partitions)
    # keep a task each, as Spark's Kafka source plans them
    many = [r(i, 0, 4000) for i in range(64)]
    tasks = split_ranges(many, small_ranges_per_task=16)
    assert [len(t) for t in tasks] == [2] * 32 and flat(tasks) == many
    eight = [r(i, 0, 31_250) for i in range(8)]
    assert split_ranges(eight, small_ranges_per_task=16) == [[x] for x in eight]
    # maxRecordsPerPartition lowers the bound: no task of shared ranges holds more than it
    assert [len(t) for t in split_ranges(many, max_records_per_partition=5000, small_ranges_per_task=16)] == [1] * 64


def test_small_ranges_are_not_packed_where_the_task_count_is_asked_for() -> None:
    small = [r(i, 0, 3) for i in range(6)]
    # minPartitions decides the task count (at least so many): small ranges are not packed at all
    assert len(split_ranges(small, min_partitions=6, small_ranges_per_task=4)) == 6
    assert len(split_ranges(small, min_partitions=2, small_ranges_per_task=4)) == 6
    # maxPartitions packs on its own terms (balanced into that many tasks)
    assert [len(t) for t in split_ranges(small, max_partitions=3, small_ranges_per_task=4)] == [2, 2, 2]
    # maxRecordsPerPartition bounds a packed task's records too
    tasks = split_ranges([r(i, 0, 40) for i in range(6)], max_records_per_partition=100, small_ranges_per_task=4)
    assert [sum(p.size for p in t) for t in tasks] == [80, 80, 80]
    with pytest.raises(ValueError, match="small_ranges_per_task"):
        split_ranges(small, small_ranges_per_task=0)


def positions(pieces: list[OffsetRange]) -> dict[OffsetRange, int]:
    """Each piece's place in ``pieces`` (all distinct). ``list.index`` per piece made the property
    tests quadratic: up to 60,000 pieces (maxRecordsPerPartition 1), 14 minutes of a CI run."""
    at = {p: i for i, p in enumerate(pieces)}
    assert len(at) == len(pieces), "a piece appears twice"
    return at


range_lists = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(0, 5000)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=12,
).map(lambda xs: [OffsetRange(f"t{i % 3}", i, s, u) for i, (s, u) in enumerate(xs)])
limits = st.one_of(st.none(), st.integers(1, 64))
max_records = st.one_of(st.none(), st.integers(1, 3000))


#: the most pieces the strategies can make: 12 ranges of 5,000 cut into single offsets
MOST_PIECES = [OffsetRange(f"t{i % 3}", i, 1000, 6000) for i in range(12)]


@given(range_lists, limits, max_records, st.integers(1, 16))
@example(MOST_PIECES, 5, 1, 16)
def test_packing_keeps_every_piece_once_within_the_task_bound(
    ranges: list[OffsetRange], min_partitions: int | None, max_recs: int | None, max_parts: int
) -> None:
    unpacked = flat(split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_recs))
    tasks = split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_recs,
                         max_partitions=max_parts)
    assert tasks == split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_recs,
                                 max_partitions=max_parts)
    assert all(task for task in tasks) and len(tasks) == min(len(unpacked), max_parts)
    at = positions(unpacked)
    assert sorted(flat(tasks), key=at.__getitem__) == unpacked and len(flat(tasks)) == len(unpacked)
    for task in tasks:  # in input order within a task
        assert [at[p] for p in task] == sorted(at[p] for p in task)
    if len(tasks) > 1:  # balanced: the fullest task exceeds the emptiest by at most the largest piece
        loads = [sum(p.size for p in t) for t in tasks]
        assert max(loads) - min(loads) <= max(p.size for p in unpacked)


@given(range_lists, limits, max_records)
def test_split_covers_exactly_contiguous_and_deterministic(
    ranges: list[OffsetRange], min_partitions: int | None, max_recs: int | None
) -> None:
    tasks = split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_recs)
    assert tasks == split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_recs)
    assert all(task for task in tasks)
    pieces = flat(tasks)
    assert all(p.size > 0 for p in pieces)
    if max_recs is not None:
        assert all(p.size <= max_recs for p in pieces)
    # Per input range, its pieces are adjacent, in order, contiguous, and cover it exactly.
    i = 0
    for rng in ranges:
        if rng.size == 0:
            continue
        pos = rng.start
        while pos < rng.until:
            p = pieces[i]
            assert (p.topic, p.partition, p.start) == (rng.topic, rng.partition, pos)
            pos = p.until
            i += 1
        assert pos == rng.until
    assert i == len(pieces)
    non_empty = sum(1 for x in ranges if x.size > 0)
    if min_partitions is not None and non_empty and max_recs is None:
        total = sum(x.size for x in ranges)
        assert len(pieces) >= min(non_empty, total) or len(pieces) >= min(min_partitions, non_empty)


@given(range_lists, max_records, st.integers(1, 6))
@example(MOST_PIECES, 1, 6)
def test_small_packing_keeps_every_piece_once_within_its_bounds(
    ranges: list[OffsetRange], max_recs: int | None, per_task: int
) -> None:
    unpacked = flat(split_ranges(ranges, max_records_per_partition=max_recs))
    tasks = split_ranges(ranges, max_records_per_partition=max_recs, small_ranges_per_task=per_task)
    assert tasks == split_ranges(ranges, max_records_per_partition=max_recs, small_ranges_per_task=per_task)
    at = positions(unpacked)
    assert sorted(flat(tasks), key=at.__getitem__) == unpacked and len(flat(tasks)) == len(unpacked)
    cap = min(SMALL_RANGE_RECORDS, max_recs or SMALL_RANGE_RECORDS)
    for task in tasks:
        assert task and [at[p] for p in task] == sorted(at[p] for p in task)
        if len(task) > 1:  # only small pieces share, within both bounds
            assert len(task) <= per_task and sum(p.size for p in task) <= cap
            assert all(p.size < cap for p in task)
    # tasks in the input order of their first piece
    firsts = [at[t[0]] for t in tasks]
    assert firsts == sorted(firsts)
