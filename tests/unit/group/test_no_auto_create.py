"""The classic member's kafka-python client never lets a Metadata request create a topic (issue 52):
kafka-python 3.0.12 does not pass ``allow_auto_create_topics`` on to its cluster metadata, whose
own default is true. tests/integration/test_topic_never_created.py shows it on a broker."""

from __future__ import annotations

import pytest
from kafka.cluster import ClusterMetadata
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.net.compat import KafkaNetClient
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.metadata import MetadataRequest

from spark_groupsource.config import parse_batch_options, parse_stream_options
from spark_groupsource.group.factory import classic_config
from spark_groupsource.group.kafka_client import Callbacks, KafkaGroupClient
from spark_groupsource.group.no_auto_create import forbid_auto_create, member_client

#: The first Metadata version with the field; versions 0-3 let the broker create what they name
FIELD_SINCE = 4


def test_kafka_python_alone_would_allow_creation() -> None:
    """Why the factory exists: the consumer keyword does not reach the requests (if a kafka-python
    upgrade fixes that, this fails and the factory may go)."""
    client = KafkaNetClient(bootstrap_servers=["127.0.0.1:1"], allow_auto_create_topics=False)
    try:
        client.cluster.set_topics({"orders"})
        assert client.cluster.metadata_request().allow_auto_topic_creation is True
    finally:
        client.close()


@pytest.mark.parametrize("version", range(FIELD_SINCE, MetadataRequest.max_version + 1))
def test_every_metadata_request_version_says_no(version: int) -> None:
    client = member_client(bootstrap_servers=["127.0.0.1:1"], api_version=(2, 3))
    try:
        client.cluster.set_topics({"orders", "payments"})
        request = client.cluster.metadata_request()
        sent = MetadataRequest.decode(request.encode(version=version), version=version)
        assert sent.allow_auto_topic_creation is False
        assert {t.name for t in sent.topics} == {"orders", "payments"}
    finally:
        client.close()


def test_the_member_sends_a_version_with_the_field() -> None:
    # the member pins api_version 2.3 (factory.py): Metadata v8; a newer broker's answer to
    # ApiVersions only raises it
    assert BrokerVersionData((2, 3)).api_version(MetadataRequest) >= FIELD_SINCE


@pytest.mark.parametrize("parse", [parse_stream_options, lambda o: parse_batch_options({**o, "groupcoordinated": "true"})],
                         ids=["stream", "backfill"])
def test_the_member_never_allows_creation(parse) -> None:
    """The classic member as the factory builds it (no connection: ``api_version`` is given)."""
    config = classic_config(parse({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.group.id": "g",
                                   "subscribe": "orders"}))
    assert config.client_config["allow_auto_create_topics"] is False
    callbacks = Callbacks(revoked=None, assigned=lambda tps: None, lost=lambda tps: None,
                          assign=None, broker_assigns=lambda gen, proto: None)
    client = KafkaGroupClient(group_id="g", topics=["orders"], pattern=None, group_instance_id=None,
                              client_rack=None, client_config=config.client_config, partition_assignors=[RangePartitionAssignor],
                              callbacks=callbacks)
    try:
        cluster = client._consumer._client.cluster
        cluster.set_topics({"orders"})
        assert cluster.metadata_request().allow_auto_topic_creation is False
    finally:
        client.close()


def test_a_kafka_python_without_the_setting_fails_loudly() -> None:
    class Client:
        cluster = ClusterMetadata(bootstrap_servers=["127.0.0.1:1"])

    Client.cluster.config.pop("allow_auto_create_topics")
    with pytest.raises(RuntimeError, match="allow_auto_create_topics"):
        forbid_auto_create(Client())
