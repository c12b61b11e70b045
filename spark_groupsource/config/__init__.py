"""What the user typed, parsed once: options, subscription and offset specs, security, client configs.

The package's public surface is this file (``from spark_groupsource import config as opt``); the
modules behind it hold one idea each:

- :mod:`.options`         the frozen option objects and their defaults (the option table)
- :mod:`.specs`           subscription and start/stop offset specs, as values
- :mod:`.names`           option names, refused options and why
- :mod:`.parsing`         raw Spark option maps into option objects, with errors that name the option
- :mod:`.secrets`         which values are secrets; maps that never show them
- :mod:`.security`        security options translated once for both Kafka clients
- :mod:`.access`          what a refused connection means (login, TLS, ACLs)
- :mod:`.client_configs`  librdkafka and kafka-python configurations derived from the options
"""

from spark_groupsource.config.client_configs import (
    MEMBERSHIP_TRANSLATIONS,
    admin_config,
    fetcher_config,
    membership_config,
    prefetch_adapts,
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
    DEFAULT_SESSION_TIMEOUT_MS,
    FETCHER_PLACEHOLDER_GROUP,
    BatchOptions,
    CommonOptions,
    StreamOptions,
    first_join_bound_ms,
    heartbeat_interval_ms,
)
from spark_groupsource.config.parsing import (
    did_you_mean,
    parse_batch_options,
    parse_bool_option,
    parse_stream_options,
    parse_time_ms,
    validate_definition,
)
from spark_groupsource.config.secrets import KafkaParams, is_secret, redacted
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

__all__ = [
    "DEFAULT_ASSIGNOR",
    "DEFAULT_BROKER_OUTAGE_TIMEOUT_MS",
    "DEFAULT_FETCH_OFFSET_NUM_RETRIES",
    "DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS",
    "DEFAULT_GROUP_JOIN_TIMEOUT_MS",
    "DEFAULT_MAX_BYTES_PER_ARROW_BATCH",
    "DEFAULT_MAX_RECORDS_PER_ARROW_BATCH",
    "DEFAULT_MAX_TRIGGER_DELAY",
    "DEFAULT_POLL_TIMEOUT_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "FETCHER_PLACEHOLDER_GROUP",
    "MEMBERSHIP_TRANSLATIONS",
    "BatchOptions",
    "CommonOptions",
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
    "admin_config",
    "did_you_mean",
    "fetcher_config",
    "first_join_bound_ms",
    "heartbeat_interval_ms",
    "is_secret",
    "membership_config",
    "parse_batch_options",
    "parse_bool_option",
    "parse_stream_options",
    "parse_time_ms",
    "prefetch_adapts",
    "redacted",
    "validate_definition",
]
