"""What a scenario's records say: lost, deleted, duplicates against the promise, wrong reads.
Pure: the inputs are the producer's delivery reports, the sinks' batches and the facts the
scenario recorded (acquisitions, retention points, final committed offsets)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chaos.sink import Batch


@dataclass
class Tally:
    produced: int
    read: int  # distinct produced records read by the union of the members
    lost: int
    deleted: int  # deleted by retention before anyone read them (not lost: reported)
    dup_total: int  # reads beyond the first (per member with `redundant`)
    dup_max: int  # the most times one record was read (by one member with `redundant`)
    wrong: int  # a read whose (partition, offset) is not where the record was written
    dup_breaches: list[str] = field(default_factory=list)
    lost_examples: list[tuple[int, int, int]] = field(default_factory=list)  # (seq, partition, offset)


def tally(
    produced: Mapping[int, tuple[int, int]],
    batches: Sequence[Batch],
    *,
    acquisitions: Mapping[str, Counter],
    deleted_before: Mapping[int, int] | None = None,
    counted_below: Mapping[int, int | None] | None = None,
    per_member: bool = False,
) -> Tally:
    """``acquisitions``: member -> partition -> how many times it acquired the partition (from
    its logs). ``deleted_before``: partition -> retention point. ``counted_below``: when the
    query was expected to stop with a failure, only records below these offsets (the group's
    final commits; None: nothing committed) can be lost. ``per_member``: `redundant` reads each
    record once per replica by design, so duplicates count re-reads by the same member."""
    deleted_before = deleted_before or {}
    reads: Counter = Counter()  # (slot, seq)
    wrong = 0
    for b in batches:
        slot = b.member if per_member else "group"
        for p, o, s in b.rows:
            if produced.get(s) != (p, o):
                wrong += 1
            reads[(slot, s)] += 1
    seen = {s for _slot, s in reads}
    lost, deleted = [], 0
    for s, (p, o) in produced.items():
        if s in seen:
            continue
        if o < deleted_before.get(p, -1):
            deleted += 1
            continue
        if counted_below is not None and (counted_below.get(p) is None or o >= counted_below[p]):
            continue
        lost.append((s, p, o))
    lost.sort(key=lambda x: (x[1], x[2]))
    dup_total = sum(n - 1 for n in reads.values())
    dup_max = max(reads.values(), default=0)
    return Tally(
        produced=len(produced), read=len(seen & produced.keys()), lost=len(lost), deleted=deleted,
        dup_total=dup_total, dup_max=dup_max, wrong=wrong,
        dup_breaches=_promise_breaches(produced, batches, reads, acquisitions, per_member),
        lost_examples=lost[:10],
    )


def _promise_breaches(produced, batches, reads, acquisitions, per_member) -> list[str]:
    """The promise: duplicates are bounded by one micro-batch per partition handover. For each
    reader slot and partition: records re-read <= handovers x the largest batch of that
    partition, and no record read more than 1 + handovers times. Handovers of a partition: the
    times it was acquired after the first (from the members' logs), or, if more, the changes of
    owner (member incarnation or plain consumer) between consecutive batches reading it."""
    slot_of = (lambda b: b.member) if per_member else (lambda b: "group")
    largest: dict[tuple[str, int], int] = defaultdict(int)
    owners: dict[tuple[str, int], list[str]] = defaultdict(list)
    for b in batches:
        per_p = Counter(p for p, _o, _s in b.rows)
        for p, n in per_p.items():
            key = (slot_of(b), p)
            largest[key] = max(largest[key], n)
            if not owners[key] or owners[key][-1] != b.owner:
                owners[key].append(b.owner)
    excess: dict[tuple[str, int], int] = defaultdict(int)
    most: dict[tuple[str, int], int] = defaultdict(int)
    for (slot, s), n in reads.items():
        if s not in produced:
            continue
        key = (slot, produced[s][0])
        excess[key] += n - 1
        most[key] = max(most[key], n)
    out = []
    for key in sorted(excess):
        slot, p = key
        if not excess[key]:
            continue
        acq = sum(c.get(p, 0) for m, c in acquisitions.items() if not per_member or m == slot)
        handovers = max(acq - 1, len(owners[key]) - 1, 0)
        if excess[key] > handovers * largest[key] or most[key] > 1 + handovers:
            who = f"member {slot}, " if per_member else ""
            out.append(f"{who}partition {p}: {excess[key]} re-reads (a record up to {most[key]}x) with "
                       f"{handovers} handovers and batches of up to {largest[key]} records")
    return out
