"""``kafka.group.protocol=consumer`` (issue #12): what is accepted, what is refused and why,
and what the KIP-848 member is configured with."""

from __future__ import annotations

import pytest

from spark_groupsource.config import fetcher_config, parse_batch_options, parse_stream_options
from spark_groupsource.errors import OptionError
from spark_groupsource.group.consumer_member import consumer_membership, parse_group_metadata

BASE = {"kafka.bootstrap.servers": "h1:9092", "kafka.group.id": "g", "subscribe": "a,b",
        "kafka.group.protocol": "consumer"}


def stream(**extra: str):
    return parse_stream_options({**BASE, **{k.lower(): v for k, v in extra.items()}})


def refused(**extra: str) -> OptionError:
    with pytest.raises(OptionError) as info:
        stream(**extra)
    return info.value


def test_consumer_protocol_defaults_to_the_brokers_assignor() -> None:
    opts = stream()
    assert opts.group_protocol == "consumer" and opts.remote_assignor is None and opts.assignors == ()


@pytest.mark.parametrize("name", ["uniform", "range", "RANGE"])
def test_remote_assignor(name: str) -> None:
    assert stream(**{"kafka.group.remote.assignor": name}).remote_assignor == name.lower()


def test_unknown_remote_assignor() -> None:
    e = refused(**{"kafka.group.remote.assignor": "cooperative-sticky"})
    assert e.option == "kafka.group.remote.assignor" and "uniform, range" in str(e)


@pytest.mark.parametrize(("option", "why"), [
    ("assignor", "kafka.group.remote.assignor"),
    ("kafka.session.timeout.ms", "group.consumer.session.timeout.ms"),
    ("kafka.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms"),
    ("leaderSyncDelayMs", "no group leader"),
    ("followupJoinDelayMs", "no JoinGroup"),
    ("redundant.replicas", "assignor settings"),
    ("range.unused", "assignor settings"),
])
def test_options_that_do_not_apply_are_refused_with_the_reason(option: str, why: str) -> None:
    e = refused(**{option: "2"})
    assert e.option.lower() == option.lower()
    assert "kafka.group.protocol=consumer" in str(e) and why in str(e)


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(OptionError) as info:
        parse_stream_options({**BASE, "kafka.group.protocol": "classic", "kafka.group.remote.assignor": "range"})
    assert info.value.option == "kafka.group.remote.assignor" and "kafka.group.protocol=consumer" in str(info.value)


def test_coordinated_backfill_accepts_the_consumer_protocol() -> None:
    opts = parse_batch_options({**BASE, "groupcoordinated": "true", "commitoffsets": "true"})
    assert opts.group_protocol == "consumer" and opts.group_coordinated


def test_member_configuration_from_options() -> None:
    opts = stream(**{"kafka.group.remote.assignor": "range", "kafka.group.instance.id": "driver-1",
                     "kafka.client.rack": "r1", "kafka.max.poll.interval.ms": "60000",
                     "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                     "kafka.sasl.username": "u", "kafka.sasl.password": "s3cret"})
    m = consumer_membership(opts)
    cfg = m.config
    assert cfg.topics == ("a", "b") and cfg.pattern is None
    assert (cfg.remote_assignor, cfg.group_instance_id, cfg.client_rack) == ("range", "driver-1", "r1")
    assert cfg.rebalance_timeout_ms == 60000
    assert m.drain_timeout_s <= 60.0  # a revocation must be acknowledged within the rebalance timeout
    assert cfg.client_config["security.protocol"] == "SASL_SSL"
    assert cfg.client_config["sasl.password"] == "s3cret"  # rendered by security.py, as for fetchers
    assert "group.protocol" not in cfg.client_config and "group.instance.id" not in cfg.client_config
    assert "s3cret" not in repr(cfg)
    # the executors' fetchers never see the member's protocol settings
    fetch = fetcher_config(opts)
    assert "group.protocol" not in fetch and "group.remote.assignor" not in fetch


def test_pattern_subscription_configuration() -> None:
    opts = parse_stream_options({k: v for k, v in BASE.items() if k != "subscribe"} | {"subscribepattern": "ev-.*"})
    assert consumer_membership(opts).config.pattern == "ev-.*"


def test_group_metadata_parsing() -> None:
    import sys
    raw = b"CGMDv2:" + (7).to_bytes(4, sys.byteorder) + b"g\0member-x\0\x01"
    assert parse_group_metadata(raw) == (7, "member-x")
    assert parse_group_metadata(b"other") is None
