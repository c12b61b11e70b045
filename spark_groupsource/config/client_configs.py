"""Client configurations derived from the options: the executors' fetchers (librdkafka), the
driver's classic member (kafka-python) and admin clients."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_groupsource.config.options import FETCHER_PLACEHOLDER_GROUP, CommonOptions
from spark_groupsource.config.secrets import shown
from spark_groupsource.errors import OptionError

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


#: No client of ours creates a topic. A Metadata request that names a topic the broker
#: does not have creates it when the broker runs with ``auto.create.topics.enable=true`` (Kafka's
#: default) and the request allows it: a topic an operator deleted under a running query came back
#: a second later. librdkafka allows it by default for producer-type handles, which every
#: ``AdminClient`` is (its consumers default to false: set anyway); kafka-python by default too,
#: see spark_groupsource/group/no_auto_create.py. The option is refused (config/parsing.py).
NO_AUTO_CREATE = {"allow.auto.create.topics": False}

#: How often the classic member refreshes its metadata unless ``kafka.metadata.max.age.ms`` says:
#: a leader sees added partitions and topics that begin to match the pattern (and rebalances to
#: hand them out) at the next refresh. Java's and kafka-python's 5 minutes made new partitions
#: wait that long (their records are not lost: they start at their earliest offset); Spark's
#: source finds them at every trigger. One Metadata request per 10 s and query.
MEMBER_METADATA_MAX_AGE_MS = 10_000

#: librdkafka's prefetch per assigned partition, in KiB (``queued.max.messages.kbytes``; see
#: fetcher_config); a task of long ranges gets four times as much (executor/prefetch.py)
PREFETCH_KBYTES = 4096
#: ... its librdkafka property, the one name for what fetcher_config sets, the user may set
#: (prefetch_adapts) and a task's fetcher may deepen (executor/prefetch.py)
PREFETCH_KBYTES_KEY = "queued.max.messages.kbytes"
#: ... and in records (``queued.min.messages``): the bound small records reach first
PREFETCH_RECORDS = 20_000


def fetcher_config(opts: CommonOptions) -> dict[str, Any]:
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
    # 17,200 with librdkafka's defaults for both; Spark's source 37,700), so it was not kept
    # here; a task of long ranges, with a 16 MiB prefetch, fetches 8 MiB (executor/prefetch.py).
    #
    # librdkafka prefetches a partition until its queue holds queued.min.messages (100,000) or
    # queued.max.messages.kbytes (64 MiB), and decodes (decompresses, parses) every fetched
    # record as it arrives. A task stops at its range end and drops the rest: with ranges of
    # 31,250 records of 100 B (maxOffsetsPerTrigger 250,000 over 8 partitions) most of what was
    # decoded was thrown away. 4 MiB (four fetches of max.partition.fetch.bytes, one Arrow
    # batch's maxBytesPerArrowBatch) keeps fetches ahead of the task and bounds the waste and
    # each fetcher's memory. Measured on Kafka 4.3.1 (2026-11-26, bench/fetch_cpu.py, native
    # path): 100 B lz4 0.69 -> 0.35 CPU-s per million in ranges of 31,250; ranges of 125,000
    # no slower (0.32/0.38 -> 0.25/0.25 CPU-s/M, none/lz4). Inside Spark, bench/steady_state.py
    # with maxPartitions=2: commit 916b9d2 (its message has the runs).
    #
    # Records bound it too (queued.min.messages 20,000, librdkafka's 100,000): a task keeps up
    # to four partitions assigned ahead (fetch._Ahead), each prefetched to the bound and the
    # rest past its range's end decoded for nothing. 4 MiB of 100 B records is 40,000, more
    # than a range of 31,250 holds. Measured 2026-11-27 on Kafka 4.0.1, idle: outside Spark
    # (tasks of four such ranges, lz4) 2.2 -> 0.9 CPU-s per 2M records, peak heap in use 229 ->
    # 148 MiB; bench/steady_state.py --tuned kafka.queued.min.messages=20000, maxPartitions=2:
    # 100 B lz4 679,000 -> 796,000 records/s, 2.20 -> 1.57 CPU-s per million (Spark's source
    # 644,000 and 1.74), 100 B none unchanged. Larger records reach the 4 MiB first (4,096
    # records of 1 KB), so this bound does not touch them. 20,000 records of 100 B still last
    # a task tens of milliseconds, longer than fetch.queue.backoff.ms.
    config: dict[str, Any] = {
        "fetch.wait.max.ms": 10,
        "fetch.queue.backoff.ms": 10,
        PREFETCH_KBYTES_KEY: PREFETCH_KBYTES,
        "queued.min.messages": PREFETCH_RECORDS,
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
            **NO_AUTO_CREATE,
        }
    )
    return config


def prefetch_adapts(opts: CommonOptions) -> bool:
    """Whether the fetchers' prefetch depth is ours to choose per task (deeper for long ranges,
    spark_groupsource/executor/prefetch.py): the user set no ``kafka.queued.max.messages.kbytes``."""
    return PREFETCH_KBYTES_KEY not in opts.kafka_params


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
    "exclude.internal.topics": ("exclude_internal_topics", _bool_value),
}


def membership_config(opts: CommonOptions) -> dict[str, Any]:
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
                    f"kafka.{prop}", f"expected an integer, got {shown(prop, params[prop])}"
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
    out.setdefault("metadata_max_age_ms", MEMBER_METADATA_MAX_AGE_MS)
    out.update(opts.security.kafka_python())
    # the consumer's keyword (kafka-python 3.0.12 does not pass it on to its metadata: the
    # member's client factory does, spark_groupsource/group/no_auto_create.py)
    out["allow_auto_create_topics"] = False
    if isinstance(out.get("bootstrap_servers"), str):
        out["bootstrap_servers"] = [s.strip() for s in out["bootstrap_servers"].split(",") if s.strip()]
    return out


#: Properties only a consumer understands; an admin client given them warns on every start.
_CONSUMER_ONLY = frozenset(
    {
        "group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store",
        "enable.partition.eof", "auto.offset.reset", "isolation.level", "fetch.wait.max.ms",
        "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.message.max.bytes",
        "queued.min.messages", "queued.max.messages.kbytes", "session.timeout.ms",
        "heartbeat.interval.ms", "max.poll.interval.ms", "partition.assignment.strategy",
        "auto.commit.interval.ms", "check.crcs", "client.rack", "group.protocol",
        "group.remote.assignor", "fetch.queue.backoff.ms", "fetch.error.backoff.ms",
    }
)


def admin_config(config: Mapping[str, object]) -> dict[str, object]:
    """The connection part of a librdkafka consumer config (servers, security, client id), for
    an AdminClient, which warns about consumer-only properties; never creating topics (an
    AdminClient's ``allow.auto.create.topics`` defaults to true: :data:`NO_AUTO_CREATE`)."""
    return {**{k: v for k, v in config.items() if k not in _CONSUMER_ONLY}, **NO_AUTO_CREATE}
