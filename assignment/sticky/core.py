"""The sticky algorithm shared by the eager and cooperative sticky assignors.

Goal order, as in Java's AbstractStickyAssignor: balanced first, then keep as
many previously owned partitions as possible, then (KIP-881) prefer members in
a replica's rack. Everything runs on integer partition numbers and member
numbers so a million partitions cost lists of ints, not objects.

* Uniform subscriptions take Java's constrained path step for step: keep owned
  partitions up to the quotas, then round-robin the rest over the members
  still under quota.
* Otherwise (general path) owned partitions are kept, the rest are
  water-filled onto the least-loaded eligible members, and then partitions move
  from a member to an eligible member with at least two fewer until no such
  move exists (Java's "balanced" test). Moves take the most recently added
  partitions first, so previously owned ones stay put.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import lt

from assignment._common import use_rack_aware
from assignment._index import PartitionSpace
from assignment.model import ClusterMetadata, Subscription, TopicPartition

DEFAULT_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member says it owned, and in which generation (None: not reported)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None = None


@dataclass(slots=True)
class StickyResult:
    members: list[str]
    space: PartitionSpace
    owner: list[int]  # partition number -> member number, -1 unassigned
    uniform: bool = True
    owned: list[list[int]] | None = None  # per member: its valid previous partitions
    multi: set[int] | None = None  # claimed by several members of the same generation
    per_member: list[list[int]] | None = None  # member number -> its partitions (any order)


def sticky_assign(
    cluster: ClusterMetadata,
    subscriptions: Mapping[str, Subscription],
    member_data: Mapping[str, MemberData],
) -> StickyResult:
    members = sorted(subscriptions)
    sets: dict[tuple[str, ...], frozenset[str]] = {}  # decoded members share topic tuples
    topic_sets = [sets.get(t) or sets.setdefault(t, frozenset(t))
                  for t in (subscriptions[m].topics for m in members)]
    all_topics = set().union(*topic_sets) if topic_sets else set()
    space = PartitionSpace(cluster.partitions_per_topic, all_topics)
    owned, multi = _resolve_owned(members, space, member_data)

    racks = _RackInfo(cluster, subscriptions, members, space)
    uniform = all(ts == topic_sets[0] for ts in topic_sets)
    per_member = None
    if not members:
        owner: list[int] = []
    elif uniform:
        owner, per_member = _constrained(space, owned, racks)
    else:
        owner = _general(space, members, topic_sets, owned, racks)
    return StickyResult(members, space, owner, uniform, owned, multi, per_member)


def _scatter(owner: list[int], positions, m: int) -> None:
    """``owner[i] = m`` for every i, in a C loop."""
    deque(map(owner.__setitem__, positions, repeat(m)), maxlen=0)


def _resolve_owned(
    members: list[str], space: PartitionSpace, member_data: Mapping[str, MemberData]
) -> tuple[list[list[int]], set[int]]:
    """Previous owners per Java's allSubscriptionsEqual (KIP-341).

    A partition claimed by members of different generations stays with the
    newest claim; claimed by two members of the same generation, it is taken
    from both (neither can be trusted) and reassigned.
    """
    claims_all = [space.indices(md.partitions) if (md := member_data.get(mid)) is not None else []
                  for mid in members]
    marks = bytearray(space.total)  # nobody claims a partition twice: nothing to resolve
    deque(map(marks.__setitem__, chain.from_iterable(claims_all), repeat(1)), maxlen=0)
    if marks.count(1) == sum(map(len, claims_all)):
        return claims_all, set()
    n = space.total
    holder = [-1] * n
    gens = []
    claims: list[list[int]] = []
    multi: set[int] = set()
    for m, mid in enumerate(members):
        md = member_data.get(mid)
        gen = md.generation if md is not None and md.generation is not None else DEFAULT_GENERATION
        gens.append(gen)
        mine: list[int] = []
        claims.append(mine)
        if md is None or not md.partitions:
            continue
        for i in dict.fromkeys(claims_all[m]):
            other = holder[i]
            if other < 0:
                mine.append(i)
                holder[i] = m
            else:
                og = gens[other]
                if gen == og:
                    multi.add(i)
                    holder[i] = m
                elif gen > og:
                    mine.append(i)
                    holder[i] = m
    result = []
    for m, mine in enumerate(claims):
        if multi:
            result.append([i for i in mine if holder[i] == m and i not in multi])
        else:
            result.append([i for i in mine if holder[i] == m])
    return result, multi


class _RackInfo:
    """Member racks and partition replica racks, when rack-aware assignment applies."""

    __slots__ = ("member_rack", "partition_racks", "enabled", "consumers_per_partition")

    def __init__(self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription],
                 members: list[str], space: PartitionSpace) -> None:
        mr = [subscriptions[m].rack_id or None for m in members]
        self.enabled = False
        self.member_rack: list[str | None] = [None] * len(members)
        self.partition_racks: list[frozenset[str]] = []
        self.consumers_per_partition: list[int] | None = None
        if not any(mr) or not space.total:
            return
        empty: frozenset[str] = frozenset()
        pr = cluster.partition_racks
        prs = []
        tps = []
        for topic, n in zip(space.topics, space.counts, strict=True):
            for p in range(n):
                tp = TopicPartition(topic, p)
                tps.append(tp)
                prs.append(pr.get(tp, empty))
        by_rack: dict[str, int] = {}
        for r in mr:
            if r:
                by_rack[r] = by_rack.get(r, 0) + 1
        # Java sorts unassigned partitions by this even when matching ends up off.
        self.consumers_per_partition = [sum(by_rack.get(r, 0) for r in rs) for rs in prs]
        if use_rack_aware(by_rack, pr, tps):
            self.enabled = True
            self.member_rack = mr
            self.partition_racks = prs

    def mismatch(self, m: int, i: int) -> bool:
        r = self.member_rack[m]
        return r is not None and r not in self.partition_racks[i]

    def match(self, m: int, i: int) -> bool:
        r = self.member_rack[m]
        return r is not None and r in self.partition_racks[i]


# --------------------------------------------------------------------------- uniform


def _pt_key(space: PartitionSpace):
    offsets = space.offsets

    def key(i: int) -> tuple[int, str]:
        k = bisect.bisect_right(offsets, i) - 1
        return (i - offsets[k], space.topics[k])

    return key


def _constrained(space: PartitionSpace, owned: list[list[int]], racks: _RackInfo
                 ) -> tuple[list[int], list[list[int]]]:
    total = space.total
    nm = len(owned)
    min_q, extra = divmod(total, nm)
    max_q = min_q + (1 if extra else 0)
    expected_over = extra
    cur_over = 0
    owner = [-1] * total
    counts = [0] * nm
    under: list[int] = []
    exact: list[int] = []
    lists: list[list[int]] = []
    key = None
    for m in range(nm):
        own = owned[m]
        if racks.enabled:
            own = [i for i in own if not racks.mismatch(m, i)]
        n_own = len(own)
        if n_own < min_q:
            keep = own
            under.append(m)
        elif n_own >= max_q and cur_over < expected_over:
            cur_over += 1
            if cur_over == expected_over:
                exact.clear()
            if n_own > max_q:
                key = key or _pt_key(space)
                own = sorted(own, key=key)
            keep = own[:max_q]
        else:
            if n_own > min_q:
                key = key or _pt_key(space)
                own = sorted(own, key=key)
            keep = own[:min_q]
            if cur_over < expected_over:
                exact.append(m)
        _scatter(owner, keep, m)
        counts[m] = len(keep)
        lists.append(list(keep))

    if any(c for c in counts):
        unassigned = list(compress(range(total), map(lt, owner, repeat(0))))
    else:
        unassigned = list(range(total))
    cpp = racks.consumers_per_partition
    if cpp is not None:
        unassigned.sort(key=cpp.__getitem__)

    state = [cur_over]
    if racks.enabled:
        unassigned = _rack_round_robin(unassigned, owner, counts, under, exact, min_q, max_q,
                                       expected_over, state, racks, lists)
    _round_robin(unassigned, owner, counts, under, exact, min_q, lists)
    return owner, lists


def _next_rack_consumer(racks: _RackInfo, i: int, members: list[int], first: int) -> int:
    prs = racks.partition_racks[i]
    if not prs:
        return -1
    n = len(members)
    mr = racks.member_rack
    for k in range(n):
        idx = (first + k) % n
        r = mr[members[idx]]
        if r is not None and r in prs:
            return idx
    return -1


def _rack_round_robin(unassigned, owner, counts, under, exact, min_q, max_q, expected_over,
                      state, racks, lists) -> list[int]:
    rest = []
    next_idx = 0
    for i in unassigned:
        consumer = -1
        idx = _next_rack_consumer(racks, i, under, next_idx)
        if idx >= 0:
            consumer = under[idx]
            cnt = counts[consumer] + 1
            if cnt >= min_q:
                del under[idx]
                if cnt < max_q and state[0] < expected_over:
                    exact.append(consumer)
            else:
                idx += 1
            next_idx = idx % len(under) if under else 0
        elif exact:
            first = _next_rack_consumer(racks, i, exact, 0)
            if first >= 0:
                consumer = exact[first]
                if counts[consumer] + 1 == max_q:
                    del exact[first]
                    state[0] += 1
                    if state[0] >= expected_over:
                        exact.clear()
        if consumer >= 0:
            owner[i] = consumer
            counts[consumer] += 1
            lists[consumer].append(i)
        else:
            rest.append(i)
    return rest


def _round_robin(unassigned, owner, counts, under, exact, min_q, lists) -> None:
    """Java's assignRoundRobin, done a whole round of members at a time."""
    pos = 0
    total = len(unassigned)
    ei = 0
    while pos < total:
        if under:
            k = len(under)
            rounds = min(min_q - counts[m] for m in under)
            rounds = min(rounds, (total - pos) // k)
            if rounds > 0:
                stop = pos + rounds * k
                for j, m in enumerate(under):
                    got = unassigned[pos + j : stop : k]
                    _scatter(owner, got, m)
                    lists[m] += got
                    counts[m] += rounds
                pos = stop
                batch = under
            else:
                batch = under[: total - pos]
                for m, i in zip(batch, unassigned[pos:], strict=False):
                    owner[i] = m
                    counts[m] += 1
                    lists[m].append(i)
                pos = total
            filled = [m for m in batch if counts[m] == min_q]
            if filled:
                done = set(filled)
                under = [m for m in under if m not in done]
                exact.extend(filled)
        else:
            if ei >= len(exact):
                raise RuntimeError("sticky: no member left under quota for remaining partitions")
            m = exact[ei]
            ei += 1
            owner[unassigned[pos]] = m
            counts[m] += 1
            lists[m].append(unassigned[pos])
            pos += 1


# --------------------------------------------------------------------------- general


def _general(space: PartitionSpace, members: list[str], topic_sets: list[frozenset[str]],
             owned: list[list[int]], racks: _RackInfo) -> list[int]:
    nm = len(members)
    total = space.total
    # Topics grouped by their set of eligible members: a move is legal within a group.
    topic_members: dict[str, list[int]] = {t: [] for t in space.topics}
    for m, ts in enumerate(topic_sets):
        for t in ts:
            if t in topic_members:
                topic_members[t].append(m)
    group_of: dict[tuple[int, ...], int] = {}
    group_members: list[list[int]] = []
    group_topics: list[list[str]] = []
    topic_group: dict[str, int] = {}
    for t in sorted(space.topics, key=lambda t: (len(topic_members[t]), t)):
        key = tuple(topic_members[t])
        if not key:
            continue
        g = group_of.get(key)
        if g is None:
            g = group_of[key] = len(group_members)
            group_members.append(list(key))
            group_topics.append([])
        group_topics[g].append(t)
        topic_group[t] = g
    ng = len(group_members)
    part_group = [-1] * total
    for t, g in topic_group.items():
        r = space.topic_range(t)
        part_group[r.start : r.stop] = [g] * len(r)

    owner = [-1] * total
    counts = [0] * nm
    held: list[dict[int, list[int]]] = [{} for _ in range(nm)]
    member_groups: list[set[int]] = [set() for _ in range(nm)]
    for g, gm in enumerate(group_members):
        for m in gm:
            member_groups[m].add(g)
    for m in range(nm):
        mine = member_groups[m]
        for i in owned[m]:
            g = part_group[i]
            if g not in mine:  # topic gone from the member's subscription
                continue
            if racks.enabled and racks.mismatch(m, i):
                continue
            owner[i] = m
            counts[m] += 1
            held[m].setdefault(g, []).append(i)

    # Unassigned partitions, most constrained topics first (Java's TopicComparator).
    for g in range(ng):
        pending: list[int] = []
        for t in group_topics[g]:
            r = space.topic_range(t)
            seg = owner[r.start : r.stop]
            pending.extend(r.start + p for p, o in enumerate(seg) if o < 0)
        if not pending:
            continue
        if racks.enabled:
            pending = _assign_rack_first(pending, group_members[g], g, owner, counts, held, racks)
        _water_fill(pending, group_members[g], g, owner, counts, held)

    _balance(group_members, owner, counts, held, racks)
    return owner


def _assign_rack_first(pending, gmembers, g, owner, counts, held, racks) -> list[int]:
    """Each partition to the least-loaded member in one of its replicas' racks.

    This ignores balance, like Java; the balancing pass then evens counts out
    and prefers to move partitions that are off-rack.
    """
    rest = []
    for i in pending:
        best = -1
        for m in gmembers:
            if racks.match(m, i) and (best < 0 or counts[m] < counts[best]):
                best = m
        if best < 0:
            rest.append(i)
            continue
        owner[i] = best
        counts[best] += 1
        held[best].setdefault(g, []).append(i)
    return rest


def _water_fill(pending, gmembers, g, owner, counts, held) -> None:
    """Raise the least-loaded members first (ties: lower member number) with the pending partitions."""
    order = sorted(gmembers, key=lambda m: (counts[m], m))
    size = len(order)
    left = len(pending)
    level = counts[order[0]]
    k = 0  # order[:k] are the members at the water level
    while True:
        while k < size and counts[order[k]] <= level:
            k += 1
        if k < size:
            nxt = counts[order[k]]
            cost = k * (nxt - level)
            if cost <= left:
                left -= cost
                level = nxt
                continue
        step, extra = divmod(left, k)
        level += step
        break
    raised = sorted(order[:k])
    pos = 0
    for j, m in enumerate(raised):
        want = level - counts[m] + (1 if j < extra else 0)
        if want <= 0:
            continue
        chunk = pending[pos : pos + want]
        pos += want
        for i in chunk:
            owner[i] = m
        counts[m] += want
        held[m].setdefault(g, []).extend(chunk)


def _balance(group_members, owner, counts, held, racks) -> None:
    """Move partitions until no member could give one to an eligible member with two fewer.

    The group holding the most-loaded member goes first: relieving it may
    balance the other groups too, where a group-by-group sweep could move a
    partition that did not need to move.
    """
    while True:
        best = None
        for g, gm in enumerate(group_members):
            if len(gm) < 2:
                continue
            holders = [m for m in gm if held[m].get(g)]
            if not holders:
                continue
            hi = max(counts[m] for m in holders)
            lo = min(counts[m] for m in gm)
            if hi > lo + 1 and (best is None or (hi, hi - lo) > best[0]):
                best = ((hi, hi - lo), g, holders)
        if best is None:
            return
        _, g, holders = best
        if not _balance_group(g, group_members[g], holders, owner, counts, held, racks):
            return


def _balance_group(g, gm, holders, owner, counts, held, racks) -> bool:
    src = [(-counts[m], -m) for m in holders]
    dst = [(counts[m], m) for m in gm]
    heapq.heapify(src)
    heapq.heapify(dst)
    moved = False
    while src and dst:
        nc, nm_ = src[0]
        o = -nm_
        if -nc != counts[o] or not held[o].get(g):
            heapq.heappop(src)
            continue
        c_cnt, c = dst[0]
        if c_cnt != counts[c]:
            heapq.heappop(dst)
            continue
        if counts[o] <= counts[c] + 1:
            break
        stack = held[o][g]
        i = _pick(stack, o, c, racks) if racks.enabled else stack.pop()
        owner[i] = c
        counts[o] -= 1
        counts[c] += 1
        held[c].setdefault(g, []).append(i)
        moved = True
        heapq.heapreplace(src, (-counts[o], -o))
        heapq.heapreplace(dst, (counts[c], c))
        if held[c][g]:
            heapq.heappush(src, (-counts[c], -c))
        heapq.heappush(dst, (counts[o], o))
    return moved


def _pick(stack: list[int], o: int, c: int, racks: _RackInfo) -> int:
    """From the newest few, a partition that is off-rack at ``o`` or on-rack at ``c``."""
    for k in range(len(stack) - 1, max(-1, len(stack) - 65), -1):
        i = stack[k]
        if racks.match(c, i) or not racks.match(o, i):
            return stack.pop(k)
    return stack.pop()
