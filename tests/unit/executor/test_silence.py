"""ClusterSilence: the host-wide record of a cluster's silence, shared by Python workers."""

from __future__ import annotations

import os
import time

from spark_groupsource.executor.silence import STALE_S, ClusterSilence


def test_the_earliest_silence_wins_until_an_answer_clears_it(tmp_path):
    a = ClusterSilence("h1:9092,h2:9092", str(tmp_path))
    b = ClusterSilence("h1:9092,h2:9092", str(tmp_path))  # another worker, same cluster
    other = ClusterSilence("h3:9092", str(tmp_path))
    assert a.since() is None
    assert a.silent(1000.0) == 1000.0
    assert b.since() == 1000.0 and b.silent(1010.0) == 1000.0
    assert other.since() is None
    b.answered()
    assert a.since() is None and a.silent(1020.0) == 1020.0


def test_a_record_nobody_refreshed_is_stale(tmp_path):
    s = ClusterSilence("h1:9092", str(tmp_path))
    s.silent(1000.0)
    path = next(p for p in tmp_path.iterdir())
    old = time.time() - STALE_S - 1
    os.utime(path, (old, old))
    assert s.since() is None
    assert s.silent(2000.0) == 2000.0
