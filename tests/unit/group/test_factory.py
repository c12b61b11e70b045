"""The one member factory: streams and backfills get the same classic member configuration.

kafka-python matches a subscription pattern with ``re.match`` (at the start of a topic name);
``subscribePattern`` means the whole name, as in Java's consumer. The backfill once built its
own member and passed the pattern raw (issue 26)."""

from __future__ import annotations

import re

import pytest

from spark_groupsource.config import parse_batch_options, parse_stream_options
from spark_groupsource.group.classic_member import GroupMembership
from spark_groupsource.group.factory import build_membership, classic_config, whole_match

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.group.id": "g", "subscribepattern": "orders"}


def batch(**extra: str):
    return parse_batch_options({**BASE, "groupcoordinated": "true", **{k.lower(): v for k, v in extra.items()}})


def stream(**extra: str):
    return parse_stream_options({**BASE, **{k.lower(): v for k, v in extra.items()}})


@pytest.mark.parametrize("options", [batch, stream], ids=["backfill", "stream"])
def test_a_pattern_matches_whole_topic_names_as_kafka_python_applies_it(options) -> None:
    pattern = re.compile(classic_config(options()).pattern)
    # kafka-python's SubscriptionState tests topics with pattern.match()
    assert pattern.match("orders")
    assert not pattern.match("orders_dlq")
    assert not pattern.match("old_orders")


def test_alternatives_stay_whole() -> None:
    pattern = re.compile(whole_match("a|b.*"))
    assert pattern.match("a") and pattern.match("bx")
    assert not pattern.match("ab")


def test_backfills_and_streams_get_the_same_member() -> None:
    s = classic_config(stream(assignor="cooperative-sticky,range", leaderSyncDelayMs="40"))
    b = classic_config(batch(assignor="cooperative-sticky,range", leaderSyncDelayMs="40"))
    assert (s.pattern, s.topics, s.group_id, s.leader_sync_delay_ms) == (b.pattern, b.topics, b.group_id, b.leader_sync_delay_ms)
    assert [a.name for a in s.assignors] == [a.name for a in b.assignors] == ["cooperative-sticky", "range"]


def test_a_backfills_own_leader_sync_delay_wins_over_the_option() -> None:
    assert classic_config(batch(leaderSyncDelayMs="40"), leader_sync_delay_ms=300).leader_sync_delay_ms == 300
    assert classic_config(batch(leaderSyncDelayMs="40")).leader_sync_delay_ms == 40


def test_topics_pass_as_named() -> None:
    opts = parse_stream_options({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "subscribe": "a,b"})
    cfg = classic_config(opts)
    assert cfg.topics == ("a", "b") and cfg.pattern is None


def test_the_protocol_option_chooses_the_member() -> None:
    classic = build_membership(stream())
    consumer = build_membership(stream(**{"kafka.group.protocol": "consumer"}))
    try:
        assert isinstance(classic, GroupMembership)
        assert type(consumer).__name__ == "ConsumerProtocolMembership"
        assert consumer.config.pattern == "orders"  # librdkafka anchors it: ^(orders)$
    finally:
        classic.close()
        consumer.close()
