"""CI's skip budget: every test that skipped in a run must be on the allow-list, or CI fails.

A skip looks like a pass in a green run: a missing jar, a broken fixture or a deselected broker
quietly turns a suite into nothing (issue: "CI cannot tell a skip from a pass"). ``.ci/run``
(with ``../shared`` beside the clone, where every tool and broker the tests need is there) runs
``make test`` with ``--junitxml`` and then this script on the report. A skip is allowed only
where an entry of ``conf/skip-allowlist.toml`` matches both its test id and its reason, and
each entry says why such a skip is right on a CI machine. Expected failures (xfail) are not
skips: they are listed, not judged.

Usage: ``python conf/skip_budget.py REPORT.xml [--allow conf/skip-allowlist.toml]``; exit 1
on an unexpected skip or an unreadable report, 0 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ALLOW = Path(__file__).with_name("skip-allowlist.toml")


@dataclass(frozen=True)
class Skip:
    """One skipped test of a junitxml report: its id (``classname.name``, as junitxml writes
    it, e.g. ``tests.integration.test_x.test_y[kafka]``) and pytest's skip reason."""

    test: str
    reason: str
    xfail: bool = False


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry: regular expressions searched in a skip's test id and reason, and
    why such a skip is right on a CI machine."""

    tests: str
    reason: str
    why: str

    def matches(self, skip: Skip) -> bool:
        return bool(re.search(self.tests, skip.test) and re.search(self.reason, skip.reason))


def skips_of(report: str) -> list[Skip]:
    """Every skipped (and xfailed) test case of a junitxml report."""
    root = ET.parse(report).getroot()
    out = []
    for case in root.iter("testcase"):
        test = f"{case.get('classname', '')}.{case.get('name', '')}".lstrip(".")
        for el in case.findall("skipped"):
            kind = el.get("type", "")
            reason = el.get("message", "") or (el.text or "")
            out.append(Skip(test, reason.strip(), xfail=kind == "pytest.xfail"))
    return out


def tests_ran(report: str) -> int:
    root = ET.parse(report).getroot()
    return sum(1 for _ in root.iter("testcase"))


def load_allow_list(path: str | Path) -> list[Allowed]:
    """The entries of an allow-list file (TOML, ``[[allow]]`` tables with ``tests``, ``reason``
    and ``why``); a bad entry is an error naming it."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out = []
    for i, entry in enumerate(data.get("allow", [])):
        missing = [k for k in ("tests", "reason", "why") if not str(entry.get(k, "")).strip()]
        if missing:
            raise ValueError(f"{path}: allow entry {i + 1} lacks {missing}")
        for key in ("tests", "reason"):
            try:
                re.compile(entry[key])
            except re.error as exc:
                raise ValueError(f"{path}: allow entry {i + 1}: {key} is not a regular expression: {exc}") from exc
        out.append(Allowed(entry["tests"], entry["reason"], entry["why"]))
    return out


@dataclass(frozen=True)
class Verdict:
    allowed: list[tuple[Skip, Allowed]]
    unexpected: list[Skip]
    xfails: list[Skip]
    unused: list[Allowed]


def judge(skips: list[Skip], allow: list[Allowed]) -> Verdict:
    """Sort a run's skips into allowed (with the entry that allows each) and unexpected;
    entries that allowed nothing are reported (stale, or the run met none of its cases)."""
    allowed, unexpected, used = [], [], set()
    real = [s for s in skips if not s.xfail]
    for skip in real:
        entry = next((a for a in allow if a.matches(skip)), None)
        if entry is None:
            unexpected.append(skip)
        else:
            allowed.append((skip, entry))
            used.add(entry)
    return Verdict(allowed, unexpected, [s for s in skips if s.xfail], [a for a in allow if a not in used])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", help="pytest's --junitxml report")
    ap.add_argument("--allow", default=str(DEFAULT_ALLOW), help="the allow-list (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        skips, ran = skips_of(args.report), tests_ran(args.report)
        allow = load_allow_list(args.allow)
    except (OSError, ET.ParseError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"skip budget: cannot judge: {exc}", file=sys.stderr)
        return 1
    if ran == 0:
        print(f"skip budget: {args.report} holds no test", file=sys.stderr)
        return 1
    v = judge(skips, allow)
    print(f"skip budget: {ran} tests, {len(v.allowed)} allowed skips, {len(v.unexpected)} unexpected, "
          f"{len(v.xfails)} xfailed")
    for skip, entry in v.allowed:
        print(f"  allowed: {skip.test}: {skip.reason}  ({entry.why})")
    for skip in v.xfails:
        print(f"  xfail: {skip.test}: {skip.reason}")
    for entry in v.unused:
        print(f"  note: no skip matched the entry tests=/{entry.tests}/ reason=/{entry.reason}/")
    for skip in v.unexpected:
        print(f"  UNEXPECTED SKIP: {skip.test}: {skip.reason}")
    if v.unexpected:
        print(f"skip budget: {len(v.unexpected)} skip(s) not on {args.allow}: make the test run here, or add an "
              "entry (tests, reason, why) if the skip is right on a CI machine", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
