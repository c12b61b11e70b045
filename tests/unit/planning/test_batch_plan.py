"""Batch planning without a broker: start/end resolution, every bad-range error, data loss."""

from __future__ import annotations

import json
import pickle

import pytest

from assignment.model import TopicPartition as TP
from spark_groupsource.batch import GroupKafkaBatchReader
from spark_groupsource.config import SubscribePattern, SubscribeTopics, parse_batch_options
from spark_groupsource.errors import DataLossError, OptionError
from spark_groupsource.planning.batch_plan import (
    offsets_json,
    plan_tasks,
    resolve_ranges,
    subscribed_partitions,
)
from spark_groupsource.ranges import OffsetRange


class FakeView:
    """Topic t: 2 partitions with offsets [10, 50) and [0, 30); record o has timestamp 1000+o."""

    def __init__(self, marks=None, committed=None, topics=None):
        self.marks = marks or {TP("t", 0): (10, 50), TP("t", 1): (0, 30)}
        self._topics = topics or {"t": 2, "other": 1, "__consumer_offsets": 1}
        self._committed = committed or {}
        self.calls: list[str] = []

    def topics(self, named=()):
        return dict(self._topics)

    def watermarks(self, partitions):
        return {tp: self.marks.get(tp, (0, 0)) for tp in partitions}

    def for_timestamps(self, stamps):
        out = {}
        for tp, ts in stamps.items():
            low, high = self.marks[tp]
            off = max(low, ts - 1000)
            out[tp] = off if off < high else None
        return out

    def committed(self, group, partitions):
        self.calls.append(group)
        return {tp: self._committed.get(tp) for tp in partitions}


def opts(**extra: str):
    base = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}
    return parse_batch_options({**base, **{k.lower(): v for k, v in extra.items()}})


def ranges(view=None, **extra: str):
    return [(r.partition, r.start, r.until) for r in resolve_ranges(opts(**extra), view or FakeView())]


def option_error(view=None, **extra: str) -> OptionError:
    with pytest.raises(OptionError) as info:
        ranges(view, **extra)
    return info.value


# ------------------------------------------------------------------ starts and ends


def test_defaults_read_earliest_to_latest():
    assert ranges() == [(0, 10, 50), (1, 0, 30)]


def test_json_offsets_with_symbolic_values():
    got = ranges(
        startingOffsets='{"t":{"0":-2,"1":5}}',
        endingOffsets='{"t":{"0":20,"1":-1}}',
    )
    assert got == [(0, 10, 20), (1, 5, 30)]


def test_group_start_uses_committed_then_reset():
    view = FakeView(committed={TP("t", 0): 42})
    got = ranges(view, startingOffsets="group", **{"kafka.group.id": "g", "kafka.auto.offset.reset": "earliest"})
    assert got == [(0, 42, 50), (1, 0, 30)]
    assert view.calls == ["g"]
    got = ranges(FakeView(committed={TP("t", 0): 42}), startingOffsets="group", **{"kafka.group.id": "g"})
    assert got == [(0, 42, 50), (1, 30, 30)]  # default reset: latest


def test_group_start_reset_none_names_the_option():
    e = option_error(
        FakeView(), startingOffsets="group", **{"kafka.group.id": "g", "kafka.auto.offset.reset": "none"}
    )
    assert e.option == "kafka.auto.offset.reset" and "t-0" in str(e)


def test_timestamps_start_and_end():
    assert ranges(startingTimestamp="1015", endingTimestamp="1025") == [(0, 15, 25), (1, 15, 25)]
    by_ts = ranges(
        startingOffsetsByTimestamp='{"t":{"0":1020,"1":1000}}',
        endingOffsetsByTimestamp='{"t":{"0":1040,"1":1029}}',
    )
    assert by_ts == [(0, 20, 40), (1, 0, 29)]


def test_end_timestamp_past_the_end_reads_to_latest():
    assert ranges(endingTimestamp="99999") == [(0, 10, 50), (1, 0, 30)]


def test_start_timestamp_past_the_end_strategy():
    e = option_error(startingTimestamp="1040")  # t-1 ends at 30
    assert e.option == "startingTimestamp" and "t-1" in str(e) and "Strategy=latest" in str(e)
    got = ranges(startingTimestamp="1040", startingOffsetsByTimestampStrategy="latest")
    assert got == [(0, 40, 50), (1, 30, 30)]


def test_pattern_subscription_skips_internal_topics():
    parts = subscribed_partitions(SubscribePattern(".*"), {"t": 2, "__consumer_offsets": 3, "o": 1})
    assert parts == [TP("o", 0), TP("t", 0), TP("t", 1)]


# ------------------------------------------------------------------ every bad range


@pytest.mark.parametrize(
    ("extra", "option", "words"),
    [
        ({"startingOffsets": "latest"}, "startingOffsets", "not valid for a batch"),
        ({"startingOffsets": '{"t":{"0":-1,"1":0}}'}, "startingOffsets", "latest"),
        ({"endingOffsets": '{"t":{"0":-2,"1":0}}'}, "endingOffsets", "JSON"),
        ({"startingOffsets": '{"t":{"0":30,"1":0}}', "endingOffsets": '{"t":{"0":20,"1":5}}'},
         "endingOffsets", "before its start"),
        ({"startingOffsets": '{"t":{"0":20,"1":5}}', "endingOffsets": '{"t":{"0":15,"1":-1}}'},
         "endingOffsets", "t-0"),
        ({"startingOffsets": '{"t":{"0":20}}'}, "startingOffsets", "missing t-1"),
        ({"endingOffsets": '{"t":{"0":20,"1":5,"2":5}}'}, "endingOffsets", "outside the subscription"),
        ({"startingOffsetsByTimestamp": '{"t":{"0":1000}}'}, "startingOffsetsByTimestamp", "missing t-1"),
        ({"startingTimestamp": "1020", "endingTimestamp": "1010"}, "endingTimestamp", "before its start"),
        ({"startingTimestamp": "1025", "endingOffsets": '{"t":{"0":20,"1":-1}}'}, "endingOffsets", "t-0"),
        ({"subscribe": "missing"}, "subscribe", "not found"),
        ({"subscribePattern": "nope.*"}, "subscribePattern", "matches no topic"),
        ({"endingOffsets": "earliest"}, "endingOffsets", "latest or JSON"),
    ],
)
def test_bad_ranges_name_the_option(extra, option, words):
    if "subscribePattern" in extra:
        base = {"kafka.bootstrap.servers": "h:9092", "subscribePattern": extra["subscribePattern"]}
        with pytest.raises(OptionError) as info:
            resolve_ranges(parse_batch_options({k.lower(): v for k, v in base.items()}), FakeView())
        e = info.value
    else:
        e = option_error(**extra)
    assert e.option == option, str(e)
    assert words in str(e)


# ------------------------------------------------------------------ data loss on the driver


def test_start_below_log_start_is_data_loss():
    with pytest.raises(DataLossError) as info:
        ranges(startingOffsets='{"t":{"0":3,"1":0}}')
    assert (info.value.partition, info.value.expected, info.value.available) == (0, 3, 10)
    got = ranges(startingOffsets='{"t":{"0":3,"1":0}}', failOnDataLoss="false")
    assert got == [(0, 10, 50), (1, 0, 30)]


def test_range_beyond_the_end_is_data_loss(caplog):
    extra = {"startingOffsets": '{"t":{"0":45,"1":0}}', "endingOffsets": '{"t":{"0":70,"1":-1}}'}
    with pytest.raises(DataLossError) as info:
        ranges(**extra)
    assert "beyond the end offset 50" in str(info.value)
    with caplog.at_level("WARNING", logger="spark_groupsource.batch"):
        got = ranges(failOnDataLoss="false", **extra)
    assert got == [(0, 45, 50), (1, 0, 30)]
    assert "data loss in t-0" in caplog.text


def test_whole_range_below_log_start_becomes_empty():
    got = ranges(
        startingOffsets='{"t":{"0":2,"1":0}}', endingOffsets='{"t":{"0":5,"1":-1}}', failOnDataLoss="false"
    )
    assert got[0] == (0, 5, 5)


# ------------------------------------------------------------------ partial plans, tasks, JSON


def test_only_some_partitions_get_empty_ranges_at_the_end():
    got = resolve_ranges(opts(), FakeView(), only={TP("t", 1)}, start_override={TP("t", 1): 7})
    assert [(r.partition, r.start, r.until) for r in got] == [(0, 50, 50), (1, 7, 30)]


def test_plan_tasks_split_large_ranges_contiguously():
    rs = [OffsetRange("t", 0, 10, 50), OffsetRange("t", 1, 0, 0)]
    tasks = plan_tasks(rs, opts(maxRecordsPerPartition="10"))
    assert [(t.index, [(r.start, r.until) for r in t.ranges]) for t in tasks] == [
        (0, [(10, 20)]), (1, [(20, 30)]), (2, [(30, 40)]), (3, [(40, 50)])
    ]
    assert len(plan_tasks(rs, opts(minPartitions="8"))) == 8


def test_offsets_json_is_sorted():
    text = offsets_json({TP("b", 10): 1, TP("b", 2): 2, TP("a", 0): 3})
    assert text == '{"a":{"0":3},"b":{"2":2,"10":1}}'
    assert json.loads(text)["b"]["10"] == 1


def test_reader_refuses_commit_offsets_and_pickles_without_plan():
    base = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.group.id": "g"}
    with pytest.raises(OptionError) as info:
        GroupKafkaBatchReader(None, {**base, "groupcoordinated": "true", "commitoffsets": "true"})
    assert info.value.option == "commitOffsets"
    reader = GroupKafkaBatchReader(None, base)
    reader._tasks = []
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._tasks is None and clone.opts == reader.opts
    assert list(clone.read(object())) == []  # Spark's placeholder partition of an empty plan


def test_subscribe_topics_keeps_the_given_order_sorted():
    assert subscribed_partitions(SubscribeTopics(("t", "other")), FakeView().topics()) == [
        TP("other", 0), TP("t", 0), TP("t", 1)
    ]
