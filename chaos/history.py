"""The history checker: what the members did, judged against what the group protocol promises,
in the spirit of Jepsen's Kafka checker. Pure: the inputs are the members' histories (parsed
from their logs and sinks at the edges, :func:`parse_member_log`) and the coordinator's
samples; the output is the list of breaches, each one a line a person can follow.

The history of a run:

- :class:`Ownership`: a member incarnation (``a-1``) or plain consumer acquiring, giving up
  after its revoke barrier (``revoked``) or losing partitions, at a monotonic time, with its
  member id and the generation (classic) or member epoch (KIP-848) then;
- :class:`Plan`: a Spark member planning a batch: member id, generation, the end offset it
  handed to Spark (the ranges of every partition it planned), when;
- :class:`Commit`: an OffsetCommit: member id and generation it carried, when it was sent,
  what the coordinator accepted and what it answered as fenced;
- the reads: the sinks' batches (:class:`chaos.sink.Batch`), with when each began and ended
  and, for a Spark member, the end offset Spark logged for it (which names its plan);
- :class:`GroupSample`: the group's members and assignments as the coordinator described them.

The rules (:func:`judge`):

a. one reader at a time: two members never plan one partition in the same generation, no
   reader's use of a partition falls inside another's ownership of it (its first and last
   plan, or poll, of one acquisition), and no description of the group has one partition in
   two members' assignments;
b. no commit is accepted from a member after it was fenced: after a fencing answer to that
   (member, generation), or (classic) sent after a later generation had formed;
c. a member reads a partition only while it owns it: a Spark member plans a partition only
   between its acquisition and the end of its revocation (a batch planned before may finish
   after: the one batch the revoke barrier allows); a plain consumer's poll overlaps its
   ownership;
d. handovers are counted from the group's generations (acquisitions in the members'
   histories), never from the readers' output (:func:`handovers`); the duplicate promise
   (one batch per handover) is judged on them (chaos.verdict.tally);
e. within one ownership (a member's acquisition of a partition until it ends), offsets only
   rise and none that holds a record is skipped unless the skip is a reported loss.

A Spark batch with no plan in its member's history cannot be judged: that is a breach too
(the history is incomplete). A batch an incarnation replays from its checkpoint was planned by
an earlier one: it is judged by the lost and duplicate checks, not by c and e. A new query's
batch 0 whose end offset has no ranges (the planner's first answer, which only records the
partitions it began with: planning/offsets.py first_batch_end) reads nothing and has no plan.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from chaos.sink import Batch

#: the product's history lines (spark_groupsource/group/history.py)
PREFIX = "groupkafka-history "


@dataclass(frozen=True)
class Ownership:
    owner: str  # "a-1", or a plain consumer's name
    event: str  # "acquired", "revoked" (after the barrier), "lost", "left" (the member closed)
    partitions: tuple[int, ...]
    t: float  # monotonic
    member: str = ""
    gen: int = -1


@dataclass(frozen=True)
class Plan:
    owner: str
    member: str
    gen: int
    t: float
    ranges: Mapping[int, tuple[int, int]]  # partition -> [from, until)
    end: str  # the end offset handed to Spark, as Spark logs it


@dataclass(frozen=True)
class Commit:
    owner: str
    member: str
    gen: int
    t: float  # when sent
    accepted: tuple[tuple[int, int], ...]  # (partition, offset)
    fenced: tuple[int, ...] = ()


@dataclass(frozen=True)
class GroupSample:
    t: float
    state: str
    members: Mapping[str, tuple[int, ...]]  # member id -> partitions


@dataclass
class History:
    ownership: list[Ownership] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    reads: list[Batch] = field(default_factory=list)
    samples: list[GroupSample] = field(default_factory=list)
    classic: bool = True  # generations are the group's (classic), not per-member epochs (KIP-848)
    exclusive: bool = True  # one owner per partition (False: the redundant assignor's replicas)


@dataclass
class Judgement:
    double_plans: list[str] = field(default_factory=list)  # a
    fenced_commits: list[str] = field(default_factory=list)  # b
    reads_unowned: list[str] = field(default_factory=list)  # c
    order_breaks: list[str] = field(default_factory=list)  # e
    unplanned: list[str] = field(default_factory=list)  # Spark batches with no plan in the history
    handovers: int = 0  # d: summed over partitions
    replayed: int = 0  # batches read by another incarnation than the one that planned them
    generations: int = 0  # distinct generations (or epochs) seen

    @property
    def breaches(self) -> list[str]:
        return ([f"two owners: {x}" for x in self.double_plans] + [f"fenced commit: {x}" for x in self.fenced_commits]
                + [f"read while not owned: {x}" for x in self.reads_unowned]
                + [f"order within one ownership: {x}" for x in self.order_breaks]
                + [f"no plan: {x}" for x in self.unplanned])


# -- parsing (text in, events out) -----------------------------------------------------------
def parse_member_log(owner: str, text: str, topic: str) -> tuple[list[Ownership], list[Plan], list[Commit]]:
    """The history lines of one incarnation's log, only ``topic``'s partitions."""
    own, plans, commits = [], [], []
    for line in text.splitlines():
        i = line.find(PREFIX)
        if i < 0:
            continue
        try:
            e = json.loads(line[i + len(PREFIX):])
        except ValueError:
            continue  # a line cut by a kill: nothing to judge
        ev, t, member, gen = e.get("ev"), float(e.get("mono", 0.0)), str(e.get("member", "")), int(e.get("gen", -1))
        if ev in ("acquired", "revoked", "lost", "left"):
            own.append(Ownership(owner, ev, tuple(p for tp, p in e.get("partitions", []) if tp == topic), t, member, gen))
        elif ev == "plan":
            ranges = json.loads(e["end"]).get("ranges", {}).get(topic, {})
            plans.append(Plan(owner, member, gen, t, {int(p): (int(r[0]), int(r[1])) for p, r in ranges.items()},
                              e["end"]))
        elif ev == "commit":
            commits.append(Commit(owner, member, gen, t,
                                  tuple((p, o) for tp, p, o in e.get("accepted", []) if tp == topic),
                                  tuple(p for tp, p in e.get("fenced", []) if tp == topic)))
    return own, plans, commits


# -- the rules ---------------------------------------------------------------------------------
def double_plans(plans: Sequence[Plan], samples: Sequence[GroupSample]) -> list[str]:
    """a: (generation, partition) planned by two member ids; a sample with a partition twice."""
    by: dict[tuple[int, int], dict[str, Plan]] = defaultdict(dict)
    for pl in plans:
        if pl.gen < 0:
            continue
        for p, (lo, hi) in pl.ranges.items():
            if hi > lo:
                by[(pl.gen, p)].setdefault(pl.member, pl)
    out = []
    for (gen, p), members in sorted(by.items()):
        if len(members) > 1:
            who = ", ".join(f"{m.owner} (member {m.member}, [{m.ranges[p][0]}, {m.ranges[p][1]}) at {m.t:.1f})"
                            for m in members.values())
            out.append(f"generation {gen}: partition {p} planned by {who}")
    for s in samples:
        owners = Counter(p for ps in s.members.values() for p in ps)
        twice = sorted(p for p, n in owners.items() if n > 1)
        if twice:
            out.append(f"the coordinator's description ({s.state}) at {s.t:.1f}: partitions {twice} in two members")
    return out


def fenced_commits(commits: Sequence[Commit], ownership: Sequence[Ownership], classic: bool) -> list[str]:
    """b: a commit accepted after its (member, generation) was fenced: after a fencing answer to
    it or a loss recorded under it; classic, also one sent after a later generation formed (a
    member acquired under it: the coordinator refuses older generations from then on)."""
    fenced: dict[tuple[str, int], float] = {}
    for c in commits:
        if c.fenced:
            key = (c.member, c.gen)
            fenced[key] = min(fenced.get(key, c.t), c.t)
    for o in ownership:
        if o.event == "lost" and o.member and o.gen >= 0:
            key = (o.member, o.gen)
            fenced[key] = min(fenced.get(key, o.t), o.t)
    formed: dict[int, float] = {}
    if classic:
        for o in ownership:
            if o.event == "acquired" and o.gen >= 0:
                formed[o.gen] = min(formed.get(o.gen, o.t), o.t)
    # the same member acquiring under the same generation after the fence: the coordinator took it
    # back in that generation (a fence the suite injected, chaos commit_errors; a real one is
    # final: generations only grow, a removed member id never returns)
    rejoined: dict[tuple[str, int], list[float]] = defaultdict(list)
    for o in ownership:
        if o.event == "acquired" and o.member:
            rejoined[(o.member, o.gen)].append(o.t)
    gens = sorted(formed)
    out = []
    for c in commits:
        if not c.accepted:
            continue
        at = fenced.get((c.member, c.gen))
        if at is not None and any(at < t < c.t for t in rejoined.get((c.member, c.gen), ())):
            at = None
        if at is not None and c.t > at:
            out.append(f"{c.owner} (member {c.member}, generation {c.gen}): commit of {list(c.accepted)[:4]} sent "
                       f"{c.t - at:.1f}s after that generation was fenced, accepted")
            continue
        later = [g for g in gens[bisect.bisect_right(gens, c.gen):] if formed[g] < c.t]
        if c.gen >= 0 and later:
            out.append(f"{c.owner} (member {c.member}, generation {c.gen}): commit of {list(c.accepted)[:4]} sent "
                       f"{c.t - formed[later[0]]:.1f}s after generation {later[0]} formed, accepted")
    return out


class Owned:
    """Who held which partition when, from the ownership events."""

    def __init__(self, ownership: Iterable[Ownership]):
        self.events: dict[tuple[str, int], list[tuple[float, bool]]] = defaultdict(list)  # (owner, p) -> (t, held)
        for o in sorted(ownership, key=lambda o: o.t):
            for p in o.partitions:
                self.events[(o.owner, p)].append((o.t, o.event == "acquired"))
        self.owners = {o.owner for o in ownership}

    def acquisitions_before(self, owner: str, p: int, t: float) -> int:
        return sum(1 for at, held in self.events.get((owner, p), ()) if held and at <= t)

    def held_at(self, owner: str, p: int, t: float) -> tuple[bool, float | None]:
        """(held at ``t``, when the last event before it happened)."""
        last = None
        for at, held in self.events.get((owner, p), ()):
            if at > t:
                break
            last = (held, at)
        return (False, None) if last is None else last

    def held_during(self, owner: str, p: int, t0: float, t1: float) -> bool:
        held, _ = self.held_at(owner, p, t0)
        return held or any(h and t0 <= at <= t1 for at, h in self.events.get((owner, p), ()))


def handovers(ownership: Iterable[Ownership]) -> dict[int, int]:
    """d: per partition, its acquisitions in the group's generations less the first: each is a
    point where the next owner starts from the group's offset (a re-read of at most a batch)."""
    acq: Counter = Counter()
    for o in ownership:
        if o.event == "acquired":
            acq.update(o.partitions)
    return {p: max(n - 1, 0) for p, n in acq.items()}


def acquisitions(ownership: Iterable[Ownership], by_member: bool = True) -> dict[str, Counter]:
    """member (``a`` across its incarnations, or the owner) -> partition -> times acquired: the
    input of chaos.verdict.tally's duplicate promise."""
    out: dict[str, Counter] = defaultdict(Counter)
    for o in ownership:
        if o.event == "acquired":
            out[o.owner.rsplit("-", 1)[0] if by_member and _incarnation(o.owner) else o.owner].update(o.partitions)
    return dict(out)


def _incarnation(owner: str) -> bool:
    return owner.rsplit("-", 1)[-1].isdigit() and "-" in owner


def _plan_of(b: Batch, plans_by_end: Mapping[str, list[Plan]]) -> Plan | None:
    """The plan a Spark batch came from: by the end offset Spark logged, the same incarnation's
    first, else an earlier incarnation's of the same member (a replay)."""
    found = plans_by_end.get(b.end or "", [])
    mine = [p for p in found if p.owner == b.owner]
    if mine:
        return mine[-1]
    same = [p for p in found if p.owner.rsplit("-", 1)[0] == b.member]
    return same[-1] if same else None


def _reads_nothing(b: Batch) -> bool:
    """A batch that read no rows and whose end offset (as Spark logged it) has no ranges."""
    if b.rows or not b.end:
        return False
    try:
        end = json.loads(b.end)
        end = json.loads(end) if isinstance(end, str) else end
    except ValueError:
        return False
    return isinstance(end, dict) and not end.get("ranges")


def judge(h: History, produced: Mapping[int, tuple[int, int | None]], *,
          spark_owners: Collection[str], deleted_before: Mapping[int, int] | None = None,
          skipped: Sequence[tuple[int, int, int]] = (), incarnation_of: Mapping[int, int] | None = None) -> Judgement:
    """Every rule on one run. ``produced``: seq -> (partition, offset) of every record in the log;
    ``spark_owners``: the Spark members' incarnations (their batches must have plans);
    ``deleted_before``, ``skipped``, ``incarnation_of``: what excuses a skipped offset
    (retention, a logged data-loss range, another incarnation of the topic)."""
    j = Judgement()
    j.double_plans = double_plans(h.plans, h.samples) if h.exclusive else []
    j.fenced_commits = fenced_commits(h.commits, h.ownership, h.classic)
    j.handovers = sum(handovers(h.ownership).values())
    j.generations = len({o.gen for o in h.ownership if o.gen >= 0})
    owned = Owned(h.ownership)
    plans_by_end: dict[str, list[Plan]] = defaultdict(list)
    for pl in sorted(h.plans, key=lambda p: p.t):
        plans_by_end[pl.end].append(pl)
    # each read with the time its ownership is judged at, or None (a replay: not judged by c, e)
    judged: list[tuple[Batch, float | None]] = []
    for b in h.reads:
        parts = sorted({p for p, _o, _s in b.rows})
        if b.owner in spark_owners:
            pl = _plan_of(b, plans_by_end)
            if pl is None and _reads_nothing(b):
                continue
            if pl is None:
                j.unplanned.append(f"{b.owner} batch {b.batch} read partitions {parts}; no plan with its end offset "
                                   f"{(b.end or '(none logged)')[:120]} in the history")
                continue
            if pl.owner != b.owner:
                j.replayed += 1
                judged.append((b, None))
                continue
            for p in parts:
                held, since = owned.held_at(b.owner, p, pl.t)
                if not held:
                    why = "before acquiring it" if since is None else f"{pl.t - since:.1f}s after giving it up"
                    j.reads_unowned.append(f"{b.owner} planned partition {p} (batch {b.batch}, member {pl.member}, "
                                           f"generation {pl.gen}) at {pl.t:.1f}, {why}")
            judged.append((b, pl.t))
        elif b.owner in owned.owners and b.started is not None:
            t1 = b.ended if b.ended is not None else b.started
            for p in parts:
                if not owned.held_during(b.owner, p, b.started, t1):
                    j.reads_unowned.append(f"{b.owner} read partition {p} (poll {b.batch}, {b.started:.1f}-{t1:.1f}) "
                                           f"while it did not own it")
            judged.append((b, t1))
        else:  # a reader whose ownership is not recorded: its order is judged as one ownership
            judged.append((b, float("inf")))
    if h.exclusive:
        j.double_plans += interleaved(judged, owned)
    j.order_breaks = order_within_ownership(judged, owned, produced, deleted_before=deleted_before,
                                            skipped=skipped, incarnation_of=incarnation_of)
    return j


def interleaved(reads: Sequence[tuple[Batch, float | None]], owned: Owned) -> list[str]:
    """a: the uses of a partition grouped by ownership (owner, acquisitions so far): a Spark
    batch's plan, a poll's start. Two owners' spans of one partition must not overlap: one
    that does read it while the other still did (the A, B, A, B of two members each acquiring
    it once). Replays and readers whose ownership is not recorded are left out."""
    uses: dict[int, dict[tuple[str, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for b, t in reads:
        if t is None or t == float("inf"):
            continue  # a replay, or a reader whose ownership is not recorded
        at = t if b.started is None or b.ended != t else b.started  # a poll: from its start
        for p in {p for p, _o, _s in b.rows}:
            uses[p][(b.owner, owned.acquisitions_before(b.owner, p, t))].append(at)
    out = []
    for p, by in sorted(uses.items()):
        widest: tuple[float, float, tuple[str, int]] | None = None  # the span reaching furthest so far
        for s1, e1, k1 in sorted((min(ts), max(ts), key) for key, ts in by.items()):
            if widest is not None and k1[0] != widest[2][0] and s1 < widest[1]:
                s0, e0, k0 = widest
                out.append(f"partition {p}: {k1[0]} read it at {s1:.1f}, inside {k0[0]}'s ownership (its reads "
                           f"{s0:.1f}-{e0:.1f}, acquisition {k0[1]})")
            if widest is None or e1 > widest[1]:
                widest = (s1, e1, k1)
    return out


def order_within_ownership(reads: Sequence[tuple[Batch, float | None]], owned: Owned,
                           produced: Mapping[int, tuple[int, int | None]], *,
                           deleted_before: Mapping[int, int] | None = None,
                           skipped: Sequence[tuple[int, int, int]] = (),
                           incarnation_of: Mapping[int, int] | None = None) -> list[str]:
    """e: each read belongs to the ownership (owner, acquisitions of the partition so far) in
    force when it was planned (or polled); within one, offsets only rise and no offset that
    holds a record is skipped outside a reported loss, a retention point or a change of the
    topic's incarnation. A new ownership starts where the group's offset says (judged by the
    lost and duplicate checks). Reads with no time (replays) are left out."""
    deleted_before = deleted_before or {}
    incarnation_of = incarnation_of or {}
    holding: dict[tuple[int, int], list[int]] = defaultdict(list)
    for s, (p, o) in produced.items():
        if o is not None and o >= 0:
            holding[(incarnation_of.get(s, 0), p)].append(o)
    for offsets in holding.values():
        offsets.sort()
    skips: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for p, lo, hi in skipped:
        skips[p].append((lo, hi))

    def unexcused(inc: int, p: int, after: int, until: int) -> list[int]:
        offsets = holding.get((inc, p), [])
        i, k = bisect.bisect_right(offsets, after), bisect.bisect_left(offsets, until)
        return [o for o in offsets[i:k] if o >= deleted_before.get(p, -1)
                and not any(lo <= o < hi for lo, hi in skips.get(p, ()))]

    last: dict[tuple[str, int, int], tuple[int, int, int]] = {}  # (owner, p, ownership) -> (inc, offset, batch)
    out: list[str] = []
    ordered = sorted(((b, t) for b, t in reads if t is not None),
                     key=lambda bt: (bt[0].owner, bt[0].started if bt[0].started is not None else bt[0].t, bt[0].batch))
    for b, t in ordered:
        for p, o, s in b.rows:
            inc = incarnation_of.get(s, 0)
            key = (b.owner, p, owned.acquisitions_before(b.owner, p, t))
            prev = last.get(key)
            last[key] = (inc, o, b.batch)
            if prev is None:
                continue
            prev_inc, prev_o, prev_batch = prev
            after = f"{prev_o} (batch {prev_batch})"
            if inc != prev_inc:
                prev_o, after = -1, f"the start of the topic's incarnation {inc}"
            if o > prev_o:
                missing = unexcused(inc, p, prev_o, o)
                if missing:
                    out.append(f"{b.owner} partition {p} (ownership {key[2]}): gap, read offset {o} (batch {b.batch}) "
                               f"after {after}, skipping {len(missing)} records at offsets {_ranges(missing)} in no "
                               f"reported loss")
                continue
            out.append(f"{b.owner} partition {p} (ownership {key[2]}): reorder, read offset {o} (batch {b.batch}) "
                       f"after {after} with no new acquisition of the partition")
    return out


def _ranges(offsets: Sequence[int], most: int = 3) -> str:
    """[3, 7), [9, 10) ... for sorted offsets."""
    spans: list[list[int]] = []
    for o in offsets:
        if spans and spans[-1][1] == o:
            spans[-1][1] = o + 1
        else:
            spans.append([o, o + 1])
    text = ", ".join(f"[{lo}, {hi})" for lo, hi in spans[:most])
    return text + (f" and {len(spans) - most} more ranges" if len(spans) > most else "")
