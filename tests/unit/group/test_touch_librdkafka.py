"""The KIP-848 member's view of its coordinator from librdkafka's statistics (pure logic; the
shapes are librdkafka 2.16's, as printed against Kafka 4.3.1 with the test proxy holding or
resetting the connections: tests/integration/test_coordinator_touch.py runs it for real)."""

from __future__ import annotations

from spark_groupsource.group.touch import librdkafka_coordinator


def _stats(state="UP", cgrp="up", waitresp=0, rxidle=30_000, nodename="127.0.0.1:35995"):
    return {
        "cgrp": {"state": cgrp, "join_state": "steady"},
        "brokers": {
            "127.0.0.1:35995/1": {"nodeid": 1, "nodename": "127.0.0.1:35995", "source": "learned",
                                  "state": "UP", "waitresp_cnt": 1, "rxidle": 400_000},
            "GroupCoordinator": {"nodeid": -1, "nodename": nodename, "source": "logical", "state": state,
                                 "waitresp_cnt": waitresp, "rxidle": rxidle},
        },
    }


def test_an_answering_coordinator_is_reached_and_named_by_its_node():
    assert librdkafka_coordinator(_stats()) == (True, "broker 1 at 127.0.0.1:35995")


def test_a_heartbeat_just_sent_after_an_idle_interval_is_still_reached():
    # heartbeats every 5 s (Kafka's default): long idle, nothing outstanding
    assert librdkafka_coordinator(_stats(rxidle=4_900_000))[0]
    assert librdkafka_coordinator(_stats(waitresp=1, rxidle=500_000))[0]


def test_a_silent_network_is_a_request_waiting_with_nothing_received():
    assert librdkafka_coordinator(_stats(waitresp=1, rxidle=3_000_000)) == (False, "broker 1 at 127.0.0.1:35995")


def test_a_closed_connection_or_a_group_looking_for_its_coordinator_is_not_reached():
    assert not librdkafka_coordinator(_stats(state="DOWN"))[0]
    assert not librdkafka_coordinator(_stats(state="CONNECT"))[0]
    assert not librdkafka_coordinator(_stats(cgrp="wait-coord"))[0]


def test_before_any_coordinator_is_known_it_is_not_reached_and_unnamed():
    assert librdkafka_coordinator(_stats(state="INIT", cgrp="wait-coord", nodename="")) == (False, "")
    assert librdkafka_coordinator({"brokers": {}}) == (False, "")
    assert librdkafka_coordinator({}) == (False, "")
