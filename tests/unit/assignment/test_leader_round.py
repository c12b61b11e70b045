"""The leader round's fast paths agree with the reference functions, byte for byte and error for error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignment import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    InvalidAssignmentError,
    MemberAssignment,
    RangeAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    validate_assignment,
)
from assignment._compact import IndexedPartitions, WirePartitions
from assignment._index import PartitionSpace
from assignment.leader import lead_round
from assignment.protocol import (
    decode_members,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
)

TP = TopicPartition
names = st.sampled_from(["a", "bb", "topic-1", "topic-22", "ü"])
owned = st.lists(st.builds(TP, names, st.integers(0, 5)), max_size=6, unique=True).map(tuple)
subs = st.builds(Subscription, member_id=st.just("m"), topics=st.lists(names, max_size=4).map(tuple),
                 user_data=st.one_of(st.none(), st.binary(max_size=6)), owned_partitions=owned,
                 generation=st.integers(-1, 9), rack_id=st.one_of(st.none(), st.just("r1")))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(subs, st.integers(0, 3), st.booleans()), min_size=1, max_size=12))
def test_bulk_decoder_matches_the_reference_reader(members):
    """Repeated shapes (the same Subscription several times) take the cached paths."""
    meta, want = {}, {}
    for k, (sub, version, corrupt) in enumerate(members * 2):
        data = encode_subscription(sub, version)
        if corrupt:
            data = data[: len(data) // 2]
        mid = f"m{k}"
        meta[mid] = data
        try:
            want[mid] = decode_subscription(mid, data)
        except Exception as e:  # noqa: BLE001
            want[mid] = type(e)
    got = decode_members(meta)
    for mid, w in want.items():
        if isinstance(w, type):
            assert mid in got.errors and isinstance(got.errors[mid], w)
        else:
            g = got.subscriptions[mid]
            assert g == w
            assert tuple(g.owned_partitions) == w.owned_partitions


def test_shape_cache_never_misreads_a_different_layout():
    # same entry count and first entry, different second entry length: must not reuse the Struct
    a = Subscription("a", ("x",), None, (TP("aa", 1), TP("bb", 2)), 3)
    b = Subscription("b", ("x",), None, (TP("aa", 1), TP("ccc", 2)), 3)
    c = Subscription("c", ("x",), None, (TP("aa", 1), TP("bb", 4), TP("bb", 5)), 3)
    got = decode_members({m.member_id: encode_subscription(m) for m in (a, b, c, a)})
    assert got.subscriptions["a"] == a and got.subscriptions["b"] == b and got.subscriptions["c"] == c
    assert isinstance(got.subscriptions["a"].owned_partitions, WirePartitions)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.integers(1, 6), min_size=1),
       st.data(), st.one_of(st.none(), st.binary(max_size=4)), st.integers(0, 3))
def test_indexed_assignment_encodes_like_the_reference(ppt, data, user_data, version):
    space = PartitionSpace(ppt, ppt)
    idx = sorted(data.draw(st.sets(st.integers(0, space.total - 1))))
    fast = MemberAssignment(IndexedPartitions(space, idx), user_data)
    ref = MemberAssignment(tuple(fast.partitions), user_data)
    assert fast == ref
    assert encode_assignment(fast, version) == encode_assignment(ref, version)


def _indexed(space, **by_member):
    return {m: MemberAssignment(IndexedPartitions(space, sorted(space.indices(tps))))
            for m, tps in by_member.items()}


@pytest.mark.parametrize("fast", [True, False], ids=["indexed", "tuples"])
def test_validation_rules_on_both_paths(fast):
    cl = ClusterMetadata({"t": 2, "u": 1})
    space = PartitionSpace(cl.partitions_per_topic, ["t", "u"])
    s = {"C0": Subscription("C0", ("t",)), "C1": Subscription("C1", ("t", "u"))}

    def a(**kw):
        if fast:
            return _indexed(space, **kw)
        return {m: MemberAssignment(tuple(v)) for m, v in kw.items()}

    validate_assignment("x", cl, s, a(C0=[TP("t", 0)], C1=[TP("t", 1), TP("u", 0)]))
    with pytest.raises(InvalidAssignmentError, match="u-0 given to member 'C0', which is not subscribed"):
        validate_assignment("x", cl, s, a(C0=[TP("t", 0), TP("u", 0)], C1=[TP("t", 1)]))
    with pytest.raises(InvalidAssignmentError, match=r"t-1 is assigned to 2 member\(s\) \(C0, C1\)"):
        validate_assignment("x", cl, s, a(C0=[TP("t", 0), TP("t", 1)], C1=[TP("t", 1), TP("u", 0)]))
    with pytest.raises(InvalidAssignmentError, match=r"u-0 is assigned to 0 member"):
        validate_assignment("x", cl, s, a(C0=[TP("t", 0)], C1=[TP("t", 1)]))
    with pytest.raises(InvalidAssignmentError, match="'C9'"):
        validate_assignment("x", cl, s, a(C0=[TP("t", 0)], C1=[TP("t", 1), TP("u", 0)], C9=[]))
    # cooperative: held back only when a member reported owning it
    owning = {**s, "C1": Subscription("C1", ("t", "u"), None, (TP("u", 0),), 2)}
    held = a(C0=[TP("t", 0)], C1=[TP("t", 1)])
    validate_assignment("x", cl, owning, held, cooperative=True)
    with pytest.raises(InvalidAssignmentError, match="u-0"):
        validate_assignment("x", cl, s, held, cooperative=True)


def _group(nt: int, np_: int, nm: int):
    topics = tuple(f"topic-{i:03d}" for i in range(nt))
    cluster = ClusterMetadata({t: np_ for t in topics})
    return topics, cluster, {f"c{i:03d}": Subscription(f"c{i:03d}", topics) for i in range(nm)}


@pytest.mark.parametrize("cls", [CooperativeStickyAssignor, StickyAssignor, RangeAssignor])
def test_lead_round_gives_the_reference_pipeline_bytes(cls):
    topics, cluster, members = _group(7, 13, 9)
    first = cls().assign(cluster, members)
    meta = {}
    for m in list(members)[1:]:  # one member left; the rest rejoin with what they own
        sub = Subscription(m, topics[::-1], encode_cooperative_user_data(4),
                           tuple(reversed(tuple(first[m].partitions))), 4)
        meta[m] = encode_subscription(sub)
    meta["broken"] = b"\x00\x03\x00"
    got = lead_round(cls(), meta, {}, lambda t, racks: cluster)
    assert set(got.undecodable) == {"broken"} and got.topics == set(topics)
    # the reference: field-by-field decode, tuples of TopicPartitions, the Writer encoder
    ref_subs = {m: decode_subscription(m, d) for m, d in meta.items() if m != "broken"}
    ref = cls().assign(cluster, ref_subs)
    want = {m: encode_assignment(MemberAssignment(tuple(a.partitions), a.user_data))
            for m, a in ref.items()}
    want["broken"] = encode_assignment(MemberAssignment(()))
    assert got.assignments == want
    assert set(got.seconds) == {"decode", "metadata", "assign", "validate", "encode"}


def test_unequal_partition_counts_that_sum_like_equal_ones():
    """3 topics of 2, 1 and 3 partitions total 6 = 3 x 2: numbers must not be split as if equal."""
    space = PartitionSpace({"a": 2, "b": 1, "c": 3}, ["a", "b", "c"])
    fast = MemberAssignment(IndexedPartitions(space, [1, 2, 5]))
    assert tuple(fast.partitions) == (TP("a", 1), TP("b", 0), TP("c", 2))
    assert encode_assignment(fast) == encode_assignment(MemberAssignment(tuple(fast.partitions)))
