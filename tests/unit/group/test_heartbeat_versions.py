"""Which ApiVersions answers the KIP-848 member refuses at once (librdkafka's "feature" lines)."""

from __future__ import annotations

import pytest

from spark_groupsource.group.consumer_member import heartbeat_versions_refusal

#: as librdkafka 2.16 logged them against Apache Kafka 3.9.1 (default settings) and 4.x
KAFKA_39 = "127.0.0.1:29392/bootstrap:   ApiKey ConsumerGroupHeartbeat (68) Versions 0..0"
KAFKA_40 = "127.0.0.1:9092/1:   ApiKey ConsumerGroupHeartbeat (68) Versions 0..1"


def test_kafka_3_9s_v0_only_is_refused_naming_versions_and_what_is_needed():
    why = heartbeat_versions_refusal(KAFKA_39)
    assert why is not None
    assert "ConsumerGroupHeartbeat v0..v0" in why and "before 4.0" in why and "needs v1" in why


@pytest.mark.parametrize("line", [
    KAFKA_40,
    KAFKA_40.replace("0..1", "0..2"),
    "127.0.0.1:9092/1:   ApiKey ConsumerGroupDescribe (69) Versions 0..0",
    "127.0.0.1:9092/1:  Feature BrokerBalancedConsumer: ConsumerGroupHeartbeat (0..32767) supported by broker",
])
def test_brokers_that_serve_v1_and_other_lines_pass(line):
    assert heartbeat_versions_refusal(line) is None
