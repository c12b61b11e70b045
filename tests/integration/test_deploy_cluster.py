"""The connector deployed as docs/deploy.md says, on a standalone Spark cluster: a Master and a
Worker started from pyspark's ``spark-class``, executors in JVMs of their own, the driver and
every Python worker running a venv that holds the wheel built from this checkout (not the
checkout itself).

Streaming with an executor JVM killed -9 mid-stream (the Worker starts a new one): every record
once in the Parquet output, committed offsets = log end. A coordinated backfill job
(jobs/backfill.py) on the same cluster.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition

from helpers import committed_offsets, produce_keyed, wait_until
from sparkcluster import (
    ROOT,
    Proc,
    build_wheel,
    make_venv,
    spark_env,
    spark_submit_cmd,
    standalone_cluster,
)

pytestmark = pytest.mark.integration
TESTS = Path(__file__).resolve().parents[1]
#: One executor of 2 cores and a small heap: the whole cluster fits a 2-core CI machine.
APP_CONF = {"spark.executor.cores": "2", "spark.cores.max": "2", "spark.executor.memory": "768m",
            "spark.driver.memory": "768m"}


@pytest.fixture(scope="module")
def deployment(kafka_broker, tmp_path_factory):
    """A standalone cluster, and the wheel built from the checkout installed in a venv of its
    own (built while the cluster's JVMs start). Asks for ``kafka_broker`` first: without
    ../shared/kafka the tests skip before anything starts."""
    base = tmp_path_factory.mktemp("deploy")

    def wheel_venv():
        return make_venv(base / "wheel", build_wheel(base / "wheel"))

    with standalone_cluster(base / "cluster", meanwhile=wheel_venv) as (cluster, venv):
        yield cluster, venv


@pytest.fixture
def cluster(deployment):
    return deployment[0]


@pytest.fixture
def wheel_venv(deployment):
    return deployment[1]


def submit(cluster, venv, workdir: Path, name: str, *args: str) -> Proc:
    cmd = spark_submit_cmd(cluster.url, venv.python, *args, conf=APP_CONF)
    return Proc(name, cmd, workdir / f"{name}.log", env=spark_env(venv.python), cwd=workdir)


def finish(proc: Proc, timeout: float) -> str:
    try:
        proc.popen.wait(timeout)
    except Exception:
        proc.stop()
        raise AssertionError(f"{proc.name} still running after {timeout}s\n{proc.tail()}") from None
    assert proc.popen.returncode == 0, proc.tail()
    return proc.text()


def log_end(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-end-probe", "log_level": 3})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def sink_files(output: Path) -> list[Path]:
    """The Parquet files the file sink's metadata log lists as committed: what
    ``spark.read.parquet(output)`` reads (files of tasks lost with their executor stay out)."""
    log = output / "_spark_metadata"
    if not log.is_dir():
        return []
    added, deleted = set(), set()
    for entry in log.iterdir():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:  # line 1: the log format version
            item = json.loads(line)
            (added if item["action"] == "add" else deleted).add(unquote(urlparse(item["path"]).path))
    return sorted(Path(p) for p in added - deleted)


def batches_logged(output: Path) -> int:
    log = output / "_spark_metadata"
    return sum(1 for e in log.iterdir() if not e.name.startswith(".")) if log.is_dir() else 0


def rows(files: list[Path]) -> Counter:
    out: Counter = Counter()
    for f in files:
        for r in pq.read_table(f, columns=["topic", "partition", "offset", "key", "value"]).to_pylist():
            out[(r["topic"], r["partition"], r["offset"], r["key"], r["value"])] += 1
    return out


def assert_in_venv(probe: dict, venv) -> None:
    root = str(venv.root)
    for place in [probe["driver"], *probe["executors"]]:
        assert place["package"].startswith(root), f"spark_groupsource from {place['package']}, not {root}"
        assert place["shim"].startswith(root), place
        # the wheel carries the native fetch path's extension, built for this platform
        assert place["native"] == "available", place
        assert place["python"].startswith(root), place
    assert probe["driver"]["jvm"] == "org.apache.spark.deploy.SparkSubmit", probe  # client mode
    assert {p["jvm"] for p in probe["executors"]} == {"org.apache.spark.executor.CoarseGrainedExecutorBackend"}, probe


@pytest.mark.extended(why="~170 s; CI keeps this cluster's backfill job, make chaos kills executors and drivers")
def test_stream_to_parquet_survives_an_executor_killed_9(cluster, wheel_venv, kafka_broker, unique_name, tmp_path):
    topic, group, partitions = unique_name("deploy"), unique_name("g"), 4
    kafka_broker.create_topic(topic, partitions)
    produced = produce_keyed(kafka_broker.bootstrap, topic, 1200, partitions=partitions)
    output, stop_file = tmp_path / "out", tmp_path / "stop"
    options = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic, "kafka.group.id": group,
        "startingOffsets": "earliest", "maxOffsetsPerTrigger": "400",
        "kafka.session.timeout.ms": str(kafka_broker.recommended_session_timeout_ms),
        "kafka.heartbeat.interval.ms": str(kafka_broker.recommended_heartbeat_interval_ms),
    }
    driver = submit(cluster, wheel_venv, tmp_path, "stream-driver", str(TESTS / "deploy_stream_job.py"),
                    json.dumps(options), str(output), str(tmp_path / "checkpoint"), str(stop_file))
    try:
        driver.wait_for("deploy_stream_job: query started", 240)
        probe = json.loads(next(line for line in driver.text().splitlines() if line.startswith("probe: "))[7:])
        assert_in_venv(probe, wheel_venv)

        # Mid-stream: the first micro-batch is in the sink, more are to come.
        wait_until(lambda: batches_logged(output) >= 1 or driver.popen.poll() is not None, timeout=180,
                   interval=0.2, message="the first micro-batch in the sink")
        assert driver.popen.poll() is None, driver.tail()
        victims = cluster.executor_pids()
        assert len(victims) == 1, (victims, cluster.logs())
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        killed_at = batches_logged(output)
        produced += produce_keyed(kafka_broker.bootstrap, topic, 1200, partitions=partitions, start=1200)

        end = log_end(kafka_broker.bootstrap, topic, partitions)
        assert sum(end.values()) == 2400

        def caught_up():
            assert driver.popen.poll() is None, driver.tail()
            return committed_offsets(kafka_broker.bootstrap, group, topic, partitions) == end

        wait_until(caught_up, timeout=300, interval=1.0, message=f"committed offsets = log end {end}")
        replacement = cluster.executor_pids()
        assert replacement and not replacement & victims, (victims, replacement)
        stop_file.touch()
        finish(driver, 120)
    finally:
        driver.stop()

    got = rows(sink_files(output))
    twice = {k: n for k, n in got.items() if n > 1}
    assert not twice, f"{len(twice)} records more than once, e.g. {list(twice.items())[:3]}"
    expected = {(r.topic, r.partition, r.offset, r.key, r.value) for r in produced}
    assert set(got) == expected, f"missing {len(expected - set(got))}, unexpected {len(set(got) - expected)}"
    assert batches_logged(output) > killed_at
    print(f"deploy stream: {len(got)} records once each; executor {sorted(victims)} killed after "
          f"{killed_at} batch(es), replaced by {sorted(replacement)}; {batches_logged(output)} batches")


def test_coordinated_backfill_job_on_the_cluster(cluster, wheel_venv, kafka_broker, unique_name, tmp_path):
    """jobs/backfill.py --coordinated: the driver joins the group, reads what it is assigned from
    the group's commits (partition 0 committed at 6 beforehand) to the end, and commits."""
    topic, group = unique_name("deploybf"), unique_name("g")
    kafka_broker.create_topic(topic, 2)
    records = produce_keyed(kafka_broker.bootstrap, topic, 200, partitions=2)
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group, "log_level": 3})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    finally:
        c.close()
    output = tmp_path / "out"
    job = submit(
        cluster, wheel_venv, tmp_path, "backfill",
        "--properties-file", str(ROOT / "conf" / "spark-defaults.conf"), str(ROOT / "jobs" / "backfill.py"),
        "--bootstrap", kafka_broker.bootstrap, "--topic", topic, "--group", group, "--coordinated",
        "--output", str(output), "--commit", "--max-records-per-partition", "40",
        "-o", f"kafka.session.timeout.ms={kafka_broker.recommended_session_timeout_ms}",
        "-o", f"kafka.heartbeat.interval.ms={kafka_broker.recommended_heartbeat_interval_ms}",
    )
    try:
        text = finish(job, 240)
    finally:
        job.stop()
    line = next((x for x in text.splitlines() if x.startswith("backfill:")), "")
    assert f"{topic}-0[6,100)" in line and f"{topic}-1[0,100)" in line and "committed=yes" in line, text[-3000:]
    expected = {(r.topic, r.partition, r.offset, r.key, r.value) for r in records
                if r.partition == 1 or r.offset >= 6}
    got = rows(sorted(output.glob("*.parquet")))
    assert max(got.values()) == 1 and set(got) == expected
    assert committed_offsets(kafka_broker.bootstrap, group, topic, 2) == {0: 100, 1: 100}
