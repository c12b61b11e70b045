"""The results tables (Markdown, so they paste into docs/chaos.md as printed): what the records
say (lost, duplicates, committed offsets), then what the history checker (chaos/history.py)
found, rule by rule, and what it judged from (generations, the coordinator's and the offset
sampler's samples).

    python -m chaos.report RUN/results.json     # the tables of a run again
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from chaos.run import Row

HEADER = ("scenario", "produced", "read", "lost", "deleted", "dup total", "dup max", "handovers", "dup per handover",
          "offset regressions", "history breaches",
          "query failures", "reached end", "s", "result")
#: the history checker's table: its inputs, then its rules' findings (a-e of chaos/history.py)
HISTORY_HEADER = ("scenario", "generations", "handovers", "coordinator samples", "offset samples", "two owners",
                  "fenced commits", "read while not owned", "order breaks", "no plan", "replayed", "unacked absent",
                  "reached end")


def _end(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)


def _samples(ok: int | None, failed: int | None) -> str:
    """``12`` or ``12 (3 failed)``; ``-`` when not kept."""
    return "-" if ok is None else f"{ok}" + (f" ({failed} failed)" if failed else "")


def _markdown(header: Sequence[str], cells: Sequence[Sequence[object]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in cells]


def table(rows: Sequence[Row]) -> str:
    main = []
    for r in rows:
        per = f"{r.dup_total / r.handovers:.1f}" if r.handovers else "-"
        main.append((r.scenario, r.produced, r.read, r.lost, r.deleted, r.dup_total, r.dup_max, r.handovers, per,
                     r.regressions, r.history_breaches,
                     r.failures, _end(r.reached_end), f"{r.elapsed_s:.0f}", "ok" if r.ok else "**FAIL**"))
    checker = [(r.scenario, r.generations, r.handovers, _samples(r.group_samples, r.group_sample_errors),
                _samples(r.offset_samples, r.offset_sample_errors), _n(r.two_owners), _n(r.fenced_commits),
                _n(r.reads_unowned), r.order_breaks, _n(r.unplanned), _n(r.replayed), r.unacked_absent,
                _end(r.reached_end)) for r in rows]
    notes = [f"- {r.scenario}: " + "; ".join(r.reasons + r.notes) for r in rows if r.reasons or r.notes]
    return "\n".join(_markdown(HEADER, main) + ["", "The history checker (chaos/history.py):", ""]
                     + _markdown(HISTORY_HEADER, checker) + ([""] + notes if notes else []))


def from_results(path: str) -> str:
    """The tables of a results file (``python -m chaos --json``, or the soak's verdict.json row)."""
    with open(path) as f:
        data = json.load(f)
    rows = data["rows"] if "rows" in data else [data["row"]]
    return table([Row.from_json(r) for r in rows])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(from_results(sys.argv[1]))
