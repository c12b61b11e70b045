"""What a scenario's records say: lost, deleted, duplicates against the promise, wrong reads
(the order of the reads and the rules of the group protocol: chaos/history.py). Pure: the inputs are the
producer's delivery reports, the sinks' batches and the facts the scenario recorded
(acquisitions, retention points, final committed offsets, the topic's incarnations)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from chaos.sink import Batch


@dataclass
class Tally:
    produced: int
    read: int  # distinct produced records read by the union of the members
    lost: int
    deleted: int  # deleted by retention before anyone read them (not lost: reported)
    dup_total: int  # reads beyond the first (per member with `redundant`)
    dup_max: int  # the most times one record was read (by one member with `redundant`)
    wrong: int  # a read whose (partition, offset) is not where the record was acknowledged
    dup_breaches: list[str] = field(default_factory=list)
    handovers: int = 0  # partition handovers, summed over partitions (see handover_count)
    lost_examples: list[tuple[int, int, int]] = field(default_factory=list)  # (seq, partition, offset)
    deleted_records: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset)
    gone: int = 0  # unread records of a topic incarnation that was deleted (gone with the topic: not lost)


def separate_log_copies(
    produced: Mapping[int, tuple[int, int | None]],
    batches: Sequence[Batch],
    copies: Mapping[int, Sequence[tuple[int, int]]],
) -> tuple[dict[int, tuple[int, int | None]], list[Batch]]:
    """A record the producer wrote more than once (``copies``: seq -> every (partition, offset)
    the log holds it at; an idempotent librdkafka producer that resets its producer id after a
    failed request may re-send what was written) is, for the reader, that many records: each
    copy must be read, and once. Each copy but the acknowledged one gets an id of its own (below
    zero) in ``produced`` and in the batches' rows, so :func:`tally` judges it like any record."""
    produced = dict(produced)
    ids: dict[tuple[int, int], int] = {}
    for s in sorted(copies):
        for pos in sorted(copies[s]):
            if produced.get(s) != pos:
                ids[pos] = -1 - len(ids)
                produced[ids[pos]] = pos
    if not ids:
        return produced, list(batches)
    relabeled = [
        replace(b, rows=tuple((p, o, ids.get((p, o), s)) if s in copies else (p, o, s) for p, o, s in b.rows))
        for b in batches
    ]
    return produced, relabeled


def tally(
    produced: Mapping[int, tuple[int, int | None]],
    batches: Sequence[Batch],
    *,
    acquisitions: Mapping[str, Counter],
    deleted_before: Mapping[int, int] | None = None,
    counted_below: Mapping[int, int | None] | None = None,
    per_member: bool = False,
    incarnation_of: Mapping[int, int] | None = None,
    gone_incarnations: Collection[int] = (),
) -> Tally:
    """``acquisitions``: member -> partition -> how many times it acquired the partition (from
    its logs). ``deleted_before``: partition -> retention point. ``counted_below``: when the
    query was expected to stop with a failure, only records below these offsets (the group's
    final commits; None: nothing committed) can be lost. ``per_member``: `redundant` reads each
    record once per replica by design, so duplicates count re-reads by the same member.
    ``incarnation_of``: seq -> the incarnation of the topic it was written to (0 when absent:
    a topic never deleted); an unread record of an incarnation in ``gone_incarnations`` (the
    topic was deleted after it was written) is ``gone``, like a record retention deleted,
    not lost."""
    deleted_before = deleted_before or {}
    incarnation_of = incarnation_of or {}
    reads: Counter = Counter()  # (slot, seq)
    wrong = 0
    for b in batches:
        slot = b.member if per_member else "group"
        for p, o, s in b.rows:
            if s in produced and produced[s][1] is not None and produced[s] != (p, o):
                wrong += 1
            reads[(slot, s)] += 1
    seen = {s for _slot, s in reads}
    lost, deleted, gone = [], [], 0
    for s, (p, o) in produced.items():
        if s in seen:
            continue
        if incarnation_of.get(s, 0) in gone_incarnations:
            gone += 1
            continue
        if o is None:  # reported delivered, offset unknown, not found in the log either: not excused
            lost.append((s, p, -1))
            continue
        if o < deleted_before.get(p, -1):
            deleted.append((p, o))
            continue
        if counted_below is not None and (counted_below.get(p) is None or o >= counted_below[p]):
            continue
        lost.append((s, p, o))
    lost.sort(key=lambda x: (x[1], x[2]))
    dup_total = sum(n - 1 for n in reads.values())
    dup_max = max(reads.values(), default=0)
    return Tally(
        produced=len(produced), read=len(seen & produced.keys()), lost=len(lost), deleted=len(deleted),
        dup_total=dup_total, dup_max=dup_max, wrong=wrong,
        dup_breaches=_promise_breaches(produced, batches, reads, acquisitions, per_member),
        handovers=handover_count(acquisitions, per_member),
        lost_examples=lost[:10], deleted_records=sorted(deleted), gone=gone,
    )


def _handovers(key: tuple[str, int], acquisitions: Mapping[str, Counter], per_member: bool) -> int:
    """Handovers of a partition (for one reader with ``per_member``): its acquisitions in the
    group's generations less the first (chaos.history.handovers), never the changes of owner
    seen in the readers' output: two members reading one partition at once would count as
    handovers there, and excuse their duplicates."""
    slot, p = key
    acq = sum(c.get(p, 0) for m, c in acquisitions.items() if not per_member or m == slot)
    return max(acq - 1, 0)


def handover_count(acquisitions: Mapping[str, Counter], per_member: bool = False) -> int:
    """Partition handovers in the run, summed over partitions (the denominator of the
    duplicates-per-handover figure the README reports)."""
    keys = ({(m, p) for m, c in acquisitions.items() for p in c} if per_member
            else {("group", p) for c in acquisitions.values() for p in c})
    return sum(_handovers(k, acquisitions, per_member) for k in keys)


def unreported(deleted: list[tuple[int, int]], reported: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Deleted records no reported skip range ``(partition, from, until)`` covers."""
    return [(p, o) for p, o in deleted if not any(rp == p and lo <= o < hi for rp, lo, hi in reported)]


def _promise_breaches(produced, batches, reads, acquisitions, per_member) -> list[str]:
    """The promise: duplicates are bounded by one micro-batch per partition handover. For each
    reader slot and partition, the records read more than once must come from at most
    ``handovers`` distinct batches (by the batch that read them first), and no record may be
    read more than 1 + handovers times. Handovers of a partition: the times it was acquired
    after the first, in the group's generations (:func:`_handovers`)."""
    slot_of = (lambda b: b.member) if per_member else (lambda b: "group")
    first_batch: dict[tuple[str, int], int] = {}  # (slot, seq) -> index of the batch that read it first
    for i, b in enumerate(batches):
        slot = slot_of(b)
        for _p, _o, s in b.rows:
            first_batch.setdefault((slot, s), i)
    reread_batches: dict[tuple[str, int], set[int]] = defaultdict(set)
    excess: dict[tuple[str, int], int] = defaultdict(int)
    most: dict[tuple[str, int], int] = defaultdict(int)
    for (slot, s), n in reads.items():
        if n < 2 or s not in produced:
            continue
        key = (slot, produced[s][0])
        excess[key] += n - 1
        most[key] = max(most[key], n)
        reread_batches[key].add(first_batch[(slot, s)])
    out = []
    for key in sorted(excess):
        slot, p = key
        handovers = _handovers(key, acquisitions, per_member)
        if len(reread_batches[key]) > handovers or most[key] > 1 + handovers:
            who = f"member {slot}, " if per_member else ""
            out.append(f"{who}partition {p}: {excess[key]} re-reads (a record up to {most[key]}x) of "
                       f"{len(reread_batches[key])} batches with {handovers} handovers")
    return out


def completeness(reached_end: bool | None, offset_samples: int, offset_errors: int) -> list[str]:
    """What a run must have done for its other checks to mean anything: the group's commits
    reached the log end (None: not expected, the query was meant to fail), and the
    committed-offset sampler answered at least once (with no sample, "committed offsets
    never went back" says nothing)."""
    out = []
    if reached_end is False:
        out.append("the group's commits did not reach the log end")
    if offset_samples == 0:
        out.append(f"the committed-offset sampler took no successful sample ({offset_errors} failed asks)")
    return out
