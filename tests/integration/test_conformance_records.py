"""Conformance with Spark's own Kafka source: what a record looks like (columns, headers, null
keys and values), transactions, where a stream or a batch read starts and ends (specific
offsets, timestamps), rate limits and triggers.

Every test runs the scenario of a Spark test (named in its docstring) on both readers on the main
Kafka and passes only where they deliver the same records: docs/conformance.md.
"""

from __future__ import annotations

import json

import pytest
from conformance.harness import (
    MODES,
    SKIP_WITHOUT_SPARK_SOURCE,
    SPARK_OPTIONS_EXTENDED,
    StreamPair,
    assert_both_fail,
    assert_same,
    batch_frames,
    collect,
    failure_of,
    options_for,
    read_both,
    values,
)
from conformance.kafka_ops import (
    create_topic,
    now_ms,
    send,
    send_in_transaction,
    transactional_producer,
    wait_end_offset,
)

pytestmark = [SKIP_WITHOUT_SPARK_SOURCE, pytest.mark.kafka39, SPARK_OPTIONS_EXTENDED]  # also on Kafka 3.9.1 (make test-compat)

BOTH = pytest.mark.parametrize("mode", MODES)
AVAILABLE_NOW = {"availableNow": True}
ONCE = {"once": True}
#: What each reader says when no record is at or after a starting timestamp: Spark's
#: KafkaOffsetReader's "No offset matched from request of topic-partition ...", groupkafka's
#: OptionError naming the option and the way out.
NO_MATCH = {
    "kafka": r"No offset matched from request",
    "groupkafka": r"option 'starting(Timestamp|OffsetsByTimestamp)': no record in .* has a timestamp at or after "
                  r"\d+.*startingOffsetsByTimestampStrategy=latest",
}


@BOTH
def test_column_types_and_headers(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite "Kafka column types": a record with a null key and two headers,
    every column (timestamp, timestampType, headers) as Spark's source gives it; plus a record
    without headers and one with a repeated header name (KafkaRelationSuite "default starting and
    ending offsets with headers")."""
    bs, topic = kafka_broker.bootstrap, unique_name("columns")
    create_topic(bs, topic, 1)
    send(bs, topic, ["1", "2", "3"], headers=[[("a", b"b"), ("c", b"d")], None, [("e", b"f"), ("e", b"g")]])
    opts = options_for(mode, {"subscribe": topic, "startingOffsets": "earliest", "includeHeaders": "true"},
                       {"kafka.metadata.max.age.ms": "1"})
    with StreamPair(spark, bs, tmp_path, opts, headers=True) as pair:
        pair.start(AVAILABLE_NOW).await_end()
        got = pair.assert_same("column types", expect_values=["1", "2", "3"])
    first = got["kafka"][0]
    assert (first.key, first.partition, first.offset, first.timestamp_type) == (None, 0, 0, 0)
    assert first.headers == (("a", b"b"), ("c", b"d"))


def test_batch_headers(spark, kafka_broker, unique_name):
    """KafkaRelationSuite "default starting and ending offsets with headers": no headers (null),
    two headers, a repeated header name; default starting and ending offsets."""
    bs, topic = kafka_broker.bootstrap, unique_name("headers")
    create_topic(bs, topic, 3)
    send(bs, topic, ["1"], partition=0, headers=[[]])
    send(bs, topic, ["2"], partition=1, headers=[[("a", b"b"), ("c", b"d")]])
    send(bs, topic, ["3"], partition=2, headers=[[("e", b"f"), ("e", b"g")]])
    got = read_both(spark, bs, {"subscribe": topic, "includeHeaders": "true"}, headers=True)
    assert values(got["kafka"]) == ["1", "2", "3"]
    assert_same(got, "headers")
    by_value = {r.value: r.headers for r in got["kafka"]}
    assert by_value[b"1"] is None and by_value[b"3"] == (("e", b"f"), ("e", b"g"))


@BOTH
def test_null_keys_and_values(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite "SPARK-27494: read kafka record containing null key/values."
    (testNullableKeyValue): 5 records null/null, 5 key/null, 5 null/value in one committed
    transaction, read with read_committed from earliest."""
    bs, topic = kafka_broker.bootstrap, unique_name("nulls")
    create_topic(bs, topic, 1)
    with transactional_producer(bs) as p:
        p.begin_transaction()
        for i in range(15):
            key = None if i < 5 or i >= 10 else str(i).encode()
            value = str(i).encode() if i >= 10 else None
            p.produce(topic, key=key, value=value, partition=0)
        p.commit_transaction(30)
    opts = options_for(mode, {"subscribe": topic, "startingOffsets": "earliest"},
                       {"kafka.isolation.level": "read_committed"})
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        pair.catch_up()
        got = pair.assert_same("null keys and values", expect_values=[None] * 10 + [str(i) for i in range(10, 15)])
    assert sum(r.key is None for r in got["kafka"]) == 10


def _nonempty_batches(run):
    return [sorted(r.value.decode() for r in batch) for _, batch in sorted(run.batches.items()) if batch]


def test_read_committed_with_aborted_transactions(spark, kafka_broker, unique_name, tmp_path):
    """KafkaMicroBatchSourceSuite "read Kafka transactional messages: read_committed": uncommitted
    records invisible until committed, aborted ones never, transaction markers as gaps at the start,
    end and middle of a batch (maxOffsetsPerTrigger=3): the same records in the same batches. The
    isolation level is what the case is about, so it is in both readers' options (one mode)."""
    bs, topic = kafka_broker.bootstrap, unique_name("txn")
    create_topic(bs, topic, 1)
    opts = {"subscribe": topic, "startingOffsets": "earliest", "kafka.isolation.level": "read_committed",
            "maxOffsetsPerTrigger": "3", "kafka.metadata.max.age.ms": "1", "kafkaConsumer.pollTimeoutMs": "5000"}
    with StreamPair(spark, bs, tmp_path, opts) as pair, transactional_producer(bs) as p:
        pair.start().process_all()
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=str(i).encode(), partition=0)
        p.flush(30)
        pair.process_all()
        pair.assert_same("an open transaction", expect_values=[])
        p.commit_transaction(30)
        pair.catch_up()
        pair.assert_same("committed", expect_values=[str(i) for i in range(5)])
        send_in_transaction(p, topic, [str(i) for i in range(6, 11)], commit=False)
        send_in_transaction(p, topic, [str(i) for i in range(12, 17)], commit=True)
        send_in_transaction(p, topic, ["18"], commit=True)
        send_in_transaction(p, topic, ["20"], commit=True)
        send_in_transaction(p, topic, ["22", "23"], commit=True)
        pair.catch_up()
        want = [str(i) for i in (0, 1, 2, 3, 4, 12, 13, 14, 15, 16, 18, 20, 22, 23)]
        pair.assert_same("aborted and committed transactions", expect_values=want)
        batches = {r: _nonempty_batches(pair[r]) for r in ("kafka", "groupkafka")}
    assert batches["kafka"] == batches["groupkafka"], f"batches differ: {batches}"


def test_batch_read_committed(spark, kafka_broker, unique_name):
    """KafkaRelationSuite "read Kafka transactional messages: read_committed" and
    "...: read_uncommitted": a batch read sees nothing of an open transaction under
    read_committed (all of it under read_uncommitted), never an aborted one under read_committed.
    A fresh DataFrame per read (the Spark test reuses one; late binding is
    test_batch_latest_late_binds's case)."""
    bs, topic = kafka_broker.bootstrap, unique_name("btxn")
    create_topic(bs, topic, 1)

    def read(level):
        return read_both(spark, bs, {"subscribe": topic, "kafka.isolation.level": level})

    with transactional_producer(bs) as p:
        p.begin_transaction()
        for i in range(1, 6):
            p.produce(topic, value=str(i).encode(), partition=0)
        p.flush(30)
        got = read("read_committed")
        assert got["kafka"] == [] and got["groupkafka"] == [], got
        assert_same(read("read_uncommitted"), "read_uncommitted, open transaction")
        p.commit_transaction(30)
        send_in_transaction(p, topic, [str(i) for i in range(6, 11)], commit=False)
        send_in_transaction(p, topic, [str(i) for i in range(11, 16)], commit=True)
    wait_end_offset(bs, topic, 0, 18)  # the last commit marker, written after the commit returns
    got = read("read_committed")
    assert values(got["kafka"]) == sorted(str(i) for i in [*range(1, 6), *range(11, 16)])
    assert_same(got, "read_committed")
    got = read("read_uncommitted")
    assert values(got["kafka"]) == sorted(str(i) for i in range(1, 16))
    assert_same(got, "read_uncommitted")


@BOTH
def test_specific_starting_offsets(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite (KafkaSourceSuiteBase) "subscribing topic by name from specific
    offsets (failOnDataLoss: true)", testFromSpecificOffsets: startingOffsets JSON with -2
    (earliest), -1 (latest), 0, 1, 2 over five partitions; stop and restart from the checkpoint;
    more records."""
    bs, topic = kafka_broker.bootstrap, unique_name("specific")
    create_topic(bs, topic, 5)
    for p, vals in enumerate([(-20, -21, -22), (-10, -11, -12), (0, 1, 2), (10, 11, 12), (20, 21, 22)]):
        send(bs, topic, [str(v) for v in vals], partition=p)
    starting = json.dumps({topic: {"0": -2, "1": -1, "2": 0, "3": 1, "4": 2}})
    opts = options_for(mode, {"subscribe": topic, "startingOffsets": starting},
                       {"kafka.metadata.max.age.ms": "1", "failOnDataLoss": "true"})
    first = ["-20", "-21", "-22", "0", "1", "2", "11", "12", "22"]
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        pair.catch_up()
        pair.assert_same("from specific offsets", expect_values=first)
        pair.restart().process_all()
        send(bs, topic, ["30", "31", "32", "33", "34"], spread=5)
        pair.catch_up()
        pair.assert_same("after a restart", expect_values=first + ["30", "31", "32", "33", "34"])


def _timestamped_topic(bs, topic):
    """setupTestMessagesForTestOnTimestampOffsets: partition p gets records at a first and a
    second timestamp (partition 4 none at the second)."""
    create_topic(bs, topic, 5)
    first = now_ms() - 5000
    second = first + 1000
    for p, vals in enumerate([(-20,), (-10,), (0, 1), (10, 11), (20, 21, 22)]):
        send(bs, topic, [str(v) for v in vals], partition=p, timestamp=first)
    for p, vals in enumerate([(-21, -22), (-11, -12), (2,), (12,)]):
        send(bs, topic, [str(v) for v in vals], partition=p, timestamp=second)
    return first, second


@BOTH
def test_starting_offsets_by_timestamp(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite (KafkaSourceSuiteBase) testFromSpecificTimestamps as "assign
    from specific timestamps" runs it (no added partitions: test_conformance_discovery has those),
    on subscribe: startingOffsetsByTimestamp per partition; restart; records added while stopped."""
    bs, topic = kafka_broker.bootstrap, unique_name("bytime")
    first, second = _timestamped_topic(bs, topic)
    starts = {str(p): second for p in range(4)} | {"4": first}
    opts = options_for(mode, {"subscribe": topic, "startingOffsetsByTimestamp": json.dumps({topic: starts})},
                       {"kafka.metadata.max.age.ms": "1", "failOnDataLoss": "true"})
    want = ["-21", "-22", "-11", "-12", "2", "12", "20", "21", "22"]
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        pair.catch_up()
        pair.assert_same("from timestamps", expect_values=want)
        pair.stop()
        send(bs, topic, ["30", "31", "32"], spread=5)
        pair.start()
        pair.catch_up()
        pair.assert_same("added while stopped", expect_values=want + ["30", "31", "32"])


def test_starting_timestamp_without_a_match(spark, kafka_broker, unique_name, tmp_path):
    """KafkaMicroBatchSourceSuite "subscribing topic by name from global timestamp per topic with
    non-matching starting offset" (testFromGlobalTimestampWithNoMatchingStartingOffset): with
    startingOffsetsByTimestampStrategy unset or "error" both readers fail (partition 4 has no
    record at or after the timestamp); with "latest" that partition starts at its end, and a
    record written there later is read."""
    bs, topic = kafka_broker.bootstrap, unique_name("nomatch")
    _first, second = _timestamped_topic(bs, topic)
    base = {"subscribe": topic, "startingTimestamp": str(second)}
    for strategy in (None, "error"):
        opts = base | ({"startingOffsetsByTimestampStrategy": strategy} if strategy else {})
        with StreamPair(spark, bs, tmp_path / f"s-{strategy}", opts) as pair:
            pair.start()
            fails = pair.failures_of()
        assert_both_fail(fails, NO_MATCH, f"strategy {strategy}")
    with StreamPair(spark, bs, tmp_path / "latest", base | {"startingOffsetsByTimestampStrategy": "latest"}) as pair:
        pair.start().process_all()
        pair.catch_up()
        pair.assert_same("strategy latest", expect_values=["-21", "-22", "-11", "-12", "2", "12"])
        send(bs, topic, ["23", "24", "25"], partition=4, timestamp=second)
        pair.catch_up()
        pair.assert_same("strategy latest, more records", expect_values=["-21", "-22", "-11", "-12", "2", "12",
                                                                       "23", "24", "25"])


def test_batch_timestamps(spark, kafka_broker, unique_name):
    """KafkaRelationSuite's timestamp cases on one topic (prepareTimestampRelatedUnitTest):
    "timestamp provided for starting and ending", "timestamp provided for starting, offset
    provided for ending", "timestamp provided for ending, offset provided for starting",
    "global timestamp provided for starting and ending", "preferences on offset related
    options", "no matched offset for timestamp - endingOffsets" and "- startingOffsets" (both
    fail)."""
    bs, topic = kafka_broker.bootstrap, unique_name("btime")
    create_topic(bs, topic, 3)
    t1 = now_ms() - 5000
    ts = [t1, t1 + 1000, t1 + 2000, t1 + 3000]
    for i, base in enumerate((0, 10, 20)):
        for p in range(3):
            send(bs, topic, [str(v) for v in range(base, base + 10) if v % 3 == p], partition=p, timestamp=ts[i])

    def per_partition(t):
        return json.dumps({topic: {str(p): t for p in range(3)}})

    cases = {
        "starting and ending by timestamp": ({"startingOffsetsByTimestamp": per_partition(ts[1]),
                                              "endingOffsetsByTimestamp": per_partition(ts[2])}, range(10, 20)),
        "starting by timestamp, ending by offset": (
            {"startingOffsetsByTimestamp": per_partition(ts[0]),
             "endingOffsets": json.dumps({topic: {"0": -1, "1": -1, "2": 1}})},
            [v for v in range(30) if v % 3 != 2] + [2]),
        "ending by timestamp, starting by offset": (
            {"startingOffsets": json.dumps({topic: {"0": -2, "1": -2, "2": 0}}),
             "endingOffsetsByTimestamp": per_partition(ts[2])}, range(20)),
        "starting by timestamp only": ({"startingOffsetsByTimestamp": per_partition(ts[1])}, range(10, 30)),
        "ending by timestamp only": ({"endingOffsetsByTimestamp": per_partition(ts[2])}, range(20)),
        "global timestamps": ({"startingTimestamp": str(ts[1]), "endingTimestamp": str(ts[2])}, range(10, 20)),
        "preference: global timestamp": ({"startingTimestamp": str(ts[2]),
                                          "startingOffsetsByTimestamp": per_partition(ts[1]),
                                          "startingOffsets": "earliest"}, range(20, 30)),
        "preference: timestamp per partition": ({"startingOffsetsByTimestamp": per_partition(ts[1]),
                                                 "startingOffsets": "earliest"}, range(10, 30)),
        "no matched ending offset": (
            {"endingOffsetsByTimestamp": json.dumps({topic: {"0": ts[1], "1": ts[1], "2": 2**63 - 1}})},
            [*range(10), *(v for v in range(10, 30) if v % 3 == 2)]),
    }
    for what, (opts, want) in cases.items():
        got = read_both(spark, bs, {"subscribe": topic, **opts})
        assert values(got["kafka"]) == sorted(str(v) for v in want), what
        assert_same(got, what)
    bad = {"subscribe": topic,
           "startingOffsetsByTimestamp": json.dumps({topic: {"0": ts[1], "1": ts[1], "2": 2**63 - 1}})}
    fails = {r: failure_of(lambda df=df: df.collect()) for r, df in batch_frames(spark, bs, bad).items()}
    assert_both_fail(fails, NO_MATCH, "no matched starting offset")


@BOTH
def test_max_offsets_per_trigger(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger": 101, 11 and 1 records in three
    partitions, at most 10 per micro-batch (the same records, no batch above the limit); a
    restart; then Trigger.Once, which ignores the limit (one batch of everything)."""
    bs, topic = kafka_broker.bootstrap, unique_name("maxoff")
    create_topic(bs, topic, 3)
    send(bs, topic, [str(v) for v in range(100, 201)], partition=0)
    send(bs, topic, [str(v) for v in range(10, 21)], partition=1)
    send(bs, topic, ["1"], partition=2)
    everything = [str(v) for v in [1, *range(10, 21), *range(100, 201)]]
    opts = options_for(mode, {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"},
                       {"kafka.metadata.max.age.ms": "1"})
    with StreamPair(spark, bs, tmp_path / "limited", opts) as pair:
        pair.start().process_all()
        pair.catch_up()
        pair.assert_same("rate limited", expect_values=everything)
        sizes = {r: run.batch_sizes() for r, run in pair.runs.items()}
    assert all(max(s) <= 10 for s in sizes.values()), sizes
    assert sum(1 for s in sizes["kafka"] if s) == sum(1 for s in sizes["groupkafka"] if s) == 12, sizes
    with StreamPair(spark, bs, tmp_path / "once", opts) as pair:
        pair.start(ONCE).await_end()
        pair.assert_same("Trigger.Once", expect_values=everything)
        assert {r: [s for s in run.batch_sizes() if s] for r, run in pair.runs.items()} == {
            "kafka": [113], "groupkafka": [113]}
        send(bs, topic, [str(v) for v in range(1000, 1011)], spread=3)
        pair.start(ONCE).await_end()
        pair.assert_same("Trigger.Once after a restart", expect_values=everything + [str(v) for v in range(1000, 1011)])


@BOTH
def test_available_now(spark, kafka_broker, unique_name, tmp_path, mode):
    """KafkaMicroBatchSourceSuite "Trigger.AvailableNow": 15 records in one of five partitions,
    maxOffsetsPerTrigger=5: three batches, then the query ends."""
    bs, topic = kafka_broker.bootstrap, unique_name("avnow")
    create_topic(bs, topic, 5)
    send(bs, topic, [f"foo-{i}" for i in range(15)], partition=0)
    opts = options_for(mode, {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "5"},
                       {"kafka.metadata.max.age.ms": "1"})
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start(AVAILABLE_NOW).await_end()
        pair.assert_same("AvailableNow", expect_values=[f"foo-{i}" for i in range(15)])
        sizes = {r: [s for s in run.batch_sizes() if s] for r, run in pair.runs.items()}
    assert sizes == {"kafka": [5, 5, 5], "groupkafka": [5, 5, 5]}


def test_rate_limit_of_long_max(spark, kafka_broker, unique_name, tmp_path):
    """KafkaMicroBatchSourceSuite "SPARK-26718 Rate limit set to Long.Max should not overflow
    integer during end offset calculation": startingOffsets at 5 of a one-partition topic,
    maxOffsetsPerTrigger=Long.MaxValue, five more records."""
    bs, topic = kafka_broker.bootstrap, unique_name("longmax")
    create_topic(bs, topic, 1)
    send(bs, topic, [str(i) for i in range(5)], partition=0)
    opts = {"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 5}}),
            "maxOffsetsPerTrigger": str(2**63 - 1), "kafka.metadata.max.age.ms": "1"}
    with StreamPair(spark, bs, tmp_path, opts) as pair:
        pair.start().process_all()
        send(bs, topic, ["30", "31", "32", "33", "34"], partition=0)
        pair.catch_up()
        pair.assert_same("Long.MaxValue limit", expect_values=["30", "31", "32", "33", "34"])


def test_batch_min_partitions_and_reuse(spark, kafka_broker, unique_name):
    """KafkaRelationSuite "SPARK-30656: minPartitions" (at least 6 Spark partitions for 21 records
    in 3 Kafka partitions, the same records) and "reuse same dataframe in query" (df.union(df):
    every record twice)."""
    bs, topic = kafka_broker.bootstrap, unique_name("minparts")
    create_topic(bs, topic, 3)
    send(bs, topic, [str(i) for i in range(10)], partition=0)
    send(bs, topic, [str(i) for i in range(10, 20)], partition=1)
    send(bs, topic, ["20"], partition=2)
    frames = batch_frames(spark, bs, {"subscribe": topic, "minPartitions": "6"})
    parts = {r: df.rdd.getNumPartitions() for r, df in frames.items()}
    assert all(n >= 6 for n in parts.values()), parts
    got = {r: collect(df) for r, df in frames.items()}
    assert values(got["kafka"]) == sorted(str(i) for i in range(21))
    assert_same(got, "minPartitions=6")
    frames = batch_frames(spark, bs, {"subscribe": topic, "startingOffsets": "earliest", "endingOffsets": "latest"})
    twice = {r: collect(df.union(df)) for r, df in frames.items()}
    assert values(twice["kafka"]) == sorted(str(i) for i in [*range(21), *range(21)])
    assert_same(twice, "df.union(df)")
