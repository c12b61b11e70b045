"""The member's metrics as a real Prometheus sees them: a stream with ``metrics.port``,
scraped every second by Debian's Prometheus (a plain process on a loopback port). On Apache
Kafka: the lag, a second member joining, a broker outage; on librdkafka's mock (which can
answer a commit ILLEGAL_GENERATION): a fenced commit. PromQL over Prometheus's HTTP API returns
the lag, the rebalance count and the commit failures, and the sample alert rules
(docs/alerts.yml) pass promtool, load, and fire on the fence."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest
from promserver import Prometheus, free_port, missing, promtool
from test_stream_support import produce, stop, stream, table_name, to_memory, wait_rows

from demo import metrics_plot
from helpers import PolledConsumer, consumer_conf, wait_until
from spark_groupsource import metrics

ALERTS = Path(__file__).resolve().parents[2] / "docs" / "alerts.yml"
PARTS = 4


@pytest.fixture(scope="module")
def prometheus_present() -> None:
    why = missing()
    if why:
        pytest.skip(why)


def test_the_sample_alert_rules_pass_promtool_and_a_broken_rule_does_not(prometheus_present, tmp_path):
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout, checked.stdout
    broken = tmp_path / "broken.yml"
    broken.write_text(ALERTS.read_text().replace("increase(groupkafka_commits_fenced_total[15m])",
                                                 "increase(groupkafka_commits_fenced_total[15m]"))
    refused = promtool("check", "rules", str(broken))
    assert refused.returncode != 0 and "GroupKafkaCommitsFenced" in refused.stdout + refused.stderr


def query_of(broker, unique_name) -> tuple[str, str, str, int]:
    """A topic of PARTS partitions holding 80 records (20 per partition), a group, a memory
    table and a free port for the metrics of one test's query."""
    topic, group, name = unique_name("topic"), unique_name("g"), table_name(unique_name)
    broker.create_topic(topic, PARTS)
    produce(broker.bootstrap, topic, 80, PARTS)
    return topic, group, name, free_port()


def test_prometheus_sees_lag_rebalances_and_an_outage_on_kafka(
        prometheus_present, spark, kafka_broker, unique_name, tmp_path):
    broker = kafka_broker
    topic, group, name, port = query_of(broker, unique_name)
    q = member = None
    with Prometheus([f"127.0.0.1:{port}"], tmp_path / "prom", rule_files=[ALERTS]) as prom:
        sel = f'{{query="qa",group="{group}"}}'
        # 20 records a trigger, 5 per partition, one trigger every 3 s: the lag steps down
        # 60, 40, 20, 0, each step held about a trigger, and Prometheus scrapes every second
        q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest", maxOffsetsPerTrigger="20",
                             **{"metrics.port": str(port), "metrics.queryName": "qa"}),
                      name, str(tmp_path / "ck"), interval="3 seconds")
        try:
            wait_rows(spark, name, 80, timeout=300, query=q)  # the first batch starts Spark's workers
            wait_until(lambda: prom.value(f"groupkafka_records_planned_total{sel}") == 80, 60,
                       interval=0.5, message="Prometheus to see 80 records planned")
            # the lag: Spark's and Flink's names, as the planner saw it before each batch
            pending = prom.samples(f"groupkafka_pendingRecords{sel}")
            assert_steps_down(pending, [60, 40, 20, 0])
            # evenly spread: the most behind partition holds a quarter of the lag, at every step
            top = max(pending) / PARTS
            assert max(prom.samples(f"groupkafka_maxOffsetsBehindLatest{sel}")) == top
            assert max(prom.samples(f"groupkafka_avgOffsetsBehindLatest{sel}")) == top
            assert prom.value(f"sum(groupkafka_latestOffsets{sel}) - sum(groupkafka_currentOffsets{sel})") == 0
            assert prom.value(f"sum(groupkafka_committedOffsets{sel})") in (60, 80)  # the last batch commits next
            assert prom.value(f"groupkafka_partitions_assigned{sel}") == PARTS
            first_rebalances = prom.value(f"groupkafka_rebalances_total{sel}")
            assert first_rebalances == 1, "the first join is the member's first rebalance"

            # a second member joins: the query gives half its partitions up
            member = PolledConsumer(consumer_conf(broker, group), topic)
            def rebalanced():
                seen = (prom.value(f"groupkafka_partitions_assigned{sel}"), prom.value(f"groupkafka_rebalances_total{sel}"))
                assert seen[0] == PARTS // 2 and seen[1] >= 2, (seen, metrics.scrape(f"127.0.0.1:{port}"))
                return True

            wait_until(rebalanced, 180, interval=0.5, message="Prometheus to see the rebalance")
            assert prom.value(f"groupkafka_last_rebalance_seconds{sel}") > 0
            assert prom.value(f"groupkafka_generation{sel}") >= 2

            # a broker outage, shorter than a session: the coordinator goes silent, then answers
            assert prom.value(f"groupkafka_coordinator_silence_seconds{sel}") < 2
            broker.kafka.freeze_node(1)
            try:
                time.sleep(4)
            finally:
                broker.kafka.thaw_node(1)
            wait_until(lambda: prom.value(f"max_over_time(groupkafka_coordinator_silence_seconds{sel}[1m])") >= 3,
                       30, interval=0.5, message="Prometheus to see the coordinator's silence")
            wait_until(lambda: prom.value(f"groupkafka_coordinator_silence_seconds{sel}") < 2, 60, interval=0.5,
                       message="the coordinator to answer again")
            assert q.exception() is None

            # the picture of it all, from what Prometheus scraped (demo/metrics_plot.py);
            # GROUPKAFKA_METRICS_PICTURE=docs/metrics.png keeps it
            end = time.time()
            series = metrics_plot.fetch(f"http://127.0.0.1:{prom.port}", "qa", end - 900, end)
            assert max(v for _, v in series["rebalances"]) >= 2
            picture = Path(os.environ.get("GROUPKAFKA_METRICS_PICTURE") or tmp_path / "metrics.png")
            metrics_plot.draw(series, picture, "test_metrics_prometheus on Kafka 4.3.1: 80 records at 20 a trigger, "
                              "a consumer joins, the broker frozen 4 s")
            assert picture.stat().st_size > 10_000
        finally:
            if member is not None:
                member.close()
            stop(q)


def test_prometheus_sees_a_kip848_members_epoch_assignment_commits_and_outage_on_kafka(
        prometheus_present, spark, kafka_broker, unique_name, tmp_path):
    """The same member numbers on the consumer group protocol (``kafka.group.protocol=consumer``):
    the generation is the member epoch the broker hands out, the broker assigns, the rebalance and
    commit counts are the member's own, and the coordinator's silence is read from librdkafka's
    statistics (the broker's session, 10 s on the dev broker, outlasts the freeze)."""
    broker = kafka_broker
    topic, group, name, port = query_of(broker, unique_name)
    q = member = None
    with Prometheus([f"127.0.0.1:{port}"], tmp_path / "prom") as prom:
        sel = f'{{query="qc",group="{group}"}}'
        # what a user writes: the broker owns session, heartbeat and assignor
        df = spark.readStream.format("groupkafka").options(**{
            "kafka.bootstrap.servers": broker.bootstrap, "kafka.group.id": group, "subscribe": topic,
            "kafka.group.protocol": "consumer", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "20",
            "metrics.port": str(port), "metrics.queryName": "qc"}).load()
        q = to_memory(df, name, str(tmp_path / "ck"), interval="2 seconds")
        try:
            wait_rows(spark, name, 80, timeout=300, query=q)
            wait_until(lambda: prom.value(f"groupkafka_records_planned_total{sel}") == 80, 60,
                       interval=0.5, message="Prometheus to see 80 records planned")
            pending = prom.samples(f"groupkafka_pendingRecords{sel}")
            assert_steps_down(pending, [60, 40, 20, 0])
            # one scrape takes both gauges: the most behind partition holds a quarter of the lag
            # seen (the first step may go unscraped: CI, 2026-12-07, saw 40 at the top)
            assert max(prom.samples(f"groupkafka_maxOffsetsBehindLatest{sel}")) == max(pending) / PARTS
            assert prom.value(f"sum(groupkafka_latestOffsets{sel})") == 80, "the ends of what was produced"
            assert prom.value(f"sum(groupkafka_latestOffsets{sel}) - sum(groupkafka_currentOffsets{sel})") == 0
            assert prom.value(f"groupkafka_partitions_assigned{sel}") == PARTS
            (labels, epoch), = prom.query(f"groupkafka_generation{sel}")
            assert labels["protocol"] == "consumer" and epoch > 0, (labels, epoch)
            assert prom.value(f"groupkafka_rebalances_total{sel}") == 1, "the first join is the member's first rebalance"
            commits = prom.value(f"groupkafka_commitsSucceeded_total{sel}")
            assert commits >= 1 and prom.value(f"groupkafka_commitsFailed_total{sel}") == 0, commits
            print(f"MEASURED: before the second member: epoch {epoch:.0f}, {commits:.0f} commits")

            # a second KIP-848 member joins: the broker moves half the partitions to it, after
            # the query's revoke barrier (its batch in flight committed)
            member = PolledConsumer(consumer_conf(broker, group, group_protocol="consumer"), topic)

            def rebalanced() -> bool:
                seen = (prom.value(f"groupkafka_partitions_assigned{sel}"), prom.value(f"groupkafka_rebalances_total{sel}"),
                        len(member.snapshot()))
                assert seen == (PARTS // 2, 2, PARTS // 2), (seen, metrics.scrape(f"127.0.0.1:{port}"))
                return True

            wait_until(rebalanced, 120, interval=0.5, message="Prometheus to see the rebalance")
            # the broker hands the new epoch in its answer to the heartbeat that acknowledges the
            # revocation, sent once the revoke callback returned: after the partitions' count fell
            after = wait_until(lambda: (prom.value(f"groupkafka_generation{sel}") or 0) > epoch
                               and prom.value(f"groupkafka_generation{sel}"), 30, interval=0.5,
                               message=f"the member epoch to rise past {epoch:.0f}")
            epochs = [v for v in prom.samples(f"groupkafka_generation{sel}") if v > 0]  # -1: not joined yet
            assert all(a <= b for a, b in itertools.pairwise(epochs)), ("the member epoch fell", epochs)
            assert prom.value(f"groupkafka_last_rebalance_seconds{sel}") > 0

            # the lag over the half it kept: 10 more records per partition, the query reads its 20
            produce(broker.bootstrap, topic, 40, PARTS, start=80)
            wait_rows(spark, name, 100, timeout=120, query=q)

            def caught_up() -> bool:
                seen = (prom.value(f"groupkafka_records_planned_total{sel}"), prom.value(f"sum(groupkafka_latestOffsets{sel})"),
                        prom.value(f"groupkafka_pendingRecords{sel}"), prom.value(f"groupkafka_commitsSucceeded_total{sel}"))
                assert seen[:3] == (100, 2 * 30, 0) and seen[3] > commits, seen
                return True

            wait_until(caught_up, 60, interval=0.5, message="Prometheus to see the query caught up on its half")
            kept = {int(labels["partition"]) for labels, _ in prom.query(f"groupkafka_latestOffsets{sel}")}
            assert kept.isdisjoint(p.partition for p in member.snapshot()) and len(kept) == PARTS // 2, kept

            # a broker outage, shorter than the session: librdkafka's statistics see the
            # coordinator silent once a heartbeat (every 0.5 s) waited SILENT_S (1 s) at a
            # statistics look (every 1 s): at most 2.5 s into the freeze, so a 5 s freeze shows
            # 2.5 s or more, scraped at most a second before it falls back to 0
            assert prom.value(f"groupkafka_coordinator_silence_seconds{sel}") == 0
            began = time.monotonic()
            broker.kafka.freeze_node(1)
            try:
                time.sleep(5)
            finally:
                broker.kafka.thaw_node(1)
                frozen_s = time.monotonic() - began
            silence = f"max_over_time(groupkafka_coordinator_silence_seconds{sel}[1m])"
            wait_until(lambda: prom.value(silence) >= 1.5, 30, interval=0.5,
                       message="Prometheus to see the coordinator's silence")
            wait_until(lambda: prom.value(f"groupkafka_coordinator_silence_seconds{sel}") == 0, 60, interval=0.5,
                       message="the coordinator to answer again")
            # no longer than the freeze, a statistics look after the thaw and some scheduling
            assert prom.value(silence) <= frozen_s + 3, (prom.value(silence), frozen_s)
            print(f"MEASURED: after the rebalance: epoch {after:.0f}; coordinator silence scraped during a "
                  f"{frozen_s:.1f} s freeze:", [round(v, 1) for v in
                                                 prom.samples(f"groupkafka_coordinator_silence_seconds{sel}", "20s")])
            assert prom.value(f"groupkafka_commitsFailed_total{sel}") == 0
            assert prom.value(f"groupkafka_commits_fenced_total{sel}") == 0
            assert prom.value(f"groupkafka_partitions_assigned{sel}") == PARTS // 2
            assert q.exception() is None
        finally:
            if member is not None:
                member.close()
            stop(q)


def assert_steps_down(samples: list[float], steps: list[int]) -> None:
    """The gauge's scraped samples walk down ``steps`` in order and end at the last one. A step
    may go unscraped: a step lasts from one plan to the next, and when a batch overruns its
    trigger (the first one on a loaded machine) the next plan follows at once; so at least two
    of the steps above the last are required, not each."""
    first = next((i for i, v in enumerate(samples) if v != 0), len(samples))
    seen = samples[first:]  # before the first plan the gauge reads 0
    assert seen and seen[-1] == steps[-1], (samples, "the gauge ends at", steps[-1])
    assert set(seen) <= set(steps), (samples, "steps other than", steps)
    assert all(a >= b for a, b in itertools.pairwise(seen)), (samples, "the lag went up")
    assert len(set(seen) - {steps[-1]}) >= 2, (samples, "fewer than two steps of", steps, "scraped")


def test_the_steps_check_holds_a_missed_step_and_catches_a_wrong_lag():
    assert_steps_down([0.0, 40.0, 40.0, 20.0, 20.0, 20.0, 0.0], [60, 40, 20, 0])  # CI, 2026-12-07: 60 unscraped
    for wrong in ([0, 60, 40, 20], [0, 40, 40, 0], [0, 20, 40, 0], [0, 60, 50, 20, 0], [0, 0, 0], []):
        with pytest.raises(AssertionError):
            assert_steps_down(wrong, [60, 40, 20, 0])


OFFSET_COMMIT, ILLEGAL_GENERATION = 8, 22  # Kafka's API key and error code


def test_prometheus_sees_a_fenced_commit_and_the_sample_rule_fires(prometheus_present, spark, mock_broker,
                                                                    unique_name, tmp_path):
    """The broker answers a commit ILLEGAL_GENERATION (librdkafka's mock injects it: on Kafka the
    member learns of its removal from its heartbeat first and sends no stale commit)."""
    broker = mock_broker
    topic, group, name = unique_name("topic"), unique_name("g"), table_name(unique_name)
    broker.create_topic(topic, 2)
    port = free_port()
    q = None
    with Prometheus([f"127.0.0.1:{port}"], tmp_path / "prom", rule_files=[ALERTS]) as prom:
        sel = f'{{query="qf",group="{group}"}}'
        produce(broker.bootstrap, topic, 10, 2)
        q = to_memory(stream(spark, broker, topic, group, startingOffsets="earliest",
                             **{"metrics.port": str(port), "metrics.queryName": "qf"}),
                      name, str(tmp_path / "ck"), interval="1 second")
        try:
            wait_rows(spark, name, 10, timeout=300, query=q)
            wait_until(lambda: (prom.value(f"groupkafka_commitsSucceeded_total{sel}") or 0) >= 1, 60, interval=0.5,
                       message="Prometheus to see the first commit")
            assert prom.value(f"groupkafka_commits_fenced_total{sel}") == 0
            assert "GroupKafkaCommitsFenced" not in prom.firing()
            broker.mock.push_request_errors(OFFSET_COMMIT, [ILLEGAL_GENERATION])
            produce(broker.bootstrap, topic, 10, 2, start=10)
            wait_until(lambda: (prom.value(f"groupkafka_commits_fenced_total{sel}") or 0) >= 1, 120, interval=0.5,
                       message="Prometheus to see the fenced commit")
            assert prom.value(f"groupkafka_commitsFailed_total{sel}") >= 1
            assert prom.value('groupkafka_last_error_info{query="qf",type="CommitError"}') == 1
            wait_until(lambda: "GroupKafkaCommitsFenced" in prom.firing(), 60, interval=0.5,
                       message="the sample rule GroupKafkaCommitsFenced to fire")
            wait_rows(spark, name, 20, timeout=120, query=q)  # the member rejoined and read on
        finally:
            stop(q)
