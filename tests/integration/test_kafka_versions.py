"""The dev broker's kafka backend on each Apache Kafka version of the suite (issue 28).

Per version (../shared/kafka: 4.0.1, ../shared/kafka-latest: 4.3.1), chosen by the API's
``kafka_home`` and the command's ``--kafka-home``: the node runs the storage format its own
``kafka-storage`` picks (metadata.version 4.0-IV3 / 4.3-IV0), serves classic and consumer
(KIP-848) groups without being told to, and its log has no deprecation warning (4.3 deprecates
``group.coordinator.rebalance.protocols``, which the dev broker used to set). Apache Kafka 3.9.1
(../shared/kafka-3.9, the suite's ``kafka-3.9`` broker) runs its own defaults too: metadata.version
3.9-IV0 and classic groups only, as production 3.9 clusters do. A version's test skips, saying so,
where its installation is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from helpers import produce_keyed
from spark_groupsource.devbroker import DevBroker, kafka_missing
from spark_groupsource.devbroker._kafka import SHARED_KAFKA, SHARED_KAFKA_LATEST

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: (home, version prefix, the metadata.version its kafka-storage writes by default)
VERSIONS = {"4.0.1": (SHARED_KAFKA, "4.0.", "4.0-IV3"), "4.3.1": (SHARED_KAFKA_LATEST, "4.3.", "4.3-IV0")}
DEPRECATED_SETTING = "group.coordinator.rebalance.protocols"


def _home_or_skip(home: str) -> str:
    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP", "").strip():
        pytest.skip("needs embedded Kafka nodes; GROUPKAFKA_TEST_BOOTSTRAP points tests elsewhere")
    why = kafka_missing(home)
    if why:
        pytest.skip(f"no Apache Kafka at {home}: {why}")
    return home


def _warnings(log_path: str, since: int = 0) -> list[str]:
    """The log's WARN and ERROR lines from byte ``since`` on."""
    with open(log_path, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return [line.strip() for line in text.splitlines() if " WARN " in line or " ERROR " in line]


def _consume_in_group(bootstrap: str, topic: str, group: str, protocol: str, want: int) -> int:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "group.protocol": protocol, "log_level": 0}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    c = Consumer(conf)
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    try:
        while got < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
    finally:
        c.close()
    return got


def _runs_its_defaults(b: Any, prefix: str, metadata_version: str, protocols: tuple[str, ...],
                       unique_name: Any, shared: bool = False) -> list[str]:
    """Asserts a dev broker's version, storage format, no group setting written, and a group of
    each protocol reading 20 records; returns its log's WARN and ERROR lines (none ERROR). A
    ``shared`` broker's log also holds what earlier tests did there (3.9.1 logs at ERROR a
    partition that CreatePartitions added: "Expected partition ... to exist, but it was missing.
    Creating..."): only the lines written during this check are judged."""
    info = b.info()
    assert str(info["kafka_version"]).startswith(prefix), info
    assert info["metadata_version"] == metadata_version, info
    node = info["nodes"][0]
    with open(os.path.join(os.path.dirname(node["log"]), "server.properties")) as f:
        assert DEPRECATED_SETTING not in f.read()
    since = os.path.getsize(node["log"]) if shared else 0
    topic = unique_name("v")
    b.create_topic(topic, 2)
    produce_keyed(b.bootstrap, topic, 20, partitions=2)
    for protocol in protocols:
        assert _consume_in_group(b.bootstrap, topic, unique_name(protocol), protocol, 20) == 20, protocol
    warnings = _warnings(node["log"], since)
    assert not [w for w in warnings if " ERROR " in w], warnings
    return warnings


@pytest.mark.parametrize("version", list(VERSIONS))
def test_each_version_runs_its_own_format_both_protocols_and_no_deprecated_setting(version, unique_name):
    home, prefix, metadata_version = VERSIONS[version]
    _home_or_skip(home)
    b = DevBroker("kafka", kafka_home=home).start()
    try:
        warnings = _runs_its_defaults(b, prefix, metadata_version, ("classic", "consumer"), unique_name)
        assert not [w for w in warnings if "deprecated" in w.lower()], warnings
    finally:
        b.stop()


def test_kafka_3_9_runs_its_own_defaults_classic_groups_only(kafka39_broker, unique_name):
    """The suite's 3.9.1 broker (started once per session) is formatted by 3.9's own kafka-storage
    and gets no group setting: its classic group coordinator serves classic groups (the KIP-848
    member's refusal there: test_consumer_protocol_member.py)."""
    _runs_its_defaults(kafka39_broker, "3.9.", "3.9-IV0", ("classic",), unique_name, shared=True)


def test_the_deprecation_check_sees_the_setting_on_4_3():
    """The check above can fail: the setting the dev broker used to write makes 4.3.1 warn."""
    home = _home_or_skip(SHARED_KAFKA_LATEST)
    b = DevBroker("kafka", kafka_home=home, broker_config={DEPRECATED_SETTING: "classic,consumer"}).start()
    try:
        log = b.info()["nodes"][0]["log"]
        deadline = time.monotonic() + 30
        while not [w for w in _warnings(log) if DEPRECATED_SETTING in w and "deprecated" in w]:
            assert time.monotonic() < deadline, _warnings(log)
            time.sleep(0.5)
    finally:
        b.stop()


def test_command_kafka_home_option_wins_over_the_environment(tmp_path):
    """``--kafka-home`` picks the installation even when GROUPKAFKA_KAFKA_HOME names another."""
    home = _home_or_skip(SHARED_KAFKA_LATEST)
    env = {**os.environ, "GROUPKAFKA_KAFKA_HOME": str(tmp_path / "no-kafka")}
    cmd = [sys.executable, "-m", "spark_groupsource.devbroker"]
    check = subprocess.run([*cmd, "--check", "--kafka-home", home], capture_output=True, text=True,
                           timeout=60, env=env, cwd=ROOT)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[1] == f"kafka: OK Apache Kafka 4.3.1 at {home}"
    bad = subprocess.run([*cmd, "--backend", "mock", "--kafka-home", home], capture_output=True, text=True,
                         timeout=60, env=env, cwd=ROOT)
    assert bad.returncode == 2 and "--kafka-home is only supported with kafka" in bad.stderr
    missing = subprocess.run([*cmd, "--backend", "kafka", "--kafka-home", str(tmp_path / "nowhere")],
                             capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert missing.returncode == 2 and "no such directory" in missing.stderr
