"""Exact expected assignments (Java semantics), the chapter's move counts, registry, validation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from assignment import (
    AssignorConfigError,
    ClusterMetadata,
    CooperativeStickyAssignor,
    CoPartitionAssignor,
    InvalidAssignmentError,
    MemberAssignment,
    RangeAssignor,
    RebalanceProtocol,
    RedundantAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    UnknownAssignorError,
    create_assignor,
    create_assignors,
    primary_partitions,
    validate_assignment,
)
from assignment.protocol import encode_sticky_user_data

TP = TopicPartition


def tps(spec: str) -> list[TopicPartition]:
    """'t0-0 t0-1' -> [TP('t0', 0), TP('t0', 1)]"""
    out = []
    for s in spec.split():
        t, _, p = s.rpartition("-")
        out.append(TP(t, int(p)))
    return sorted(out)


def simple(a) -> dict[str, list[TopicPartition]]:
    return {m: sorted(v.partitions) for m, v in a.items()}


def subs(**topics_by_member) -> dict[str, Subscription]:
    return {m: Subscription(m, tuple(ts)) for m, ts in topics_by_member.items()}


T2x3 = ClusterMetadata({"t0": 3, "t1": 3})


# --------------------------------------------------------------------------- range / round-robin


def test_range_java_doc_example():
    a = RangeAssignor().assign(T2x3, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert simple(a) == {"C0": tps("t0-0 t0-1 t1-0 t1-1"), "C1": tps("t0-2 t1-2")}


def test_range_orders_static_members_by_instance_id():
    s = {
        "C3": Subscription("C3", ("t0", "t1"), group_instance_id="I0"),
        "C2": Subscription("C2", ("t0", "t1"), group_instance_id="I1"),
    }
    a = RangeAssignor().assign(T2x3, s)
    assert simple(a) == {"C3": tps("t0-0 t0-1 t1-0 t1-1"), "C2": tps("t0-2 t1-2")}


def test_range_static_members_sort_before_dynamic():
    s = {
        "A": Subscription("A", ("t0",)),
        "Z": Subscription("Z", ("t0",), group_instance_id="inst"),
    }
    assert simple(RangeAssignor().assign(ClusterMetadata({"t0": 3}), s)) == {
        "Z": tps("t0-0 t0-1"), "A": tps("t0-2")}


def test_range_rack_aware_kip881():
    racks = {TP("t", 0): frozenset({"b"}), TP("t", 1): frozenset({"b"}),
             TP("t", 2): frozenset({"a"}), TP("t", 3): frozenset({"a"})}
    cl = ClusterMetadata({"t": 4}, racks)
    s = {"C0": Subscription("C0", ("t",), rack_id="a"), "C1": Subscription("C1", ("t",), rack_id="b")}
    assert simple(RangeAssignor().assign(cl, s)) == {"C0": tps("t-2 t-3"), "C1": tps("t-0 t-1")}


def test_range_rack_aware_keeps_copartitioning():
    racks = {}
    for t in ("x", "y"):
        racks[TP(t, 0)] = frozenset({"b"})
        racks[TP(t, 1)] = frozenset({"a"})
    cl = ClusterMetadata({"x": 2, "y": 2}, racks)
    s = {"C0": Subscription("C0", ("x", "y"), rack_id="a"), "C1": Subscription("C1", ("x", "y"), rack_id="b")}
    assert simple(RangeAssignor().assign(cl, s)) == {"C0": tps("x-1 y-1"), "C1": tps("x-0 y-0")}


def test_range_rack_aware_with_a_rackless_topic():
    racks = {TP("t", 0): frozenset({"b"}), TP("t", 1): frozenset({"a"})}
    cl = ClusterMetadata({"t": 2, "u": 3}, racks)
    s = {"C0": Subscription("C0", ("t",), rack_id="a"), "C1": Subscription("C1", ("t",), rack_id="b"),
         "C2": Subscription("C2", ("u",))}
    assert simple(RangeAssignor().assign(cl, s)) == {
        "C0": tps("t-1"), "C1": tps("t-0"), "C2": tps("u-0 u-1 u-2")}


def test_range_without_partition_racks_is_plain_range():
    s = {"C0": Subscription("C0", ("t0",), rack_id="a"), "C1": Subscription("C1", ("t0",), rack_id="b")}
    assert simple(RangeAssignor().assign(ClusterMetadata({"t0": 3}), s)) == {
        "C0": tps("t0-0 t0-1"), "C1": tps("t0-2")}


def test_roundrobin_java_doc_examples():
    a = RoundRobinAssignor().assign(T2x3, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert simple(a) == {"C0": tps("t0-0 t0-2 t1-1"), "C1": tps("t0-1 t1-0 t1-2")}
    cl = ClusterMetadata({"t0": 1, "t1": 2, "t2": 3})
    a = RoundRobinAssignor().assign(cl, subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]))
    assert simple(a) == {"C0": tps("t0-0"), "C1": tps("t1-0"), "C2": tps("t1-1 t2-0 t2-1 t2-2")}


# --------------------------------------------------------------------------- the chapter's tables


def _sub(m, owned, gen):
    """Previous ownership both ways: Java sticky user data and v2 owned partitions."""
    ud = encode_sticky_user_data(owned, gen) if owned else None
    return Subscription(m, ("t",), ud, owned, gen if owned else -1)


def _grow(assignor_cls, cooperative=False):
    """8 partitions, members 1 -> 2 -> 3 -> 4; partitions that changed owner at each step."""
    cl = ClusterMetadata({"t": 8})
    prev: dict[str, tuple] = {}
    moves = []
    for n in range(1, 5):
        gen = n
        s = {f"C{i}": _sub(f"C{i}", prev.get(f"C{i}", ()), gen - 1) for i in range(n)}
        a = assignor_cls().assign(cl, s)
        if not cooperative:
            validate_assignment(assignor_cls.name, cl, s, a)
        if cooperative:
            # follow-up round: members report what they now own
            s = {m: Subscription(m, ("t",), None, a[m].partitions, gen) for m in s}
            a = assignor_cls().assign(cl, s)
            validate_assignment(assignor_cls.name, cl, s, a)
        old = {tp: m for m, ps in prev.items() for tp in ps}
        if prev:
            moves.append(sum(1 for m, v in a.items() for tp in v.partitions if old.get(tp) != m))
        prev = {m: v.partitions for m, v in a.items()}
    return moves


@pytest.mark.parametrize(
    "cls,expected,coop",
    [(RangeAssignor, [4, 3, 5], False), (RoundRobinAssignor, [4, 4, 5], False),
     (StickyAssignor, [4, 2, 2], False), (CooperativeStickyAssignor, [4, 2, 2], True)],
)
def test_chapter_move_counts(cls, expected, coop):
    assert _grow(cls, coop) == expected


def test_range_chapter_table_exact():
    cl = ClusterMetadata({"t": 8})
    a = RangeAssignor().assign(cl, subs(C0=["t"], C1=["t"], C2=["t"]))
    assert simple(a) == {"C0": tps("t-0 t-1 t-2"), "C1": tps("t-3 t-4 t-5"), "C2": tps("t-6 t-7")}


# --------------------------------------------------------------------------- sticky family


def test_sticky_keeps_lowest_partition_numbers_like_java():
    cl = ClusterMetadata({"t": 8})
    owned = tuple(tps("t-0 t-1 t-2 t-3 t-4 t-5 t-6 t-7"))
    s = {"C0": Subscription("C0", ("t",), None, owned, 1), "C1": Subscription("C1", ("t",))}
    a = CooperativeStickyAssignor().assign(cl, s)
    # revoked t-4..t-7 are not handed to C1 in the same round
    assert simple(a) == {"C0": tps("t-0 t-1 t-2 t-3"), "C1": []}
    s2 = {"C0": Subscription("C0", ("t",), None, a["C0"].partitions, 2),
          "C1": Subscription("C1", ("t",), None, (), 2)}
    assert simple(CooperativeStickyAssignor().assign(cl, s2))["C1"] == tps("t-4 t-5 t-6 t-7")


def test_sticky_reads_java_user_data_and_generations():
    cl = ClusterMetadata({"t": 4})
    # C0 (gen 5) and C1 (stale, gen 3) both claim t-0 and t-1: the newer claim wins.
    s = {
        "C0": Subscription("C0", ("t",), encode_sticky_user_data(tps("t-0 t-1"), 5)),
        "C1": Subscription("C1", ("t",), encode_sticky_user_data(tps("t-0 t-1 t-2"), 3)),
    }
    a = StickyAssignor().assign(cl, s)
    assert simple(a) == {"C0": tps("t-0 t-1"), "C1": tps("t-2 t-3")}


def test_sticky_v0_user_data_without_generation():
    cl = ClusterMetadata({"t": 4})
    s = {"C0": Subscription("C0", ("t",), encode_sticky_user_data(tps("t-2 t-3"), None)),
         "C1": Subscription("C1", ("t",))}
    assert simple(StickyAssignor().assign(cl, s)) == {"C0": tps("t-2 t-3"), "C1": tps("t-0 t-1")}


def test_sticky_user_data_round_trip_through_on_assignment():
    a = StickyAssignor()
    assert a.subscription_user_data(("t",)) is None
    a.on_assignment(MemberAssignment(tuple(tps("t-1"))), 4)
    assert a.subscription_user_data(("t",)) == encode_sticky_user_data(tps("t-1"), 4)
    c = CooperativeStickyAssignor()
    assert c.subscription_user_data(("t",)) == b"\xff\xff\xff\xff"
    c.on_assignment(MemberAssignment(()), 9)
    assert c.subscription_user_data(("t",)) == b"\x00\x00\x00\x09"


def test_same_generation_double_claim_is_invalidated_and_not_reassigned_same_round():
    cl = ClusterMetadata({"t": 4})
    s = {
        "C0": Subscription("C0", ("t",), None, tuple(tps("t-0 t-1")), 3),
        "C1": Subscription("C1", ("t",), None, tuple(tps("t-1 t-2")), 3),
        "C2": Subscription("C2", ("t",), None, (), 3),
    }
    a = StickyAssignor().assign(cl, s)
    validate_assignment("sticky", cl, s, a)
    coop = CooperativeStickyAssignor().assign(cl, s)
    owner = {tp: m for m, v in coop.items() for tp in v.partitions}
    assert TP("t", 1) not in owner  # both claim it: whoever gets it must wait a round


def test_sticky_general_path_example():
    cl = ClusterMetadata({"t0": 2, "t1": 2})
    a = StickyAssignor().assign(cl, subs(C0=["t0", "t1"], C1=["t1"]))
    assert simple(a) == {"C0": tps("t0-0 t0-1"), "C1": tps("t1-0 t1-1")}


def test_supported_protocols():
    assert CooperativeStickyAssignor.supported_protocols == (
        RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    assert StickyAssignor.supported_protocols == (RebalanceProtocol.EAGER,)


# --------------------------------------------------------------------------- copartition / redundant


def test_copartition_keeps_slots_together():
    cl = ClusterMetadata({"a": 3, "b": 3})
    a = CoPartitionAssignor().assign(cl, subs(C0=["a", "b"], C1=["a", "b"]))
    for v in a.values():
        slots = {tp.partition for tp in v.partitions}
        assert sorted(v.partitions) == sorted(TP(t, p) for t in "ab" for p in slots)
    assert sorted(len(v.partitions) for v in a.values()) == [2, 4]


def test_copartition_rejects_unequal_counts():
    with pytest.raises(AssignorConfigError, match=r"a=3, b=4"):
        CoPartitionAssignor().assign(ClusterMetadata({"a": 3, "b": 4}), subs(C0=["a", "b"]))


def test_redundant_replicas_and_primaries():
    cl = ClusterMetadata({"t": 4})
    s = subs(C0=["t"], C1=["t"], C2=["t"])
    a = RedundantAssignor(2).assign(cl, s)
    validate_assignment("redundant", cl, s, a, replicas=2)
    prim = {m: primary_partitions(v) for m, v in a.items()}
    all_prim = [tp for p in prim.values() for tp in p]
    assert sorted(all_prim) == tps("t-0 t-1 t-2 t-3")
    assert max(map(len, prim.values())) - min(map(len, prim.values())) <= 1


def test_redundant_options_and_errors():
    assert create_assignor("redundant", {"redundant.replicas": "3"}).replicas == 3
    with pytest.raises(AssignorConfigError, match="redundant.replicas"):
        create_assignor("redundant", {"redundant.replicas": "0"})
    with pytest.raises(AssignorConfigError, match="redundant.replicas"):
        create_assignor("redundant", {"redundant.replicas": "two"})
    with pytest.raises(AssignorConfigError, match="redundant.replicas"):
        RedundantAssignor(-1)


def test_redundant_degrades_to_the_members_alive_and_recovers(caplog):
    """Issue #8: a rolling restart (fewer members than replicas) must not fail the group."""
    cl = ClusterMetadata({"t": 3, "u": 2})
    a = RedundantAssignor(2)
    alone = subs(C0=["t", "u"])
    with caplog.at_level("WARNING", logger="assignment.redundant"):
        got = a.assign(cl, alone)
    assert simple(got) == {"C0": tps("t-0 t-1 t-2 u-0 u-1")}
    assert primary_partitions(got["C0"]) == frozenset(tps("t-0 t-1 t-2 u-0 u-1"))
    validate_assignment("redundant", cl, alone, got, replicas=2)
    assert a.degraded_assignments == 1 and a.last_shortfall == {"t": 1, "u": 1}
    assert "redundant.replicas=2" in caplog.text and "degraded" in caplog.text
    # the second member returns with the first's ownership reported: full redundancy again
    back = {
        "C0": Subscription("C0", ("t", "u"), got["C0"].user_data, got["C0"].partitions, 1),
        "C1": Subscription("C1", ("t", "u")),
    }
    full = a.assign(cl, back)
    validate_assignment("redundant", cl, back, full, replicas=2)
    assert simple(full) == {"C0": tps("t-0 t-1 t-2 u-0 u-1"), "C1": tps("t-0 t-1 t-2 u-0 u-1")}
    assert a.degraded_assignments == 1 and a.last_shortfall == {}
    # one topic short, the other fully served
    mixed = subs(C0=["t", "u"], C1=["t"])
    got = a.assign(cl, mixed)
    validate_assignment("redundant", cl, mixed, got, replicas=2)
    assert a.last_shortfall == {"u": 1} and a.degraded_assignments == 2
    with pytest.raises(InvalidAssignmentError, match="expected 2"):
        validate_assignment("redundant", cl, mixed, {**got, "C1": MemberAssignment(())}, replicas=2)


# --------------------------------------------------------------------------- registry / validation


def test_registry_builtins_and_user_classes():
    assert [a.name for a in create_assignors("cooperative-sticky, range")] == [
        "cooperative-sticky", "range"]
    for spec in ("tests.unit.assignment.example_user_assignor:EverythingToFirst",
                 "tests.unit.assignment.example_user_assignor.EverythingToFirst"):
        assert create_assignor(spec).name == "everything-to-first"


@pytest.mark.parametrize("spec,match", [
    ("nope", "roundrobin"),
    ("tests.unit.assignment.example_user_assignor:NotAnAssignor", "not a subclass"),
    ("no_such_module_xyz:Foo", "cannot import"),
    ("tests.unit.assignment.example_user_assignor:Missing", "no attribute"),
])
def test_registry_errors(spec, match):
    with pytest.raises(UnknownAssignorError, match=match):
        create_assignor(spec)


@pytest.mark.parametrize("spec", ["range,,sticky", "", "range,range"])
def test_registry_rejects_bad_lists(spec):
    with pytest.raises(AssignorConfigError):
        create_assignors(spec)


def test_validation_catches_a_bad_user_assignor():
    bad = create_assignor("tests.unit.assignment.example_user_assignor:Broken")
    cl = ClusterMetadata({"t": 2})
    s = subs(C0=["t"], C1=["t"])
    with pytest.raises(InvalidAssignmentError, match=r"'broken'.*t-0"):
        validate_assignment(bad.name, cl, s, bad.assign(cl, s))


def test_validation_rules():
    cl = ClusterMetadata({"t": 2, "u": 1})
    s = subs(C0=["t"], C1=["t"])
    ok = {"C0": MemberAssignment.of(tps("t-0")), "C1": MemberAssignment.of(tps("t-1"))}
    validate_assignment("x", cl, s, ok)
    with pytest.raises(InvalidAssignmentError, match="t-5"):
        validate_assignment("x", cl, s, {**ok, "C1": MemberAssignment.of(tps("t-1 t-5"))})
    with pytest.raises(InvalidAssignmentError, match="not subscribed"):
        validate_assignment("x", cl, s, {**ok, "C1": MemberAssignment.of(tps("t-1 u-0"))})
    with pytest.raises(InvalidAssignmentError, match="'C9'"):
        validate_assignment("x", cl, s, {**ok, "C9": MemberAssignment(())})
    with pytest.raises(InvalidAssignmentError, match="t-1"):
        validate_assignment("x", cl, s, {"C0": MemberAssignment.of(tps("t-0"))})


def test_package_imports_without_kafka_or_spark():
    code = (
        "import sys; sys.modules['kafka']=None; sys.modules['confluent_kafka']=None; "
        "sys.modules['pyspark']=None; import assignment, assignment.registry, assignment.protocol, "
        "assignment.validate, assignment.range, assignment.roundrobin, assignment.sticky, "
        "assignment.copartition, assignment.redundant; "
        "[assignment.create_assignor(n) for n in assignment.BUILTIN]; "
        "bad=[m for m in sys.modules if m.split('.')[0] in ('kafka','confluent_kafka','pyspark') "
        "and sys.modules[m] is not None]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_validation_allows_cooperative_withheld_partition_only_when_revoked():
    from assignment.errors import InvalidAssignmentError
    from assignment.model import ClusterMetadata, MemberAssignment, Subscription, TopicPartition
    from assignment.validate import validate_assignment

    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    cluster = ClusterMetadata({"t": 2})
    subs = {
        "a": Subscription("a", ("t",), owned_partitions=(tp0, tp1)),
        "b": Subscription("b", ("t",)),
    }
    # t-1 is revoked from "a" and held back this round: fine for cooperative
    held_back = {"a": MemberAssignment((tp0,)), "b": MemberAssignment(())}
    validate_assignment("cooperative-sticky", cluster, subs, held_back, cooperative=True)
    with pytest.raises(InvalidAssignmentError, match="t-1"):
        validate_assignment("sticky", cluster, subs, held_back)
    # a partition nobody owned must still be assigned, even for cooperative
    fresh = {"a": Subscription("a", ("t",)), "b": Subscription("b", ("t",))}
    with pytest.raises(InvalidAssignmentError, match="t-1"):
        validate_assignment("cooperative-sticky", cluster, fresh, held_back, cooperative=True)


@pytest.mark.parametrize("indexed", [False, True], ids=["general", "indexed"])
def test_cooperative_hold_back_needs_a_current_owner(indexed):
    """A partition may go to nobody only from its current owner: the highest generation's claim
    (a stale claim is no ownership); claimed by two members at one known generation, nobody
    owns it and it must be assigned at once (Java's rule), so holding it back is rejected."""
    from assignment._compact import IndexedPartitions
    from assignment._index import PartitionSpace
    from assignment.errors import InvalidAssignmentError
    from assignment.model import ClusterMetadata, MemberAssignment, Subscription, TopicPartition
    from assignment.validate import validate_assignment

    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    cluster = ClusterMetadata({"t": 2})
    space = PartitionSpace({"t": 2}, ["t"])

    def given(**kw):
        if indexed:
            return {m: MemberAssignment(IndexedPartitions(space, [p.partition for p in v])) for m, v in kw.items()}
        return {m: MemberAssignment(tuple(v)) for m, v in kw.items()}

    def claims(gen_a, gen_b):
        return {"a": Subscription("a", ("t",), None, (tp0, tp1), gen_a),
                "b": Subscription("b", ("t",), None, (tp1,), gen_b)}

    held = given(a=[tp0], b=[])
    validate_assignment("c", cluster, claims(3, 2), held, cooperative=True)  # a owns t-1 and loses it
    validate_assignment("c", cluster, claims(-1, -1), held, cooperative=True)  # no generations: cannot tell
    with pytest.raises(InvalidAssignmentError, match="t-1 is assigned to 0 member"):
        validate_assignment("c", cluster, claims(3, 3), held, cooperative=True)
    validate_assignment("c", cluster, claims(3, 3), given(a=[tp0], b=[tp1]), cooperative=True)
