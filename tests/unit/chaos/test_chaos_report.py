"""The chaos report (chaos/report.py) shows what the history checker judged and found, rule by
rule, read back from a results file as ``python -m chaos`` writes it."""

from __future__ import annotations

import json
import subprocess
import sys

from chaos.report import HEADER, HISTORY_HEADER, from_results
from chaos.run import Row

CLEAN = Row("eager_churn", produced=900, read=900, dup_total=4, dup_max=2, handovers=4, generations=5,
            group_samples=120, group_sample_errors=0, two_owners=0, fenced_commits=0, reads_unowned=0, unplanned=0,
            replayed=0, offset_samples=118, offset_sample_errors=0, reached_end=True, elapsed_s=200.0, ok=True)
BROKEN = Row("driver_kill9", produced=500, read=500, history_breaches=7, order_breaks=1, generations=3,
             group_samples=0, group_sample_errors=40, two_owners=2, fenced_commits=1, reads_unowned=2, unplanned=1,
             replayed=3, offset_samples=0, offset_sample_errors=9, unacked_absent=4, reached_end=False,
             reasons=["7 breaches of the history's rules"])


def _tables(text: str) -> dict[tuple[str, ...], list[dict[str, str]]]:
    """Each Markdown table of ``text`` by its header: its rows as column -> cell."""
    out: dict[tuple[str, ...], list[dict[str, str]]] = {}
    header: tuple[str, ...] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = tuple(c.strip() for c in line.strip("|").split("|"))
        if header is None:
            header = cells
            out[header] = []
        elif not set(line) <= set("|-"):
            out[header].append(dict(zip(header, cells, strict=True)))
    return out


def _results(tmp_path, rows: list[dict]) -> str:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"workdir": str(tmp_path), "protocol": "classic", "broker": "mock", "rows": rows}))
    return str(path)


def test_the_history_checkers_findings_and_inputs_are_shown_per_scenario(tmp_path):
    tables = _tables(from_results(_results(tmp_path, [CLEAN.to_json(), BROKEN.to_json()])))
    main, checker = tables[HEADER], tables[HISTORY_HEADER]
    assert [r["history breaches"] for r in main] == ["0", "7"]
    assert [r["result"] for r in main] == ["ok", "**FAIL**"]
    clean, broken = checker
    assert clean == {"scenario": "eager_churn", "generations": "5", "handovers": "4", "coordinator samples": "120",
                     "offset samples": "118", "two owners": "0", "fenced commits": "0", "read while not owned": "0",
                     "order breaks": "0", "no plan": "0", "replayed": "0", "unacked absent": "0", "reached end": "yes"}
    assert broken == {"scenario": "driver_kill9", "generations": "3", "handovers": "0",
                      "coordinator samples": "0 (40 failed)", "offset samples": "0 (9 failed)", "two owners": "2",
                      "fenced commits": "1", "read while not owned": "2", "order breaks": "1", "no plan": "1",
                      "replayed": "3", "unacked absent": "4", "reached end": "no"}


def test_a_results_file_from_before_the_rules_were_kept_shows_them_as_not_known(tmp_path):
    old = {k: v for k, v in BROKEN.to_json().items()
           if k not in ("two_owners", "fenced_commits", "reads_unowned", "unplanned", "replayed",
                        "group_sample_errors", "offset_samples", "offset_sample_errors")}
    old["a_field_of_the_future"] = 1
    (row,) = _tables(from_results(_results(tmp_path, [old])))[HISTORY_HEADER]
    assert [row[c] for c in ("two owners", "fenced commits", "read while not owned", "no plan", "replayed",
                             "offset samples")] == ["-"] * 6
    assert row["coordinator samples"] == "0" and row["order breaks"] == "1"


def test_the_report_command_prints_a_runs_tables(tmp_path):
    out = subprocess.run([sys.executable, "-m", "chaos.report", _results(tmp_path, [BROKEN.to_json()])],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert _tables(out)[HISTORY_HEADER][0]["fenced commits"] == "1"
    assert "- driver_kill9: 7 breaches of the history's rules" in out


def test_a_soaks_verdict_file_is_read_as_its_one_row(tmp_path):
    """``python -m soak`` writes its row as ``row`` of RUN/soak/verdict.json."""
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps({"ok": False, "minutes": 45, "row": {**CLEAN.to_json(), "scenario": "soak"}}))
    (row,) = _tables(from_results(str(path)))[HISTORY_HEADER]
    assert row["scenario"] == "soak" and row["offset samples"] == "118" and row["generations"] == "5"
