"""The member's metrics: what the planner publishes at its edges, what the endpoint serves, and
what reading the endpoint back gives (the same numbers), through the membership seam."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from log_double import LogDouble

from assignment.model import TopicPartition
from spark_groupsource import metrics
from spark_groupsource.config import parse_batch_options, parse_stream_options
from spark_groupsource.config.secrets import scrubbed
from spark_groupsource.errors import OptionError
from spark_groupsource.group.memory_member import InMemoryMembership
from spark_groupsource.group.seam import Counters
from spark_groupsource.metrics import exporter
from spark_groupsource.planning.stream_driver import StreamDriver

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
PASSWORD = "s3cr3t-Pa55"


def _driver(group, log, **options):
    raw = {"kafka.bootstrap.servers": "unused:9092", "kafka.group.id": "g", "subscribe": "t",
           "startingoffsets": "earliest", "metrics.port": "0", "metrics.queryname": "q1",
           "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
           "kafka.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{PASSWORD}";', **options}
    log.group = group
    d = StreamDriver(parse_stream_options(raw), membership=group, reader=log)
    d.fresh_query = True
    return d


@pytest.fixture
def driven():
    group, log = InMemoryMembership(), LogDouble({T0: 10, T1: 4})
    group.assign({T0, T1})
    d = _driver(group, log, maxoffsetspertrigger="6")
    yield group, log, d
    d.close()


def test_lag_commits_and_batches_follow_the_plans(driven):
    group, log, d = driven
    first = d.plan(None, 6)  # 6 of 14 records, spread over both partitions
    snap = metrics.snapshot("q1")
    assert snap.batches_planned == 1 and snap.records_planned == 6
    behind = snap.offsets_behind_latest
    assert sum(behind.values()) == snap.pending_records == 14 - 6
    assert snap.max_offsets_behind_latest == max(behind.values())
    assert snap.min_offsets_behind_latest == min(behind.values())
    assert snap.avg_offsets_behind_latest == pytest.approx((14 - 6) / 2)
    assert snap.offsets.latest == {T0: 10, T1: 4}
    d.plan(first, 6)  # the first batch completes and is committed
    snap = metrics.snapshot("q1")
    assert snap.member.commits_succeeded >= 1
    assert snap.offsets.committed == group.offsets == {T0: 3, T1: 3}
    assert snap.records_planned == 12 and snap.batches_planned == 2
    assert snap.member.partitions_assigned == 2 and snap.member.generation == group.generation


def test_fenced_commit_is_a_failed_commit_and_the_last_error_shows_no_secret(driven):
    group, log, d = driven
    first = d.plan(None, 6)
    group.fence_next_commit()
    d.plan(first, 6)
    snap = metrics.snapshot("q1")
    assert snap.member.commits_fenced == 1 and snap.member.commits_failed == 1
    assert snap.errors == 1 and snap.last_error
    d.metrics.failed(RuntimeError(f"login refused with sasl.jaas.config=... password=\"{PASSWORD}\""))
    text = urllib.request.urlopen(f"http://127.0.0.1:{exporter._servers[0]}/metrics", timeout=10).read().decode()
    assert PASSWORD not in text and PASSWORD not in (metrics.snapshot("q1").last_error or "")
    assert 'groupkafka_last_error_info{group="g",message=' in text and 'type="RuntimeError"' in text


def test_the_endpoint_reads_back_as_the_same_snapshot(driven):
    group, log, d = driven
    first = d.plan(None, 6)
    d.plan(first, 6)
    d.data_loss.offsets_skipped = 3  # as _check_data_loss counts them
    served = metrics.scrape(f"127.0.0.1:{exporter._servers[0]}")
    assert len(served) == 1 and _same(served[0], metrics.snapshot("q1"))
    text = urllib.request.urlopen(f"http://127.0.0.1:{exporter._servers[0]}/metrics", timeout=10).read().decode()
    for name in ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest", "pendingRecords",
                 "commitsSucceeded_total", "commitsFailed_total", "committedOffsets", "currentOffsets",
                 "rebalances_total", "records_skipped_total"):
        assert f"groupkafka_{name}{{" in text, name
    assert 'groupkafka_currentOffsets{group="g",partition="0",query="q1",topic="t"}' in text
    assert 'groupkafka_records_skipped_total{group="g",query="q1",reason="data_loss"} 3.0' in text


def _same(a, b) -> bool:
    """Equal but for the time-based readings, which move between two reads."""
    moving = ("rebalance_in_progress_seconds", "coordinator_silence_seconds")
    return all(getattr(a.member, f) == getattr(b.member, f) for f in a.member.__dataclass_fields__ if f not in moving) \
        and a.offsets == b.offsets and a.records_skipped == b.records_skipped and a.errors == b.errors


def test_off_by_default_and_nothing_registered():
    group, log = InMemoryMembership(), LogDouble({T0: 3})
    group.assign({T0})
    log.group = group
    d = StreamDriver(parse_stream_options({"kafka.bootstrap.servers": "x:1", "kafka.group.id": "g2",
                                           "subscribe": "t"}), membership=group, reader=log)
    try:
        assert d.metrics is None
        d.plan(None, None)
        assert all(s.group != "g2" for s in metrics.snapshots())
    finally:
        d.close()


def test_rebalance_episodes_are_timed_from_first_sign_to_settled():
    c = Counters()
    c.observe_rebalance(True, 10.0)
    c.observe_rebalance(True, 12.0)  # still the same one
    c.observe_rebalance(False, 13.5)
    c.observe_rebalance(False, 14.0)
    c.observe_rebalance(True, 20.0)
    c.observe_rebalance(False, 20.25)
    assert (c.rebalance_episodes, c.rebalance_s, c.last_rebalance_s) == (2, 3.75, 0.25)
    assert c.rebalancing_since is None


@pytest.mark.parametrize("value", ["-1", "65536", "x"])
def test_a_bad_port_is_refused_naming_the_option(value):
    with pytest.raises(OptionError, match="metrics.port"):
        parse_stream_options({"kafka.bootstrap.servers": "x:1", "kafka.group.id": "g", "subscribe": "t",
                              "metrics.port": value})


def test_batch_reads_refuse_the_option():
    with pytest.raises(OptionError, match="metrics.port.*streaming"):
        parse_batch_options({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "metrics.port": "0"})


def test_a_port_taken_fails_the_query_at_its_start_naming_the_option():
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter.BIND_WAIT_S, saved = 0.3, exporter.BIND_WAIT_S
        try:
            with pytest.raises(OptionError, match=f"metrics.port.*{port}.*its own port"):
                _driver(InMemoryMembership(), LogDouble({T0: 1}), **{"metrics.port": str(port)})
        finally:
            exporter.BIND_WAIT_S = saved


def test_scrubbed_hides_secret_values_and_secret_assignments():
    text = (f"refused: {{'sasl_plain_password': 'hunter2', 'sasl_plain_username': 'bob'}} "
            f"ssl.key.password=abc token {PASSWORD} offset=5")
    out = scrubbed(text, [PASSWORD])
    assert "hunter2" not in out and "abc" not in out and PASSWORD not in out
    assert "'sasl_plain_username': 'bob'" in out and "offset=5" in out
