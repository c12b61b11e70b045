"""The KIP-848 member's view of its coordinator from librdkafka's statistics (pure logic; the
shapes are librdkafka 2.16's, as printed against Kafka 4.3.1 with the test proxy holding or
resetting the connections: tests/integration/test_coordinator_touch.py runs it for real)."""

from __future__ import annotations

import json

import pytest

from spark_groupsource.group.touch import SILENT_S, LibrdkafkaCoordinator, parse_stats, silence_s


def _stats(state="UP", cgrp="up", waitresp=0, rxidle=30_000, rx=10, timeouts=0, nodename="127.0.0.1:35995"):
    return {
        "cgrp": {"state": cgrp, "join_state": "steady"},
        "brokers": {
            "127.0.0.1:35995/1": {"nodeid": 1, "nodename": "127.0.0.1:35995", "source": "learned",
                                  "state": "UP", "waitresp_cnt": 1, "rxidle": 400_000},
            "GroupCoordinator": {"nodeid": -1, "nodename": nodename, "source": "logical", "state": state,
                                 "waitresp_cnt": waitresp, "rxidle": rxidle, "rx": rx, "req_timeouts": timeouts},
        },
    }


def test_an_answering_coordinator_is_reached_and_named_by_its_node():
    assert LibrdkafkaCoordinator().observe(_stats()) == (True, "broker 1 at 127.0.0.1:35995")


def test_a_heartbeat_just_sent_after_an_idle_interval_is_still_reached():
    view = LibrdkafkaCoordinator()
    assert view.observe(_stats(rx=10))[0]
    # heartbeats every 5 s (Kafka's default): long idle, nothing outstanding, nothing new received
    assert view.observe(_stats(rx=10, rxidle=4_900_000))[0]
    assert view.observe(_stats(rx=10, waitresp=1, rxidle=500_000))[0]


def test_a_silent_network_is_unreached_until_an_answer_arrives():
    view = LibrdkafkaCoordinator()
    assert view.observe(_stats(rx=10))[0]
    assert view.observe(_stats(rx=10, waitresp=1, rxidle=3_000_000)) == (False, "broker 1 at 127.0.0.1:35995")
    # the heartbeat timed out and was dropped: nothing outstanding, nothing received (measured:
    # this look read as "back in touch" in the middle of a 6 s hold)
    assert not view.observe(_stats(rx=10, waitresp=0, rxidle=5_000_000, timeouts=1))[0]
    assert not view.observe(_stats(rx=10, waitresp=0, rxidle=5_500_000, timeouts=1))[0]
    assert view.observe(_stats(rx=11, rxidle=20_000, timeouts=1))[0]  # the healed network answered


def test_a_request_timed_out_without_an_answer_is_unreached():
    view = LibrdkafkaCoordinator()
    assert view.observe(_stats(rx=10))[0]
    assert not view.observe(_stats(rx=10, timeouts=1))[0]


def test_a_closed_connection_or_a_group_looking_for_its_coordinator_is_not_reached():
    for stats in (_stats(state="DOWN"), _stats(state="CONNECT"), _stats(cgrp="wait-coord")):
        assert not LibrdkafkaCoordinator().observe(stats)[0]


def test_after_a_reconnect_it_is_reached_once_the_new_connection_answers():
    view = LibrdkafkaCoordinator()
    assert view.observe(_stats(rx=10))[0]
    assert not view.observe(_stats(rx=10, state="CONNECT"))[0]
    assert not view.observe(_stats(rx=10, state="UP", waitresp=1, rxidle=100_000))[0]  # ApiVersions sent
    assert view.observe(_stats(rx=12))[0]


def test_before_any_coordinator_is_known_it_is_not_reached_and_unnamed():
    view = LibrdkafkaCoordinator()
    assert view.observe(_stats(state="INIT", cgrp="wait-coord", nodename="")) == (False, "")
    assert view.observe({"brokers": {}}) == (False, "")
    assert view.observe({}) == (False, "")
    assert view.observe(_stats(rx=3))[0]  # found and answered


def _raw(topics: dict, **kw) -> str:
    """Statistics text in librdkafka's layout: scalars, ``brokers`` (a bootstrap entry of the same
    address first), ``topics``, ``cgrp``, ``eos``."""
    s = _stats(**kw)
    brokers = {"127.0.0.1:35995/bootstrap": {"nodeid": -1, "nodename": "127.0.0.1:35995", "source": "configured",
                                             "toppars": {}}, **s["brokers"]}
    brokers["127.0.0.1:35995/1"]["toppars"] = {f"t-{p}": {"topic": "t", "partition": p} for p in range(50)}
    whole = {"name": "rdkafka#consumer-1", "type": "consumer", "ts": 1, "brokers": brokers,
             "topics": topics, "cgrp": s["cgrp"], "eos": {"idemp_state": "Init"}}
    return json.dumps(whole, indent=1)


def _topics(*names: str) -> dict:
    return {n: {"topic": n, "partitions": {str(p): {"partition": p, "broker": 1, "cgrp": 1, "brokers": []}
                                           for p in range(50)}} for n in names}


def test_parse_stats_keeps_what_the_view_reads_and_not_the_partitions():
    raw = _raw(_topics("t"))
    got = parse_stats(raw)
    assert got["cgrp"] == json.loads(raw)["cgrp"]
    assert got["brokers"]["GroupCoordinator"] == json.loads(raw)["brokers"]["GroupCoordinator"]
    assert got["brokers"]["127.0.0.1:35995/1"] == {"nodeid": 1, "nodename": "127.0.0.1:35995", "source": "learned"}
    assert "topics" not in got and len(got["brokers"]) == 2


@pytest.mark.parametrize("topics", [("t",), ("cgrp", "brokers", "GroupCoordinator", "127.0.0.1:35995")])
@pytest.mark.parametrize("kw", [{}, {"state": "DOWN"}, {"cgrp": "wait-coord"}, {"waitresp": 1, "rxidle": 3_000_000},
                                {"timeouts": 1}, {"nodename": ""}])
def test_the_view_of_the_parsed_parts_is_the_view_of_the_whole(topics, kw):
    # topics named like the keys looked for, states of every rule of the view: the same answers
    raw = _raw(_topics(*topics), **kw)
    assert LibrdkafkaCoordinator().observe(parse_stats(raw)) == LibrdkafkaCoordinator().observe(json.loads(raw))


def test_a_coordinator_on_node_0_is_named_by_its_node():
    s = _stats()
    s["brokers"]["127.0.0.1:35995/1"]["nodeid"] = 0
    assert LibrdkafkaCoordinator().observe(s) == (True, "broker 0 at 127.0.0.1:35995")


def test_parse_stats_of_another_layout_is_the_whole_json():
    assert parse_stats('{"cgrp": 3, "brokers": {}}') == {"cgrp": 3, "brokers": {}}
    assert parse_stats('{"name": "x"}') == {"brokers": {}}
    with pytest.raises(ValueError):
        parse_stats('{"cgrp": {')


def test_a_request_waited_on_past_the_silent_bound_is_silence_even_when_the_statistics_saw_none():
    assert silence_s(None, None) == 0.0 and silence_s(None, SILENT_S / 2) == 0.0  # a commit in the usual time
    assert silence_s(None, 3.5) == 3.5  # the member's thread waits in a commit: no statistics served
    assert silence_s(4.0, 3.5) == 4.0 and silence_s(2.0, None) == 2.0  # the statistics saw longer
    assert silence_s(0.0, SILENT_S) == SILENT_S
