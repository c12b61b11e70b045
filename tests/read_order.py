"""Whether a group's readers read each partition in order: ConsumerBounceTest's
``assertEquals(consumed, record.offset())`` for members that may own a partition more than once.

Pure, over what the readers logged: the Java reference consumer's events (``tests/javaclient.py``:
its rebalance callbacks and the offset ranges of each poll) and a query's batches with their
plans (the end offset Spark logged for each batch: the ``[from, until)`` of every partition the
member planned). Within one ownership of a partition (for the Java consumer, the callback that
gave it the partition until the one that took it away; for a query, the batches in a row that
planned it) each read goes on exactly where the one before ended: no offset twice, none skipped.
A new ownership starts where the group's offset says, which the exactly-once tally judges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: (batch id, its (partition, offset) rows in the order the sink got them, partition ->
#: [from, until) of its plan, or None where no plan was logged)
PlannedBatch = tuple[int, Sequence[tuple[int, int]], Mapping[int, tuple[int, int]] | None]


def _tp(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition("-")
    return topic, int(p)


def java_order_breaks(name: str, events: Iterable[Mapping[str, Any]], topic: str) -> list[str]:
    """The Java consumer's polls of ``topic``, in event order: each within an ownership of its
    partition, each going on where the poll before ended, each partition's records of one poll
    as many as its offset range holds (the CLI logs a poll's first and last offset and its count
    per partition; a log written without transactions has no gaps)."""
    owned: set[int] = set()
    position: dict[int, int] = {}  # the next offset of each partition within its ownership
    out = []
    for e in events:
        kind = e.get("event")
        if kind in ("assigned", "revoked", "lost"):
            parts = {p for t, p in map(_tp, e.get("partitions", ())) if t == topic}
            for p in parts:
                position.pop(p, None)  # an ownership ends, or begins
            owned = owned | parts if kind == "assigned" else owned - parts
        elif kind == "records":
            counts = e.get("per_partition", {})
            for tp, (first, last) in sorted(e.get("offset_ranges", {}).items()):
                t, p = _tp(tp)
                if t != topic:
                    continue
                first, last = int(first), int(last)
                n = int(counts.get(tp, last - first + 1))
                if n != last - first + 1:
                    out.append(f"{name} partition {p}: one poll read {n} records from {first} to {last}")
                if p not in owned:
                    out.append(f"{name} read partition {p} [{first}, {last}] while not owning it")
                elif p in position and first != position[p]:
                    out.append(f"{name} partition {p}: read from {first} after {position[p] - 1} in one ownership")
                position[p] = last + 1
    return out


def planned_order_breaks(batches: Iterable[PlannedBatch]) -> list[str]:
    """A query's batches, in the order they ran: each read exactly the ranges it planned, each
    partition's records in offset order; a partition planned in consecutive batches goes on
    where the batch before ended; no batch runs twice, none without a plan."""
    out = []
    before: tuple[int, Mapping[int, tuple[int, int]]] | None = None  # the batch before: id, plan
    seen: set[int] = set()
    for batch_id, rows, plan in batches:
        if batch_id in seen:
            out.append(f"batch {batch_id} ran twice")
        seen.add(batch_id)
        if plan is None:
            out.append(f"batch {batch_id}: no plan logged")
            before = None
            continue
        out += [f"batch {batch_id} read partition {p}, which it did not plan"
                for p in sorted({p for p, _ in rows} - set(plan))]
        for p, (lo, hi) in sorted(plan.items()):
            got = [o for pp, o in rows if pp == p]
            if got != list(range(lo, hi)):
                out.append(f"batch {batch_id} partition {p}: planned [{lo}, {hi}), read {len(got)} records "
                           f"{got[:3]}..{got[-3:]}")
            if before is not None and before[0] == batch_id - 1 and p in before[1] and lo != before[1][p][1]:
                out.append(f"batch {batch_id} partition {p}: planned from {lo}, the batch before ended at "
                           f"{before[1][p][1]}, in one ownership")
        before = (batch_id, plan)
    return out
