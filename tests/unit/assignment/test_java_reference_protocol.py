"""The Java client's ConsumerProtocolTest, ported (apache/kafka clients/src/test/java/org/apache/
kafka/clients/consumer/internals/ConsumerProtocolTest.java). Each test names the method it ports."""

from __future__ import annotations

import struct

import pytest

from assignment import MemberAssignment, Subscription, TopicPartition
from assignment.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

TP1 = TopicPartition("foo", 1)
TP2 = TopicPartition("bar", 2)
GENERATION = 1
RACK = "rack-a"


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


@pytest.mark.parametrize("version", range(4))
def test_serialize_deserialize_subscription_all_versions(version):
    # serializeDeserializeSubscriptionAllVersions, serializeDeserializeConsumerProtocolSubscriptionAllVersions
    owned = (TopicPartition("foo", 0), TopicPartition("bar", 0))
    sub = Subscription("m", ("foo", "bar"), b"hello", owned, GENERATION, RACK)
    back = decode_subscription("m", encode_subscription(sub, version))
    assert set(back.topics) == {"foo", "bar"}
    assert back.user_data == b"hello"
    assert back.group_instance_id is None
    assert set(back.owned_partitions) == (set(owned) if version >= 1 else set())
    assert back.generation == (GENERATION if version >= 2 else -1)
    assert back.rack_id == (RACK if version >= 3 else None)


def test_serialize_deserialize_metadata():  # serializeDeserializeMetadata
    back = decode_subscription("m", encode_subscription(Subscription("m", ("foo", "bar"), b"")))
    assert set(back.topics) == {"foo", "bar"} and back.user_data == b""
    assert back.group_instance_id is None and back.generation == -1 and back.rack_id is None


def test_serialize_deserialize_metadata_and_group_instance_id():
    # serializeDeserializeMetadataAndGroupInstanceId
    data = encode_subscription(Subscription("m", ("foo", "bar"), b""))
    back = decode_subscription("m", data, group_instance_id="instance.id")
    assert back.group_instance_id == "instance.id" and set(back.topics) == {"foo", "bar"}
    assert back.generation == -1 and back.rack_id is None


def test_serialize_deserialize_null_subscription_user_data():
    # serializeDeserializeNullSubscriptionUserData
    back = decode_subscription("m", encode_subscription(Subscription("m", ("foo", "bar"), None)))
    assert back.user_data is None and back.rack_id is None


def test_serialize_subscription_should_order_topics():  # serializeSubscriptionShouldOrderTopics
    a = Subscription("m", ("foo", "bar"), None, (TP1, TP2))
    b = Subscription("m", ("bar", "foo"), None, (TP1, TP2))
    assert encode_subscription(a) == encode_subscription(b)


def test_serialize_subscription_should_order_owned_partitions():
    # serializeSubscriptionShouldOrderOwnedPartitions
    a = Subscription("m", ("foo", "bar"), None, (TP1, TP2))
    b = Subscription("m", ("foo", "bar"), None, (TP2, TP1))
    assert encode_subscription(a) == encode_subscription(b)
    # and the bytes are Java's: topics sorted, owned grouped by topic in topic order
    interleaved = Subscription("m", ("foo", "bar"), None,
                               (TopicPartition("foo", 3), TP2, TopicPartition("foo", 1)))
    data = encode_subscription(interleaved, 1)
    want = (struct.pack(">hi", 1, 2) + _string("bar") + _string("foo") + struct.pack(">i", -1)
            + struct.pack(">i", 2) + _string("bar") + struct.pack(">ii", 1, 2)
            + _string("foo") + struct.pack(">iii", 2, 1, 3))
    assert data == want


def test_deserialize_old_subscription_version():  # deserializeOldSubscriptionVersion
    back = decode_subscription("m", encode_subscription(Subscription("m", ("foo", "bar")), 0))
    assert set(back.topics) == {"foo", "bar"} and back.user_data is None
    assert back.owned_partitions == () and back.generation == -1 and back.rack_id is None


def test_deserialize_future_subscription_version():  # deserializeFutureSubscriptionVersion
    # version 100 with every known field plus an unknown trailing string "bar"
    data = (struct.pack(">hi", 100, 1) + _string("topic") + struct.pack(">i", 0)
            + struct.pack(">i", 1) + _string(TP2.topic) + struct.pack(">ii", 1, TP2.partition)
            + struct.pack(">i", GENERATION) + _string(RACK) + _string("bar"))
    back = decode_subscription("m", data, group_instance_id="instance.id")
    assert back.topics == ("topic",) and back.owned_partitions == (TP2,)
    assert back.group_instance_id == "instance.id"
    assert back.generation == GENERATION and back.rack_id == RACK


@pytest.mark.parametrize("version", range(4))
def test_serialize_deserialize_assignment_all_versions(version):
    # serializeDeserializeAssignmentAllVersions, serializeDeserializeConsumerProtocolAssignmentAllVersions
    back = decode_assignment(encode_assignment(MemberAssignment((TP1, TP2), b"hello"), version))
    assert set(back.partitions) == {TP1, TP2} and back.user_data == b"hello"


def test_serialize_deserialize_assignment():  # serializeDeserializeAssignment
    back = decode_assignment(encode_assignment(MemberAssignment((TP1, TP2), b"")))
    assert set(back.partitions) == {TP1, TP2} and back.user_data == b""


def test_deserialize_null_assignment_user_data():  # deserializeNullAssignmentUserData
    back = decode_assignment(encode_assignment(MemberAssignment((TP1, TP2), None)))
    assert set(back.partitions) == {TP1, TP2} and back.user_data is None


def test_deserialize_future_assignment_version():  # deserializeFutureAssignmentVersion
    data = (struct.pack(">hi", 100, 1) + _string(TP1.topic) + struct.pack(">ii", 1, TP1.partition)
            + struct.pack(">i", 0) + _string("bar"))
    assert set(decode_assignment(data).partitions) == {TP1}
