"""The many-partitions benchmark's arithmetic (bench/many_partitions.py) and the size of the
OffsetCommit it measures (``kafka_client.offset_commit_request``, the request the member sends)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from many_partitions import MEMBER_ID, _ranges, _slope  # noqa: E402

from assignment.model import TopicPartition  # noqa: E402
from spark_groupsource.group.kafka_client import offset_commit_request  # noqa: E402


def _size(n: int, topics: int = 1) -> int:
    offsets = {TopicPartition(f"t{i % topics}", i): 123_456 for i in range(n)}
    return len(offset_commit_request("bench-group", 7, MEMBER_ID, None, offsets).encode(version=8))


def test_the_commit_request_grows_by_a_fixed_size_per_partition():
    # one topic name for all partitions: the growth is linear, never quadratic (v8 is a flexible
    # version: a compact array's varint length grows by a byte at 128 and 16,384 entries)
    per = _size(3) - _size(2)
    assert abs(_size(10_000) - _size(1) - per * 9_999) <= 4
    assert per <= 20  # partition index, offset, leader epoch, empty metadata, tagged fields
    # a topic more costs its name once
    assert _size(1_000, topics=2) > _size(1_000)


def test_the_slope_is_the_growth_per_trigger():
    assert _slope([5, 5, 5, 5]) == 0
    assert _slope([100, 110, 120, 130]) == pytest.approx(10)
    assert _slope([1]) != _slope([1])  # nan: one point has no slope


def test_the_ranges_come_from_the_end_offset_json():
    progress = {"sources": [{"endOffset": '{"v":1,"ranges":{"a":{"0":[3,5],"1":[7,7]}},"known":{"a":2}}'}]}
    assert _ranges(progress) == {TopicPartition("a", 0): (3, 5), TopicPartition("a", 1): (7, 7)}
