"""A crowded group under traffic: the chaos suite's ``crowded_group`` scenario (chaos/crowd.py)
run end to end on one Apache Kafka node: two Spark queries (member processes), Java consumers
and librdkafka consumers in one classic group, joining and leaving in waves while a producer
writes. Judged by the suite's verdict and its history checker (chaos/history.py: one owner per
partition and generation, no fenced commit accepted, no read while not owned, order within one
ownership, handovers from the generations, every Spark batch planned), and the group must
settle after the last wave (the coordinator's description Stable, every member in, every
partition assigned once) within the crowd's bound.

`make test-extended` runs the lean crowd (2 queries, 2 Java and 10 librdkafka consumers, 11
members at the peak, 24 partitions); ``GROUPKAFKA_CROWDED_FULL=1`` runs the 50-member crowd (2 queries, 4 Java and 44
librdkafka consumers, 4 waves, 64 partitions): the commands and measured results are in
docs/membership.md.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from chaos.crowd import CROWD
from helpers import own_kafka_or_skip, run_tree
from javaclient import java_consumer_missing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.integration  # starts its own Kafka node, Spark members and Java consumers


@pytest.mark.extended(why="~140 s of a quiet CI (205 s loaded); CI keeps members joining and leaving beside a "
                        "query in test_java_consumers_bounce_beside_a_query (one per protocol) and the history "
                        "checker in the quick chaos run")
def test_a_crowded_group_joining_and_leaving_in_waves_passes_the_chaos_verdict_and_history(tmp_path):
    own_kafka_or_skip("the crowded group runs its own Kafka node")
    missing = java_consumer_missing()
    if missing:
        pytest.skip(f"the crowded group's Java consumers cannot run here: {missing}")
    results = tmp_path / "results.json"
    proc = run_tree(
        [sys.executable, "-m", "chaos", "--broker", "kafka", "--kafka-brokers", "1", "--only", "crowded_group",
         "--workdir", str(tmp_path / "w"), "--json", str(results)],
        cwd=ROOT, timeout=1800,
    )
    report = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert results.exists(), report
    data = json.loads(results.read_text())
    assert data["broker"] == "kafka" and [r["scenario"] for r in data["rows"]] == ["crowded_group"], report
    row = data["rows"][0]
    assert row["produced"] > 0 and row["read"] == row["produced"] and row["lost"] == 0, report
    assert row["history_breaches"] == 0 and row["regressions"] == 0, report
    assert row["offset_samples"] and row["group_samples"] > 0, report
    settled = [n for n in row["notes"] if n.startswith("the group settled")]
    assert settled, report
    peak = max(CROWD.members_after())
    assert any(n.startswith(f"the crowd at its peak: {peak} members") for n in row["notes"]), report
    assert row["ok"] and row["reached_end"], report
    assert proc.returncode == 0, report
    print(f"MEASURED: {settled[0]}; {row['produced']} records, {row['dup_total']} read twice over "
          f"{row['handovers']} handovers, {row['generations']} generations, {row['elapsed_s']:.0f}s")
