"""Option names: their documented spelling, the ones refused and why, stream-only and batch-only."""

from __future__ import annotations

# Lower-cased option -> reason it is refused and what to use instead.
CONTROLLED = {
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

STREAM_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
               "metrics.port", "metrics.queryname"}
BATCH_ONLY = {
    "endingoffsets",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "groupcoordinated",
}
# Our non-kafka options in their documented spelling (keys arrive lower-cased).
OPTION_NAMES = [
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
    "maxPartitions",
    "smallRangesPerTask",
    "includeHeaders",
    "failOnDataLoss",
    "commitOffsets",
    "maxRecordsPerArrowBatch",
    "maxBytesPerArrowBatch",
    "fetcher",
    "workerGcFreeze",
    "workerTcpNoDelay",
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
    # the driver's member as metrics on a Prometheus endpoint (spark_groupsource/metrics/)
    "metrics.port",
    "metrics.queryName",
    # typed records from a Schema Registry (spark_groupsource/decode/options.py)
    *(DECODE_NAMES := (
        "valueFormat", "keyFormat", "schemaRegistry.url", "valueSubject", "keySubject",
        "valueSubjectNameStrategy", "keySubjectNameStrategy", "valueSchemaVersion",
        "keySchemaVersion", "valueSchema", "keySchema", "mode", "schemaRegistryOutageTimeoutMs",
        "valueMessageName", "keyMessageName", "valueRecordName", "keyRecordName",
    )),
]
#: lower-cased decode option names, and the prefix of the registry client's properties
DECODE_OPTIONS = frozenset(n.lower() for n in DECODE_NAMES)
DECODE_PREFIX = "schemaregistry."
SPELLING = {n.lower(): n for n in OPTION_NAMES}
_REFUSED_SPELLING = {"groupidprefix": "groupIdPrefix"}


def option_name(key: str) -> str:
    """The documented spelling of a (lower-cased) option name, for messages."""
    if key.startswith("kafka."):
        return key
    return SPELLING.get(key) or _REFUSED_SPELLING.get(key, key)


