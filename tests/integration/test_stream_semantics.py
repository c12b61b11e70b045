"""Delivery semantics of the stream: the completion invariant the commit hook relies on, a
fenced commit (records re-read, never lost), and replay from a checkpoint."""

from __future__ import annotations

import threading

import pytest
from test_stream_support import (
    QUERY_TIMEOUT_S,
    assert_all_read,
    committed_batches,
    duplicates,
    ends,
    offset_log,
    process_all,
    produce,
    rows,
    stop,
    stream,
    table_name,
    to_memory,
    wait_committed,
)

from helpers import committed_offsets


def _recording_sink(broker, group, topic, parts, calls, fail_on=None):
    lock = threading.Lock()

    def sink(df, batch_id):
        seen_committed = committed_offsets(broker.bootstrap, group, topic, parts)
        got = [(r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value))
               for r in df.select("topic", "partition", "offset", "key", "value").collect()]
        with lock:
            calls.append((batch_id, seen_committed, got))
        if fail_on is not None and batch_id == fail_on:
            raise RuntimeError(f"sink fails on batch {batch_id} (test)")

    return sink


def _ends_of(got):
    out = {}
    for _t, p, o, *_ in got:
        out[p] = max(out.get(p, 0), o + 1)
    return out


def test_completion_invariant_commit_seen_by_the_next_batch(spark, broker, new_topic, unique_name, tmp_path):
    """When batch N+1 runs, the group's committed offsets are exactly the end of batch N: Spark
    calls latestOffset(start=end N) only after batch N completed, and that is where we commit."""
    topic, group = new_topic(2), unique_name("g")
    records = produce(broker.bootstrap, topic, 60, 2)
    calls: list = []
    q = (
        stream(spark, broker, topic, group, startingOffsets="earliest", maxOffsetsPerTrigger="20")
        .writeStream.foreachBatch(_recording_sink(broker, group, topic, 2, calls))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S)
        assert q.exception() is None
    finally:
        stop(q)
    calls.sort(key=lambda c: c[0])
    assert [c[0] for c in calls] == [0, 1, 2]
    assert [len(c[2]) for c in calls] == [20, 20, 20]
    assert calls[0][1] == {0: None, 1: None}
    for (_, _, prev), (_, seen, _) in zip(calls, calls[1:], strict=False):
        assert seen == _ends_of(prev)
    assert_all_read([r for c in calls for r in c[2]], records)
    assert committed_offsets(broker.bootstrap, group, topic, 2) == ends(records)


def test_fenced_commit_is_lost_and_records_are_reread(spark, mock_broker, unique_name, tmp_path):
    """The mock fences the first OffsetCommit (ILLEGAL_GENERATION): the driver reports the commit
    lost ("commit fenced ... marked lost, not retried" on the runner's stderr, which it inherits
    from the JVM, so pytest shows it but cannot assert on it), gives the partitions up and
    rejoins. The next owner (here the same driver, re-assigned) starts from the group's
    committed offset, except that a driver re-acquiring partitions whose only batch completed
    (the committed offset is still that batch's start) commits the batch's end instead of
    re-reading it. Either way: nothing is lost and only the fenced batch may repeat."""
    broker = mock_broker
    topic, group, name = unique_name("topic"), unique_name("g"), table_name(unique_name)
    broker.create_topic(topic, 2)
    first = produce(broker.bootstrap, topic, 10, 2)
    broker.mock.push_request_errors(8, [22])  # OffsetCommit -> ILLEGAL_GENERATION, once
    q = to_memory(stream(spark, broker, topic, group, **{"kafka.auto.offset.reset": "earliest"}),
                  name, str(tmp_path / "ck"))
    try:
        process_all(q)
        # the report ("commit fenced ... marked lost, not retried") goes to the runner's stderr,
        # which the runner inherits from the JVM: pytest shows it but cannot assert on it
        second = produce(broker.bootstrap, topic, 10, 2, start=10)
        wait_committed(broker, group, topic, ends(first + second), timeout=60)
        process_all(q)
        got = rows(spark, name)
        assert_all_read(got, first + second)
        assert set(duplicates(got)) <= {(r.topic, r.partition, r.offset) for r in first}
        assert q.exception() is None
    finally:
        broker.mock.clear_request_errors(8)
        stop(q)


def test_restart_replays_the_unfinished_batch_identically(spark, broker, new_topic, unique_name, tmp_path):
    topic, group = new_topic(2), unique_name("g")
    ck = str(tmp_path / "ck")
    records = produce(broker.bootstrap, topic, 60, 2)
    first_run: list = []

    def start(calls, fail_on=None):
        return (
            stream(spark, broker, topic, group, startingOffsets="earliest", maxOffsetsPerTrigger="20")
            .writeStream.foreachBatch(_recording_sink(broker, group, topic, 2, calls, fail_on))
            .option("checkpointLocation", ck)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    q = start(first_run, fail_on=1)
    try:
        with pytest.raises(Exception, match="sink fails on batch 1"):
            q.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        stop(q)
    planned = offset_log(ck)
    assert 1 in planned and committed_batches(ck) == {0}, "batch 1 was planned, not completed"
    failed_batch = sorted(r[:3] for r in next(c[2] for c in first_run if c[0] == 1))
    # batch 0 completed; its commit waited for batch 1's latestOffset, so the group has it
    assert committed_offsets(broker.bootstrap, group, topic, 2) == _ends_of(first_run[0][2])

    second_run: list = []
    q = start(second_run)
    try:
        process_all(q)
        wait_committed(broker, group, topic, ends(records))
        assert q.exception() is None
    finally:
        stop(q)
    assert offset_log(ck)[1] == planned[1], "the offset log of the replayed batch changed"
    replay = next(c for c in second_run if c[0] == 1)
    assert sorted(r[:3] for r in replay[2]) == failed_batch
    assert min(c[0] for c in second_run) == 1
    got = first_run[0][2] + [r for c in second_run for r in c[2]]
    assert_all_read(got, records)
    assert not duplicates(got)
