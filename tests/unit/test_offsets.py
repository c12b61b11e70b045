"""Pure tests of spark_groupsource/offsets.py: the offset JSON and batch planning."""

from __future__ import annotations

import pytest

from assignment.model import TopicPartition as TP
from spark_groupsource.offsets import (
    OffsetFormatError,
    StreamOffset,
    fair_share,
    has_new_data,
    plan_ranges,
)

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_json_round_trip_and_fixed_key_order():
    off = StreamOffset({B0: (1, 2), A1: (7, 9), A0: (0, 5)})
    text = off.to_json()
    assert text == '{"v":1,"ranges":{"a":{"0":[0,5],"1":[7,9]},"b":{"0":[1,2]}}}'
    assert StreamOffset.from_json(text) == off
    assert StreamOffset(dict(reversed(list(off.ranges.items())))).to_json() == text
    assert StreamOffset.from_json({"v": 1, "ranges": {}}).ranges == {}


def test_partition_order_is_numeric_not_lexical():
    off = StreamOffset({TP("a", 10): (0, 1), TP("a", 2): (0, 1)})
    assert off.to_json().index('"2"') < off.to_json().index('"10"')


@pytest.mark.parametrize("bad", ["", "nope", "{}", '{"v":2,"ranges":{}}', '{"v":1,"ranges":{"a":{"0":[5,3]}}}',
                                 '{"v":1,"ranges":{"a":{"0":[-1,3]}}}', '{"v":1,"ranges":{"a":{"x":[1,3]}}}'])
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
