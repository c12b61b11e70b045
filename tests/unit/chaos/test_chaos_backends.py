"""The chaos suite's dev-broker selection (``python -m chaos --broker``): which scenarios run on
Kafka, why the others do not, what ``auto`` picks, and that no mock-only option reaches a member
on Kafka (pure: no broker, no Spark)."""

from __future__ import annotations

import pytest

from chaos import __main__ as cli
from chaos.run import MOCK_ONLY_OPTIONS, kafka_broker_config
from chaos.scenarios import SCENARIOS, for_protocol, why_not
from spark_groupsource.devbroker import DevBrokerError, _kafka


@pytest.fixture(autouse=True)
def java_present(monkeypatch) -> None:
    """The scenarios with Java plain members run on Kafka whether or not java-consumer.sh is on
    this machine (test_chaos_java_member checks the skip where it is missing)."""
    monkeypatch.setattr("chaos.traffic.java_missing", lambda: None)


def names(protocol: str, backend: str, kafka_nodes: int = 1) -> set[str]:
    return {s.name for s in for_protocol(protocol, backend, kafka_nodes)}


def test_fault_injection_scenarios_run_on_the_mock_only_and_say_why_on_kafka() -> None:
    injected = {"broker_outage", "coordinator_moved", "commit_errors"}
    java_only = {"classic": {"eager_plain_churn", "crowded_group"}, "consumer": set()}  # Java plain members: Kafka only
    cluster = {"broker_crash", "coordinator_crash", "rolling_restart", "broker_frozen", "cluster_down",
               "cluster_down_long"}
    # Kafka only, no cluster fault: CreatePartitions (no mock handler), max.poll.interval (measured on Kafka)
    kafka_only = {"classic": {"partitions_added", "stuck_batch"}, "consumer": set()}
    for protocol in ("classic", "consumer"):
        java_only[protocol] |= kafka_only[protocol]
        assert injected <= names(protocol, "mock") and not injected & names(protocol, "kafka")
        assert names(protocol, "kafka") == (names(protocol, "mock") - injected) | java_only[protocol]
        net = {sp.name for sp in SCENARIOS if sp.named_only} if protocol == "classic" else set()
        assert names(protocol, "kafka", 3) == names(protocol, "kafka") | cluster | net
        assert not (cluster | java_only[protocol]) & names(protocol, "mock")
        for s in SCENARIOS:
            if protocol in s.protocols and s.name not in names(protocol, "kafka"):
                why = why_not(s.name, protocol, "kafka") or ""
                assert "fault injection" in why or "3-node Kafka cluster" in why, s.name
            if s.name in cluster | java_only[protocol]:
                assert "--broker kafka" in (why_not(s.name, protocol, "mock") or ""), s.name
    assert {"query_churn", "consumer_churn", "driver_kill9", "member_frozen", "worker_kill",
            "unreachable_bootstrap", "retention_fail", "retention_skip"} == names("consumer", "kafka")


def test_the_network_scenarios_run_only_when_named() -> None:
    """make chaos-net names them (--only); make chaos-kafka, naming none, leaves them out."""
    net = {s.name for s in SCENARIOS if s.named_only}
    assert {"net_coordinator_drop", "net_leader_reset", "clock_jumps"} <= net
    assert all(s.backends == ("kafka",) or "mock" not in s.backends for s in SCENARIOS if s.named_only)


def test_auto_picks_kafka_for_the_consumer_mode_when_its_jars_are_present(monkeypatch) -> None:
    monkeypatch.setattr(_kafka, "check", lambda home=None: "found")
    assert cli.choose_broker("auto", "consumer") == ("kafka", None)
    assert cli.choose_broker("auto", "classic") == ("mock", None)
    assert cli.choose_broker("mock", "consumer") == ("mock", None)

    def missing(home: str | None = None) -> str:
        raise DevBrokerError("no jars here")

    monkeypatch.setattr(_kafka, "check", missing)
    backend, why = cli.choose_broker("auto", "consumer")
    assert backend == "mock" and "no jars here" in why
    with pytest.raises(ValueError, match="no jars here"):
        cli.choose_broker("kafka", "consumer")


def test_list_on_kafka_names_the_skipped_scenarios_with_the_reason(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_kafka, "check", lambda home=None: "found")
    assert cli.main(["--protocol", "consumer", "--broker", "kafka", "--list"]) == 0
    out = capsys.readouterr().out
    skipped = out.split("not run with --protocol consumer --broker kafka:")[1]
    assert "commit_errors" in skipped and "fault injection" in skipped
    assert cli.main(["--protocol", "consumer", "--broker", "kafka", "--only", "commit_errors"]) == 2
    assert "fault injection" in capsys.readouterr().err


def test_members_on_kafka_get_no_mock_workaround_and_the_suite_session() -> None:
    from chaos.run import Run

    run = Run.__new__(Run)  # only member_options: no broker started
    for protocol in ("classic", "consumer"):
        run.protocol, run.backend = protocol, "kafka"
        assert not set(MOCK_ONLY_OPTIONS) & set(run.member_options)
    run.protocol, run.backend = "classic", "mock"
    assert "leaderSyncDelayMs" in run.member_options
    assert kafka_broker_config("consumer") == {"group.consumer.session.timeout.ms": "6000",
                                                "group.consumer.heartbeat.interval.ms": "1000"}


def test_kafka_home_option_is_the_runs_kafka_and_its_java_client(tmp_path, monkeypatch, capsys) -> None:
    """``--kafka-home`` names the installation the dev broker and the Java members use (through
    GROUPKAFKA_KAFKA_HOME, which both read); a directory without jars is refused (exit 2)."""
    import zipfile

    monkeypatch.setenv(_kafka.KAFKA_HOME_ENV, "/elsewhere")
    assert cli.main(["--broker", "mock", "--kafka-home", str(tmp_path / "none"), "--list"]) == 2
    assert "--kafka-home: Apache Kafka jars not found at --kafka-home" in capsys.readouterr().err
    (tmp_path / "lib" / "broker").mkdir(parents=True)
    (tmp_path / "lib" / "clients").mkdir(parents=True)
    (tmp_path / "lib" / "broker" / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    with zipfile.ZipFile(tmp_path / "lib" / "clients" / "kafka-clients-4.3.1.jar", "w") as z:
        z.writestr("kafka/kafka-version.properties", "version=4.3.1\n")
    monkeypatch.setattr(_kafka, "java_binary", lambda: "/usr/bin/java")
    assert cli.use_kafka_home(str(tmp_path)) == f"Apache Kafka 4.3.1 at {tmp_path}"
    import os

    assert os.environ[_kafka.KAFKA_HOME_ENV] == str(tmp_path)
    from tests.javaclient import java_consumer_script

    monkeypatch.delenv("GROUPKAFKA_JAVA_CONSUMER", raising=False)
    assert java_consumer_script() == os.path.join(str(tmp_path), "java-consumer.sh")
