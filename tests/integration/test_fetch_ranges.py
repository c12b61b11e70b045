"""The executor fetcher against real brokers over TCP (Apache Kafka and librdkafka's mock cluster).

Conditions are created for real on the broker, never faked:

* gaps: transactional producers leave control records (commit/abort markers) in the log;
  both brokers support transactions;
* data loss below the log start: on Kafka, DeleteRecords moves the log start as retention
  would; the mock cluster enforces a size-based retention on each partition log, so producing
  more than it keeps deletes the oldest records;
* ranges beyond the end (truncated / recreated topic): asking for offsets past the high
  watermark, which both answer with OFFSET_OUT_OF_RANGE.

read_committed filtering of aborted records is checked on Kafka, which sends the aborted
transaction list in Fetch responses; the mock does not (it returns aborted records even with
read_committed), so there the test only proves that markers and aborted batches do not hang.

Every case runs on both fetch paths (the ``fetcher`` option): ``native`` (librdkafka straight
into Arrow buffers) and ``python`` (confluent-kafka's Consumer); they must agree to the record.
"""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from helpers import produce_keyed, wait_until
from spark_groupsource.config import fetcher_config, parse_stream_options
from spark_groupsource.errors import DataLossError
from spark_groupsource.executor import prefetch
from spark_groupsource.executor.fetch import _POOL, FetchStats, fetch_range, read_partition
from spark_groupsource.ranges import OffsetRange
from spark_groupsource.schema import arrow_schema

#: A hang is a failure, not a stuck test run.
DEADLINE_S = 60.0


#: the path the running case reads with (set by the ``fetcher`` fixture)
PATH = "auto"


@pytest.fixture(autouse=True, params=["native", "python"])
def fetcher(request: pytest.FixtureRequest):
    """Each case on both fetch paths. Pooled fetchers outlive a test; close them before its
    broker goes away."""
    global PATH
    PATH = request.param
    yield request.param
    PATH = "auto"
    _POOL.clear()


def config(broker: Any, **extra: str) -> dict[str, Any]:
    opts = parse_stream_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "kafka.group.id": "fetch-tests",
            "subscribe": "unused",
            **extra,
        }
    )
    return {**fetcher_config(opts), "log_level": 3}


def fetch(cfg: dict[str, Any], rng: OffsetRange, *, headers: bool = False, fail: bool = True,
          batch: int = 10_000, stats: FetchStats | None = None, poll_timeout_ms: int = 20_000
          ) -> list[pa.RecordBatch]:
    return bounded(
        lambda: list(
            fetch_range(
                cfg,
                rng,
                include_headers=headers,
                fail_on_data_loss=fail,
                max_records_per_batch=batch,
                poll_timeout_ms=poll_timeout_ms,
                stats=stats,
                fetcher=PATH,
            )
        )
    )


def bounded(fn: Callable[[], Any], seconds: float = DEADLINE_S) -> Any:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"fetch did not finish within {seconds}s (hang)")
    finally:
        pool.shutdown(wait=False)


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


def high_watermark(broker: Any, topic: str, partition: int = 0) -> tuple[int, int]:
    """(low, high) as a read_committed consumer sees them: ``high`` is the last stable offset."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm", "log_level": 3})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


# ------------------------------------------------------------------------------ contents


def test_full_range_exact_contents_with_headers(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produced = produce_keyed(broker.bootstrap, topic, 40, partitions=1, headers=True)
    stats = FetchStats()
    batches = fetch(config(broker), OffsetRange(topic, 0, 0, 40), headers=True, batch=7, stats=stats)

    assert [b.num_rows for b in batches] == [7, 7, 7, 7, 7, 5]
    assert all(b.schema.equals(arrow_schema(True), check_metadata=True) for b in batches)
    # the batches outlive their fetcher: on the native path their buffers are the memory it
    # wrote them into, handed over, not copies
    _POOL.clear()
    gc.collect()
    got = rows(batches)
    assert [r["offset"] for r in got] == [p.offset for p in produced] == list(range(40))
    for r, p in zip(got, produced, strict=True):
        assert r["key"] == p.key and r["value"] == p.value
        assert (r["topic"], r["partition"]) == (topic, 0)
        assert int(r["timestamp"].timestamp() * 1000) == p.timestamp
        assert r["timestampType"] == 0  # CreateTime
        assert [(h["key"], h["value"]) for h in r["headers"]] == list(p.headers)
    assert stats == FetchStats(records=40, batches=6, lost_records=0, gaps=0)


def test_without_headers_and_null_headers(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 3, partitions=1)
    batches = fetch(config(broker), OffsetRange(topic, 0, 0, 3))
    assert batches[0].schema.equals(arrow_schema(False))
    with_headers = rows(fetch(config(broker), OffsetRange(topic, 0, 0, 3), headers=True))
    assert [r["headers"] for r in with_headers] == [None, None, None]  # as Spark: null, not []


def test_null_key_and_value(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    p.produce(topic, value=None, key=None, partition=0)
    p.produce(topic, value=b"", key=b"", partition=0)
    assert p.flush(30) == 0
    got = rows(fetch(config(broker), OffsetRange(topic, 0, 0, 2)))
    assert [(r["key"], r["value"]) for r in got] == [(None, None), (b"", b"")]


def test_bounded_batches_on_a_long_range(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 5000, partitions=1)
    batches = fetch(config(broker), OffsetRange(topic, 0, 0, 5000), batch=1000)
    assert [b.num_rows for b in batches] == [1000] * 5
    assert rows(batches)[-1]["offset"] == 4999


def test_batches_bounded_in_bytes_whatever_the_record_size(broker: Any, new_topic: Any) -> None:
    """maxBytesPerArrowBatch: large records end a batch before maxRecordsPerArrowBatch does;
    a batch stays within the byte bound plus at most one record, and a record larger than the
    bound is a batch of its own. Nothing is lost or reordered on the way."""
    topic = new_topic(1)
    sizes = [40_000] * 30 + [250_000] + [10] * 50 + [40_000] * 10
    p = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3, "message.max.bytes": 1_000_000})
    for i, n in enumerate(sizes):
        p.produce(topic, value=bytes([i % 251]) * n, key=b"k%d" % i, partition=0)
    assert p.flush(30) == 0
    bound = 100_000
    batches = bounded(lambda: list(fetch_range(
        config(broker), OffsetRange(topic, 0, 0, len(sizes)), include_headers=False, fail_on_data_loss=True,
        max_records_per_batch=10_000, max_bytes_per_batch=bound, poll_timeout_ms=20_000,
        fetcher=PATH)))

    got = rows(batches)
    assert [r["offset"] for r in got] == list(range(len(sizes)))
    # every batch's values intact after the later batches were built: a fetcher that reused
    # or freed a batch's memory too early would show here
    assert [r["value"] for r in got] == [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    per_batch = [sum(len(v) for v in b.column("value").to_pylist()) for b in batches]
    largest = [max(len(v) for v in b.column("value").to_pylist()) for b in batches]
    assert all(total - big < bound for total, big in zip(per_batch, largest, strict=True)), per_batch
    assert any(b.num_rows == 1 and total == 250_000 for b, total in zip(batches, per_batch, strict=True))
    assert len(batches) >= sum(sizes) // (bound + 250_000)
    # without the byte bound the same range is one batch (the record bound alone)
    whole = fetch(config(broker), OffsetRange(topic, 0, 0, len(sizes)))
    assert [b.num_rows for b in whole] == [len(sizes)]


def test_range_ending_before_the_partition_end(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 30, partitions=1)
    got = rows(fetch(config(broker), OffsetRange(topic, 0, 5, 12), batch=4))
    assert [r["offset"] for r in got] == list(range(5, 12))
    assert [r["key"] for r in got] == [f"k{i}".encode() for i in range(5, 12)]


def test_range_at_the_partition_end_returns_at_once(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 10, partitions=1)
    cfg = config(broker)
    started = time.monotonic()
    got = rows(fetch(cfg, OffsetRange(topic, 0, 7, 10)))
    assert [r["offset"] for r in got] == [7, 8, 9]
    assert time.monotonic() - started < 10
    assert fetch(cfg, OffsetRange(topic, 0, 10, 10)) == []  # empty range: nothing, no consumer


def test_read_partition_reads_several_ranges_with_one_consumer(broker: Any, new_topic: Any) -> None:
    topic = new_topic(3)
    produce_keyed(broker.bootstrap, topic, 30, partitions=3)  # 10 per partition
    ranges = [OffsetRange(topic, 2, 0, 4), OffsetRange(topic, 0, 5, 10), OffsetRange(topic, 1, 3, 3),
              OffsetRange(topic, 1, 8, 10)]
    stats = FetchStats()
    batches = bounded(
        lambda: list(
            read_partition(config(broker), ranges, include_headers=False, fail_on_data_loss=True,
                           max_records_per_batch=3, poll_timeout_ms=20_000, stats=stats,
                           fetcher=PATH)
        )
    )
    got = [(r["partition"], r["offset"]) for r in rows(batches)]
    assert got == [(2, o) for o in range(4)] + [(0, o) for o in range(5, 10)] + [(1, 8), (1, 9)]
    assert max(b.num_rows for b in batches) <= 3
    assert stats.records == 11


def test_a_task_of_many_ranges_reads_each_record_once(broker: Any, new_topic: Any) -> None:
    """A task of many small ranges (smallRangesPerTask packs them): on the native path the next
    ranges' partitions are assigned ahead and fetched while one is read. Mid-log ranges,
    ranges at the partition end, an empty range, and two ranges of one partition apart in the
    task (the later one is assigned only once the first is done): every record once, in the
    task's order, on both paths."""
    topic = new_topic(8)
    produce_keyed(broker.bootstrap, topic, 80, partitions=8)  # 10 per partition
    ranges = [OffsetRange(topic, 3, 9, 10), OffsetRange(topic, 5, 2, 4), OffsetRange(topic, 0, 0, 10),
              OffsetRange(topic, 7, 4, 4), OffsetRange(topic, 5, 6, 10), OffsetRange(topic, 1, 9, 10),
              OffsetRange(topic, 6, 0, 1), OffsetRange(topic, 2, 5, 10), OffsetRange(topic, 4, 3, 7)]
    stats = FetchStats()
    batches = bounded(lambda: list(read_partition(
        config(broker), ranges, include_headers=False, fail_on_data_loss=True,
        max_records_per_batch=4, poll_timeout_ms=20_000, stats=stats, fetcher=PATH)))
    want = [(r.partition, o) for r in ranges for o in range(r.start, r.until)]
    assert [(row["partition"], row["offset"]) for row in rows(batches)] == want
    assert [row["value"] for row in rows(batches)] == [
        b"value-%d" % (o * 8 + p) for p, o in want]  # record i: partition i % 8, offset i // 8
    assert stats.records == len(want) and stats.lost_records == stats.gaps == 0


@pytest.mark.parametrize("fetcher", ["native"], indirect=True)  # the other reads one at a time
def test_the_native_fetcher_assigns_the_next_ranges_ahead(broker: Any, new_topic: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """While a task reads a range, the partitions of its next ranges are assigned at their
    starts (at most four, a partition once: its later range waits for the earlier one to be
    done); each is released when its range is done, and none stays assigned when the fetcher
    goes back to the pool."""
    topic = new_topic(6)
    produce_keyed(broker.bootstrap, topic, 60, partitions=6)
    ranges = [OffsetRange(topic, 0, 0, 5), OffsetRange(topic, 1, 2, 4), OffsetRange(topic, 0, 7, 9),
              OffsetRange(topic, 2, 0, 3), OffsetRange(topic, 3, 1, 2), OffsetRange(topic, 4, 0, 10)]
    fetchers: list[Any] = []
    acquire = _POOL.acquire

    def tracked(*args: Any, **kwargs: Any) -> Any:
        fetchers.append(acquire(*args, **kwargs))
        return fetchers[-1]

    monkeypatch.setattr(_POOL, "acquire", tracked)
    seen: list[tuple[int, list[tuple[int, int, bool]]]] = []  # per batch: its partition, assigned

    def read() -> None:
        for batch in read_partition(config(broker), ranges, include_headers=False,
                                    fail_on_data_loss=True, max_records_per_batch=100,
                                    poll_timeout_ms=20_000, fetcher=PATH):
            assigned = sorted((p, o, ahead) for _, p, o, ahead in fetchers[-1].assigned())
            seen.append((batch.column("partition")[0].as_py(), assigned))

    bounded(read)
    assert seen == [
        (0, [(0, 0, False), (1, 2, True)]),
        (1, [(0, 7, True), (1, 2, False), (2, 0, True), (3, 1, True)]),
        (0, [(0, 7, False), (2, 0, True), (3, 1, True), (4, 0, True)]),
        (2, [(2, 0, False), (3, 1, True), (4, 0, True)]),
        (3, [(3, 1, False), (4, 0, True)]),
        (4, [(4, 0, False)]),
    ]
    assert fetchers[-1].assigned() == [], "a pooled fetcher kept partitions assigned"


def test_a_task_of_long_ranges_gets_the_deeper_prefetch(broker: Any, new_topic: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once this worker has read a topic, a task whose ranges are all long (records times the
    bytes per record it saw) gets a fetcher with the deeper prefetch and reads each record once;
    a task with a short range, a topic not read yet, or the user's own prefetch keep 4 MiB."""
    topic = new_topic(2)
    produce_keyed(broker.bootstrap, topic, 80, partitions=2)  # record i: partition i % 2, offset i // 2
    # about 70 B a record in Arrow: 30 records are long, 5 are not
    monkeypatch.setattr(prefetch, "LONG_RANGE_BYTES", 1_000)
    depths: list[int] = []
    acquire = _POOL.acquire

    def tracked(cfg: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        depths.append(int(cfg["queued.max.messages.kbytes"]))
        return acquire(cfg, *args, **kwargs)

    monkeypatch.setattr(_POOL, "acquire", tracked)

    def read(ranges: list[OffsetRange], adapt: bool = True) -> list[tuple[int, int, bytes]]:
        batches = bounded(lambda: list(read_partition(
            config(broker), ranges, include_headers=False, fail_on_data_loss=True,
            max_records_per_batch=7, poll_timeout_ms=20_000, fetcher=PATH, adapt_prefetch=adapt)))
        return [(row["partition"], row["offset"], row["value"]) for row in rows(batches)]

    def want(ranges: list[OffsetRange]) -> list[tuple[int, int, bytes]]:
        return [(r.partition, o, b"value-%d" % (o * 2 + r.partition)) for r in ranges
                for o in range(r.start, r.until)]

    long_ranges = [OffsetRange(topic, 0, 0, 30), OffsetRange(topic, 1, 5, 35)]
    for ranges, adapt in [
        (long_ranges[:1], True),  # the topic not read yet
        (long_ranges, True),
        ([long_ranges[0], OffsetRange(topic, 1, 0, 5)], True),
        (long_ranges, False),
    ]:
        assert read(ranges, adapt) == want(ranges)
    deep, bounded_kb = prefetch.LONG_RANGE_PREFETCH_KBYTES, prefetch.PREFETCH_KBYTES
    assert depths == [bounded_kb, deep, bounded_kb, bounded_kb]


def test_fetchers_are_pooled_and_start_clean(broker: Any, new_topic: Any) -> None:
    """A task's fetcher goes back to the worker's pool and the next task reuses it; what it
    had prefetched for its last range (records past ``until``) never leaks into the next
    range, even on the same partition further back. A task that failed closes its fetcher."""
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 300, partitions=1)
    cfg = config(broker)
    _POOL.clear()
    created, reused = _POOL.created, _POOL.reused

    def offsets(rng: OffsetRange) -> list[int]:
        return [r["offset"] for r in rows(fetch(cfg, rng))]

    assert offsets(OffsetRange(topic, 0, 100, 150)) == list(range(100, 150))
    assert offsets(OffsetRange(topic, 0, 0, 50)) == list(range(50))
    assert offsets(OffsetRange(topic, 0, 120, 125)) == list(range(120, 125))
    assert (_POOL.created - created, _POOL.reused - reused) == (1, 2)
    with pytest.raises(DataLossError):
        fetch(cfg, OffsetRange(topic, 0, 290, 400), poll_timeout_ms=5_000)  # beyond the end
    assert offsets(OffsetRange(topic, 0, 10, 12)) == [10, 11]
    assert (_POOL.created - created, _POOL.reused - reused) == (2, 3), "a failed task's fetcher was reused"


# ------------------------------------------------------------------------------ gaps


def _transactional_log(broker: Any, topic: str) -> None:
    """Offsets: 0-2 committed, 3 marker, 4-6 aborted, 7 marker, 8-9 committed, 10 marker."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"a%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=b"d%d" % i, partition=0)
    p.commit_transaction(30)
    # commit_transaction returns once the coordinator logged PREPARE_COMMIT; it writes the
    # marker at offset 10 afterwards, and until then the last stable offset stays at 8.
    wait_until(lambda: high_watermark(broker, topic) == (0, 11), timeout=30,
               message=f"the commit marker of {topic}-0")


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_transaction_markers_are_gaps_not_hangs(broker: Any, new_topic: Any, isolation: str) -> None:
    topic = new_topic(1)
    _transactional_log(broker, topic)
    assert high_watermark(broker, topic) == (0, 11)
    cfg = config(broker, **{"kafka.isolation.level": isolation})

    stats = FetchStats()
    started = time.monotonic()
    got = rows(fetch(cfg, OffsetRange(topic, 0, 0, 11), stats=stats))
    offsets = [r["offset"] for r in got]
    assert {0, 1, 2, 8, 9} <= set(offsets) and not {3, 7, 10} & set(offsets)
    if isolation == "read_uncommitted":
        assert offsets == [0, 1, 2, 4, 5, 6, 8, 9]
        assert stats == FetchStats(records=8, batches=1, lost_records=0, gaps=3)
    elif broker.backend == "kafka":  # the broker names the aborted transaction: filtered
        assert offsets == [0, 1, 2, 8, 9]
        assert stats.records == 5 and stats.lost_records == 0
    assert time.monotonic() - started < 10

    # A range that starts on a marker, and one that holds nothing but a marker.
    assert [r["offset"] for r in rows(fetch(cfg, OffsetRange(topic, 0, 3, 5)))] == (
        [4] if isolation == "read_uncommitted" else [r for r in [4] if r in offsets]
    )
    stats = FetchStats()
    assert fetch(cfg, OffsetRange(topic, 0, 10, 11), stats=stats) == []
    assert stats.gaps == 1 and stats.lost_records == 0
    assert fetch(cfg, OffsetRange(topic, 0, 7, 8)) == []  # marker followed by more records


# ------------------------------------------------------------------------------ data loss


def test_range_beyond_the_partition_end_is_data_loss(broker: Any, new_topic: Any) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 10, partitions=1)
    cfg = config(broker)
    with pytest.raises(DataLossError) as info:
        fetch(cfg, OffsetRange(topic, 0, 15, 20))
    assert (info.value.topic, info.value.partition, info.value.expected) == (topic, 0, 15)
    assert "failOnDataLoss=false" in str(info.value)

    stats = FetchStats()
    assert fetch(cfg, OffsetRange(topic, 0, 15, 20), fail=False, stats=stats) == []
    assert stats.lost_records == 5


def test_range_ending_beyond_the_partition_end_is_data_loss(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(1)
    produce_keyed(broker.bootstrap, topic, 10, partitions=1)
    cfg = config(broker)
    with pytest.raises(DataLossError) as info:
        fetch(cfg, OffsetRange(topic, 0, 6, 14))
    assert info.value.expected == 10

    stats = FetchStats()
    with caplog.at_level(logging.WARNING, logger="spark_groupsource.fetch"):
        got = rows(fetch(cfg, OffsetRange(topic, 0, 6, 14), fail=False, stats=stats))
    assert [r["offset"] for r in got] == [6, 7, 8, 9]
    assert stats == FetchStats(records=4, batches=1, lost_records=4, gaps=0)
    assert f"data loss in {topic}-0: offsets [10, 14)" in caplog.text


def _produce_past_retention(broker: Any, topic: str, n: int) -> tuple[int, int]:
    """The mock keeps a bounded log per partition: big records push the oldest ones out."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 3})
    value = b"x" * 100_000
    for _ in range(n):
        p.produce(topic, value=value, partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    return high_watermark(broker, topic)


def test_records_deleted_by_retention(mock_broker: Any, unique_name: Any,
                                      caplog: pytest.LogCaptureFixture) -> None:
    topic = unique_name("retention")
    mock_broker.create_topic(topic, 1)
    low, high = _produce_past_retention(mock_broker, topic, 120)
    assert 0 < low < high == 120, "the mock's retention did not delete anything"
    cfg = config(mock_broker)

    with pytest.raises(DataLossError) as info:
        fetch(cfg, OffsetRange(topic, 0, 0, high))
    assert (info.value.expected, info.value.available) == (0, low)

    stats = FetchStats()
    with caplog.at_level(logging.WARNING, logger="spark_groupsource.fetch"):
        got = rows(fetch(cfg, OffsetRange(topic, 0, 0, high), fail=False, stats=stats, batch=25))
    assert [r["offset"] for r in got] == list(range(low, high))
    assert stats.lost_records == low and stats.records == high - low
    assert f"offsets [0, {low})" in caplog.text and "failOnDataLoss=false" in caplog.text

    # A range entirely below the log start: all of it is lost, nothing is read.
    stats = FetchStats()
    assert fetch(cfg, OffsetRange(topic, 0, 0, low), fail=False, stats=stats) == []
    assert stats.lost_records == low


def test_loss_in_a_partition_assigned_ahead_on_kafka(kafka_broker: Any, unique_name: Any,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The out-of-range answer for a partition assigned ahead waits in its queue for its range:
    records deleted below the log start of the task's second range, a range beyond the end of
    its fourth, both read while the first range's partition is read: the same loss as for a
    range read alone (raised, or skipped and counted), the other ranges complete."""
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient

    topic = unique_name("ahead-loss")
    kafka_broker.create_topic(topic, 4)
    produce_keyed(kafka_broker.bootstrap, topic, 400, partitions=4)  # 100 per partition
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3})
    [fut] = admin.delete_records([CkTP(topic, 1, 50)], request_timeout=30).values()
    assert fut.result(timeout=35).low_watermark == 50
    cfg = config(kafka_broker)
    ranges = [OffsetRange(topic, 0, 0, 100), OffsetRange(topic, 1, 10, 100),
              OffsetRange(topic, 2, 90, 100), OffsetRange(topic, 3, 95, 130)]

    def read(fail: bool, stats: FetchStats | None = None) -> list[pa.RecordBatch]:
        return bounded(lambda: list(read_partition(
            cfg, ranges, include_headers=False, fail_on_data_loss=fail, max_records_per_batch=30,
            poll_timeout_ms=20_000, stats=stats, fetcher=PATH)))

    with pytest.raises(DataLossError) as info:
        read(True)
    assert (info.value.partition, info.value.expected, info.value.available) == (1, 10, 50)
    stats = FetchStats()
    with caplog.at_level(logging.WARNING, logger="spark_groupsource.fetch"):
        got = [(r["partition"], r["offset"]) for r in rows(read(False, stats))]
    assert got == ([(0, o) for o in range(100)] + [(1, o) for o in range(50, 100)]
                   + [(2, o) for o in range(90, 100)] + [(3, o) for o in range(95, 100)])
    assert stats.lost_records == 40 + 30 and stats.records == len(got)
    assert f"{topic}-1: offsets [10, 50)" in caplog.text and f"{topic}-3: offsets [100, 130)" in caplog.text


def test_records_deleted_below_the_log_start_on_kafka(kafka_broker: Any, unique_name: Any) -> None:
    """DeleteRecords moves the log start, as retention does on a production cluster: a range
    below it is data loss (raised, or skipped and counted with failOnDataLoss=false)."""
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient

    topic = unique_name("deleted")
    kafka_broker.create_topic(topic, 1)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3})
    for i in range(120):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3})
    [fut] = admin.delete_records([CkTP(topic, 0, 50)], request_timeout=30).values()
    assert fut.result(timeout=35).low_watermark == 50
    assert high_watermark(kafka_broker, topic) == (50, 120)
    cfg = config(kafka_broker)

    with pytest.raises(DataLossError) as info:
        fetch(cfg, OffsetRange(topic, 0, 10, 120))
    assert (info.value.expected, info.value.available) == (10, 50)
    stats = FetchStats()
    got = rows(fetch(cfg, OffsetRange(topic, 0, 10, 120), fail=False, stats=stats, batch=25))
    assert [r["offset"] for r in got] == list(range(50, 120))
    assert stats.lost_records == 40 and stats.records == 70
