"""The soak's rules (soak/rules.py) and its pure parsing (soak/probe.py): flat counts, the RSS
slope, the live heap's floor, warm-up per series, p99, the CSV round trip."""

from __future__ import annotations

import pytest

from soak.__main__ import main as soak_main
from soak.probe import ProgressTail, parse_status
from soak.rules import (
    MIN_POINTS,
    RETAINED_BATCHES,
    Sample,
    after_warmup,
    default_warmup_s,
    halves_max,
    histogram_growth,
    histogram_total_mb,
    judge,
    judge_series,
    not_judged,
    parse_class_histogram,
    percentile,
    read_rows,
    series_table,
    slope_per_hour,
    summary,
    verdict_word,
    window_floors,
    write_rows,
)


def _minutes(values, start=0.0):
    return [(start + 60.0 * i, float(v)) for i, v in enumerate(values)]


def test_slope_is_least_squares_per_hour():
    assert slope_per_hour(_minutes([100, 101, 102, 103])) == pytest.approx(60.0)
    assert slope_per_hour(_minutes([5, 5, 5])) == pytest.approx(0.0)
    # noise around a flat line: slope near 0 although first < last
    assert abs(slope_per_hour(_minutes([100, 110, 90, 105, 95, 101]))) < 60
    assert slope_per_hour([(0.0, 1.0)]) is None
    assert slope_per_hour([(5.0, 1.0), (5.0, 2.0)]) is None


def test_warmup_is_counted_from_each_series_start():
    points = _minutes(range(10), start=600.0)  # an incarnation started at 10 min
    kept = after_warmup(points, 180.0)
    assert kept[0] == (780.0, 3.0) and len(kept) == 7
    assert after_warmup([], 60.0) == []


def test_halves_give_the_middle_point_to_the_last_half():
    assert halves_max(_minutes([1, 9, 2, 3, 4])) == (9.0, 4.0)


def test_flat_fds_pass_with_noise_within_the_slack():
    v = judge_series("a-1/driver_jvm", "fds", _minutes([400, 420, 410, 415, 418, 412, 425, 430]), 0)
    assert v is not None and v.judged and v.ok and v.rule == "flat"
    assert (v.first_max, v.last_max) == (420.0, 430.0)


def test_growing_fds_fail():
    leak = _minutes([400 + 2 * i for i in range(40)])  # 2 fds a minute
    v = judge_series("a-1/driver_jvm", "fds", leak, 0)
    assert v.judged and not v.ok and "last-half max" in v.what


def test_threads_slack_is_absolute():
    base = [300] * 6
    assert judge_series("a-1/driver_jvm", "threads", _minutes(base + [308] * 6), 0).ok
    assert not judge_series("a-1/driver_jvm", "threads", _minutes(base + [309] * 6), 0).ok


def test_one_more_worker_is_within_the_slack_two_are_not():
    assert judge_series("a-1/workers", "count", _minutes([1, 1, 1, 2, 2, 2]), 0).ok
    assert not judge_series("a-1/workers", "count", _minutes([1, 1, 1, 3, 3, 3]), 0).ok


def test_checkpoint_files_are_judged_bytes_are_reported():
    assert judge_series("a/checkpoint", "files", _minutes([400, 410, 412, 424]), 0).ok
    assert not judge_series("a/checkpoint", "files", _minutes([400, 410, 420, 430, 440, 450]), 0).ok
    assert judge_series("a/checkpoint", "bytes", _minutes([1, 2, 3, 4]), 0) is None
    assert judge_series("group", "lag", _minutes([1, 2, 3, 4]), 0) is None
    assert judge_series("a-1/trigger", "p99_ms", _minutes([1, 2, 3, 4]), 0) is None


def test_the_driver_jvms_rss_is_held_to_a_ceiling_not_a_slope():
    # 387 -> 587 MB in 15 minutes while its live heap stayed flat (2026-12-02): G1 growing its heap
    growing = _minutes([387 + 14 * i for i in range(15)])  # +840 MB/h, under the ceiling
    v = judge_series("a-1/driver_jvm", "rss_mb", growing, 0)
    assert v.rule == "ceiling" and v.judged and v.ok and v.bound == 1280.0
    over = _minutes([900 + 30 * i for i in range(15)])  # crosses 1,280 MB
    v = judge_series("a-1/driver_jvm", "rss_mb", over, 0)
    assert not v.ok and "MB >" in v.what


def test_rss_slope_bounds_by_role():
    py = _minutes([60 + 0.2 * i for i in range(20)])  # 12 MB/h: over the Python bound
    v = judge_series("a-1/runner", "rss_mb", py, 0)
    assert not v.ok and v.slope == pytest.approx(12.0) and v.bound == 10.0
    # a drop (a restart of a worker) does not make a leak pass or fail by itself: the slope decides
    assert judge_series("a-1/workers", "rss_mb", _minutes([80, 80, 80, 40, 40, 40]), 0).ok


def test_the_driver_jvms_live_heap_is_judged_by_its_floor():
    # a heap that G1 grows towards -Xmx shows in RSS; only the live set after a full GC is a leak,
    # and a leak raises its floor: the lowest sample of every 10 minutes
    flat = _minutes([180 + (i % 3) for i in range(60)])
    growing = _minutes([180 + i for i in range(60)])  # +60 MB/h
    assert judge_series("a-1/driver_jvm", "live_heap_mb", flat, 0).ok
    v = judge_series("a-1/driver_jvm", "live_heap_mb", growing, 0)
    assert v.judged and not v.ok and v.rule == "floor" and v.bound == 20.0
    assert v.slope == pytest.approx(60.0)
    assert judge_series("a-1/runner", "live_heap_mb", growing, 0) is None


def test_a_wandering_live_heap_with_a_level_floor_passes():
    # the 2-hour soak's b-2 (2026-12-02): the live set holds whatever batch is in flight, so it
    # wanders 40-156 MB; here the high samples come later more often, which a least-squares
    # slope reads as a leak, but every window still falls back to the same floor
    values = [40 if i % (4 if i < 30 else 7) == 0 else (90 if i < 30 else 150) for i in range(60)]
    points = _minutes(values)
    assert slope_per_hour(points) > 20.0  # the slope rule of before failed it
    v = judge_series("b-2/driver_jvm", "live_heap_mb", points, 0)
    assert v.judged and v.ok and v.slope == pytest.approx(0.0)


def test_a_rising_floor_under_spikes_fails():
    # spikes on top, the lowest point of each window 30 MB/h higher than the one before
    values = [40 + i / 2 + (100 if i % 10 else 0) for i in range(60)]
    v = judge_series("a-2/driver_jvm", "live_heap_mb", _minutes(values), 0)
    assert v.judged and not v.ok and "floor slope +30.0 MB/h > 20 MB/h" in v.what


def test_a_short_live_heap_series_is_reported_not_judged():
    # the 2-hour soak's a-1: 4 samples in its last minutes before its kill, +505 MB/h by least squares
    v = judge_series("a-1/driver_jvm", "live_heap_mb", _minutes([40, 60, 90, 140]), 0)
    assert not v.judged and v.ok is None and "4 windows of 10 min" in v.what
    assert window_floors(_minutes(range(36))) == [(300.0, 0.0), (900.0, 10.0), (1500.0, 20.0), (2100.0, 30.0)]
    assert window_floors(_minutes(range(32))) == [(300.0, 0.0), (900.0, 10.0), (1500.0, 20.0)]  # 2 in the last


def test_a_window_cut_short_has_no_floor():
    # the 2-hour soak's b-1 (2026-12-06): four level windows, then 3 samples in the 2 minutes
    # before its kill, each above the floors before: no floor of a window, no leak
    values = [70 + (i % 10) * 4 for i in range(40)] + [110, 114, 109]
    points = _minutes(values)
    assert [f for _, f in window_floors(points)] == [70, 70, 70, 70]
    v = judge_series("b-1/driver_jvm", "live_heap_mb", points, 0)
    assert v.judged and v.ok and v.slope == pytest.approx(0.0)
    # the same 3 samples spread over 6 minutes are a window of their own, and a rising floor fails
    spread = points + [(points[-1][0] + 180, 112), (points[-1][0] + 360, 111)]
    assert window_floors(spread)[-1][1] == 109
    assert not judge_series("b-1/driver_jvm", "live_heap_mb", spread, 0).ok


def test_short_series_are_reported_not_judged():
    v = judge_series("a-2/driver_jvm", "fds", _minutes([1, 1000, 1, 5000, 9000]), 180.0)
    assert not v.judged and v.ok is None and v.points == 2 and f"{MIN_POINTS} needed" in v.what


def test_judge_and_table_over_samples():
    samples = [Sample(60.0 * i, "w", "a-1/driver_jvm", "threads", 100 + (50 if i > 8 else 0)) for i in range(12)]
    samples += [Sample(60.0 * i, "w", "a-1/driver_jvm", "rss_mb", 500) for i in range(12)]
    samples += [Sample(60.0 * i, "w", "group", "lag", i) for i in range(12)]
    verdicts = judge(samples, 120.0)
    by = {(v.subject, v.metric): v for v in verdicts}
    assert set(by) == {("a-1/driver_jvm", "threads"), ("a-1/driver_jvm", "rss_mb")}
    assert not by[("a-1/driver_jvm", "threads")].ok and by[("a-1/driver_jvm", "rss_mb")].ok
    text = series_table(verdicts)
    assert "**FAIL**" in text and "| a-1/driver_jvm | rss_mb | ceiling | 10 |" in text
    assert summary(samples) == {"group max lag": 11.0}


def test_percentile_nearest_rank():
    assert percentile([], 99) is None
    assert percentile([3.0], 99) == 3.0
    values = list(range(1, 101))
    assert percentile(values, 99) == 99 and percentile(values, 50) == 50 and percentile(values, 100) == 100


def test_default_warmup():
    assert default_warmup_s(15) == 180.0
    assert default_warmup_s(5) == 120.0
    assert default_warmup_s(120) == 900.0


def test_csv_round_trip(tmp_path):
    path = tmp_path / "samples.csv"
    rows = [Sample(1.25, "2026-12-02T01:00:00Z", "a-1/runner", "rss_mb", 63.5),
            Sample(61.0, "2026-12-02T01:01:00Z", "fault", "broker_kill9", 1.0)]
    with open(path, "w", newline="") as f:
        write_rows(f, rows[:1], header=True)
    with open(path, "a", newline="") as f:
        write_rows(f, rows[1:], header=False)
    got = read_rows(str(path))
    assert [(s.subject, s.metric, s.value) for s in got] == [(s.subject, s.metric, s.value) for s in rows]
    assert got[0].t_s == pytest.approx(1.2, abs=0.06)


def test_parse_status():
    text = "Name:\tjava\nVmPeak:\t 9 kB\nVmRSS:\t  524288 kB\nThreads:\t87\n"
    assert parse_status(text) == (512.0, 87)


def test_progress_tail_reads_complete_lines_once(tmp_path):
    path = tmp_path / "a-1.progress.jsonl"
    tail = ProgressTail(str(path))
    assert tail.read() == []
    path.write_text('{"batchId": 0, "triggerMs": 120}\n{"batchId": 1, "triggerMs": 80}\n{"batchId": 2, "trig')
    assert tail.read() == [120.0, 80.0]
    with open(path, "a") as f:
        f.write('gerMs": 95}\n')
    assert tail.read() == [95.0]
    assert tail.read() == []


def test_checkpoint_files_are_judged_once_spark_retains_its_batches():
    # the files grow by design until the offsets log holds RETAINED_BATCHES (Spark's retention)
    files = [Sample(60.0 * i, "w", "a/checkpoint", "files", min(40 * i, 410) + (i % 2)) for i in range(16)]
    offsets = [Sample(60.0 * i, "w", "a/checkpoint", "offset_files", min(10 * i, RETAINED_BATCHES))
               for i in range(16)]
    (v,) = judge(files + offsets, 120.0)
    assert v.judged and v.ok and v.points == 6 and v.first_max == 411
    (never,) = judge(files + [Sample(s.t_s, s.wall, s.subject, s.metric, 50) for s in offsets], 120.0)
    assert not never.judged and never.ok is None
    leaking = [Sample(s.t_s, s.wall, s.subject, s.metric, s.value + (30 * i if i >= 10 else 0))
               for i, s in enumerate(files)]
    (bad,) = judge(leaking + offsets, 120.0)
    assert bad.judged and not bad.ok


#: the head of a real ``jcmd PID GC.class_histogram`` answer (a Kafka broker, JDK 17.0.15)
HISTOGRAM = """3160:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:         60452       28984440  [B (java.base@17.0.15)
   2:         20737        1784008  [Ljava.util.HashMap$Node; (java.base@17.0.15)
   3:         38963        1558520  java.util.LinkedHashMap$Entry (java.base@17.0.15)
Total        622899       50265016
"""


def test_parse_class_histogram_reads_rows_not_the_header_or_total():
    rows = parse_class_histogram(HISTOGRAM)
    assert rows == {"[B": (60452, 28984440), "[Ljava.util.HashMap$Node;": (20737, 1784008),
                    "java.util.LinkedHashMap$Entry": (38963, 1558520)}


def test_histogram_growth_names_what_grew_most_first():
    later = (HISTOGRAM.replace("38963        1558520", "98963        3958520")
             + "   4:          1000          64000  org.example.Leak\n")
    assert histogram_growth(HISTOGRAM, later) == [
        ("java.util.LinkedHashMap$Entry", 2_400_000, 60_000), ("org.example.Leak", 64_000, 1000)]


def test_histogram_total_is_the_live_heap_in_mb():
    assert histogram_total_mb(HISTOGRAM) == pytest.approx(50265016 / 2**20)
    assert histogram_total_mb("12345:\nCommand executed successfully\n") is None
    assert histogram_total_mb("") is None


def test_histograms_report_lists_each_incarnations_live_heap_slope_and_growth(tmp_path, capsys):
    later = HISTOGRAM.replace("38963        1558520", "98963        3958520").replace(
        "Total        622899       50265016", "Total        682899       52665016")
    (tmp_path / "a-1-000060.txt").write_text(HISTOGRAM)
    (tmp_path / "a-1-003660.txt").write_text(later)
    (tmp_path / "b-2-001200.txt").write_text(HISTOGRAM)
    assert soak_main(["--histograms", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    grown_mb = 2_400_000 / 2**20
    assert out[0] == (f"a-1: live heap {50265016 / 2**20:.1f} MB at 1 min, {52665016 / 2**20:.1f} MB at 61 min; "
                      f"slope {grown_mb:+.1f} MB/h")
    assert "java.util.LinkedHashMap$Entry" in out[2] and f"{grown_mb:+.2f} MB" in out[2]
    assert out[3] == f"b-2: live heap {50265016 / 2**20:.1f} MB at 20 min"


def test_a_soak_too_short_to_judge_the_heap_does_not_pass():
    """The 15-minute default: the driver's live heap has fewer than 4 ten-minute windows. The
    run says so, and its verdict is not PASSED (it was, with the series counted as passing)."""
    heap = judge_series("a-1/driver_jvm", "live_heap_mb", _minutes([40, 41, 40, 42] * 3), 0)
    threads = judge_series("a-1/driver_jvm", "threads", _minutes([300] * 12), 0)
    assert heap.ok is None and threads.judged and threads.ok
    (unjudged,) = not_judged([heap, threads])
    assert unjudged.startswith("a-1/driver_jvm live_heap_mb: not judged")
    word = verdict_word(True, [], [unjudged])
    assert "PASSED" not in word and "NOT JUDGED" in word and "live_heap_mb" in word
    assert verdict_word(True, [], []) == "PASSED"
    assert verdict_word(False, ["lost 3"], [unjudged]).startswith("FAILED: lost 3")


def test_an_incarnation_cut_short_by_the_soak_is_judged_on_its_successor_and_not_otherwise():
    """member_kill9 ends a-1 at minute 20: its heap can never have 4 windows. a-2, which ran long
    enough, judges member a; when no incarnation of a member ran long enough, the run is not
    judged in full (the 50-minute soak of 2026-12-07: a-1 and a-2 both short)."""
    short = judge_series("a-1/driver_jvm", "live_heap_mb", _minutes([40, 41, 40, 42] * 3), 0)
    long_ = judge_series("a-2/driver_jvm", "live_heap_mb", _minutes([40, 41, 40, 42] * 15), 0)
    other = judge_series("b-1/driver_jvm", "live_heap_mb", _minutes([40, 41, 40, 42] * 3), 0)
    assert long_.judged and long_.ok and not short.judged and not other.judged
    assert not_judged([short, long_]) == []
    (only,) = not_judged([short, long_, other])
    assert only.startswith("b-1/driver_jvm live_heap_mb: not judged")
    (again,) = not_judged([short])
    assert again.startswith("a-1/driver_jvm live_heap_mb")
