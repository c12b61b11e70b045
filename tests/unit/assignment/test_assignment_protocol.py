"""Byte-exact encodings, cross-checked against kafka-python's independent encoders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignment.errors import ProtocolDecodeError
from assignment.model import MemberAssignment, Subscription, TopicPartition
from assignment.protocol import (
    decode_assignment,
    decode_cooperative_user_data,
    decode_members,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)

kp_meta = pytest.importorskip("kafka.protocol.consumer.metadata")
kp_sticky = pytest.importorskip("kafka.coordinator.assignors.sticky.user_data")
KSub = kp_meta.ConsumerProtocolSubscription
KAsg = kp_meta.ConsumerProtocolAssignment
KUser = kp_sticky.StickyAssignorUserData

TP = TopicPartition


def _grouped(parts):
    out: dict[str, list[int]] = {}
    for tp in parts:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _kafka_sub(sub: Subscription, version: int) -> bytes:
    """kafka-python's encoder fed in Java's order (it does not sort by itself, Java does)."""
    owned = [KSub.TopicPartition(topic=t, partitions=p)
             for t, p in _grouped(sorted(sub.owned_partitions)).items()]
    kw = dict(topics=sorted(sub.topics), user_data=sub.user_data)
    if version >= 1:
        kw["owned_partitions"] = owned
    if version >= 2:
        kw["generation_id"] = sub.generation
    if version >= 3:
        kw["rack_id"] = sub.rack_id
    return KSub(version=version, **kw).encode(version=version)


topic_names = st.text(alphabet="abcxyz-._0123456789", min_size=1, max_size=8)
partition_lists = st.lists(
    st.builds(TopicPartition, topic_names, st.integers(0, 2**31 - 1)), max_size=8, unique=True
).map(lambda ps: tuple(sorted(ps)))
subscriptions = st.builds(
    Subscription,
    member_id=st.just("m"),
    topics=st.lists(topic_names, max_size=5).map(tuple),
    user_data=st.one_of(st.none(), st.binary(max_size=16)),
    # any order: the encoder sorts, as Java's does
    owned_partitions=st.lists(
        st.builds(TopicPartition, topic_names, st.integers(0, 2**31 - 1)), max_size=8, unique=True
    ).map(tuple),
    generation=st.integers(-1, 2**31 - 1),
    rack_id=st.one_of(st.none(), st.text(max_size=6)),
)


@settings(max_examples=80, deadline=None)
@given(subscriptions, st.integers(0, 3))
def test_subscription_matches_kafka_python_and_round_trips(sub, version):
    data = encode_subscription(sub, version)
    assert data == _kafka_sub(sub, version)
    back = decode_subscription("m", data)
    assert back.topics == tuple(sorted(sub.topics))
    assert back.user_data == sub.user_data
    assert back.owned_partitions == (tuple(sorted(sub.owned_partitions)) if version >= 1 else ())
    assert back.generation == (sub.generation if version >= 2 else -1)
    assert back.rack_id == (sub.rack_id if version >= 3 else None)


@settings(max_examples=80, deadline=None)
@given(partition_lists, st.one_of(st.none(), st.binary(max_size=16)), st.integers(0, 3))
def test_assignment_matches_kafka_python_and_round_trips(parts, user_data, version):
    a = MemberAssignment(parts, user_data)
    data = encode_assignment(a, version)
    ref = KAsg(
        version=version,
        assigned_partitions=[KAsg.TopicPartition(topic=t, partitions=p) for t, p in _grouped(parts).items()],
        user_data=user_data,
    ).encode(version=version)
    assert data == ref
    assert decode_assignment(data) == a


@settings(max_examples=60, deadline=None)
@given(partition_lists, st.integers(-1, 2**31 - 1))
def test_sticky_user_data_matches_kafka_python(parts, generation):
    ref = KUser(
        previous_assignment=[KUser.TopicPartition(topic=t, partitions=p) for t, p in _grouped(parts).items()],
        generation=generation,
    )
    assert encode_sticky_user_data(parts, generation) == ref.encode(version=1, header=False)
    assert encode_sticky_user_data(parts, None) == ref.encode(version=0, header=False)
    assert decode_sticky_user_data(ref.encode(version=1, header=False)).generation == generation
    v0 = decode_sticky_user_data(ref.encode(version=0, header=False))
    assert v0.partitions == parts and v0.generation == -1


def test_v3_subscription_byte_vector_with_rack():
    sub = Subscription("m", ("t1",), None, (TP("t1", 0), TP("t1", 2)), 5, "rack-a")
    expected = (
        b"\x00\x03"                                  # version 3
        b"\x00\x00\x00\x01" b"\x00\x02t1"            # topics ["t1"]
        b"\xff\xff\xff\xff"                          # user_data null
        b"\x00\x00\x00\x01" b"\x00\x02t1"            # owned: t1
        b"\x00\x00\x00\x02" b"\x00\x00\x00\x00" b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x05"                          # generation 5
        b"\x00\x06rack-a"                            # rack id
    )
    assert encode_subscription(sub) == expected
    assert decode_subscription("m", expected) == sub


def test_v3_null_rack_is_length_minus_one():
    data = encode_subscription(Subscription("m", (), None, (), -1, None))
    assert data.endswith(b"\xff\xff\xff\xff" + b"\xff\xff")


def test_newer_version_with_trailing_fields_decodes():
    sub = Subscription("m", ("a",), b"u", (TP("a", 1),), 9, "r")
    v3 = encode_subscription(sub)
    v5 = b"\x00\x05" + v3[2:] + b"\x00\x00\x00\x2a" + b"\x00\x03xyz"
    assert decode_subscription("m", v5) == sub
    a = encode_assignment(MemberAssignment((TP("a", 1),), b"x"))
    assert decode_assignment(b"\x00\x07" + a[2:] + b"\x01\x02") == MemberAssignment((TP("a", 1),), b"x")


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x01\x00\x00\x00\x05\x00\x01a", b"\x00\x00\xff\xff\xff\xfe",
     b"\x00\x03\x00\x00\x00\x01\x00\x09ab"],
)
def test_corrupt_subscription_names_the_member(data):
    with pytest.raises(ProtocolDecodeError, match="consumer-7") as e:
        decode_subscription("consumer-7", data)
    assert e.value.member_id == "consumer-7"


def test_corrupt_assignment_and_empty_assignment():
    with pytest.raises(ProtocolDecodeError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x05")
    assert decode_assignment(b"") == MemberAssignment(())


def test_decode_members_isolates_a_bad_member():
    good = encode_subscription(Subscription("a", ("t",)))
    res = decode_members({"a": good, "b": b"\x00\x01\x00"}, {"a": "inst-a"})
    assert set(res.subscriptions) == {"a"}
    assert res.subscriptions["a"].group_instance_id == "inst-a"
    assert set(res.errors) == {"b"} and "'b'" in str(res.errors["b"])


def test_cooperative_user_data_is_int32_generation():
    assert encode_cooperative_user_data(7) == b"\x00\x00\x00\x07"
    assert decode_cooperative_user_data(b"\xff\xff\xff\xff") == -1
    assert decode_cooperative_user_data(b"\x00") is None
    assert decode_cooperative_user_data(None) is None
