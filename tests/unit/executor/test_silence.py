"""ClusterSilence: the host-wide record of a cluster's silence, shared by Python workers, kept on
the monotonic clock (a stepped wall clock changes nothing: issue 53)."""

from __future__ import annotations

import time

import pytest

from spark_groupsource.executor import silence as silence_mod
from spark_groupsource.executor.silence import STALE_S, ClusterSilence


def test_the_earliest_silence_wins_until_an_answer_clears_it(tmp_path):
    now = time.monotonic()
    a = ClusterSilence("h1:9092,h2:9092", str(tmp_path))
    b = ClusterSilence("h1:9092,h2:9092", str(tmp_path))  # another worker, same cluster
    other = ClusterSilence("h3:9092", str(tmp_path))
    assert a.since_monotonic() is None
    assert a.silent_monotonic(now - 30) == now - 30
    assert b.since_monotonic() == now - 30 and b.silent_monotonic(now - 20) == now - 30
    assert other.since_monotonic() is None
    b.answered()
    assert a.since_monotonic() is None and a.silent_monotonic(now - 10) == now - 10


def test_a_record_nobody_refreshed_is_stale(tmp_path, monkeypatch):
    s = ClusterSilence("h1:9092", str(tmp_path))
    real = time.monotonic
    s.silent_monotonic(real() - 5)
    monkeypatch.setattr(silence_mod.time, "monotonic", lambda: real() + STALE_S + 1)
    assert s.since_monotonic() is None
    assert s.silent_monotonic(real()) == pytest.approx(real(), abs=0.05)


@pytest.mark.parametrize("step_s", [-600.0, 600.0])
def test_a_stepped_wall_clock_changes_nothing(tmp_path, monkeypatch, step_s):
    """Wall clock stepped 10 minutes back or forward: the record is as fresh and as old as it was
    (with file times, a step back made every record stale-proof and a step forward stale)."""
    s = ClusterSilence("h1:9092", str(tmp_path))
    began = time.monotonic() - 12
    s.silent_monotonic(began)
    real = time.time
    monkeypatch.setattr(silence_mod.time, "time", lambda: real() + step_s)
    assert s.since_monotonic() == began
    assert time.monotonic() - s.since_monotonic() == pytest.approx(12, abs=0.5)


def test_a_record_of_another_format_is_no_record(tmp_path):
    s = ClusterSilence("h1:9092", str(tmp_path))
    s.silent_monotonic(time.monotonic())
    path = next(p for p in tmp_path.iterdir())
    path.write_text("1796160000.5")  # the old format: one wall-clock time
    assert s.since_monotonic() is None
