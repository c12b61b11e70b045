"""The leader's bulk codec: a whole JoinGroup's subscriptions in, every SyncGroup assignment out.

Same bytes as ``protocol``'s reference functions, but built for a group of
thousands of members with a million owned partitions, where a field-by-field
reader spends seconds in Python calls. Two observations make it fast:

* members of one group repeat themselves: the topic list is usually the same
  bytes for everyone (one ``startswith`` reuses the decoded tuple), and owned
  partitions have the same *shape* (topic name lengths and partition counts), so
  one precompiled ``struct.Struct`` unpacks a member's whole owned section in C.
  The shape is then verified from the unpacked length and count fields, which
  fixes every field boundary; anything else takes the plain reader.
* an assignment held as sorted partition numbers (``IndexedPartitions``)
  encodes from per-topic header bytes joined in C, without TopicPartitions.

Any error in the fast path falls back to ``protocol.decode_subscription``,
which raises the ``ProtocolDecodeError`` naming the member.
"""

from __future__ import annotations

import struct
from itertools import chain, compress, islice
from operator import add, ne, sub

from assignment._compact import IndexedPartitions, WirePartitions
from assignment.model import Subscription

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_MAX_SHAPES = 64


class _Names(dict):
    """Topic name bytes -> str, decoded once per distinct name."""

    def __missing__(self, raw: bytes) -> str:
        s = raw.decode("utf-8")
        self[raw] = s
        return s


class SubscriptionDecoder:
    """Decodes many members' subscriptions, sharing what repeats between them."""

    __slots__ = ("_names", "_sections", "_shapes", "_owned_topics")

    def __init__(self) -> None:
        self._names = _Names()
        # owned entries' topic names, shared between members that list the same topics
        self._owned_topics: dict[tuple[bytes, ...], list[str]] = {}
        self._sections: list[tuple[bytes, tuple[str, ...]]] = []
        self._shapes: dict[tuple[int, bytes], tuple[struct.Struct, int, tuple[int, ...]]] = {}

    def decode(self, member_id: str, data: bytes, group_instance_id: str | None) -> Subscription:
        """Raises ValueError/struct.error/IndexError/UnicodeDecodeError on bad input."""
        version = _I16.unpack_from(data, 0)[0]
        if version < 0:
            raise ValueError("negative version")
        pos = 2
        topics = None
        for sec, tup in self._sections:
            if data.startswith(sec, 2):
                topics, pos = tup, 2 + len(sec)
                break
        if topics is None:
            topics, pos = self._topics(data)
        user_data, pos = _nbytes(data, pos)
        owned: WirePartitions | tuple = ()
        generation = -1
        rack_id = None
        if version >= 1:
            owned, pos = self._owned(data, pos)
        if version >= 2:
            generation = _I32.unpack_from(data, pos)[0]
            pos += 4
        if version >= 3:
            n = _I16.unpack_from(data, pos)[0]
            pos += 2
            if n >= 0:
                raw = data[pos:pos + n]
                if len(raw) != n:
                    raise ValueError("truncated rack id")
                rack_id = raw.decode("utf-8")
            elif n != -1:
                raise ValueError("bad rack id length")
        return Subscription(member_id, topics, user_data, owned,  # type: ignore[arg-type]
                            generation if generation >= 0 else -1, rack_id, group_instance_id)

    def _topics(self, data: bytes) -> tuple[tuple[str, ...], int]:
        n = _I32.unpack_from(data, 2)[0]
        if n < 0:
            raise ValueError("negative topic count")
        pos = 6
        names = self._names
        out = []
        for _ in range(n):
            ln = _I16.unpack_from(data, pos)[0]
            raw = data[pos + 2:pos + 2 + ln]
            if ln < 0 or len(raw) != ln:
                raise ValueError("bad topic name")
            out.append(names[raw])
            pos += 2 + ln
        tup = tuple(out)
        self._sections.insert(0, (data[2:pos], tup))
        del self._sections[8:]
        return tup, pos

    def _owned(self, data: bytes, pos: int) -> tuple[WirePartitions | tuple, int]:
        n = _I32.unpack_from(data, pos)[0]
        if n < 0:
            raise ValueError("negative owned partition count")
        pos += 4
        if n == 0:
            return (), pos
        # the shape guess: same entry count and same first entry layout as a member seen before
        ln = _I16.unpack_from(data, pos)[0]
        cnt = _I32.unpack_from(data, pos + 2 + ln)[0] if ln >= 0 else -1
        key = (n, ln, cnt)
        shape = self._shapes.get(key)
        if shape is not None:
            st, stride, lens = shape
            if pos + st.size <= len(data):
                vals = st.unpack_from(data, pos)
                if vals[0::stride] == lens and vals[2::stride] == (cnt,) * n:
                    raw = vals[1::stride]
                    topics = self._owned_topics.get(raw)
                    if topics is None:
                        topics = list(map(self._names.__getitem__, raw))
                        if len(self._owned_topics) < 256:
                            self._owned_topics[raw] = topics
                    if cnt == 1:
                        return WirePartitions(topics, None, n, vals[3::4]), pos + st.size
                    parts = [vals[j + 3:j + stride] for j in range(0, len(vals), stride)]
                    return WirePartitions(topics, parts, n * cnt), pos + st.size
        return self._owned_slow(data, pos, n, key)

    def _owned_slow(self, data: bytes, pos: int, n: int, key) -> tuple[WirePartitions, int]:
        names = self._names
        topics, parts, lens = [], [], []
        same_count = key[2]
        total = 0
        for _ in range(n):
            ln = _I16.unpack_from(data, pos)[0]
            raw = data[pos + 2:pos + 2 + ln]
            if ln < 0 or len(raw) != ln:
                raise ValueError("bad topic name")
            pos += 2 + ln
            c = _I32.unpack_from(data, pos)[0]
            if c < 0:
                raise ValueError("negative partition count")
            pos += 4
            ps = struct.unpack_from(f">{c}i", data, pos)
            pos += 4 * c
            topics.append(names[raw])
            parts.append(ps)
            lens.append(ln)
            total += c
            if c != same_count:
                same_count = -1
        if same_count >= 0 and len(self._shapes) < _MAX_SHAPES:
            fmt = ">" + "".join(f"h{ln}si{same_count}i" for ln in lens)
            self._shapes[key] = (struct.Struct(fmt), 3 + same_count, tuple(lens))
        return WirePartitions(topics, parts, total), pos


def _nbytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n = _I32.unpack_from(data, pos)[0]
    pos += 4
    if n == -1:
        return None, pos
    raw = data[pos:pos + n]
    if n < 0 or len(raw) != n:
        raise ValueError("bad bytes field")
    return raw, pos + n


# --------------------------------------------------------------------------- assignments


class AssignmentEncoder:
    """Encodes ``IndexedPartitions`` assignments of one partition space."""

    __slots__ = ("space", "_headers", "_ints", "_head1")

    def __init__(self, space) -> None:
        self.space = space
        self._headers = [_I16.pack(len(b)) + b for b in (t.encode("utf-8") for t in space.topics)]
        self._ints = [_I32.pack(p) for p in range(max(space.counts, default=0) + 1)]
        self._head1 = [h + self._ints[1] for h in self._headers] if len(self._ints) > 1 else []

    def encode(self, parts: IndexedPartitions, user_data: bytes | None, version: int) -> bytes:
        idx = parts.idx
        n = len(idx)
        ints = self._ints
        if n:
            ks = list(self.space.topics_of(idx))
            values = map(ints.__getitem__, self.space.partitions_of(idx))
            if len(set(ks)) == n:  # one partition per topic: header + count 1 + partition each
                heads = map(self._head1.__getitem__, ks)
                body = b"".join(chain.from_iterable(zip(heads, values, strict=True)))
                return b"".join((_I16.pack(version), _I32.pack(n), body, _user_data(user_data)))
            # idx is sorted, so each topic is one run; a run starts where the topic changes
            starts = [0, *compress(range(1, n), map(ne, islice(ks, 1, None), ks))]
            counts = map(sub, chain(islice(starts, 1, None), (n,)), starts)
            heads = list(map(add, map(self._headers.__getitem__, map(ks.__getitem__, starts)),
                             map(ints.__getitem__, counts)))
            if len(heads) == n:  # one partition per topic
                prefix = heads
            else:
                prefix = [b""] * n
                for at, head in zip(starts, heads, strict=True):
                    prefix[at] = head
            body = b"".join(chain.from_iterable(zip(prefix, values, strict=True)))
            n_topics = len(heads)
        else:
            body, n_topics = b"", 0
        return b"".join((_I16.pack(version), _I32.pack(n_topics), body, _user_data(user_data)))


def _user_data(user_data: bytes | None) -> bytes:
    return _I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + bytes(user_data)
