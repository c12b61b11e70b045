"""The user-facing option contract, parsed once into frozen, typed objects.

Spark hands a data source its options as a case-insensitive map with lower-cased keys and
string values. :func:`parse_stream_options` / :func:`parse_batch_options` validate all of them
when the query is defined and return :class:`StreamOptions` / :class:`BatchOptions`; nothing
downstream reads the raw map again. Names and meanings follow Spark's own Kafka source
wherever it has the same option.

Stream options (``kafka.*`` names are client properties; the rest are ours):

=====================================  =====================================================
``kafka.bootstrap.servers``            required
``kafka.group.id``                     required: the group the driver joins
``subscribe`` / ``subscribePattern``   exactly one: comma-separated topics / a Python regex
                                       that must match a whole topic name (Java's semantics)
``assignor``                           ``range`` (default), or a comma-separated priority
                                       list of assignor names
``<assignor>.<setting>``               settings of a configured assignor, e.g.
                                       ``redundant.replicas``
``startingOffsets``                    ``group`` (default), ``earliest``, ``latest``, or JSON
                                       ``{"topicA":{"0":23,"1":-2}}`` (-2 earliest, -1 latest)
``startingTimestamp``                  ms since the epoch, for every partition
``startingOffsetsByTimestamp``         JSON ``{"topicA":{"0":1700000000000}}``
``startingOffsetsByTimestampStrategy`` ``error`` (default) or ``latest``: when no offset
                                       has a timestamp that late
``kafka.auto.offset.reset``            ``latest`` (default), ``earliest``, ``none``: where a
                                       partition without a committed offset starts under
                                       ``startingOffsets=group`` (``none``: fail)
``maxOffsetsPerTrigger``               positive int: records per micro-batch
``minOffsetsPerTrigger``               positive int: wait for this many new records before
                                       starting a micro-batch (at most ``maxTriggerDelay``)
``maxTriggerDelay``                    time, default ``15m``: start a batch with fewer than
                                       ``minOffsetsPerTrigger`` records once this long has
                                       passed since the previous batch (``10s``, ``500ms``)
``minPartitions``                      positive int: split ranges to reach this many tasks
``maxRecordsPerPartition``             positive int: split larger ranges
``includeHeaders``                     ``false`` (default) / ``true``
``failOnDataLoss``                     ``true`` (default) / ``false``
``commitOffsets``                      ``true`` (default) / ``false``: commit each completed
                                       micro-batch to the group
``maxRecordsPerArrowBatch``            positive int, default 10000: rows per Arrow batch
``maxBytesPerArrowBatch``              positive int, default 67108864 (64 MiB): value bytes
                                       per Arrow batch (a batch ends at whichever bound
                                       comes first; one record larger than this is a batch)
``kafkaConsumer.pollTimeoutMs``        positive int, default 120000: how long an executor
                                       waits for records it knows exist before failing
``fetchOffset.numRetries``             int >= 0, default 3: driver offset-query retries
``fetchOffset.retryIntervalMs``        int >= 0, default 1000
``brokerOutageTimeoutMs``              positive int, default 120000: how long a partition's
                                       offsets (or the group's commits) may stay unreadable,
                                       its leader or the coordinator away, before the query
                                       fails; meanwhile it is left out of micro-batches (an
                                       executor reading a partition no broker answers for
                                       fails after it too)
``groupJoinTimeoutMs``                 positive int, default 120000: how long the driver may
                                       take to reach the cluster and get its first
                                       assignment before the query fails
``kafka.group.instance.id``            static membership (KIP-345)
``kafka.client.rack``                  rack of the driver's member and of the fetchers
``kafka.session.timeout.ms``           group timeouts; left to the client when not given
``kafka.heartbeat.interval.ms``
``kafka.max.poll.interval.ms``         the rebalance timeout
``leaderSyncDelayMs``                  int >= 0, default 0: when elected leader, wait before
                                       SyncGroup (for brokers that reject a follower's
                                       SyncGroup arriving after the leader's: librdkafka's mock)
``followupJoinDelayMs``                int >= 0, default 0: after a cooperative revocation,
                                       hold the follow-up JoinGroup back this long (for
                                       brokers that answer a follower's pending join with
                                       the next generation: Tansu; Kafka needs none)
``kafka.isolation.level``              ``read_uncommitted`` (default, as Spark's Java
                                       consumer) / ``read_committed``
``kafka.group.protocol``               ``classic`` (default: our client-side assignors) or
                                       ``consumer`` (KIP-848: the broker assigns; then
                                       ``assignor``, its settings, the session and
                                       heartbeat settings, ``leaderSyncDelayMs`` and
                                       ``followupJoinDelayMs`` are
                                       rejected)
``kafka.group.remote.assignor``        ``uniform`` or ``range`` (consumer protocol only;
                                       default: the broker's, ``uniform`` on Kafka)
=====================================  =====================================================

Batch queries also take ``endingOffsets`` (``latest`` or JSON, -1 = latest),
``endingTimestamp``, ``endingOffsetsByTimestamp`` and ``groupCoordinated``; their
``startingOffsets`` default is ``earliest`` and ``commitOffsets`` defaults to ``false``.

Every option is checked when the DataFrame is defined (``load()``, see
:func:`validate_definition`); an unknown name gets a "did you mean" suggestion.

Every other ``kafka.*`` option passes through to the Kafka clients, minus the prefix.
Secret values (passwords, keys, JAAS configs, OAuth secrets) never appear in ``repr``, in
error messages or in logs: see :func:`redacted`.

Why ``range`` is the default assignor: it is the first protocol of the Java consumer's
default list and librdkafka's default, so a Spark query joining a group of ordinary
consumers agrees with them on a protocol without any setting (a classic-protocol group
only forms around a protocol every member supports).
"""

from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_groupsource.errors import OptionError
from spark_groupsource.security import SECURITY_KEYS, SecurityConfig, parse_security

__all__ = [
    "BatchOptions",
    "EarliestOffsets",
    "GroupOffsets",
    "KafkaParams",
    "LatestOffsets",
    "OffsetsSpec",
    "Position",
    "SpecificOffsets",
    "StreamOptions",
    "SubscribePattern",
    "SubscribeTopics",
    "Subscription",
    "TimestampOffsets",
    "fetcher_config",
    "is_secret",
    "membership_config",
    "parse_batch_options",
    "parse_stream_options",
    "parse_time_ms",
    "redacted",
    "validate_definition",
]

DEFAULT_ASSIGNOR = "range"
DEFAULT_MAX_RECORDS_PER_ARROW_BATCH = 10_000
DEFAULT_MAX_BYTES_PER_ARROW_BATCH = 64 * 1024 * 1024
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1_000
DEFAULT_BROKER_OUTAGE_TIMEOUT_MS = 120_000
DEFAULT_GROUP_JOIN_TIMEOUT_MS = 120_000
#: Spark's Kafka source default for ``maxTriggerDelay`` (KafkaSourceProvider.DEFAULT_MAX_TRIGGER_DELAY)
DEFAULT_MAX_TRIGGER_DELAY = "15m"
#: librdkafka's Consumer needs a group.id even when it only assigns; batch queries without one
#: use this. The fetchers never subscribe or commit, so it never becomes a group.
FETCHER_PLACEHOLDER_GROUP = "spark-groupkafka-fetcher"

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_REDACTED = "***"

# --------------------------------------------------------------------------- secrets

_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential")
_SECRET_KEYS = frozenset(
    {"ssl.key.pem", "ssl_key_pem", "ssl.keystore.key", "sasl.oauthbearer.config"}
)


def is_secret(key: str) -> bool:
    """Whether the value of option/property ``key`` must never be shown."""
    k = key.lower()
    if k.startswith("kafka."):
        k = k[len("kafka."):]
    return k in _SECRET_KEYS or any(w in k for w in _SECRET_WORDS)


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with every secret value replaced by ``"***"`` (safe to log)."""
    return {k: (_REDACTED if is_secret(k) else v) for k, v in config.items()}


class KafkaParams(Mapping[str, str]):
    """A read-only string map whose ``repr`` redacts secrets (it is shown inside options)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, str] | None = None):
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self._data)!r})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, str]:
        return self._data

    def __setstate__(self, state: dict[str, str]) -> None:
        self._data = state


# --------------------------------------------------------------------------- subscription


class Subscription:
    """What the driver's member subscribes to: a closed set of two kinds."""

    def matches(self, topic: str) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class SubscribeTopics(Subscription):
    topics: tuple[str, ...]

    def matches(self, topic: str) -> bool:
        return topic in self.topics


@dataclass(frozen=True)
class SubscribePattern(Subscription):
    """A regex that must match the whole topic name (``java.util.regex.Matcher.matches``)."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


# --------------------------------------------------------------------------- offset specs


class Position(enum.Enum):
    """A symbolic position inside a JSON offsets map (``-2`` / ``-1`` in Spark's syntax)."""

    EARLIEST = -2
    LATEST = -1


class OffsetsSpec:
    """Where reading starts (or a batch stops): resolved to numbers by the offset reader."""


@dataclass(frozen=True)
class GroupOffsets(OffsetsSpec):
    """The group's committed offsets; partitions without one start at ``reset``."""

    reset: str = "latest"  # latest | earliest | none


@dataclass(frozen=True)
class EarliestOffsets(OffsetsSpec):
    pass


@dataclass(frozen=True)
class LatestOffsets(OffsetsSpec):
    pass


@dataclass(frozen=True)
class SpecificOffsets(OffsetsSpec):
    """Explicit offsets per partition, sorted by (topic, partition)."""

    offsets: tuple[tuple[str, int, int | Position], ...]

    def as_dict(self) -> dict[tuple[str, int], int | Position]:
        return {(t, p): o for t, p, o in self.offsets}

    def get(self, topic: str, partition: int) -> int | Position | None:
        return self.as_dict().get((topic, partition))


@dataclass(frozen=True)
class TimestampOffsets(OffsetsSpec):
    """The first offset whose timestamp is >= a time (ms since the epoch).

    ``timestamp`` applies to every partition (``startingTimestamp``); otherwise
    ``timestamps`` lists them per partition (``...OffsetsByTimestamp``). ``strategy``:
    what a start does when no such offset exists: ``error`` or ``latest``.
    """

    timestamp: int | None = None
    timestamps: tuple[tuple[str, int, int], ...] = ()
    strategy: str = "error"

    def timestamp_for(self, topic: str, partition: int) -> int | None:
        if self.timestamp is not None:
            return self.timestamp
        for t, p, ts in self.timestamps:
            if t == topic and p == partition:
                return ts
        return None


# --------------------------------------------------------------------------- option objects


@dataclass(frozen=True, kw_only=True)
class _CommonOptions:
    bootstrap_servers: str
    group_id: str | None
    subscription: Subscription
    assignors: tuple[str, ...]
    assignor_options: KafkaParams
    starting: OffsetsSpec
    auto_offset_reset: str
    include_headers: bool
    fail_on_data_loss: bool
    commit_offsets: bool
    isolation_level: str
    group_instance_id: str | None
    client_rack: str | None
    session_timeout_ms: int | None
    heartbeat_interval_ms: int | None
    max_poll_interval_ms: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    max_records_per_arrow_batch: int
    poll_timeout_ms: int
    fetch_offset_num_retries: int
    fetch_offset_retry_interval_ms: int
    broker_outage_timeout_ms: int = DEFAULT_BROKER_OUTAGE_TIMEOUT_MS
    max_bytes_per_arrow_batch: int = DEFAULT_MAX_BYTES_PER_ARROW_BATCH
    group_join_timeout_ms: int = DEFAULT_GROUP_JOIN_TIMEOUT_MS
    #: When leader, wait this long before SyncGroup (brokers such as librdkafka's mock reject
    #: a follower's SyncGroup that arrives after the leader's).
    leader_sync_delay_ms: int = 0
    #: After a cooperative revocation, hold the follow-up JoinGroup back this long (Tansu answers
    #: a follower's pending JoinGroup with the next generation when the leader rejoins at once).
    followup_join_delay_ms: int = 0
    #: Every ``kafka.*`` option without the prefix (repr redacts secrets).
    kafka_params: KafkaParams = field(default_factory=KafkaParams)
    #: ``kafka.group.protocol``: ``classic`` (our assignors) or ``consumer`` (KIP-848, the broker
    #: assigns with ``remote_assignor``, None meaning the broker's default)
    group_protocol: str = "classic"
    remote_assignor: str | None = None
    #: the security options, parsed once for both clients (see :mod:`spark_groupsource.security`)
    security: SecurityConfig = field(default_factory=SecurityConfig)


@dataclass(frozen=True, kw_only=True)
class StreamOptions(_CommonOptions):
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``: hold a batch until this many records are available ...
    min_offsets_per_trigger: int | None = None
    #: ... or until this long has passed since the previous batch started (``maxTriggerDelay``)
    max_trigger_delay_ms: int = 15 * 60 * 1000


@dataclass(frozen=True, kw_only=True)
class BatchOptions(_CommonOptions):
    ending: OffsetsSpec = field(default_factory=LatestOffsets)
    group_coordinated: bool = False


# --------------------------------------------------------------------------- option names

# Lower-cased option -> reason it is refused and what to use instead.
_CONTROLLED = {
    "kafka.enable.auto.commit": "the source commits offsets itself when a micro-batch "
    "completes; use commitOffsets=true|false",
    "kafka.auto.commit.interval.ms": "offsets are committed when a micro-batch completes, "
    "not on a timer; use commitOffsets=true|false",
    "kafka.enable.auto.offset.store": "the source decides which offsets are committed; "
    "use commitOffsets=true|false",
    "kafka.partition.assignment.strategy": "the driver runs the assignor itself; use "
    "assignor (e.g. assignor=range or assignor=cooperative-sticky,range)",
    "kafka.key.deserializer": "keys are always returned as binary; deserialize them with "
    "DataFrame operations",
    "kafka.value.deserializer": "values are always returned as binary; deserialize them "
    "with DataFrame operations",
    "kafka.enable.partition.eof": "the executors' fetchers set it themselves to find the "
    "end of a partition",
    "assign": "this source reads what the consumer group assigns to it; use subscribe or "
    "subscribePattern",
    "groupidprefix": "this source joins the group named by kafka.group.id; set that instead",
}

_STREAM_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"}
_BATCH_ONLY = {
    "endingoffsets",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "groupcoordinated",
}
# Our non-kafka options in their documented spelling (keys arrive lower-cased).
_OPTION_NAMES = [
    "subscribe",
    "subscribePattern",
    "assignor",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "failOnDataLoss",
    "commitOffsets",
    "maxRecordsPerArrowBatch",
    "maxBytesPerArrowBatch",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "brokerOutageTimeoutMs",
    "groupJoinTimeoutMs",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "groupCoordinated",
    "leaderSyncDelayMs",
    "followupJoinDelayMs",
]
_SPELLING = {n.lower(): n for n in _OPTION_NAMES}
_REFUSED_SPELLING = {"groupidprefix": "groupIdPrefix"}


def _name(key: str) -> str:
    """The documented spelling of a (lower-cased) option name, for messages."""
    if key.startswith("kafka."):
        return key
    return _SPELLING.get(key) or _REFUSED_SPELLING.get(key, key)


# --------------------------------------------------------------------------- parsing


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Validate a streaming query's options (keys lower-cased, as Spark passes them)."""
    raw = _normalize(options)
    for key in sorted(_BATCH_ONLY & raw.keys()):
        raise OptionError(_name(key), "only applies to batch queries (spark.read)")
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
    )


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
    batch_only = (_BATCH_ONLY & raw.keys()) and not (_STREAM_ONLY & raw.keys())
    if batch_only or (stream_error.option == "kafka.group.id" and "kafka.group.id" not in raw):
        raise batch_error.with_traceback(None) from None
    raise stream_error.with_traceback(None) from None


def parse_batch_options(options: Mapping[str, str]) -> BatchOptions:
    """Validate a batch query's options (keys lower-cased, as Spark passes them)."""
    raw = _normalize(options)
    for key in sorted(_STREAM_ONLY & raw.keys()):
        raise OptionError(_name(key), "only applies to streaming queries (spark.readStream)")
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
    for key in sorted(_CONTROLLED.keys() & raw.keys()):
        raise OptionError(_name(key), f"is set by the source and cannot be given: {_CONTROLLED[key]}")

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
        min_partitions=_int(raw, "minpartitions", None, minimum=1),
        max_records_per_partition=_int(raw, "maxrecordsperpartition", None, minimum=1),
        max_records_per_arrow_batch=_int(
            raw, "maxrecordsperarrowbatch", DEFAULT_MAX_RECORDS_PER_ARROW_BATCH, minimum=1
        ),
        max_bytes_per_arrow_batch=_int(
            raw, "maxbytesperarrowbatch", DEFAULT_MAX_BYTES_PER_ARROW_BATCH, minimum=1
        ),
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
    )


def _is_security(key: str) -> bool:
    """Java SSL settings accepted at their defaults (see security.py): not passed to librdkafka."""
    return key.startswith(("ssl.", "sasl.")) or key == "security.protocol"


# --------------------------------------------------------------------------- group protocol (issue #12)

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
            raise OptionError(_name(key), f"does not apply with kafka.group.protocol=consumer: "
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
    known = set(_SPELLING)
    prefixes = tuple(dict.fromkeys(f"{a.lower()}." for a in assignors))
    for key in sorted(raw):
        if key.startswith("kafka.") or key in known or key.startswith(prefixes):
            continue
        excluded = _STREAM_ONLY if batch else _BATCH_ONLY
        accepted = ", ".join(n for n in _OPTION_NAMES if n.lower() not in excluded)
        raise OptionError(
            key,
            f"unknown option{did_you_mean(key)}; accepted: {accepted}, kafka.<client property>, "
            f"and settings of the configured assignors as <assignor>.<setting> "
            f"(assignors: {', '.join(dict.fromkeys(assignors))})",
        )


def did_you_mean(key: str) -> str:
    """`` (did you mean startingOffsets?)`` for a near miss of a known option name, else ``""``."""
    close = difflib.get_close_matches(key.lower(), list(_SPELLING), n=1, cutoff=0.75)
    return f" (did you mean {_SPELLING[close[0]]}?)" if close else ""


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
        raise OptionError(_name(key), f"is required{hint}")
    return value


def _optional_str(raw: Mapping[str, str], key: str) -> str | None:
    if key not in raw:
        return None
    value = raw[key].strip()
    if not value:
        raise OptionError(_name(key), "must not be empty when given")
    return value


def _shown(key: str, value: str) -> str:
    return _REDACTED if is_secret(key) else repr(value)


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in raw:
        return default
    value = raw[key].strip().lower()
    if value not in ("true", "false"):
        raise OptionError(_name(key), f"expected true or false, got {_shown(key, raw[key])}")
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
        raise OptionError(_name(key), f"expected {what}, got {_shown(key, raw[key])}")
    return value


def _choice(raw: Mapping[str, str], key: str, accepted: tuple[str, ...], default: str) -> str:
    if key not in raw:
        return default
    value = raw[key].strip().lower()
    if value not in accepted:
        raise OptionError(
            _name(key), f"expected one of {', '.join(accepted)}, got {_shown(key, raw[key])}"
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
        return OptionError(_name(key), f"expected {words}, e.g. {example}, got {shown}{extra}")

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


# --------------------------------------------------------------------------- client configs

# Properties that only matter to the driver's group member; executors must not see them.
_MEMBER_ONLY = frozenset(
    {
        "group.instance.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "auto.offset.reset",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
    }
)


def fetcher_config(opts: _CommonOptions) -> dict[str, Any]:
    """Configuration for the executors' confluent-kafka ``Consumer``.

    Everything the user passed as ``kafka.*`` (security, SASL, SSL, fetch tuning, client.rack
    for follower fetching) plus what the fetcher needs: it assigns, never subscribes, never
    commits, sees partition ends (``enable.partition.eof``) and fails rather than jumps when
    an offset is out of range (``auto.offset.reset=error``).
    """
    # A range that ends at the partition's end leaves librdkafka's prefetch waiting there: the
    # broker holds that empty fetch for fetch.wait.max.ms (librdkafka's default 500), and a
    # pooled fetcher given another partition next sends nothing to that broker until it is
    # answered. Measured on Kafka 4.0.1 (bench/fetch_cpu.py, 32 ranges of 8 partitions one
    # after the other): 3.1 s at 100 ms, 1.6 s at 10 ms, the same CPU. Responses with data
    # return at once whatever this is; the wait also bounds how soon a range end without a
    # record (gaps, transaction markers) is seen. A fetcher is assigned only while its task
    # reads, so the shorter wait costs no idle polling.
    #
    # librdkafka stops fetching a partition whose local queue holds queued.min.messages
    # (100,000) and looks again only after fetch.queue.backoff.ms (1,000 ms), however fast the
    # task drains the queue: a task reading a long range of small records waited about a
    # second per 100,000 records. Measured on Kafka 4.0.1 (bench/fetch_cpu.py, one range of
    # 600,000 x 100 B, load ~28 on 2 cores): 5.5 s at 1,000 ms, 2.2 s at 10 ms, the same CPU
    # per record (1.48 / 1.39 CPU-s per million). At 10 ms the fetcher looks again soon after
    # the queue drops below the mark (it still holds tens of thousands of records then).
    #
    # max.partition.fetch.bytes stays librdkafka's 1 MiB: 8 MiB read 30,000 x 10 KB faster in
    # bench/fetch_cpu.py (1.01 -> 0.72 s) but not inside Spark (bench/steady_state.py, 10 KB,
    # 2026-11-26, load 14-20: 14,200 marginal records/s with 8 MiB and this backoff against
    # 17,200 with librdkafka's defaults for both; Spark's source 37,700), so it was not kept.
    config: dict[str, Any] = {
        "fetch.wait.max.ms": 10,
        "fetch.queue.backoff.ms": 10,
    }
    config.update((k, v) for k, v in opts.kafka_params.items() if k not in _MEMBER_ONLY)
    config.update(opts.security.librdkafka())
    config.update(
        {
            "bootstrap.servers": opts.bootstrap_servers,
            "group.id": opts.group_id or FETCHER_PLACEHOLDER_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "isolation.level": opts.isolation_level,
        }
    )
    return config


def _int_value(value: str) -> int:
    return int(value.strip())


def _bool_value(value: str) -> bool:
    return value.strip().lower() == "true"


# librdkafka / Java property -> (kafka-python 3.0.12 KafkaConsumer keyword, converter).
# Properties with no kafka-python equivalent (most librdkafka tuning) are not passed to the
# membership client. Security settings are not here: SecurityConfig renders them for both.
MEMBERSHIP_TRANSLATIONS: dict[str, tuple[str, Any]] = {
    "bootstrap.servers": ("bootstrap_servers", str.strip),
    "client.id": ("client_id", str),
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "client.rack": ("client_rack", str),
    "session.timeout.ms": ("session_timeout_ms", _int_value),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _int_value),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int_value),
    "request.timeout.ms": ("request_timeout_ms", _int_value),
    "retry.backoff.ms": ("retry_backoff_ms", _int_value),
    "metadata.max.age.ms": ("metadata_max_age_ms", _int_value),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int_value),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _int_value),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _int_value),
    "socket.send.buffer.bytes": ("send_buffer_bytes", _int_value),
    "send.buffer.bytes": ("send_buffer_bytes", _int_value),
    "socket.receive.buffer.bytes": ("receive_buffer_bytes", _int_value),
    "receive.buffer.bytes": ("receive_buffer_bytes", _int_value),
    "receive.message.max.bytes": ("receive_message_max_bytes", _int_value),
    "client.dns.lookup": ("client_dns_lookup", str),
    "allow.auto.create.topics": ("allow_auto_create_topics", _bool_value),
    "exclude.internal.topics": ("exclude_internal_topics", _bool_value),
}


def membership_config(opts: _CommonOptions) -> dict[str, Any]:
    """Keyword arguments for kafka-python's ``KafkaConsumer``/``KafkaClient`` (driver member).

    Only properties in :data:`MEMBERSHIP_TRANSLATIONS` are passed; the typed options
    (group id, instance id, rack, timeouts) win over the raw ``kafka.*`` strings. The caller
    adds what is not a user option (``api_version``, assignors, listeners).
    """
    params = dict(opts.kafka_params)
    params["bootstrap.servers"] = opts.bootstrap_servers
    out: dict[str, Any] = {}
    for prop in sorted(params):
        if prop in MEMBERSHIP_TRANSLATIONS:
            keyword, convert = MEMBERSHIP_TRANSLATIONS[prop]
            try:
                out[keyword] = convert(params[prop])
            except ValueError:
                raise OptionError(
                    f"kafka.{prop}", f"expected an integer, got {_shown(prop, params[prop])}"
                ) from None
    typed = {
        "group_id": opts.group_id,
        "group_instance_id": opts.group_instance_id,
        "client_rack": opts.client_rack,
        "session_timeout_ms": opts.session_timeout_ms,
        "heartbeat_interval_ms": opts.heartbeat_interval_ms,
        "max_poll_interval_ms": opts.max_poll_interval_ms,
    }
    out.update({k: v for k, v in typed.items() if v is not None})
    out.update(opts.security.kafka_python())
    if isinstance(out.get("bootstrap_servers"), str):
        out["bootstrap_servers"] = [s.strip() for s in out["bootstrap_servers"].split(",") if s.strip()]
    return out


def parse_bool_option(options: Mapping[str, str], key: str, *, default: bool) -> bool:
    """One boolean option from Spark's raw map (used by ``source.schema`` before full parsing).

    Added by the batch engineer (issue 5): ``source.py`` calls it and it was missing.
    """
    return _bool(_normalize(options), key.lower(), default)
