"""The results table (Markdown, so it pastes into the README as printed)."""

from __future__ import annotations

from collections.abc import Sequence

from chaos.run import Row

HEADER = ("scenario", "produced", "read", "lost", "deleted", "dup total", "dup max", "handovers", "dup per handover",
          "offset regressions",
          "query failures", "reached end", "s", "result")


def _end(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        per = f"{r.dup_total / r.handovers:.1f}" if r.handovers else "-"
        cells = (r.scenario, r.produced, r.read, r.lost, r.deleted, r.dup_total, r.dup_max, r.handovers, per,
                 r.regressions,
                 r.failures, _end(r.reached_end), f"{r.elapsed_s:.0f}", "ok" if r.ok else "**FAIL**")
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    notes = [f"- {r.scenario}: " + "; ".join(r.reasons + r.notes) for r in rows if r.reasons or r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))
