"""The durable sink format shared by Spark members and plain consumers, and its reader.

One file per batch, ``<owner>-<batch>-<uuid>.jsonl``: a header ``{"owner", "batch", "t"}`` then
one ``[partition, offset, seq]`` line per record. Written to a temporary name and renamed, so a
killed writer leaves either the whole batch or nothing.
"""

from __future__ import annotations

import glob
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass


def write_batch(out: str, owner: str, batch_id: int, rows: Iterable[tuple[int, int, int]],
                t: float | None = None, *, started: float | None = None, ended: float | None = None,
                end: str | None = None) -> str:
    """``t``: when the batch was read (wall clock; default now). The verdict orders batches by it,
    so a batch written after the fact (a Java consumer's, see chaos.traffic.JavaPlainMember)
    carries the time it was read. For the history checker (chaos/history.py): ``started`` and
    ``ended``, when the batch began and finished reading (``time.monotonic()``, the members'
    history's clock), and ``end``, the source's end offset Spark logged for the batch in the
    query's checkpoint (the planner's history names the plan it came from by it)."""
    if t is None:
        # a member on the clock-step shim (chaos/netfaults.py clock_jumps) has a stepped wall clock:
        # its batches carry the harness's wall clock, from its real monotonic one
        anchor = os.environ.get("CHAOS_WALL_MINUS_MONOTONIC")
        t = float(anchor) + time.monotonic() if anchor else time.time()
    head: dict[str, object] = {"owner": owner, "batch": batch_id, "t": t}
    if started is not None:
        head.update(started=started, ended=ended if ended is not None else time.monotonic())
    if end is not None:
        head["end"] = end
    lines = [json.dumps(head)]
    lines += [json.dumps([p, o, s]) for p, o, s in rows]
    final = os.path.join(out, f"{owner}-{batch_id}-{uuid.uuid4().hex[:8]}.jsonl")
    tmp = final + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    return final


@dataclass(frozen=True)
class Batch:
    owner: str  # "<member>-<incarnation>" or a plain consumer's name
    batch: int
    t: float
    rows: tuple[tuple[int, int, int], ...]  # (partition, offset, seq)
    started: float | None = None  # monotonic: began reading (None: not recorded)
    ended: float | None = None  # monotonic: done reading
    end: str | None = None  # a Spark member's: the end offset of the batch in its checkpoint

    @property
    def member(self) -> str:
        """The member across its incarnations ("a" for "a-2")."""
        return self.owner.rsplit("-", 1)[0]


def read_batches(out: str) -> list[Batch]:
    """Every complete batch file under ``out``, in write order: by time, then one owner's
    batches by their number. A Java consumer's polls carry millisecond times and two polls in
    one millisecond are common (the 2-hour soak of 2026-12-02 had them): ordered by time alone,
    the files' order in the directory decided, and the order check saw records read after
    later ones."""
    batches = []
    for path in glob.glob(os.path.join(out, "*.jsonl")):
        with open(path) as f:
            lines = f.read().splitlines()
        head = json.loads(lines[0])
        rows = tuple(tuple(json.loads(ln)) for ln in lines[1:] if ln)
        end = head.get("end")
        if isinstance(end, str) and end.startswith('"'):  # Spark logs a source's offset as a JSON string
            end = json.loads(end)
        batches.append(Batch(head["owner"], int(head["batch"]), float(head["t"]), rows,  # type: ignore[arg-type]
                             head.get("started"), head.get("ended"), end))
    batches.sort(key=lambda b: (b.t, b.owner, b.batch))
    return batches
