"""format("groupkafka") from a Spark Connect client session.

The server (spark-submit --class ...SparkConnectServer, local[2]) runs its Python workers and
the stream's runner on the test venv's interpreter, which has the connector installed; the
client runs in a process of its own (tests/connect_client.py) and never registers the data
source: the server's auto-registration (the ``pyspark_groupkafka`` module) serves the remote
session too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import committed_offsets, produce_keyed
from sparkcluster import connect_server, spark_env

pytestmark = pytest.mark.integration
CLIENT = Path(__file__).resolve().parents[1] / "connect_client.py"


@pytest.fixture(scope="module")
def connect_url(kafka_broker, tmp_path_factory):
    """A Connect server (started after ``kafka_broker``, so the tests skip first without
    ../shared/kafka)."""
    with connect_server(tmp_path_factory.mktemp("connect"), sys.executable) as url:
        yield url


def test_batch_and_stream_reads_from_a_remote_session(connect_url, kafka_broker, unique_name):
    topic, group, partitions = unique_name("connect"), unique_name("g"), 3
    kafka_broker.create_topic(topic, partitions)
    records = produce_keyed(kafka_broker.bootstrap, topic, 300, partitions=partitions)
    options = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic, "kafka.group.id": group,
        "startingOffsets": "earliest", "maxOffsetsPerTrigger": "120",
        "kafka.session.timeout.ms": str(kafka_broker.recommended_session_timeout_ms),
        "kafka.heartbeat.interval.ms": str(kafka_broker.recommended_heartbeat_interval_ms),
    }
    env = spark_env(sys.executable)
    del env["PYSPARK_PYTHON"], env["PYSPARK_DRIVER_PYTHON"]  # a client needs neither
    done = subprocess.run([sys.executable, str(CLIENT), connect_url, json.dumps(options)], env=env,
                          capture_output=True, text=True, timeout=360, cwd="/")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[:6000]
    line = next(x for x in done.stdout.splitlines() if x.startswith("result: "))
    result = json.loads(line[len("result: "):])

    expected = sorted([r.topic, r.partition, r.offset, r.key.decode(), r.value.decode()] for r in records)
    assert sorted(result["batch"]) == expected
    assert sorted(result["stream"]) == expected  # every record once: no duplicates, none missing
    # availableNow with maxOffsetsPerTrigger=120: several micro-batches, the last one at the end
    assert len(result["progress"]) >= 3, result["progress"]
    assert committed_offsets(kafka_broker.bootstrap, group, topic, partitions) == {0: 100, 1: 100, 2: 100}
