"""The kafka backend's version-dependent choices (pure): what the jars report decides them."""

from __future__ import annotations

import os
import zipfile

import pytest

from spark_groupsource.devbroker import DevBrokerError
from spark_groupsource.devbroker._kafka import (
    KafkaDist,
    find_kafka,
    formatted_metadata_version,
    parse_version,
)
from spark_groupsource.devbroker._server import validate_args


@pytest.mark.parametrize("text, want", [("4.3.1", (4, 3, 1)), ("4.0.0-SNAPSHOT", (4, 0, 0)),
                                        ("3.7.2", (3, 7, 2)), ("unknown version", None), ("4", None)])
def test_parse_version(text, want):
    assert parse_version(text) == want


def test_no_version_gets_group_protocol_settings(tmp_path):
    """Each version runs its own group coordinator defaults (3.9: classic only, as in production)."""
    from spark_groupsource.devbroker._kafka import KafkaCluster

    for version in ("3.9.1", "4.0.1", "4.3.1"):
        home = _fake_home(tmp_path / version, version, f"version={version}\n")
        assert not [k for k in KafkaCluster(home=home).config if k.startswith("group.coordinator.")], version


def test_formatted_metadata_version():
    out = "Formatting metadata directory /tmp/x/data with metadata.version 4.3-IV0.\n"
    assert formatted_metadata_version(out) == "4.3-IV0"
    assert formatted_metadata_version("nothing here") is None


def _fake_home(tmp_path, jar_version: str, properties: str | None) -> str:
    broker, clients = tmp_path / "lib" / "broker", tmp_path / "lib" / "clients"
    broker.mkdir(parents=True)
    clients.mkdir(parents=True)
    (broker / "kafka_2.13-x.jar").write_bytes(b"")
    with zipfile.ZipFile(clients / f"kafka-clients-{jar_version}.jar", "w") as z:
        if properties is not None:
            z.writestr("kafka/kafka-version.properties", properties)
    return str(tmp_path)


def test_version_comes_from_the_jar_properties_before_the_file_name(tmp_path):
    home = _fake_home(tmp_path, "9.9.9", "commitId=abc\nversion=4.3.1\n")
    dist = find_kafka(home)
    assert isinstance(dist, KafkaDist) and dist.version == "4.3.1" and dist.version_tuple == (4, 3, 1)


def test_version_falls_back_to_the_jar_name(tmp_path):
    assert find_kafka(_fake_home(tmp_path, "3.8.0", None)).version == "3.8.0"


def test_home_argument_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GROUPKAFKA_KAFKA_HOME", os.path.join(str(tmp_path), "elsewhere"))
    home = _fake_home(tmp_path, "4.3.1", "version=4.3.1\n")
    assert find_kafka(home).home == home
    with pytest.raises(DevBrokerError, match="not found at --kafka-home /nowhere"):
        find_kafka("/nowhere")


def test_kafka_home_is_refused_for_other_backends(tmp_path):
    with pytest.raises(DevBrokerError, match="--kafka-home is only supported with kafka"):
        validate_args("mock", 1, None, [], None, str(tmp_path))
    with pytest.raises(DevBrokerError, match="no such directory"):
        validate_args("kafka", 1, None, [], None, str(tmp_path / "missing"))
    validate_args("kafka", 1, None, [], None, str(tmp_path))

