"""conf/skip_budget.py: a run's skips against the allow-list, on crafted junitxml reports."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "conf"))

from skip_budget import DEFAULT_ALLOW, Allowed, Skip, judge, load_allow_list, main, skips_of  # noqa: E402

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" skipped="3">
 <testcase classname="tests.integration.test_kafka" name="test_a[kafka]" time="1.0"/>
 <testcase classname="tests.integration.test_member" name="test_batching[kafka-compat]" time="0.1">
  <skipped type="pytest.skip" message="this broker reports no consumer.assignment.interval.ms">x.py:9: skip</skipped>
 </testcase>
 <testcase classname="tests.integration.test_conformance_records" name="test_b" time="0.0">
  <skipped type="pytest.skip" message="conformance suite: Spark's own Kafka source jars not found">y</skipped>
 </testcase>
 <testcase classname="tests.integration.test_x" name="test_c" time="0.0">
  <skipped type="pytest.xfail" message="a known difference">z</skipped>
 </testcase>
</testsuite></testsuites>
"""

BATCHING = Allowed(r"test_member\.test_batching\[kafka-compat\]", r"reports no consumer\.assignment",
                   "no assignment batching before Kafka 4.3")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_skips_are_read_with_their_ids_and_reasons(tmp_path):
    skips = skips_of(write(tmp_path, "r.xml", REPORT))
    assert skips == [
        Skip("tests.integration.test_member.test_batching[kafka-compat]",
             "this broker reports no consumer.assignment.interval.ms"),
        Skip("tests.integration.test_conformance_records.test_b",
             "conformance suite: Spark's own Kafka source jars not found"),
        Skip("tests.integration.test_x.test_c", "a known difference", xfail=True),
    ]


def test_a_skip_needs_an_entry_matching_its_test_and_its_reason(tmp_path):
    skips = skips_of(write(tmp_path, "r.xml", REPORT))
    v = judge(skips, [BATCHING])
    assert [s.test for s, _ in v.allowed] == ["tests.integration.test_member.test_batching[kafka-compat]"]
    assert [s.test for s in v.unexpected] == ["tests.integration.test_conformance_records.test_b"]
    assert [s.test for s in v.xfails] == ["tests.integration.test_x.test_c"]
    # the right test skipped for another reason is not allowed, nor the right reason elsewhere
    other_reason = Skip("tests.integration.test_member.test_batching[kafka-compat]", "no Apache Kafka")
    other_test = Skip("tests.integration.test_member.test_batching[kafka]", "reports no consumer.assignment.x")
    assert judge([other_reason, other_test], [BATCHING]).unexpected == [other_reason, other_test]
    assert judge([], [BATCHING]).unused == [BATCHING]


def test_main_fails_on_an_unexpected_skip_and_passes_when_allowed(tmp_path, capsys):
    report = write(tmp_path, "r.xml", REPORT)
    allow = write(tmp_path, "allow.toml", """
[[allow]]
tests = 'test_member\\.test_batching\\[kafka-compat\\]'
reason = 'reports no consumer\\.assignment'
why = "no assignment batching before Kafka 4.3"
""")
    assert main([report, "--allow", allow]) == 1
    assert "UNEXPECTED SKIP: tests.integration.test_conformance_records.test_b" in capsys.readouterr().out
    only_allowed = re.sub(r'<testcase classname="tests.integration.test_conformance_records".*?</testcase>', "",
                          REPORT, flags=re.S)
    assert main([write(tmp_path, "ok.xml", only_allowed), "--allow", allow]) == 0


@pytest.mark.parametrize("text", ["", "<testsuites/>", "<not xml"])
def test_an_empty_or_broken_report_fails(tmp_path, text):
    assert main([write(tmp_path, "r.xml", text)]) == 1


@pytest.mark.parametrize("entry", ["tests = 'x'\nreason = 'y'\n", "tests = '('\nreason = 'y'\nwhy = 'z'\n"])
def test_an_entry_without_a_why_or_with_a_bad_pattern_is_refused(tmp_path, entry):
    with pytest.raises(ValueError, match="allow entry 1"):
        load_allow_list(write(tmp_path, "a.toml", "[[allow]]\n" + entry))


def test_the_shipped_allow_list_loads():
    assert all(a.why for a in load_allow_list(DEFAULT_ALLOW))
