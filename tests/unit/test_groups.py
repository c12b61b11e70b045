"""The groups command's pure parts: the report text and argument errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_groupsource.groups import GroupReport, Member, PartitionRow, format_report, main


def test_format_report_with_members() -> None:
    m = Member("m-1", "spark-driver", "/10.0.0.1", "inst-a", (("orders", 0), ("orders", 1)))
    report = GroupReport("etl", (PartitionRow("orders", 0, 5, 9, m), PartitionRow("orders", 1, None, 4, m),
                                 PartitionRow("orders", 2, 7, None)), "STABLE", "range", (m,))
    text = format_report(report)
    lines = text.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["etl", "orders", "0", "5", "9", "4", "m-1", "/10.0.0.1", "spark-driver"]
    assert lines[2].split() == ["etl", "orders", "1", "-", "4", "-", "m-1", "/10.0.0.1", "spark-driver"]
    assert lines[3].split() == ["etl", "orders", "2", "7", "-", "-", "-", "-", "-"]
    assert "TOTAL-LAG 4" in lines
    assert "Members, as the broker reports them: 1 (state STABLE, protocol range)" in text
    assert lines[-1].split() == ["m-1", "inst-a", "/10.0.0.1", "spark-driver", "2", "orders(0,1)"]


def test_format_report_names_a_converted_group() -> None:
    """A KIP-848 member converted the group: the broker's assignor decides, and the report says so."""
    m = Member("m-1", "spark-driver", "/10.0.0.1", None, (("orders", 0),))
    report = GroupReport("etl", (PartitionRow("orders", 0, 5, 9, m),), "STABLE", "uniform", (m,),
                         group_type="CONSUMER")
    assert "Members, as the broker reports them: 1 (type CONSUMER, state STABLE, protocol uniform)" \
        in format_report(report)


def test_format_report_without_describe() -> None:
    text = format_report(GroupReport("g", (), describe_error="Local: Required feature not supported by broker"))
    assert "Group 'g' has no committed offsets." in text and "TOTAL-LAG 0" in text
    assert "not available: the broker did not answer DescribeGroups (Local: Required feature" in text


def test_lag_never_negative() -> None:
    assert PartitionRow("t", 0, committed=10, log_end=7).lag == 0


def test_usage_errors() -> None:
    with pytest.raises(SystemExit) as e:
        main(["--bootstrap", "h:1", "--group", "g", "-X", "nonsense"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["--group", "g"])


def test_unreachable_broker_fails_within_the_timeout() -> None:
    r = subprocess.run([sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", "127.0.0.1:1",
                        "--group", "g", "--timeout", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot read metadata from 127.0.0.1:1" in r.stderr
