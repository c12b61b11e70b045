"""The chaos suite's group-protocol selection (``python -m chaos --protocol``): which scenarios
run in which mode, why the others do not, and that the members' options are ones the
connector accepts in that mode (pure: no broker, no Spark)."""

from __future__ import annotations

import pytest

from chaos.__main__ import main
from chaos.run import CONSUMER_MEMBER_OPTIONS, MEMBER_OPTIONS
from chaos.scenarios import SCENARIOS, for_protocol, why_not
from spark_groupsource.config import parse_stream_options
from spark_groupsource.errors import OptionError

BASE = {"kafka.bootstrap.servers": "h:9092", "kafka.group.id": "g", "subscribe": "t"}


def names(protocol: str) -> set[str]:
    return {s.name for s in for_protocol(protocol)}


def test_client_side_assignor_scenarios_run_only_in_classic_mode() -> None:
    classic_only = {"eager_churn", "cooperative_churn", "redundant_restart"}
    assert classic_only <= names("classic") and not classic_only & names("consumer")
    assert {"query_churn", "consumer_churn"} <= names("consumer")
    shared = {"driver_kill9", "member_frozen", "worker_kill", "broker_outage", "coordinator_moved",
              "commit_errors", "unreachable_bootstrap", "retention_fail", "retention_skip"}
    assert shared <= names("classic") & names("consumer")
    for protocol in ("classic", "consumer"):
        for s in SCENARIOS:
            if protocol not in s.protocols:
                assert why_not(s.name, protocol), f"{s.name} skipped in {protocol} mode without a reason"


def test_member_options_are_accepted_in_their_mode_and_the_classic_ones_refused_in_consumer_mode() -> None:
    assert parse_stream_options({**BASE, **MEMBER_OPTIONS}).group_protocol == "classic"
    assert parse_stream_options({**BASE, **CONSUMER_MEMBER_OPTIONS}).group_protocol == "consumer"
    with pytest.raises(OptionError):
        parse_stream_options({**BASE, **MEMBER_OPTIONS, "kafka.group.protocol": "consumer"})


def test_asking_for_a_classic_only_scenario_in_consumer_mode_says_why(capsys) -> None:
    assert main(["--protocol", "consumer", "--only", "redundant_restart"]) == 2
    assert "client-side assignor" in capsys.readouterr().err
    assert main(["--protocol", "consumer", "--list"]) == 0
    out = capsys.readouterr().out
    assert "not run with --protocol consumer" in out and "eager_churn" in out.split("not run")[1]
