"""Properties over random clusters, subscriptions and membership changes."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from assignment import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    RangeAssignor,
    RedundantAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    primary_partitions,
    validate_assignment,
)

SETTINGS = settings(max_examples=75, deadline=None)
RACKS = ["a", "b", "c"]


@st.composite
def groups(draw, uniform=None, racks=False):
    n_topics = draw(st.integers(1, 4))
    counts = {f"t{i}": draw(st.integers(1, 12)) for i in range(n_topics)}
    topics = sorted(counts)
    n_members = draw(st.integers(1, 7))
    uni = draw(st.booleans()) if uniform is None else uniform
    subs = {}
    for i in range(n_members):
        ts = topics if uni else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        rack = draw(st.sampled_from(RACKS)) if racks else None
        subs[f"m{i}"] = Subscription(f"m{i}", tuple(sorted(ts)), rack_id=rack)
    pracks = {}
    if racks:
        for t, n in counts.items():
            for p in range(n):
                pracks[TopicPartition(t, p)] = frozenset(
                    draw(st.lists(st.sampled_from(RACKS), min_size=1, max_size=2, unique=True)))
    return ClusterMetadata(counts, pracks), subs


def owner_map(a):
    return {tp: m for m, v in a.items() for tp in v.partitions}


def counts(a):
    return sorted(len(v.partitions) for v in a.values())


def no_improving_move(cl, subs, a):
    n = {m: len(v.partitions) for m, v in a.items()}
    for m, v in a.items():
        for tp in v.partitions:
            for other, s in subs.items():
                if tp.topic in s.topics and n[other] + 1 < n[m]:
                    return False
    return True


def with_ownership(subs, a, gen, drop=None, add=0):
    out = {}
    for m, s in subs.items():
        if m == drop:
            continue
        out[m] = Subscription(m, s.topics, None, a[m].partitions, gen, s.rack_id)
    topics = next(iter(subs.values())).topics
    for j in range(add):
        m = f"new{j}"
        out[m] = Subscription(m, topics, None, (), gen)
    return out


def moves(before, after):
    old = owner_map(before)
    return sum(1 for tp, m in owner_map(after).items() if tp in old and old[tp] != m)


def reverse_moves(before, after):
    """Pairs of members that passed partitions of one topic both ways (Java's isSticky test)."""
    old = owner_map(before)
    pairs = {(tp.topic, old[tp], m) for tp, m in owner_map(after).items()
             if tp in old and old[tp] != m}
    return sorted(p for p in pairs if (p[0], p[2], p[1]) in pairs)


@SETTINGS
@given(groups() | groups(racks=True))
def test_all_exclusive_assignors_cover_exactly_once(g):
    cl, subs = g
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
        validate_assignment(cls.name, cl, subs, cls().assign(cl, subs))


@SETTINGS
@given(groups(uniform=True, racks=True) | groups(uniform=True))
def test_uniform_sticky_is_balanced_even_with_racks(g):
    cl, subs = g
    for cls in (StickyAssignor, CooperativeStickyAssignor, RoundRobinAssignor):
        c = counts(cls().assign(cl, subs))
        assert c[-1] - c[0] <= 1


@SETTINGS
@given(groups(uniform=False, racks=True) | groups(uniform=False))
def test_general_sticky_has_no_improving_move(g):
    cl, subs = g
    a = StickyAssignor().assign(cl, subs)
    validate_assignment("sticky", cl, subs, a)
    assert no_improving_move(cl, subs, a)


# Hypothesis found it (CI at 6f53ee9): sticky moved 5 partitions where a fresh assignment of
# the same members moved 4; mixed subscriptions promise no fewest-moves bound (below)
_MIXED = (ClusterMetadata({"t0": 8, "t1": 7, "t2": 3, "t3": 2}, {}),
          {m: Subscription(m, ts) for m, ts in {
              "m0": ("t1",), "m1": ("t3",), "m2": ("t1", "t2", "t3"), "m3": ("t0", "t2"),
              "m4": ("t0",), "m5": ("t0", "t1", "t2")}.items()})


@SETTINGS
@given(groups(), st.integers(0, 6), st.integers(0, 2))
@example(_MIXED, 4, 0)
def test_rebalance_stays_valid_balanced_and_sticky(g, drop_idx, add):
    """Stickiness as Java's StickyAssignor tests define it, plus fewest moves when uniform.

    With equal subscriptions the quotas fix how many partitions must move, and the sticky
    path keeps every other one: it moves no more than a fresh assignment would. With mixed
    subscriptions Java's general path is a heuristic that puts balance before stickiness
    (a better-balanced result may move one more partition); its tests check that no two
    members traded partitions of one topic, which is what is checked here.
    """
    cl, subs = g
    first = StickyAssignor().assign(cl, subs)
    drop = f"m{drop_idx}" if len(subs) > 1 else None
    uniform = len({s.topics for s in subs.values()}) == 1
    nxt = with_ownership(subs, first, 1, drop, add if uniform else 0)
    a = StickyAssignor().assign(cl, nxt)
    validate_assignment("sticky", cl, nxt, a)
    assert no_improving_move(cl, nxt, a)
    assert reverse_moves(first, a) == []
    if uniform:
        fresh_subs = {m: Subscription(m, s.topics, rack_id=s.rack_id) for m, s in nxt.items()}
        fresh = StickyAssignor().assign(cl, fresh_subs)
        assert moves(first, a) <= moves(first, fresh)


@SETTINGS
@given(groups(), st.integers(0, 6), st.integers(0, 2))
def test_cooperative_never_assigns_what_it_revokes(g, drop_idx, add):
    cl, subs = g
    coop = CooperativeStickyAssignor()
    first = coop.assign(cl, subs)
    uniform = len({s.topics for s in subs.values()}) == 1
    drop = f"m{drop_idx}" if len(subs) > 1 else None
    nxt = with_ownership(subs, first, 1, drop, add if uniform else 0)
    a = coop.assign(cl, nxt)
    claimed = {tp: m for m, s in nxt.items() for tp in s.owned_partitions}
    for m, v in a.items():
        for tp in v.partitions:
            assert claimed.get(tp, m) == m, f"{tp} given to {m} while {claimed[tp]} still owns it"
    # the follow-up round completes the assignment
    final = coop.assign(cl, with_ownership(nxt, a, 2))
    validate_assignment("cooperative-sticky", cl, nxt, final)
    assert no_improving_move(cl, nxt, final)


@SETTINGS
@given(groups(uniform=True), st.integers(1, 3), st.integers(0, 6))
def test_redundant_replicas_primaries_and_stickiness(g, n, drop_idx):
    cl, subs = g
    if len(subs) < n:
        n = len(subs)
    r = RedundantAssignor(n)
    a = r.assign(cl, subs)
    validate_assignment("redundant", cl, subs, a, replicas=n)
    prim = [tp for v in a.values() for tp in primary_partitions(v)]
    assert sorted(prim) == sorted(tp for t in cl.partitions_per_topic for tp in cl.partitions_for(t))
    c = counts(a)
    assert c[-1] - c[0] <= 1
    pc = sorted(len(primary_partitions(v)) for v in a.values())
    assert pc[-1] - pc[0] <= 1
    # rebalance with previous replicas and primaries reported back
    drop = f"m{drop_idx}" if len(subs) > n else None
    nxt = {m: Subscription(m, s.topics, a[m].user_data, a[m].partitions, 1)
           for m, s in subs.items() if m != drop}
    b = r.assign(cl, nxt)
    validate_assignment("redundant", cl, nxt, b, replicas=n)
    kept = {m: primary_partitions(a[m]) & primary_partitions(b[m]) for m in nxt}
    if drop is None:
        assert all(kept[m] == primary_partitions(a[m]) for m in nxt)
