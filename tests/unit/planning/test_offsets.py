"""Pure tests of spark_groupsource/planning/offsets.py: the offset JSON and batch planning."""

from __future__ import annotations

import pytest

from assignment.model import TopicPartition as TP
from spark_groupsource.planning.offsets import (
    OffsetFormatError,
    StreamOffset,
    fair_share,
    first_batch_end,
    has_new_data,
    plan_ranges,
    trim_replay,
)

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_json_round_trip_and_fixed_key_order():
    off = StreamOffset({B0: (1, 2), A1: (7, 9), A0: (0, 5)})
    text = off.to_json()
    assert text == '{"v":1,"ranges":{"a":{"0":[0,5],"1":[7,9]},"b":{"0":[1,2]}}}'
    assert StreamOffset.from_json(text) == off
    assert StreamOffset(dict(reversed(list(off.ranges.items())))).to_json() == text
    assert StreamOffset.from_json({"v": 1, "ranges": {}}).ranges == {}


def test_known_partition_counts_round_trip_in_a_fixed_order():
    """``known`` (the partition counts when the query first planned) rides in every offset."""
    off = StreamOffset({A0: (0, 5)}, known={"b": 3, "a": 2})
    text = off.to_json()
    assert text == '{"v":1,"ranges":{"a":{"0":[0,5]}},"known":{"a":2,"b":3}}'
    assert StreamOffset.from_json(text) == off
    assert StreamOffset.from_json('{"v":1,"ranges":{}}').known is None  # written before it was carried


def test_a_new_querys_first_answer_without_a_batch_carries_known():
    """Batch 0 of a new query is logged whatever its end: a first plan with no batch (the start,
    no ranges) gets ``known``; anything else is answered as it is, so no batch is added."""
    start = StreamOffset({}).to_json()
    assert first_batch_end(start, {"a": 2}) == '{"v":1,"ranges":{},"known":{"a":2}}'
    assert first_batch_end(start, None) == start  # the partitions could not be listed
    planned = StreamOffset({A0: (0, 5)}, known={"a": 2}).to_json()
    assert first_batch_end(planned, {"a": 3}) == planned  # a planned batch carries its own
    legacy = StreamOffset({A0: (0, 5)}).to_json()  # logged by an earlier run: replayed as it is
    assert first_batch_end(legacy, {"a": 2}) == legacy


def test_partition_order_is_numeric_not_lexical():
    off = StreamOffset({TP("a", 10): (0, 1), TP("a", 2): (0, 1)})
    assert off.to_json().index('"2"') < off.to_json().index('"10"')


@pytest.mark.parametrize("bad", ["", "nope", "{}", '{"v":2,"ranges":{}}', '{"v":1,"ranges":{"a":{"0":[5,3]}}}',
                                 '{"v":1,"ranges":{"a":{"0":[-1,3]}}}', '{"v":1,"ranges":{"a":{"x":[1,3]}}}',
                                 '{"v":1,"ranges":{},"known":{"a":-1}}', '{"v":1,"ranges":{},"known":{"a":"x"}}',
                                 '{"v":1,"ranges":{},"known":[1]}'])
def test_bad_offsets_are_rejected(bad):
    with pytest.raises(OffsetFormatError):
        StreamOffset.from_json(bad)


def test_fair_share_water_filling():
    assert fair_share({A0: 30, A1: 15, B0: 3}, 10) == {A0: 4, A1: 3, B0: 3}
    assert fair_share({A0: 2, A1: 2}, 10) == {A0: 2, A1: 2}
    assert fair_share({A0: 5, A1: 5}, 0) == {A0: 0, A1: 0}
    assert sum(fair_share({A0: 100, A1: 100, B0: 100}, 10).values()) == 10


def test_plan_ranges_limits_and_caps():
    pos, latest = {A0: 10, A1: 0}, {A0: 20, A1: 4}
    assert plan_ranges(pos, latest) == {A0: (10, 20), A1: (0, 4)}
    assert plan_ranges(pos, latest, max_rows=6) == {A0: (10, 13), A1: (0, 3)}
    assert plan_ranges(pos, latest, max_rows=10) == {A0: (10, 16), A1: (0, 4)}
    assert plan_ranges(pos, latest, caps={A0: 15}) == {A0: (10, 15), A1: (0, 0)}
    # a position beyond the end never produces a negative range
    assert plan_ranges({A0: 30}, {A0: 20}) == {A0: (30, 30)}
    assert not has_new_data(plan_ranges({A0: 5}, {A0: 5}))
    assert has_new_data({A0: (1, 2)})


def test_trim_replay_leaves_out_what_the_group_read_since_the_batch_was_logged():
    a, b, c, d, e = (TP("t", p) for p in range(5))
    logged = {a: (10, 20), b: (10, 20), c: (10, 20), d: (10, 20), e: (10, 20)}
    committed = {a: 10, b: 14, c: 25, d: None}  # e: the coordinator did not answer
    kept, left_out = trim_replay(logged, committed, owned=frozenset({a, b, c, d, e}))
    # a: the group is where the earlier run left it, the replay is identical; b: another
    # member read [10, 14) meanwhile; c: read past the batch; d: nothing committed; e: unknown
    assert kept == {a: (10, 20), b: (14, 20), d: (10, 20), e: (10, 20)}
    assert set(left_out) == {c} and "25" in left_out[c]


def test_trim_replay_leaves_out_partitions_another_member_owns_unless_the_assignment_is_unknown():
    a, b = TP("t", 0), TP("t", 1)
    logged = {a: (10, 20), b: (5, 9)}
    kept, left_out = trim_replay(logged, {a: 10, b: 5}, owned=frozenset({a}))
    assert kept == {a: (10, 20)} and set(left_out) == {b} and "another member" in left_out[b]
    kept, left_out = trim_replay(logged, {a: 10, b: 7}, owned=None)
    assert kept == {a: (10, 20), b: (7, 9)} and left_out == {}


def test_trim_replay_keeps_a_range_the_group_offset_fell_behind():
    """Below the batch's start (the earlier run's last commit did not land, or the group was
    reset): the replay stays whole, and positions afterwards follow the group (planner)."""
    a = TP("t", 0)
    assert trim_replay({a: (10, 20)}, {a: 3}, owned=frozenset({a})) == ({a: (10, 20)}, {})
