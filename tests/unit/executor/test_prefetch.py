"""How deep a task's fetcher prefetches (spark_groupsource/executor/prefetch.py): deeper only
where every range is long by the bytes per record the worker saw, never over the user's own
setting; and the fetcher's window of partitions ahead shrinks to keep its memory bound."""

from __future__ import annotations

from spark_groupsource.config import parse_stream_options, prefetch_adapts
from spark_groupsource.config.client_configs import PREFETCH_KBYTES, PREFETCH_RECORDS
from spark_groupsource.executor.fetch import _AHEAD_PARTITIONS, _Ahead
from spark_groupsource.executor.prefetch import (
    LONG_RANGE_BYTES,
    LONG_RANGE_FETCH_BYTES,
    LONG_RANGE_PREFETCH_KBYTES,
    RecordSizes,
    prefetch_config,
)
from spark_groupsource.ranges import OffsetRange

KEY = "queued.max.messages.kbytes"
FETCH = "max.partition.fetch.bytes"
BASE = {"bootstrap.servers": "b:9092", KEY: PREFETCH_KBYTES, "queued.min.messages": PREFETCH_RECORDS}


def sizes(**per_topic: float) -> RecordSizes:
    seen = RecordSizes()
    for topic, per_record in per_topic.items():
        seen.saw(topic, int(per_record * 1000), 1000)
    return seen


def long_range(topic: str = "t", partition: int = 0, per_record: float = 1000.0) -> OffsetRange:
    return OffsetRange(topic, partition, 0, int(LONG_RANGE_BYTES // per_record) + 1)


def test_a_task_of_long_ranges_prefetches_deeper_in_larger_fetches() -> None:
    got = prefetch_config(BASE, [long_range(), long_range(partition=1)], sizes(t=1000.0), adapt=True)
    assert got == {**BASE, KEY: LONG_RANGE_PREFETCH_KBYTES, FETCH: LONG_RANGE_FETCH_BYTES}
    assert BASE[KEY] == PREFETCH_KBYTES and FETCH not in BASE  # the task's config is a copy
    assert LONG_RANGE_FETCH_BYTES < LONG_RANGE_PREFETCH_KBYTES * 1024  # a fetch fits the queue


def test_small_records_keep_the_fetch_size_where_the_record_bound_stops_the_prefetch() -> None:
    """20,000 records of 100 B are 2 MB, far below the 16 MiB queue: a larger fetch would
    only decode more past a range's end (measured: 100 B lz4 slower with 8 MiB fetches)."""
    small = prefetch_config(BASE, [long_range(per_record=100.0)], sizes(t=100.0), adapt=True)
    assert small == {**BASE, KEY: LONG_RANGE_PREFETCH_KBYTES}
    assert 838 < LONG_RANGE_PREFETCH_KBYTES * 1024 / PREFETCH_RECORDS < 839  # the edge
    assert FETCH in prefetch_config(BASE, [long_range(per_record=839.0)], sizes(t=839.0), adapt=True)
    assert FETCH not in prefetch_config(BASE, [long_range(per_record=838.0)], sizes(t=838.0), adapt=True)
    mixed = prefetch_config(BASE, [long_range(), long_range("u", per_record=100.0)], sizes(t=1000.0, u=100.0),
                            adapt=True)
    assert FETCH not in mixed  # the smallest records decide


def test_the_users_own_fetch_size_is_never_changed() -> None:
    for key in (FETCH, "fetch.message.max.bytes"):  # librdkafka's name and its alias
        own = {**BASE, key: 1 << 20}
        got = prefetch_config(own, [long_range()], sizes(t=1000.0), adapt=True)
        assert got == {**own, KEY: LONG_RANGE_PREFETCH_KBYTES}
    small = {**BASE, "fetch.max.bytes": 2 << 20}  # a whole Fetch response's bound
    got = prefetch_config(small, [long_range()], sizes(t=1000.0), adapt=True)
    assert got[FETCH] == 2 << 20


def test_one_short_range_keeps_the_task_at_the_bounded_prefetch() -> None:
    short = OffsetRange("t", 2, 0, int(LONG_RANGE_BYTES // 1000) - 1)
    assert prefetch_config(BASE, [long_range(), short], sizes(t=1000.0), adapt=True) is BASE


def test_the_same_records_count_as_long_only_when_large_enough() -> None:
    rng = OffsetRange("t", 0, 0, 200_000)
    assert prefetch_config(BASE, [rng], sizes(t=1000.0), adapt=True)[KEY] == LONG_RANGE_PREFETCH_KBYTES
    assert prefetch_config(BASE, [rng], sizes(t=100.0), adapt=True) is BASE


def test_a_topic_not_read_yet_keeps_the_bounded_prefetch() -> None:
    assert prefetch_config(BASE, [long_range("other")], sizes(t=1000.0), adapt=True) is BASE
    assert prefetch_config(BASE, [long_range(), long_range("other")], sizes(t=1000.0), adapt=True) is BASE


def test_the_users_own_prefetch_is_never_changed() -> None:
    assert prefetch_config(BASE, [long_range()], sizes(t=1000.0), adapt=False) is BASE
    deep = {**BASE, KEY: 65536}
    assert prefetch_config(deep, [long_range()], sizes(t=1000.0), adapt=True) is deep


def test_the_option_decides_whether_the_prefetch_adapts() -> None:
    common = {"kafka.bootstrap.servers": "b:9092", "kafka.group.id": "g", "subscribe": "t"}
    assert prefetch_adapts(parse_stream_options(common))
    assert not prefetch_adapts(parse_stream_options({**common, "kafka.queued.max.messages.kbytes": "4096"}))


def test_record_sizes_keep_the_last_read_per_topic() -> None:
    seen = RecordSizes()
    assert seen.get("t") is None
    seen.saw("t", 10_000, 10)
    seen.saw("t", 5_000, 0)  # a range that read nothing says nothing
    assert seen.get("t") == 1000.0
    seen.saw("t", 500, 10)
    assert seen.get("t") == 50.0 and seen.get("u") is None


def test_a_deeper_prefetch_keeps_one_partition_assigned_at_a_time() -> None:
    """The fetcher's memory bound: four partitions of 4 MiB or one of 16 MiB."""
    ranges = [OffsetRange("t", p, 0, 10) for p in range(6)]
    assert _Ahead(None, ranges, BASE).window == _AHEAD_PARTITIONS == 4  # type: ignore[arg-type]
    deep = {**BASE, KEY: LONG_RANGE_PREFETCH_KBYTES}
    assert _Ahead(None, ranges, deep).window == 1  # type: ignore[arg-type]
