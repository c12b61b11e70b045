"""The option contract: defaults, valid forms, every error, passthrough, translation, secrets."""

from __future__ import annotations

import pickle

import pytest
from kafka import KafkaConsumer

from spark_groupsource.config import (
    MEMBERSHIP_TRANSLATIONS,
    BatchOptions,
    EarliestOffsets,
    GroupOffsets,
    KafkaParams,
    LatestOffsets,
    Position,
    SpecificOffsets,
    StreamOptions,
    SubscribePattern,
    SubscribeTopics,
    TimestampOffsets,
    fetcher_config,
    heartbeat_interval_ms,
    is_secret,
    membership_config,
    parse_batch_options,
    parse_stream_options,
    parse_time_ms,
    redacted,
    validate_definition,
)
from spark_groupsource.errors import OptionError

BASE = {
    "kafka.bootstrap.servers": "h1:9092,h2:9092",
    "kafka.group.id": "g",
    "subscribe": "a",
}
SECRET = "hunter2-s3cret-value"


def stream(**extra: str) -> StreamOptions:
    return parse_stream_options({**BASE, **{k.lower(): v for k, v in extra.items()}})


def batch(**extra: str) -> BatchOptions:
    return parse_batch_options({**BASE, **{k.lower(): v for k, v in extra.items()}})


def stream_error(options: dict[str, str]) -> OptionError:
    with pytest.raises(OptionError) as info:
        parse_stream_options({k.lower(): v for k, v in options.items()})
    return info.value


def batch_error(options: dict[str, str]) -> OptionError:
    with pytest.raises(OptionError) as info:
        parse_batch_options({k.lower(): v for k, v in options.items()})
    return info.value


def error(**extra: str) -> OptionError:
    return stream_error({**BASE, **extra})


# ------------------------------------------------------------------ defaults


def test_stream_defaults() -> None:
    o = stream()
    assert o.bootstrap_servers == "h1:9092,h2:9092"
    assert o.group_id == "g"
    assert o.subscription == SubscribeTopics(("a",))
    assert o.assignors == ("range",)
    assert o.starting == GroupOffsets("latest")
    assert o.auto_offset_reset == "latest"
    assert (o.include_headers, o.fail_on_data_loss, o.commit_offsets) == (False, True, True)
    assert o.isolation_level == "read_uncommitted"
    assert o.max_offsets_per_trigger is None
    assert o.min_partitions is None and o.max_records_per_partition is None
    assert o.max_records_per_arrow_batch == 10_000
    assert o.max_bytes_per_arrow_batch == 4 * 1024 * 1024
    assert o.poll_timeout_ms == 120_000
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (3, 1000)
    assert o.group_instance_id is None and o.client_rack is None
    assert o.session_timeout_ms is None and o.heartbeat_interval_ms is None
    assert o.max_poll_interval_ms is None
    assert dict(o.kafka_params) == {"bootstrap.servers": "h1:9092,h2:9092", "group.id": "g"}


def test_batch_defaults() -> None:
    o = batch()
    assert o.starting == EarliestOffsets()
    assert o.ending == LatestOffsets()
    assert o.group_coordinated is False
    assert o.commit_offsets is False


SASL = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u"}


def test_options_are_frozen_and_picklable() -> None:
    o = stream(**SASL, **{"kafka.sasl.password": SECRET})
    with pytest.raises(AttributeError):
        o.group_id = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(o)) == o
    assert hash(o) == hash(pickle.loads(pickle.dumps(o)))


# ------------------------------------------------------------------ required and subscription


@pytest.mark.parametrize("missing", ["kafka.bootstrap.servers", "kafka.group.id"])
def test_required(missing: str) -> None:
    opts = dict(BASE)
    del opts[missing]
    e = stream_error(opts)
    assert e.option == missing and "required" in str(e)


def test_batch_group_id_only_needed_when_joining_or_reading_group_offsets() -> None:
    opts = {k: v for k, v in BASE.items() if k != "kafka.group.id"}
    assert parse_batch_options(opts).group_id is None
    with pytest.raises(OptionError, match="kafka.group.id"):
        parse_batch_options({**opts, "groupcoordinated": "true"})
    with pytest.raises(OptionError, match="kafka.group.id"):
        parse_batch_options({**opts, "startingoffsets": "group"})


def test_subscribe_list_is_trimmed_and_deduplicated() -> None:
    o = stream(subscribe=" a , b.c,d_e-f ,a")
    assert o.subscription == SubscribeTopics(("a", "b.c", "d_e-f"))
    assert o.subscription.matches("b.c") and not o.subscription.matches("x")


@pytest.mark.parametrize("value", ["", "a,,b", "a,", "bad topic", "x" * 250, "..", "a/b"])
def test_subscribe_invalid(value: str) -> None:
    e = error(subscribe=value)
    assert e.option == "subscribe"
    assert "[a-zA-Z0-9._-]" in str(e)


def test_subscribe_pattern() -> None:
    opts = {k: v for k, v in BASE.items() if k != "subscribe"}
    o = parse_stream_options({**opts, "subscribepattern": r"orders\..*"})
    assert o.subscription == SubscribePattern(r"orders\..*")
    assert o.subscription.matches("orders.eu")
    assert not o.subscription.matches("xorders.eu")  # whole-name match, as Java's matches()


def test_subscribe_pattern_invalid() -> None:
    opts = {k: v for k, v in BASE.items() if k != "subscribe"}
    e = stream_error({**opts, "subscribePattern": "orders[("})
    assert e.option == "subscribePattern" and "regular expression" in str(e)


def test_exactly_one_subscription() -> None:
    e = error(subscribePattern="a.*")
    assert e.option == "subscribe" and "exactly one" in str(e) and "both" in str(e)
    e = stream_error({k: v for k, v in BASE.items() if k != "subscribe"})
    assert "exactly one" in str(e) and "none" in str(e)


# ------------------------------------------------------------------ assignors


def test_assignor_list_and_assignor_settings() -> None:
    o = stream(assignor="redundant, range", **{"redundant.replicas": "3"})
    assert o.assignors == ("redundant", "range")
    assert o.assignor_options["redundant.replicas"] == "3"
    assert "kafka.group.id" not in o.assignor_options


@pytest.mark.parametrize("value", ["", "range,", ",range", "range,,sticky"])
def test_assignor_malformed(value: str) -> None:
    e = error(assignor=value)
    assert e.option == "assignor" and "comma-separated" in str(e)


def test_assignor_unknown_names_the_built_ins() -> None:
    e = error(assignor="nope")
    assert e.option == "assignor" and "nope" in str(e) and "cooperative-sticky" in str(e)


def test_assignor_listed_twice() -> None:
    assert error(assignor="range,range").option == "assignor"


def test_assignor_setting_is_validated_by_the_assignor() -> None:
    e = error(assignor="redundant", **{"redundant.replicas": "many"})
    assert e.option == "redundant.replicas" and "'many'" in str(e)


def test_assignor_setting_of_an_unconfigured_assignor_is_unknown() -> None:
    e = error(**{"redundant.replicas": "3"})
    assert e.option == "redundant.replicas" and "unknown option" in str(e)


# ------------------------------------------------------------------ starting / ending offsets


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("group", GroupOffsets("latest")),
        ("GROUP", GroupOffsets("latest")),
        ("earliest", EarliestOffsets()),
        ("latest", LatestOffsets()),
        (
            '{"b":{"1":-1,"0":23},"a":{"0":-2}}',
            SpecificOffsets(
                (("a", 0, Position.EARLIEST), ("b", 0, 23), ("b", 1, Position.LATEST))
            ),
        ),
    ],
)
def test_starting_offsets(value: str, expected: object) -> None:
    assert stream(startingOffsets=value).starting == expected


def test_specific_offsets_lookup() -> None:
    s = stream(startingOffsets='{"a":{"0":23,"1":-1}}').starting
    assert isinstance(s, SpecificOffsets)
    assert s.get("a", 0) == 23 and s.get("a", 1) is Position.LATEST and s.get("a", 2) is None
    assert s.as_dict() == {("a", 0): 23, ("a", 1): Position.LATEST}


@pytest.mark.parametrize(
    "value",
    ["first", "{", "[]", "{}", '{"a":{}}', '{"a":{"x":1}}', '{"a":{"-1":1}}', '{"a":{"0":-3}}',
     '{"a":{"0":"1"}}', '{"a":{"0":1.5}}', '{"a":{"0":true}}', '{"a b":{"0":1}}', '{"a":[1]}'],
)
def test_starting_offsets_invalid(value: str) -> None:
    e = error(startingOffsets=value)
    assert e.option == "startingOffsets"
    assert 'expected group, earliest, latest, or JSON, e.g. {"topicA":{"0":23,"1":-1}}' in str(e)
    assert f"got {value}" in str(e)


def test_group_offsets_carry_auto_offset_reset() -> None:
    o = stream(**{"kafka.auto.offset.reset": "earliest"})
    assert o.starting == GroupOffsets("earliest") and o.auto_offset_reset == "earliest"
    assert stream(**{"kafka.auto.offset.reset": "NONE"}).starting == GroupOffsets("none")


@pytest.mark.parametrize("value", ["smallest", "largest", "error", ""])
def test_auto_offset_reset_invalid(value: str) -> None:
    e = error(**{"kafka.auto.offset.reset": value})
    assert e.option == "kafka.auto.offset.reset"
    assert "latest, earliest, none" in str(e)


def test_timestamps_take_precedence_as_in_spark() -> None:
    o = stream(
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"a":{"0":1000}}',
        startingTimestamp="5000",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert o.starting == TimestampOffsets(timestamp=5000, strategy="latest")
    assert o.starting.timestamp_for("a", 7) == 5000
    o = stream(startingOffsets="earliest", startingOffsetsByTimestamp='{"a":{"0":1000,"1":2000}}')
    assert o.starting == TimestampOffsets(timestamps=(("a", 0, 1000), ("a", 1, 2000)))
    assert o.starting.timestamp_for("a", 1) == 2000 and o.starting.timestamp_for("a", 2) is None


def test_timestamp_options_invalid() -> None:
    assert error(startingTimestamp="-1").option == "startingTimestamp"
    assert error(startingTimestamp="soon").option == "startingTimestamp"
    e = error(startingOffsetsByTimestamp='{"a":{"0":-1}}')
    assert e.option == "startingOffsetsByTimestamp" and "1700000000000" in str(e)
    e = error(startingOffsetsByTimestampStrategy="skip")
    assert e.option == "startingOffsetsByTimestampStrategy" and "error, latest" in str(e)


def test_batch_starting_and_ending() -> None:
    o = batch(startingOffsets="group", endingOffsets='{"a":{"0":50,"1":-1}}')
    assert o.starting == GroupOffsets("latest")
    assert o.ending == SpecificOffsets((("a", 0, 50), ("a", 1, Position.LATEST)))
    assert batch(endingOffsets="LATEST").ending == LatestOffsets()
    assert batch(endingTimestamp="9", endingOffsets="latest").ending == TimestampOffsets(
        timestamp=9, strategy="latest"
    )
    assert batch(endingOffsetsByTimestamp='{"a":{"0":9}}').ending == TimestampOffsets(
        timestamps=(("a", 0, 9),), strategy="latest"
    )


def test_batch_invalid_positions() -> None:
    with pytest.raises(OptionError, match="startingOffsets.*'latest' is not valid for a batch"):
        batch(startingOffsets="latest")
    with pytest.raises(OptionError, match="endingOffsets.*expected latest or JSON"):
        batch(endingOffsets="earliest")
    with pytest.raises(OptionError, match="endingOffsets"):
        batch(endingOffsets='{"a":{"0":-2}}')


def test_batch_and_stream_only_options() -> None:
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp", "groupCoordinated"):
        e = error(**{name: "1"})
        assert e.option == name and "batch queries" in str(e)
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        with pytest.raises(OptionError, match=f"{name}.*streaming queries"):
            batch(**{name: "10"})


def test_batch_group_coordination_and_commit() -> None:
    o = batch(groupCoordinated="true", commitOffsets="true")
    assert o.group_coordinated and o.commit_offsets
    with pytest.raises(OptionError, match="commitOffsets.*groupCoordinated=true"):
        batch(commitOffsets="true")
    assert batch(groupCoordinated="TRUE", minPartitions="4").min_partitions == 4


def test_max_partitions_below_min_partitions_is_refused() -> None:
    assert stream().max_partitions is None
    assert stream().small_ranges_per_task == batch().small_ranges_per_task == 16
    o = stream(minPartitions="2", maxPartitions="2")
    assert (o.min_partitions, o.max_partitions) == (2, 2)
    e = error(minPartitions="3", maxPartitions="2")
    assert e.option == "maxPartitions" and "lower than minPartitions (3)" in str(e)
    assert "Raise maxPartitions or lower minPartitions" in str(e)
    with pytest.raises(OptionError, match="maxPartitions"):
        batch(minPartitions="5", maxPartitions="4")


# ------------------------------------------------------------------ scalars


@pytest.mark.parametrize(
    ("name", "attr", "default"),
    [("includeHeaders", "include_headers", False), ("failOnDataLoss", "fail_on_data_loss", True),
     ("commitOffsets", "commit_offsets", True)],
)
def test_booleans(name: str, attr: str, default: bool) -> None:
    assert getattr(stream(), attr) is default
    assert getattr(stream(**{name: "TRUE"}), attr) is True
    assert getattr(stream(**{name: "False"}), attr) is False
    for bad in ("yes", "1", "", "t"):
        e = error(**{name: bad})
        assert e.option == name and "expected true or false" in str(e) and repr(bad) in str(e)


@pytest.mark.parametrize(
    ("name", "attr", "minimum"),
    [
        ("maxOffsetsPerTrigger", "max_offsets_per_trigger", 1),
        ("minOffsetsPerTrigger", "min_offsets_per_trigger", 1),
        ("minPartitions", "min_partitions", 1),
        ("maxRecordsPerPartition", "max_records_per_partition", 1),
        ("maxPartitions", "max_partitions", 1),
        ("smallRangesPerTask", "small_ranges_per_task", 1),
        ("maxRecordsPerArrowBatch", "max_records_per_arrow_batch", 1),
        ("maxBytesPerArrowBatch", "max_bytes_per_arrow_batch", 1),
        ("kafkaConsumer.pollTimeoutMs", "poll_timeout_ms", 1),
        ("fetchOffset.numRetries", "fetch_offset_num_retries", 0),
        ("fetchOffset.retryIntervalMs", "fetch_offset_retry_interval_ms", 0),
        ("kafka.session.timeout.ms", "session_timeout_ms", 1),
        ("kafka.heartbeat.interval.ms", "heartbeat_interval_ms", 1),
        ("kafka.max.poll.interval.ms", "max_poll_interval_ms", 1),
        ("leaderSyncDelayMs", "leader_sync_delay_ms", 0),
        ("followupJoinDelayMs", "followup_join_delay_ms", 0),
    ],
)
def test_integers(name: str, attr: str, minimum: int) -> None:
    assert getattr(stream(**{name: " 1234 "}), attr) == 1234
    assert getattr(stream(**{name: str(minimum)}), attr) == minimum
    for bad in (str(minimum - 1), "ten", "1.5", ""):
        e = error(**{name: bad})
        assert e.option == name
        want = "a positive integer" if minimum == 1 else "an integer >= 0"
        assert f"expected {want}, got {bad!r}" in str(e)


def test_heartbeat_must_be_below_session_timeout() -> None:
    e = error(**{"kafka.session.timeout.ms": "6000", "kafka.heartbeat.interval.ms": "6000"})
    assert e.option == "kafka.heartbeat.interval.ms" and "6000" in str(e)


def test_membership_strings() -> None:
    o = stream(**{"kafka.group.instance.id": "spark-1", "kafka.client.rack": "eu-1a"})
    assert (o.group_instance_id, o.client_rack) == ("spark-1", "eu-1a")
    assert error(**{"kafka.group.instance.id": " "}).option == "kafka.group.instance.id"


def test_isolation_level() -> None:
    assert stream(**{"kafka.isolation.level": "read_committed"}).isolation_level == "read_committed"
    e = error(**{"kafka.isolation.level": "serializable"})
    assert e.option == "kafka.isolation.level" and "read_uncommitted, read_committed" in str(e)


def test_fetcher_choice() -> None:
    assert stream().fetcher == "auto"
    assert stream(fetcher="python").fetcher == "python"
    assert stream(fetcher="native").fetcher == "native"
    e = error(fetcher="fast")
    assert e.option == "fetcher" and "auto, native, python" in str(e)


def test_worker_gc_freeze() -> None:
    assert stream().worker_gc_freeze is True
    assert stream(workerGcFreeze="false").worker_gc_freeze is False
    assert error(workerGcFreeze="sometimes").option == "workerGcFreeze"


def test_worker_tcp_no_delay() -> None:
    assert stream().worker_tcp_no_delay is True
    assert stream(workerTcpNoDelay="false").worker_tcp_no_delay is False
    assert error(workerTcpNoDelay="maybe").option == "workerTcpNoDelay"


def test_option_keys_are_case_insensitive() -> None:
    o = parse_stream_options({**BASE, "INCLUDEHEADERS": "true", "maxOffsetsPerTrigger": "5"})
    assert o.include_headers and o.max_offsets_per_trigger == 5


# ------------------------------------------------------------------ refused and unknown


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("kafka.enable.auto.commit", "commitOffsets"),
        ("kafka.auto.commit.interval.ms", "commitOffsets"),
        ("kafka.enable.auto.offset.store", "commitOffsets"),
        ("kafka.partition.assignment.strategy", "use assignor"),
        ("kafka.key.deserializer", "binary"),
        ("kafka.value.deserializer", "binary"),
        ("kafka.enable.partition.eof", "fetchers"),
        ("assign", "subscribe or subscribePattern"),
        ("groupIdPrefix", "kafka.group.id"),
    ],
)
def test_controlled_options_are_refused(name: str, hint: str) -> None:
    e = error(**{name: "x"})
    assert e.option == name and "set by the source" in str(e) and hint in str(e)


@pytest.mark.parametrize("value", ["true", "TRUE", " True ", "yes", ""])
def test_topic_creation_is_refused(value: str) -> None:
    """A reader never creates topics (issue 52): every client sets allow.auto.create.topics=false,
    and a user who asks for true is told so, in both modes and at load()."""
    for parse in (stream_error, batch_error):
        e = parse({**BASE, "kafka.allow.auto.create.topics": value})
        assert e.option == "kafka.allow.auto.create.topics"
        assert "a reader never creates topics" in str(e) and "auto.create.topics.enable" in str(e)
    with pytest.raises(OptionError, match="a reader never creates topics"):
        validate_definition({**BASE, "kafka.allow.auto.create.topics": value})


def test_topic_creation_off_is_accepted_and_set_on_every_client() -> None:
    from spark_groupsource.config import admin_config

    for o in (stream(), stream(**{"kafka.allow.auto.create.topics": "false"}), batch()):
        fetch = fetcher_config(o)
        assert fetch["allow.auto.create.topics"] is False  # executors' fetchers, offset reader's probe
        assert admin_config(fetch)["allow.auto.create.topics"] is False  # offset reader, handover watch
        assert membership_config(o)["allow_auto_create_topics"] is False  # the classic member


def test_admin_config_never_allows_topic_creation() -> None:
    from confluent_kafka.admin import AdminClient

    from spark_groupsource.config import admin_config

    # an AdminClient is a producer-type librdkafka handle: its default is true
    conf = admin_config({"bootstrap.servers": "127.0.0.1:1", "allow.auto.create.topics": True})
    assert conf["allow.auto.create.topics"] is False
    AdminClient({**conf, "log_level": 0})  # librdkafka accepts the property on an admin handle


def test_group_protocol_classic_or_consumer() -> None:
    assert stream(**{"kafka.group.protocol": "CLASSIC"}).group_protocol == "classic"
    assert stream(**{"kafka.group.protocol": "consumer"}).group_protocol == "consumer"  # issue #12
    e = error(**{"kafka.group.protocol": "eager"})
    assert e.option == "kafka.group.protocol" and "classic, consumer" in str(e)


def test_unknown_option_lists_accepted_ones() -> None:
    e = error(startingOffset="earliest")
    assert e.option == "startingoffset" and "unknown option" in str(e)
    for name in ("startingOffsets", "subscribePattern", "maxOffsetsPerTrigger", "kafka.<client property>"):
        assert name in str(e)
    assert "endingOffsets" not in str(e)  # batch-only, not offered to a stream


# ------------------------------------------------------------------ client configs


def test_kafka_options_pass_through() -> None:
    o = stream(**SASL, **{"kafka.sasl.password": SECRET, "kafka.fetch.max.bytes": "1000"})
    assert o.kafka_params["fetch.max.bytes"] == "1000"
    # security settings are parsed once into o.security, not passed through as given
    assert "security.protocol" not in o.kafka_params and "sasl.password" not in o.kafka_params
    assert (o.security.protocol, o.security.username, o.security.password) == ("SASL_SSL", "u", SECRET)


def test_fetcher_config() -> None:
    o = stream(
        **{
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": "u",
            "kafka.sasl.password": SECRET,
            "kafka.isolation.level": "read_committed",
            "kafka.client.rack": "r1",
            "kafka.group.instance.id": "i1",
            "kafka.session.timeout.ms": "6000",
            "kafka.auto.offset.reset": "earliest",
        }
    )
    c = fetcher_config(o)
    assert c["bootstrap.servers"] == "h1:9092,h2:9092"
    assert c["group.id"] == "g"
    assert c["enable.auto.commit"] is False and c["enable.auto.offset.store"] is False
    assert c["enable.partition.eof"] is True
    assert c["auto.offset.reset"] == "error"
    assert c["isolation.level"] == "read_committed"
    assert c["sasl.password"] == SECRET and c["security.protocol"] == "SASL_SSL"
    assert c["client.rack"] == "r1"  # follower fetching
    for member_only in ("group.instance.id", "session.timeout.ms"):
        assert member_only not in c
    assert fetcher_config(stream())["isolation.level"] == "read_uncommitted"


def test_fetcher_config_fetches_again_soon_unless_told_otherwise() -> None:
    # librdkafka's 1,000 ms pause once its queue holds queued.min.messages stalled long ranges
    assert fetcher_config(stream())["fetch.queue.backoff.ms"] == 10
    assert fetcher_config(stream(**{"kafka.fetch.queue.backoff.ms": "1000"}))["fetch.queue.backoff.ms"] == "1000"


def test_fetcher_config_bounds_the_prefetch_unless_told_otherwise() -> None:
    # librdkafka's 64 MiB / 100,000 records ahead were decoded and thrown away at range ends
    assert fetcher_config(stream())["queued.max.messages.kbytes"] == 4096
    told = stream(**{"kafka.queued.max.messages.kbytes": "65536"})
    assert fetcher_config(told)["queued.max.messages.kbytes"] == "65536"
    assert fetcher_config(stream())["queued.min.messages"] == 20_000
    told = stream(**{"kafka.queued.min.messages": "100000"})
    assert fetcher_config(told)["queued.min.messages"] == "100000"


def test_fetcher_config_is_accepted_by_confluent_kafka() -> None:
    from confluent_kafka import Consumer

    Consumer(fetcher_config(stream(**{"kafka.bootstrap.servers": "127.0.0.1:1"}))).close()
    batch_opts = parse_batch_options({k: v for k, v in BASE.items() if k != "kafka.group.id"})
    assert fetcher_config(batch_opts)["group.id"]


def test_membership_config_translation() -> None:
    o = stream(
        **{
            "kafka.client.id": "cid",
            "kafka.security.protocol": "sasl_plaintext",
            "kafka.sasl.mechanisms": "scram-sha-512",
            "kafka.sasl.username": "u",
            "kafka.sasl.password": SECRET,
            "kafka.session.timeout.ms": "6000",
            "kafka.heartbeat.interval.ms": "1000",
            "kafka.max.poll.interval.ms": "60000",
            "kafka.request.timeout.ms": "30000",
            "kafka.retry.backoff.ms": "50",
            "kafka.metadata.max.age.ms": "1000",
            "kafka.connections.max.idle.ms": "5000",
            "kafka.reconnect.backoff.ms": "20",
            "kafka.group.instance.id": "i1",
            "kafka.client.rack": "r1",
            "kafka.queued.min.messages": "5",  # librdkafka-only: not passed
            "kafka.api.version.request": "true",  # no kafka-python equivalent
        }
    )
    m = membership_config(o)
    assert m == {
        "bootstrap_servers": ["h1:9092", "h2:9092"],
        "client_id": "cid",
        "group_id": "g",
        "group_instance_id": "i1",
        "client_rack": "r1",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": SECRET,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
        "max_poll_interval_ms": 60000,
        "request_timeout_ms": 30000,
        "retry_backoff_ms": 50,
        "metadata_max_age_ms": 1000,
        "connections_max_idle_ms": 5000,
        "reconnect_backoff_ms": 20,
        "allow_auto_create_topics": False,  # issue 52: never creates a topic
    }


def test_translation_table_targets_exist_in_kafka_python() -> None:
    known = set(KafkaConsumer.DEFAULT_CONFIG)
    assert {kw for kw, _ in MEMBERSHIP_TRANSLATIONS.values()} <= known


def test_membership_config_bad_integer() -> None:
    o = stream(**{"kafka.request.timeout.ms": "soon"})
    with pytest.raises(OptionError, match="kafka.request.timeout.ms.*'soon'"):
        membership_config(o)


# ------------------------------------------------------------------ secrets


@pytest.mark.parametrize(
    "key",
    ["sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
     "sasl.oauthbearer.client.secret", "sasl.jaas.config", "kafka.sasl.password",
     "sasl_plain_password", "ssl_password", "ssl.key.pem", "my.api.secret.key"],
)
def test_is_secret(key: str) -> None:
    assert is_secret(key)


@pytest.mark.parametrize("key", ["bootstrap.servers", "sasl.username", "ssl.key.location", "group.id"])
def test_is_not_secret(key: str) -> None:
    assert not is_secret(key)


def test_redacted() -> None:
    cfg = {"sasl.password": SECRET, "sasl.username": "u", "sasl_plain_password": SECRET}
    assert redacted(cfg) == {"sasl.password": "***", "sasl.username": "u", "sasl_plain_password": "***"}
    assert cfg["sasl.password"] == SECRET  # a copy


SECRETS = {
    "kafka.security.protocol": "SASL_PLAINTEXT",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
    f'username="u" password="{SECRET}5";',
}


def test_repr_and_str_never_show_secrets() -> None:
    for o in (stream(**SECRETS), batch(**SECRETS)):
        for text in (repr(o), str(o), repr(o.kafka_params), str(o.kafka_params), repr(o.security),
                     o.security.describe()):
            assert SECRET not in text and "PlainLoginModule" not in text
        assert o.security.password == SECRET + "5"


def test_errors_never_show_secrets() -> None:
    cases = [
        {"includeHeaders": "maybe"},
        {"unknownOption": "x"},
        {"kafka.enable.auto.commit": "true"},
        {"startingOffsets": "{bad"},
        {"assignor": "nope"},
        {"kafka.heartbeat.interval.ms": "soon"},
    ]
    for extra in cases:
        e = error(**SECRETS, **extra)
        assert SECRET not in str(e) and SECRET not in repr(e.args)


def test_assignor_settings_that_look_secret_are_redacted_too() -> None:
    o = stream(assignor="redundant", **{"redundant.api.secret": SECRET})
    assert o.assignor_options["redundant.api.secret"] == SECRET
    assert SECRET not in repr(o)


def test_kafka_params_is_a_read_only_mapping_with_a_safe_repr() -> None:
    p = KafkaParams({"sasl.password": SECRET, "client.id": "c"})
    assert dict(p) == {"sasl.password": SECRET, "client.id": "c"} and len(p) == 2
    assert p == {"sasl.password": SECRET, "client.id": "c"}
    assert SECRET not in repr(p) and "'client.id': 'c'" in repr(p)
    assert pickle.loads(pickle.dumps(p)) == p
    with pytest.raises(TypeError):
        p["x"] = "y"  # type: ignore[index]


# ------------------------------------------------------------------ minOffsetsPerTrigger / maxTriggerDelay


def test_min_offsets_and_trigger_delay_defaults_as_spark() -> None:
    o = stream()
    assert o.min_offsets_per_trigger is None and o.max_offsets_per_trigger is None
    assert o.max_trigger_delay_ms == 15 * 60 * 1000  # Spark's DEFAULT_MAX_TRIGGER_DELAY, 15m
    o = stream(minOffsetsPerTrigger="100", maxTriggerDelay="30s", maxOffsetsPerTrigger="100")
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms, o.max_offsets_per_trigger) == (100, 30_000, 100)


def test_min_above_max_offsets_is_spark_error() -> None:
    e = error(minOffsetsPerTrigger="11", maxOffsetsPerTrigger="10")
    assert e.option == "minOffsetsPerTrigger"
    assert "The value of minOffsetPerTrigger(11) is higher than the maxOffsetsPerTrigger(10)." in str(e)


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("10s", 10_000), ("500ms", 500), ("250", 250), ("2min", 120_000),
     ("1h", 3_600_000), ("1d", 86_400_000), ("1500us", 1), (" 5S ", 5_000), ("0s", 0)],
)
def test_time_strings_as_spark(text: str, ms: int) -> None:
    assert parse_time_ms(text, option="maxTriggerDelay") == ms
    assert stream(maxTriggerDelay=text).max_trigger_delay_ms == ms


@pytest.mark.parametrize("bad", ["", "soon", "-5s", "5 parsecs", "1.5s", "s"])
def test_bad_trigger_delay(bad: str) -> None:
    e = error(maxTriggerDelay=bad)
    assert e.option == "maxTriggerDelay" and "E.g. 50s, 100ms, or 250us" in str(e)


# ------------------------------------------------------------------ checked at load()


def test_unknown_option_suggests_the_closest_name() -> None:
    e = error(startingOffset="earliest")
    assert e.option == "startingoffset" and "did you mean startingOffsets?" in str(e)
    assert "did you mean maxOffsetsPerTrigger?" in str(error(maxOffsetPerTrigger="5"))
    assert "did you mean" not in str(error(colour="blue"))
    e = stream_error({"kafka.bootstrap.server": "h:1", "kafka.group.id": "g", "subscribe": "a"})
    assert e.option == "kafka.bootstrap.servers" and "kafka.bootstrap.server?" in str(e)


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        ({"startingOffset": "earliest"}, "startingoffset"),
        ({"assignor": "nope"}, "assignor"),
        ({"startingOffsets": '{"a":{"0":'}, "startingOffsets"),
        ({"maxOffsetsPerTrigger": "-1"}, "maxOffsetsPerTrigger"),
        ({"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "3"}, "minOffsetsPerTrigger"),
        ({"endingOffsets": "soon"}, "endingOffsets"),  # batch-only option: the batch error
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),  # stream-only option: the stream error
    ],
)
def test_validate_definition_rejects_what_no_mode_accepts(extra: dict[str, str], option: str) -> None:
    with pytest.raises(OptionError) as info:
        validate_definition({**BASE, **{k.lower(): v for k, v in extra.items()}})
    assert info.value.option == option


@pytest.mark.parametrize(
    "extra",
    [
        {"endingOffsets": "latest"},  # batch only: fails when the stream reader is made
        {"maxOffsetsPerTrigger": "10"},  # stream only
        {"startingOffsets": "latest"},  # stream only
        {"commitOffsets": "true"},  # a stream commits; a batch needs groupCoordinated too
    ],
)
def test_validate_definition_accepts_what_one_mode_accepts(extra: dict[str, str]) -> None:
    validate_definition({**BASE, **{k.lower(): v for k, v in extra.items()}})
    no_group = {k: v for k, v in BASE.items() if k != "kafka.group.id"}
    validate_definition({**no_group, "startingoffsets": "earliest"})  # batch without a group


def test_validate_definition_without_a_group_reports_the_batch_error() -> None:
    """No kafka.group.id means spark.read (a stream always needs one): the user sees the batch
    mode's error, not "kafka.group.id is required"."""
    no_group = {k: v for k, v in BASE.items() if k != "kafka.group.id"}
    with pytest.raises(OptionError) as info:
        validate_definition({**no_group, "startingoffsets": "latest"})
    assert info.value.option == "startingOffsets" and "not valid for a batch" in str(info.value)


def test_the_default_heartbeat_is_a_third_of_the_session_within_100_ms_and_3_s() -> None:
    # Java's rule: one rule for the member that heartbeats and the bounds counted in heartbeats
    assert heartbeat_interval_ms(None) == 3_000  # session 45 s
    assert heartbeat_interval_ms(6_000) == 2_000
    assert heartbeat_interval_ms(10_000) == 3_000  # a third would be 3,333
    assert heartbeat_interval_ms(150) == 100
    assert heartbeat_interval_ms(6_000, 500) == 500  # heartbeat.interval.ms wins
