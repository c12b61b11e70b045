"""The consumer embedded protocol, byte for byte as the Java client writes it.

Members of one group may run different clients (Java, librdkafka, this one),
so the leader must read and write exactly the Java layouts:

* ``ConsumerProtocolSubscription`` v0-v3 (JoinGroup member metadata)::

      version int16, topics [string], user_data nullable bytes,
      v1+ owned_partitions [topic string, partitions [int32]],
      v2+ generation_id int32, v3+ rack_id nullable string

* ``ConsumerProtocolAssignment`` v0-v3 (SyncGroup member state)::

      version int16, assigned_partitions [topic string, partitions [int32]],
      user_data nullable bytes

Non-flexible versions: arrays have an int32 length, strings an int16 length,
and a nullable field is written with length -1. Like Java, a decoder handed a
newer version reads the fields it knows and ignores the rest, which is what
lets a group roll forward to a new client version.

The sticky user data lives here too (KIP-341): the eager ``StickyAssignor``
reports its previous assignment and generation in user data, the
``CooperativeStickyAssignor`` only its generation.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignment.errors import ProtocolDecodeError
from assignment.model import MemberAssignment, Subscription, TopicPartition

SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3
DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Truncated(Exception):
    pass


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.parts.append(_I16.pack(-1))
            return
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise ValueError(f"string too long for the protocol: {len(b)} bytes")
        self.parts.append(_I16.pack(len(b)))
        self.parts.append(b)

    def nbytes(self, b: bytes | None) -> None:
        if b is None:
            self.parts.append(_I32.pack(-1))
        else:
            self.parts.append(_I32.pack(len(b)))
            self.parts.append(bytes(b))

    def topic_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        # Grouped by topic in order of first appearance, as Java's mapKey collection does.
        grouped: dict[str, list[int]] = {}
        for tp in partitions:
            grouped.setdefault(tp.topic, []).append(tp.partition)
        self.topic_partition_lists(grouped)

    def topic_partition_lists(self, grouped: Mapping[str, Iterable[int]]) -> None:
        self.int32(len(grouped))
        for topic, parts in grouped.items():
            self.string(topic)
            parts = list(parts)
            self.int32(len(parts))
            if parts:
                self.parts.append(struct.pack(f">{len(parts)}i", *parts))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise _Truncated(f"needed {n} bytes at offset {self.pos}, only {len(self.data) - self.pos} left")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise _Truncated(f"invalid string length {n}")
        raw = bytes(self._take(n))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Truncated(f"string is not UTF-8: {e}") from None

    def nbytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise _Truncated(f"invalid bytes length {n}")
        return bytes(self._take(n))

    def int32_array(self) -> tuple[int, ...]:
        n = self.int32()
        if n < 0:
            raise _Truncated(f"invalid array length {n}")
        raw = self._take(4 * n)
        return struct.unpack(f">{n}i", raw)

    def topic_partitions(self) -> list[TopicPartition]:
        n = self.int32()
        if n < 0:
            raise _Truncated(f"invalid array length {n}")
        out: list[TopicPartition] = []
        for _ in range(n):
            topic = self.string()
            assert topic is not None
            out.extend(TopicPartition(topic, p) for p in self.int32_array())
        return out


# --------------------------------------------------------------------------- subscription


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_MAX_VERSION) -> bytes:
    """JoinGroup member metadata; fields newer than ``version`` are dropped, as in Java.

    Topics and owned partitions are sorted first, as Java does (KAFKA-12898):
    the coordinator compares metadata bytes, so the same subscription in
    another order would look like a change and trigger a needless rebalance.
    """
    if not 0 <= version <= SUBSCRIPTION_MAX_VERSION:
        raise ValueError(f"subscription version must be 0..{SUBSCRIPTION_MAX_VERSION}, got {version}")
    w = _Writer()
    w.int16(version)
    topics = sorted(sub.topics)
    w.int32(len(topics))
    for t in topics:
        w.string(t)
    w.nbytes(sub.user_data)
    if version >= 1:
        w.topic_partitions(sorted(sub.owned_partitions))
    if version >= 2:
        w.int32(sub.generation)
    if version >= 3:
        w.string(sub.rack_id)
    return w.getvalue()


def decode_subscription(
    member_id: str, data: bytes, group_instance_id: str | None = None
) -> Subscription:
    """Read a member's metadata; raise ProtocolDecodeError naming the member if corrupt."""
    try:
        r = _Reader(data)
        version = r.int16()
        if version < 0:
            raise _Truncated(f"invalid version {version}")
        n = r.int32()
        if n < 0:
            raise _Truncated(f"invalid topic count {n}")
        topics = []
        for _ in range(n):
            t = r.string()
            assert t is not None
            topics.append(t)
        user_data = r.nbytes()
        owned: tuple[TopicPartition, ...] = ()
        generation = DEFAULT_GENERATION
        rack_id = None
        if version >= 1:
            owned = tuple(r.topic_partitions())
        if version >= 2:
            generation = r.int32()
        if version >= 3:
            rack_id = r.string(nullable=True)
    except (_Truncated, struct.error) as e:
        raise ProtocolDecodeError("subscription", str(e), member_id) from None
    return Subscription(
        member_id=member_id,
        topics=tuple(topics),
        user_data=user_data,
        owned_partitions=owned,
        generation=generation if generation >= 0 else DEFAULT_GENERATION,
        rack_id=rack_id,
        group_instance_id=group_instance_id,
    )


@dataclass(frozen=True, slots=True)
class DecodedMembers:
    """Subscriptions that decoded, and per-member errors for those that did not."""

    subscriptions: dict[str, Subscription]
    errors: dict[str, ProtocolDecodeError]


def decode_members(
    metadata: Mapping[str, bytes],
    group_instance_ids: Mapping[str, str | None] | None = None,
) -> DecodedMembers:
    """Decode a JoinGroup response's members; one bad member never stops the leader.

    The caller assigns the failed members nothing (and logs the errors), so the
    rest of the group keeps consuming.
    """
    from assignment._wirefast import SubscriptionDecoder

    ids = group_instance_ids or {}
    good: dict[str, Subscription] = {}
    bad: dict[str, ProtocolDecodeError] = {}
    fast = SubscriptionDecoder()
    for member_id, data in metadata.items():
        try:
            good[member_id] = fast.decode(member_id, bytes(data), ids.get(member_id))
            continue
        except (ValueError, struct.error, IndexError):  # UnicodeDecodeError is a ValueError
            pass
        try:  # the reference reader says exactly what is wrong
            good[member_id] = decode_subscription(member_id, data, ids.get(member_id))
        except ProtocolDecodeError as e:
            bad[member_id] = e
    return DecodedMembers(good, bad)


# --------------------------------------------------------------------------- assignment


def encode_assignment(a: MemberAssignment, version: int = ASSIGNMENT_MAX_VERSION) -> bytes:
    """SyncGroup member state (the layout is the same in v0-v3)."""
    if not 0 <= version <= ASSIGNMENT_MAX_VERSION:
        raise ValueError(f"assignment version must be 0..{ASSIGNMENT_MAX_VERSION}, got {version}")
    from assignment._compact import IndexedPartitions

    if isinstance(a.partitions, IndexedPartitions):
        from assignment._wirefast import AssignmentEncoder

        space = a.partitions.space
        enc = space.cache.get("encoder")
        if enc is None:
            enc = space.cache["encoder"] = AssignmentEncoder(space)
        return enc.encode(a.partitions, a.user_data, version)  # type: ignore[attr-defined]
    w = _Writer()
    w.int16(version)
    w.topic_partitions(a.partitions)
    w.nbytes(a.user_data)
    return w.getvalue()


def decode_assignment(data: bytes, member_id: str | None = None) -> MemberAssignment:
    """Read SyncGroup member state. Empty bytes mean "no assignment", as in Java."""
    if len(data) == 0:
        return MemberAssignment((), None)
    try:
        r = _Reader(data)
        version = r.int16()
        if version < 0:
            raise _Truncated(f"invalid version {version}")
        parts = r.topic_partitions()
        user_data = r.nbytes()
    except (_Truncated, struct.error) as e:
        raise ProtocolDecodeError("assignment", str(e), member_id) from None
    return MemberAssignment(tuple(parts), user_data)


# --------------------------------------------------------------------------- sticky user data


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """Java StickyAssignor user data: the previous assignment and its generation (-1 if v0)."""

    partitions: tuple[TopicPartition, ...]
    generation: int = DEFAULT_GENERATION


def _group_sorted(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def encode_sticky_user_data(
    partitions: Iterable[TopicPartition], generation: int | None = DEFAULT_GENERATION
) -> bytes:
    """KIP-341 v1 (``generation=None`` writes v0: the assignment without a generation)."""
    w = _Writer()
    w.topic_partition_lists(_group_sorted(partitions))
    if generation is not None:
        w.int32(generation)
    return w.getvalue()


def decode_sticky_user_data(data: bytes, member_id: str | None = None) -> StickyUserData:
    """Try v1, fall back to v0 (generation -1), as the Java StickyAssignor does."""
    try:
        r = _Reader(data)
        parts = r.topic_partitions()
        generation = r.int32() if r.remaining() >= 4 else DEFAULT_GENERATION
    except (_Truncated, struct.error) as e:
        raise ProtocolDecodeError("sticky assignor user data", str(e), member_id) from None
    return StickyUserData(tuple(parts), generation)


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: just the int32 generation."""
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation, or None when absent or too short (Java's BufferUnderflow case)."""
    if data is None or len(data) < 4:
        return None
    return _I32.unpack_from(data, 0)[0]


# --------------------------------------------------------------------------- generic helpers


def encode_versioned_partitions(version: int, partitions: Iterable[TopicPartition]) -> bytes:
    """int16 version + [topic string, [int32]]: the layout of our own assignor user data."""
    w = _Writer()
    w.int16(version)
    w.topic_partition_lists(_group_sorted(partitions))
    return w.getvalue()


def decode_versioned_partitions(
    data: bytes, what: str, member_id: str | None = None
) -> tuple[int, tuple[TopicPartition, ...]]:
    """Inverse of encode_versioned_partitions; newer versions may append fields."""
    try:
        r = _Reader(data)
        version = r.int16()
        if version < 0:
            raise _Truncated(f"invalid version {version}")
        return version, tuple(r.topic_partitions())
    except (_Truncated, struct.error) as e:
        raise ProtocolDecodeError(what, str(e), member_id) from None
