"""The classic member's kafka-python client never lets a Metadata request create a topic.

kafka-python 3.0.12 takes ``allow_auto_create_topics`` as a consumer keyword (default true) but
never passes it to the ``ClusterMetadata`` its connection manager builds
(``kafka/net/manager.py``: only the servers, the metadata age and the DNS lookup), whose own
default is true: every Metadata request then goes out with ``allow_auto_topic_creation=true``
(``ClusterMetadata.metadata_request``), naming the subscribed topics. On a broker with
``auto.create.topics.enable=true`` (Kafka's default) a topic an operator deleted under a running
query was created again within a metadata refresh (Spark's own source leaves it deleted).

:func:`member_client` is the ``kafka_client`` factory the member's ``KafkaConsumer`` is given
(spark_groupsource/group/kafka_client.py): the same ``KafkaNetClient``, its cluster metadata told
``allow_auto_create_topics=False`` before the first request (the bootstrap) is sent. Metadata
requests of versions 0-3 carry no such field and let the broker create the topics they name;
kafka-python sends the highest version both sides know (4 or more for any Kafka from 0.11, and
the member pins ``api_version`` 2.3: version 8), so that never happens with the brokers we support.
tests/unit/group/test_no_auto_create.py checks every version from 4 up.
"""

from __future__ import annotations

from typing import Any

from kafka.net.compat import KafkaNetClient

__all__ = ["member_client", "forbid_auto_create"]


def forbid_auto_create(client: Any) -> Any:
    """Tell ``client``'s cluster metadata (a ``KafkaNetClient``'s) never to allow auto-creation."""
    cluster = client.cluster
    if "allow_auto_create_topics" not in cluster.config:
        # a kafka-python whose ClusterMetadata no longer reads this key: fail loudly rather than
        # let its requests default to auto-creation again
        raise RuntimeError("kafka-python's ClusterMetadata has no allow_auto_create_topics setting; "
                           "see spark_groupsource/group/no_auto_create.py")
    cluster.config["allow_auto_create_topics"] = False
    return client


def member_client(**configs: Any) -> KafkaNetClient:
    """``KafkaConsumer(kafka_client=member_client)``: a ``KafkaNetClient`` whose Metadata requests
    never allow auto-creation."""
    return forbid_auto_create(KafkaNetClient(**configs))
