"""What happened in a demo run, from the recorded data: pure functions, no I/O.

Ownership comes from each member's own events: for a groupkafka query, the connector's INFO
log lines (``group G: assigned [...]``, ``revoked [...]``, ``lost N partitions (...): [...]``,
``left the group``); for the plain consumer, its rebalance callbacks. Lag comes from the
group's committed offsets and the partitions' end offsets, sampled during the run.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

_STAMP = r"(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_ASSIGNED = re.compile(_STAMP + r" INFO \S+: group (?P<group>\S+): (?P<kind>assigned|revoked) (?P<parts>\[.*\])\s*$")
_LOST = re.compile(_STAMP + r" WARNING \S+: group (?P<group>\S+): lost \d+ partitions \(.*\): (?P<parts>\[.*\])\s*$")
_LEFT = re.compile(_STAMP + r" INFO \S+: group (?P<group>\S+): left the group\s*$")


@dataclass(frozen=True)
class OwnershipEvent:
    """At ``t`` (epoch seconds), ``member`` gained (``kind == "assigned"``) or gave up
    (``"revoked"``, ``"lost"``, ``"left"``: everything) ``partitions``."""

    t: float
    member: str
    kind: str
    partitions: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Interval:
    member: str
    partition: int
    start: float
    end: float


@dataclass(frozen=True)
class Sample:
    """The group's committed offset (None: nothing committed) and the end offset per partition."""

    t: float
    committed: Mapping[int, int | None]
    ends: Mapping[int, int]


@dataclass(frozen=True)
class ReadStats:
    produced: int
    read_by: Mapping[str, int]  # records delivered to each member's sink, duplicates included
    lost: tuple[int, ...]  # sequence numbers produced and read by nobody
    duplicates: int  # deliveries beyond the first, over all members
    duplicates_by: Mapping[str, int] = field(default_factory=dict)  # member that read a record again


def _partition_of(name: str, topic: str) -> int | None:
    prefix = topic + "-"
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        return int(name[len(prefix):])
    return None


def _stamp(text: str) -> float:
    """The log's local-time stamp (logging's asctime) as epoch seconds."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse_connector_log(lines: Iterable[str], member: str, group: str, topic: str) -> list[OwnershipEvent]:
    """Ownership events of ``group`` on ``topic`` in a query process's stderr."""
    out = []
    for line in lines:
        if (m := _ASSIGNED.search(line) or _LOST.search(line)) and m["group"] == group:
            kind = m.groupdict().get("kind") or "lost"
            parts = frozenset(p for p in (_partition_of(n, topic) for n in ast.literal_eval(m["parts"]))
                              if p is not None)
            if parts:
                out.append(OwnershipEvent(_stamp(m["stamp"]), member, kind, parts))
        elif (m := _LEFT.search(line)) and m["group"] == group:
            out.append(OwnershipEvent(_stamp(m["stamp"]), member, "left"))
    return out


def owned_now(events: Sequence[OwnershipEvent]) -> frozenset[int]:
    """What one member owns after its ``events`` (in order)."""
    owned: set[int] = set()
    for e in events:
        if e.kind == "assigned":
            owned |= e.partitions
        elif e.kind == "left":
            owned.clear()
        else:
            owned -= e.partitions
    return frozenset(owned)


def intervals(events: Iterable[OwnershipEvent], end: float,
              exits: Mapping[str, float] | None = None) -> list[Interval]:
    """Ownership intervals per member and partition. An interval still open is closed at the
    member's process exit (``exits``) or at ``end``."""
    exits = exits or {}
    open_: dict[tuple[str, int], float] = {}
    out: list[Interval] = []
    for e in sorted(events, key=lambda e: e.t):
        if e.kind == "assigned":
            for p in e.partitions:
                open_.setdefault((e.member, p), e.t)
            continue
        gone = [k for k in open_ if k[0] == e.member and (e.kind == "left" or k[1] in e.partitions)]
        for key in gone:
            out.append(Interval(key[0], key[1], open_.pop(key), e.t))
    for (member, p), start in open_.items():
        out.append(Interval(member, p, start, min(end, exits.get(member, end))))
    return sorted(out, key=lambda i: (i.partition, i.start))


def owner_at(ivals: Sequence[Interval], partition: int, t: float) -> str | None:
    for i in ivals:
        if i.partition == partition and i.start <= t < i.end:
            return i.member
    return None


def overlaps(ivals: Sequence[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of intervals in which two members owned one partition at once."""
    out = []
    for a in ivals:
        for b in ivals:
            if a.partition == b.partition and a.member < b.member and a.start < b.end and b.start < a.end:
                out.append((a, b))
    return out


def lag_by_member(samples: Sequence[Sample], ivals: Sequence[Interval],
                  members: Sequence[str]) -> dict[str, list[tuple[float, int]]]:
    """Per member (and ``"unowned"``), the summed lag (end - committed) of the partitions it owned
    at each sample. A partition with no committed offset lags by its whole end offset."""
    out: dict[str, list[tuple[float, int]]] = {m: [] for m in [*members, "unowned"]}
    for s in samples:
        total = dict.fromkeys(out, 0)
        for p, end in s.ends.items():
            committed = s.committed.get(p)
            owner = owner_at(ivals, p, s.t) or "unowned"
            total[owner if owner in total else "unowned"] += max(0, end - (committed or 0))
        for m, v in total.items():
            out[m].append((s.t, v))
    return out


def read_stats(produced: Iterable[int], reads: Mapping[str, Sequence[tuple[float, int]]]) -> ReadStats:
    """Lost and duplicated records over every member's sink; ``reads`` holds (time, sequence
    number) per member. A duplicate is charged to the member that read the record later."""
    want = set(produced)
    seen: Counter[int] = Counter()
    dups_by: Counter[str] = Counter()
    for _t, member, seq in sorted((t, m, seq) for m, rs in reads.items() for t, seq in rs):
        if seen[seq]:
            dups_by[member] += 1
        seen[seq] += 1
    return ReadStats(
        produced=len(want),
        read_by={m: len(v) for m, v in reads.items()},
        lost=tuple(sorted(want - set(seen))),
        duplicates=sum(n - 1 for n in seen.values() if n > 1),
        duplicates_by=dict(dups_by),
    )


def changes(events: Iterable[OwnershipEvent]) -> list[float]:
    """Times ownership changed, close events (within 1 s) merged: the rebalances."""
    out: list[float] = []
    for t in sorted(e.t for e in events):
        if not out or t - out[-1] > 1.0:
            out.append(t)
    return out


def planned_outside_ownership(progress: Mapping[str, Sequence[Mapping]], ivals: Sequence[Interval],
                              topic: str, slack_s: float = 1.0) -> list[dict]:
    """Cross-check of the logged ownership against what each query planned: every partition in a
    micro-batch's ranges (Spark's progress) must have been owned by that query at some moment
    between the trigger's start and its end (``slack_s`` for the two processes' log stamps)."""
    out = []
    for member, batches in progress.items():
        for b in batches:
            lo, hi = b["t"] - slack_s, b["t"] + b.get("ms", 0) / 1000 + slack_s
            for name in b["ranges"]:
                p = _partition_of(name, topic)
                if not any(i.member == member and i.partition == p and i.start <= hi and i.end >= lo
                           for i in ivals):
                    out.append({"member": member, "batch": b["batch"], "partition": p})
    return out
