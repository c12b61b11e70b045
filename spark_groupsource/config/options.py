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
``maxPartitions``                      positive int: at most this many tasks per batch,
                                       ranges packed whole (set it to the executors' cores
                                       for small records); unset: a task per range
                                       (small ones shared: ``smallRangesPerTask``)
``smallRangesPerTask``                 positive int, default 16: ranges of fewer than 10,000
                                       records share a task, up to this many and 10,000
                                       records (not with min/maxPartitions); 1: a task per
                                       range
``includeHeaders``                     ``false`` (default) / ``true``
``failOnDataLoss``                     ``true`` (default) / ``false``
``commitOffsets``                      ``true`` (default) / ``false``: commit each completed
                                       micro-batch to the group
``maxRecordsPerArrowBatch``            positive int, default 10000: rows per Arrow batch
``maxBytesPerArrowBatch``              positive int, default 4194304 (4 MiB): value bytes
                                       per Arrow batch (a batch ends at whichever bound
                                       comes first; one record larger than this is a batch)
``fetcher``                            ``auto`` (default) / ``native`` / ``python``: how
                                       executors read (native: librdkafka straight into
                                       Arrow buffers; python: confluent-kafka's Consumer)
``workerGcFreeze``                     ``true`` (default) / ``false``: freeze a Python
                                       worker's long-lived objects out of the full garbage
                                       collection Spark runs after every task
``workerTcpNoDelay``                   ``true`` (default) / ``false``: a Python worker's
                                       socket to Spark's JVM sends and acknowledges at once
                                       (no Nagle / delayed-ACK wait per task over TCP)
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
``metrics.port``                       streams: serve the member's metrics (lag, rebalances,
                                       commits) for Prometheus on this driver port; ``0``:
                                       any free port, named in the log; unset: off
``metrics.queryName``                  streams: the ``query`` label of those metrics
                                       (default: the group id)
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

from dataclasses import dataclass, field

from spark_groupsource.config.secrets import KafkaParams
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.config.specs import LatestOffsets, OffsetsSpec, Subscription

DEFAULT_ASSIGNOR = "range"
DEFAULT_MAX_RECORDS_PER_ARROW_BATCH = 10_000
#: 4 MiB: at 10 KB values a 64 MiB batch cost a task twice the CPU of a 4 MiB one (fresh
#: pages for every buffer of that size); 1 and 16 MiB were no better (docs/benchmarks.md)
DEFAULT_MAX_BYTES_PER_ARROW_BATCH = 4 * 1024 * 1024
DEFAULT_POLL_TIMEOUT_MS = 120_000
#: 16: a small range at the end of its partition reads in about 3 ms in a shared task (the
#: native fetcher fetches the next ranges' partitions meanwhile; alone: one fetch wait,
#: fetch.wait.max.ms 10, 12 ms), against 40-55 ms of Spark's own per Python task
#: (docs/benchmarks.md): sixteen cost about one task's share, and add about 50 ms to a batch
#: where every range had a core of its own.
DEFAULT_SMALL_RANGES_PER_TASK = 16
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1_000
DEFAULT_BROKER_OUTAGE_TIMEOUT_MS = 120_000
DEFAULT_GROUP_JOIN_TIMEOUT_MS = 120_000
#: ``session.timeout.ms`` where unset: the Java client's and kafka-python's default.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
#: Spark's Kafka source default for ``maxTriggerDelay`` (KafkaSourceProvider.DEFAULT_MAX_TRIGGER_DELAY)
DEFAULT_MAX_TRIGGER_DELAY = "15m"
#: librdkafka's Consumer needs a group.id even when it only assigns; batch queries without one
#: use this. The fetchers never subscribe or commit, so it never becomes a group.
FETCHER_PLACEHOLDER_GROUP = "spark-groupkafka-fetcher"


def heartbeat_interval_ms(session_timeout_ms: int | None, configured: int | None = None) -> int:
    """The classic member's heartbeat interval: ``heartbeat.interval.ms`` where set, else a
    third of the session timeout (Java's rule of thumb) between 100 ms and Java's default 3 s.
    One rule for the member that heartbeats and for every bound counted in its heartbeats."""
    if configured:
        return int(configured)
    session = int(session_timeout_ms or DEFAULT_SESSION_TIMEOUT_MS)
    return max(100, min(3_000, session // 3))


@dataclass(frozen=True, kw_only=True)
class CommonOptions:
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
    #: How executors read: ``auto`` (native where built), ``native``, ``python``.
    fetcher: str = "auto"
    #: Freeze a Python worker's long-lived objects out of Spark's per-task gc.collect().
    worker_gc_freeze: bool = True
    #: TCP_NODELAY and prompt ACKs on a Python worker's socket to the JVM (task_socket.py).
    worker_tcp_no_delay: bool = True
    #: At most this many tasks per batch, ranges packed whole (maxPartitions); None: one per range.
    max_partitions: int | None = None
    #: Ranges of fewer than 10,000 records share a task, up to this many (smallRangesPerTask).
    small_ranges_per_task: int = DEFAULT_SMALL_RANGES_PER_TASK
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
    #: the security options, parsed once for both clients (see :mod:`spark_groupsource.config.security`)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    #: typed-records options (valueFormat, schemaRegistry.*, ...), raw: spark_groupsource.decode.options
    decode_params: KafkaParams = field(default_factory=KafkaParams)


#: Kafka's default max.poll.interval.ms: the rebalance timeout a member sends in JoinGroup
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000


def first_join_bound_ms(group_join_timeout_ms: int, max_poll_interval_ms: int | None) -> int:
    """How long a member may wait for its first assignment once its coordinator answers: a
    rebalance waits for every member to rejoin, up to the rebalance timeout
    (``kafka.max.poll.interval.ms``, +5 s as Java's JoinGroup request timeout), and another
    member giving up its partitions at the end of a long batch is no fault of the joining one
    (Java's consumer waits as long). ``groupJoinTimeoutMs`` bounds the rest: finding the
    brokers and the coordinator."""
    return max(group_join_timeout_ms, (max_poll_interval_ms or DEFAULT_REBALANCE_TIMEOUT_MS) + 5_000)


@dataclass(frozen=True, kw_only=True)
class StreamOptions(CommonOptions):
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``: hold a batch until this many records are available ...
    min_offsets_per_trigger: int | None = None
    #: ... or until this long has passed since the previous batch started (``maxTriggerDelay``)
    max_trigger_delay_ms: int = 15 * 60 * 1000
    #: ``metrics.port``: serve the driver's member metrics on this port (0: any free one); None: off
    metrics_port: int | None = None
    #: ``metrics.queryName``: the ``query`` label of those metrics (None: the group id)
    metrics_query_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class BatchOptions(CommonOptions):
    ending: OffsetsSpec = field(default_factory=LatestOffsets)
    group_coordinated: bool = False


