"""Raw option maps (keys lower-cased, as Spark passes them) into typed option objects, with
errors that name the option and say how to fix it."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from spark_groupsource.config.names import (
    BATCH_ONLY,
    CONTROLLED,
    DECODE_OPTIONS,
    DECODE_PREFIX,
    OPTION_NAMES,
    SPELLING,
    STREAM_ONLY,
    option_name,
)
from spark_groupsource.config.options import (
    DEFAULT_ASSIGNOR,
    DEFAULT_BROKER_OUTAGE_TIMEOUT_MS,
    DEFAULT_FETCH_OFFSET_NUM_RETRIES,
    DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS,
    DEFAULT_GROUP_JOIN_TIMEOUT_MS,
    DEFAULT_MAX_BYTES_PER_ARROW_BATCH,
    DEFAULT_MAX_RECORDS_PER_ARROW_BATCH,
    DEFAULT_MAX_TRIGGER_DELAY,
    DEFAULT_POLL_TIMEOUT_MS,
    DEFAULT_SMALL_RANGES_PER_TASK,
    BatchOptions,
    StreamOptions,
)
from spark_groupsource.config.secrets import KafkaParams, shown
from spark_groupsource.config.security import SECURITY_KEYS, parse_security
from spark_groupsource.config.specs import (
    EarliestOffsets,
    GroupOffsets,
    LatestOffsets,
    OffsetsSpec,
    Position,
    SpecificOffsets,
    SubscribePattern,
    SubscribeTopics,
    Subscription,
    TimestampOffsets,
)
from spark_groupsource.errors import OptionError

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Validate a streaming query's options (keys lower-cased, as Spark passes them)."""
    raw = _normalize(options)
    for key in sorted(BATCH_ONLY & raw.keys()):
        raise OptionError(option_name(key), "only applies to batch queries (spark.read)")
    common = _parse_common(raw, batch=False)
    return StreamOptions(**common, **_admission(raw))


def _admission(raw: Mapping[str, str]) -> dict[str, Any]:
    """maxOffsetsPerTrigger / minOffsetsPerTrigger / maxTriggerDelay, as Spark's Kafka source."""
    max_offsets = _int(raw, "maxoffsetspertrigger", None, minimum=1)
    min_offsets = _int(raw, "minoffsetspertrigger", None, minimum=1)
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        # Spark's message (KafkaSourceProvider.validateGeneralOptions), then how to fix it
        raise OptionError(
            "minOffsetsPerTrigger",
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger({max_offsets}). Lower minOffsetsPerTrigger or raise "
            "maxOffsetsPerTrigger.",
        )
    delay = raw.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY)
    return dict(
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=parse_time_ms(delay, option="maxTriggerDelay"),
        **_metrics(raw),
    )


def _metrics(raw: Mapping[str, str]) -> dict[str, Any]:
    """metrics.port (off unless given; 0: an ephemeral port) and the query label metrics.queryName."""
    port = _int(raw, "metrics.port", None, minimum=0)
    if port is not None and port > 65535:
        raise OptionError("metrics.port", f"expected a TCP port 0-65535 (0: any free port), got {port}")
    return dict(metrics_port=port, metrics_query_name=_optional_str(raw, "metrics.queryname"))


# Spark's time suffixes (JavaUtils.timeStringAs); no suffix means milliseconds.
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIME_RE = re.compile(r"([0-9]+)\s*([a-z]+)?")


def parse_time_ms(value: str, *, option: str) -> int:
    """A Spark time string (``15m``, ``10s``, ``500ms``, ``1h``; bare numbers are ms) in ms."""
    text = value.strip().lower()
    m = _TIME_RE.fullmatch(text)
    if m is None or (m.group(2) is not None and m.group(2) not in _TIME_UNITS_MS):
        raise OptionError(
            option,
            f"expected a duration >= 0, got {value!r}. Time must be specified as seconds (s), "
            "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). "
            "E.g. 50s, 100ms, or 250us.",
        )
    return int(int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"])


def validate_definition(options: Mapping[str, str]) -> None:
    """Check options when the DataFrame is defined (``load()``), before Spark knows the mode.

    A Python data source cannot tell ``spark.read`` from ``spark.readStream`` at ``load()``,
    so this accepts options valid for at least one of the two and raises when they are valid
    for neither (unknown or misspelt names, bad values, bad JSON, conflicting limits). What is
    wrong only in the other mode (``endingOffsets`` on a stream) fails when the reader is made.
    """
    try:
        parse_stream_options(options)
        return
    except OptionError as exc:
        stream_error = exc
    try:
        parse_batch_options(options)
        return
    except OptionError as exc:
        batch_error = exc
    raw = _normalize(options)
    # The error of the mode the options point to: a batch-only option means spark.read, and so
    # does a missing kafka.group.id (a stream always needs one; a plain batch read does not).
    batch_only = (BATCH_ONLY & raw.keys()) and not (STREAM_ONLY & raw.keys())
    if batch_only or (stream_error.option == "kafka.group.id" and "kafka.group.id" not in raw):
        raise batch_error.with_traceback(None) from None
    raise stream_error.with_traceback(None) from None


def parse_batch_options(options: Mapping[str, str]) -> BatchOptions:
    """Validate a batch query's options (keys lower-cased, as Spark passes them)."""
    raw = _normalize(options)
    for key in sorted(STREAM_ONLY & raw.keys()):
        raise OptionError(option_name(key), "only applies to streaming queries (spark.readStream)")
    common = _parse_common(raw, batch=True)
    coordinated = _bool(raw, "groupcoordinated", False)
    if common["commit_offsets"] and not coordinated:
        raise OptionError(
            "commitOffsets",
            "a batch query commits to the group only when it joins it; "
            "set groupCoordinated=true as well, or commitOffsets=false",
        )
    return BatchOptions(**common, ending=_ending(raw), group_coordinated=coordinated)


def _normalize(options: Mapping[str, str]) -> dict[str, str]:
    raw: dict[str, str] = {}
    for key, value in options.items():
        k = str(key).lower()
        raw[k] = "" if value is None else str(value)
    return raw


def _parse_common(raw: dict[str, str], *, batch: bool) -> dict[str, Any]:
    for key in sorted(CONTROLLED.keys() & raw.keys()):
        raise OptionError(option_name(key), f"is set by the source and cannot be given: {CONTROLLED[key]}")
    _refuse_topic_creation(raw)

    protocol, remote_assignor = _group_protocol(raw)
    if protocol == "consumer":
        assignors: tuple[str, ...] = ()
        assignor_options: dict[str, str] = {}
        _check_unknown(raw, (), batch=batch)
    else:
        assignors = _assignor_names(raw)
        assignor_options = {k: v for k, v in raw.items() if not k.startswith("kafka.")}
        wire_names = _validate_assignors(assignors, assignor_options)
        _check_unknown(raw, assignors + wire_names, batch=batch)

    kafka_params = {k[len("kafka."):]: v for k, v in raw.items() if k.startswith("kafka.")}
    security = parse_security(kafka_params)
    kafka_params = {k: v for k, v in kafka_params.items() if k not in SECURITY_KEYS and not _is_security(k)}
    bootstrap = _required(raw, "kafka.bootstrap.servers")
    group_coordinated = batch and _bool(raw, "groupcoordinated", False)
    group_id = raw.get("kafka.group.id", "").strip() or None
    reset = _choice(raw, "kafka.auto.offset.reset", ("latest", "earliest", "none"), "latest")
    starting = _starting(raw, batch=batch, reset=reset)
    if group_id is None and (not batch or group_coordinated or isinstance(starting, GroupOffsets)):
        why = (
            "the driver joins this consumer group"
            if not batch or group_coordinated
            else "startingOffsets=group reads its committed offsets"
        )
        raise OptionError("kafka.group.id", f"is required: {why}")

    session = _int(raw, "kafka.session.timeout.ms", None, minimum=1)
    heartbeat = _int(raw, "kafka.heartbeat.interval.ms", None, minimum=1)
    if session is not None and heartbeat is not None and heartbeat >= session:
        raise OptionError(
            "kafka.heartbeat.interval.ms",
            f"must be lower than kafka.session.timeout.ms ({session}), got {heartbeat}",
        )
    return dict(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        subscription=_subscription(raw),
        assignors=assignors,
        assignor_options=KafkaParams(assignor_options),
        starting=starting,
        auto_offset_reset=reset,
        include_headers=_bool(raw, "includeheaders", False),
        fail_on_data_loss=_bool(raw, "failondataloss", True),
        commit_offsets=_bool(raw, "commitoffsets", not batch),
        isolation_level=_choice(
            raw, "kafka.isolation.level", ("read_uncommitted", "read_committed"), "read_uncommitted"
        ),
        group_instance_id=_optional_str(raw, "kafka.group.instance.id"),
        client_rack=_optional_str(raw, "kafka.client.rack"),
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=_int(raw, "kafka.max.poll.interval.ms", None, minimum=1),
        **_task_counts(raw),
        max_records_per_partition=_int(raw, "maxrecordsperpartition", None, minimum=1),
        max_records_per_arrow_batch=_int(
            raw, "maxrecordsperarrowbatch", DEFAULT_MAX_RECORDS_PER_ARROW_BATCH, minimum=1
        ),
        max_bytes_per_arrow_batch=_int(
            raw, "maxbytesperarrowbatch", DEFAULT_MAX_BYTES_PER_ARROW_BATCH, minimum=1
        ),
        fetcher=_choice(raw, "fetcher", ("auto", "native", "python"), "auto"),
        worker_gc_freeze=_bool(raw, "workergcfreeze", True),
        worker_tcp_no_delay=_bool(raw, "workertcpnodelay", True),
        poll_timeout_ms=_int(raw, "kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS, minimum=1),
        fetch_offset_num_retries=_int(
            raw, "fetchoffset.numretries", DEFAULT_FETCH_OFFSET_NUM_RETRIES, minimum=0
        ),
        fetch_offset_retry_interval_ms=_int(
            raw, "fetchoffset.retryintervalms", DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS, minimum=0
        ),
        broker_outage_timeout_ms=_int(
            raw, "brokeroutagetimeoutms", DEFAULT_BROKER_OUTAGE_TIMEOUT_MS, minimum=1
        ),
        group_join_timeout_ms=_int(raw, "groupjointimeoutms", DEFAULT_GROUP_JOIN_TIMEOUT_MS, minimum=1),
        leader_sync_delay_ms=_int(raw, "leadersyncdelayms", 0, minimum=0),
        followup_join_delay_ms=_int(raw, "followupjoindelayms", 0, minimum=0),
        kafka_params=KafkaParams(kafka_params),
        group_protocol=protocol,
        remote_assignor=remote_assignor,
        security=security,
        # the typed-records options, validated by spark_groupsource.decode.options
        decode_params=KafkaParams({k: v for k, v in raw.items() if k in DECODE_OPTIONS or k.startswith(DECODE_PREFIX)}),
    )


def _refuse_topic_creation(raw: Mapping[str, str]) -> None:
    """``kafka.allow.auto.create.topics``: every client of the source sets it to false
    (config/client_configs.py NO_AUTO_CREATE: a deleted topic must not come back); ``false`` is accepted as a no-op, anything else refused."""
    value = raw.get("kafka.allow.auto.create.topics")
    if value is not None and value.strip().lower() != "false":
        raise OptionError(
            "kafka.allow.auto.create.topics",
            f"a reader never creates topics, got {value!r}: the source sets it to false on every client "
            "(driver member, offset reader, executors), so that a topic that is missing or was deleted "
            "stays so even where the broker has auto.create.topics.enable=true; create topics with "
            "kafka-topics.sh or an AdminClient, and leave this option out",
        )


def _task_counts(raw: Mapping[str, str]) -> dict[str, int | None]:
    """minPartitions (split to reach it), maxPartitions (pack down to it) and
    smallRangesPerTask (small ranges share a task)."""
    low = _int(raw, "minpartitions", None, minimum=1)
    high = _int(raw, "maxpartitions", None, minimum=1)
    if low is not None and high is not None and low > high:
        raise OptionError("maxPartitions", f"is {high}, lower than minPartitions ({low}): a batch cannot have "
                          "at least the one and at most the other number of tasks. Raise maxPartitions or "
                          "lower minPartitions.")
    return dict(min_partitions=low, max_partitions=high,
                small_ranges_per_task=_int(raw, "smallrangespertask", DEFAULT_SMALL_RANGES_PER_TASK, minimum=1))


def _is_security(key: str) -> bool:
    """Java SSL settings accepted at their defaults (see security.py): not passed to librdkafka."""
    return key.startswith(("ssl.", "sasl.")) or key == "security.protocol"


#: Options that do not apply to a KIP-848 member, and why.
_NOT_FOR_CONSUMER_PROTOCOL = {
    "assignor": "the broker assigns partitions in the consumer group protocol (KIP-848); choose its "
    "assignor with kafka.group.remote.assignor=uniform|range, or use kafka.group.protocol=classic "
    "for client-side assignors",
    "kafka.session.timeout.ms": "the broker owns the session timeout in the consumer group protocol "
    "(broker setting group.consumer.session.timeout.ms)",
    "kafka.heartbeat.interval.ms": "the broker sets the heartbeat interval in the consumer group "
    "protocol (broker setting group.consumer.heartbeat.interval.ms)",
    "leadersyncdelayms": "there is no group leader or SyncGroup in the consumer group protocol",
    "followupjoindelayms": "the consumer group protocol has no JoinGroup: the broker reconciles each member",
}


def _group_protocol(raw: Mapping[str, str]) -> tuple[str, str | None]:
    """``kafka.group.protocol`` (classic | consumer) and, for consumer, ``kafka.group.remote.assignor``.

    Rejects what does not apply to the chosen protocol, saying why, before anything connects."""
    protocol = _choice(raw, "kafka.group.protocol", ("classic", "consumer"), "classic")
    if protocol == "classic":
        if "kafka.group.remote.assignor" in raw:
            raise OptionError(
                "kafka.group.remote.assignor",
                "only applies with kafka.group.protocol=consumer (KIP-848, the broker assigns); "
                "the classic protocol runs the client-side assignor named by assignor",
            )
        return protocol, None
    for key in sorted(raw):
        if key in _NOT_FOR_CONSUMER_PROTOCOL:
            raise OptionError(option_name(key), f"does not apply with kafka.group.protocol=consumer: "
                                          f"{_NOT_FOR_CONSUMER_PROTOCOL[key]}")
        head = key.split(".", 1)[0]
        if "." in key and not key.startswith("kafka.") and _is_assignor(head):
            raise OptionError(key, "assignor settings do not apply with kafka.group.protocol=consumer: "
                                   "the broker assigns partitions (kafka.group.remote.assignor=uniform|range)")
    remote = None
    if "kafka.group.remote.assignor" in raw:
        remote = _choice(raw, "kafka.group.remote.assignor", ("uniform", "range"), "uniform")
    return protocol, remote


def _is_assignor(name: str) -> bool:
    """A built-in assignor name (their settings are ``<name>.<setting>``)."""
    from assignment.registry import BUILTIN

    return name.lower() in BUILTIN


def _check_unknown(raw: Mapping[str, str], assignors: tuple[str, ...], *, batch: bool) -> None:
    known = set(SPELLING)
    prefixes = tuple(dict.fromkeys(f"{a.lower()}." for a in assignors))
    for key in sorted(raw):
        if key.startswith(("kafka.", DECODE_PREFIX)) or key in known or key.startswith(prefixes):
            continue
        excluded = STREAM_ONLY if batch else BATCH_ONLY
        accepted = ", ".join(n for n in OPTION_NAMES if n.lower() not in excluded)
        raise OptionError(
            key,
            f"unknown option{did_you_mean(key)}; accepted: {accepted}, kafka.<client property>, "
            f"and settings of the configured assignors as <assignor>.<setting> "
            f"(assignors: {', '.join(dict.fromkeys(assignors))})",
        )


def did_you_mean(key: str) -> str:
    """`` (did you mean startingOffsets?)`` for a near miss of a known option name, else ``""``."""
    close = difflib.get_close_matches(key.lower(), list(SPELLING), n=1, cutoff=0.75)
    return f" (did you mean {SPELLING[close[0]]}?)" if close else ""


def _assignor_names(raw: Mapping[str, str]) -> tuple[str, ...]:
    value = raw.get("assignor")
    if value is None:
        return (DEFAULT_ASSIGNOR,)
    names = tuple(n.strip() for n in value.split(","))
    if not value.strip() or any(not n for n in names):
        raise OptionError(
            "assignor",
            f"expected an assignor name or a comma-separated priority list such as "
            f"'cooperative-sticky,range', got {value!r}",
        )
    if len(set(names)) != len(names):
        raise OptionError("assignor", f"lists an assignor twice: {value!r}")
    return names


def _validate_assignors(names: tuple[str, ...], assignor_options: Mapping[str, str]) -> tuple[str, ...]:
    """Check names and their settings with the assignor registry (imported lazily).

    Returns the assignors' protocol names (for a dotted-path class, its ``name``).
    """
    from assignment.errors import AssignmentError, AssignorConfigError
    from assignment.registry import create_assignors

    try:
        created = create_assignors(",".join(names), dict(assignor_options))
    except AssignorConfigError as exc:
        option = exc.option
        if option in ("partition.assignment.strategy", "assignor"):
            option = "assignor"
        message = str(exc).removeprefix(f"{exc.option}: ")
        raise OptionError(option, message) from None
    except AssignmentError as exc:
        raise OptionError("assignor", str(exc)) from None
    return tuple(a.name for a in created)


def _required(raw: Mapping[str, str], key: str) -> str:
    value = raw.get(key, "").strip()
    if not value:
        close = difflib.get_close_matches(key, [k for k in raw if k != key], n=1, cutoff=0.8)
        hint = f" (did you mean it instead of {close[0]}?)" if close else ""
        raise OptionError(option_name(key), f"is required{hint}")
    return value


def _optional_str(raw: Mapping[str, str], key: str) -> str | None:
    if key not in raw:
        return None
    value = raw[key].strip()
    if not value:
        raise OptionError(option_name(key), "must not be empty when given")
    return value


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in raw:
        return default
    value = raw[key].strip().lower()
    if value not in ("true", "false"):
        raise OptionError(option_name(key), f"expected true or false, got {shown(key, raw[key])}")
    return value == "true"


def _int(raw: Mapping[str, str], key: str, default: int | None, *, minimum: int) -> int | None:
    if key not in raw:
        return default
    text = raw[key].strip()
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise OptionError(option_name(key), f"expected {what}, got {shown(key, raw[key])}")
    return value


def _choice(raw: Mapping[str, str], key: str, accepted: tuple[str, ...], default: str) -> str:
    if key not in raw:
        return default
    value = raw[key].strip().lower()
    if value not in accepted:
        raise OptionError(
            option_name(key), f"expected one of {', '.join(accepted)}, got {shown(key, raw[key])}"
        )
    return value


def _subscription(raw: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern") if k in raw]
    if len(given) != 1:
        which = "none" if not given else "both"
        raise OptionError(
            "subscribe",
            f"exactly one of subscribe (comma-separated topics) or subscribePattern (a regex) "
            f"is required, got {which}",
        )
    if given[0] == "subscribepattern":
        pattern = raw["subscribepattern"].strip()
        if not pattern:
            raise OptionError("subscribePattern", "expected a regular expression, got ''")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(
                "subscribePattern", f"is not a valid Python regular expression ({exc}): {pattern!r}"
            ) from None
        return SubscribePattern(pattern)
    topics = tuple(t.strip() for t in raw["subscribe"].split(","))
    for t in topics:
        if not _valid_topic(t):
            raise OptionError(
                "subscribe",
                "expected comma-separated topic names of 1-249 characters from [a-zA-Z0-9._-], "
                f"got {raw['subscribe']!r} (bad name {t!r})",
            )
    return SubscribeTopics(tuple(dict.fromkeys(topics)))


def _valid_topic(name: str) -> bool:
    return _TOPIC_RE.fullmatch(name) is not None and name not in (".", "..")


def _starting(raw: Mapping[str, str], *, batch: bool, reset: str) -> OffsetsSpec:
    """Spark's precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets."""
    strategy = _choice(raw, "startingoffsetsbytimestampstrategy", ("error", "latest"), "error")
    if "startingtimestamp" in raw:
        ts = _int(raw, "startingtimestamp", None, minimum=0)
        return TimestampOffsets(timestamp=ts, strategy=strategy)
    if "startingoffsetsbytimestamp" in raw:
        stamps = _json_offsets(raw, "startingoffsetsbytimestamp", _TIMESTAMPS_EXAMPLE, minimum=0)
        return TimestampOffsets(timestamps=stamps, strategy=strategy)
    if "startingoffsets" not in raw:
        return EarliestOffsets() if batch else GroupOffsets(reset)
    value = raw["startingoffsets"].strip()
    word = value.lower()
    if word == "group":
        return GroupOffsets(reset)
    if word == "earliest":
        return EarliestOffsets()
    if word == "latest":
        if batch:
            raise OptionError(
                "startingOffsets", "'latest' is not valid for a batch query (it would read nothing)"
            )
        return LatestOffsets()
    entries = _json_offsets(raw, "startingoffsets", _OFFSETS_EXAMPLE, minimum=-2, words="group, earliest, latest, or JSON")
    return SpecificOffsets(tuple((t, p, _position(o)) for t, p, o in entries))


def _ending(raw: Mapping[str, str]) -> OffsetsSpec:
    """Spark's precedence: endingTimestamp > endingOffsetsByTimestamp > endingOffsets."""
    if "endingtimestamp" in raw:
        return TimestampOffsets(timestamp=_int(raw, "endingtimestamp", None, minimum=0), strategy="latest")
    if "endingoffsetsbytimestamp" in raw:
        stamps = _json_offsets(raw, "endingoffsetsbytimestamp", _TIMESTAMPS_EXAMPLE, minimum=0)
        return TimestampOffsets(timestamps=stamps, strategy="latest")
    if "endingoffsets" not in raw:
        return LatestOffsets()
    value = raw["endingoffsets"].strip()
    if value.lower() == "latest":
        return LatestOffsets()
    if value.lower() in ("earliest", "group"):
        raise OptionError("endingOffsets", f"expected latest or JSON, got {value!r}")
    entries = _json_offsets(raw, "endingoffsets", '{"topicA":{"0":23,"1":-1}}', minimum=-1, words="latest or JSON")
    return SpecificOffsets(tuple((t, p, _position(o)) for t, p, o in entries))


def _position(offset: int) -> int | Position:
    return Position(offset) if offset < 0 else offset


def _json_offsets(
    raw: Mapping[str, str], key: str, example: str, *, minimum: int, words: str = "JSON"
) -> tuple[tuple[str, int, int], ...]:
    """Parse ``{"topic":{"partition":number}}`` into sorted (topic, partition, number) triples."""
    text = raw[key]

    def bad(detail: str = "") -> OptionError:
        shown = text if len(text) <= 200 else text[:200] + "..."
        extra = f" ({detail})" if detail else ""
        return OptionError(option_name(key), f"expected {words}, e.g. {example}, got {shown}{extra}")

    try:
        data = json.loads(text)
    except ValueError:
        raise bad() from None
    if not isinstance(data, dict) or not data:
        raise bad()
    out = []
    for topic, parts in data.items():
        if not _valid_topic(topic):
            raise bad(f"bad topic name {topic!r}")
        if not isinstance(parts, dict) or not parts:
            raise bad(f"topic {topic!r} needs a map of partition to number")
        for p, number in parts.items():
            if not (isinstance(p, str) and p.isdigit()):
                raise bad(f"bad partition {p!r} of {topic!r}")
            if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
                raise bad(f"bad value {number!r} for {topic}-{p}; the least allowed is {minimum}")
            out.append((topic, int(p), number))
    return tuple(sorted(out))


def parse_bool_option(options: Mapping[str, str], key: str, *, default: bool) -> bool:
    """One boolean option from Spark's raw map: ``source.schema`` needs ``includeHeaders``
    before the full parse, which needs the broker-facing options the schema does not."""
    return _bool(_normalize(options), key.lower(), default)
