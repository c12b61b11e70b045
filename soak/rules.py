"""The soak's judgement of its samples, pure: the CSV rows, the flatness rule for counts (open
files, threads, checkpoint files, workers), the slope rule for RSS, the floor rule for the JVM's
live heap, trigger p99.

Samples are rows ``t_s, wall, subject, metric, value`` (one CSV, long format): a subject is a
process role of one member incarnation (``a-1/driver_jvm``, ``a-1/runner``, ``a-1/workers``,
``a-1/driver_py``, ``a-1/planners``), a member's checkpoint (``a/checkpoint``), a query's triggers
(``a-1/trigger``), the group (``group``) or a fault (``fault``, metric = its name).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FIELDS = ("t_s", "wall", "subject", "metric", "value")

#: metric -> absolute slack of the flatness rule (max over the last half of the judged samples
#: <= max over the first half + slack). Absolute, not relative: a leak of one fd a minute over
#: two hours is ~60 more in the last half, and 10% of a JVM's ~400 fds would hide most of it.
FLAT_SLACK = {"fds": 16.0, "threads": 8.0, "files": 16.0, "count": 1.0}
#: role -> bound of the RSS slope (MB per hour, least squares over the samples after warm-up):
#: the Python processes (runner, workers, planner daemons, the driver's Python) hold no growing
#: state: 10 MB/h. The driver JVM is judged by the two rules below instead.
RSS_SLOPE_MB_PER_H = {"runner": 10.0, "workers": 10.0, "driver_py": 10.0, "planners": 10.0}
#: role -> the RSS it must stay under (MB): the driver JVM's is bounded by design (-Xmx 768m of
#: heap, then metaspace, code cache, thread stacks and Netty's direct buffers), and grows towards
#: that bound for a long while without a leak (the 15-minute run of 2026-12-02 07:17: RSS 387 ->
#: 587 MB while its live heap stayed at 67-133 MB), so its RSS is held to a ceiling, not a slope;
#: a native leak crosses it in a long run
RSS_CEILING_MB = {"driver_jvm": 768.0 + 512.0}
#: role -> bound of the slope of the live heap's floor (the heap in use right after a full GC,
#: its lowest sample in each :data:`FLOOR_WINDOW_S`), MB/hour: what a leak in the driver JVM
#: grows (Spark's listeners, progress history and metrics are bounded by their own settings once
#: warm). The floor, not every sample: the live set also holds whatever batch is in flight when
#: the GC runs, so it wanders (32-156 MB a minute in the 2-hour soak of 2026-12-02, no rising
#: envelope) and a least-squares slope over the samples read that as +39.8 MB/h; a leak raises
#: every window's lowest point
LIVE_HEAP_FLOOR_MB_PER_H = {"driver_jvm": 20.0}
#: the live heap's floor: the lowest sample of each window this long (from the first kept sample)
FLOOR_WINDOW_S = 600.0
#: a window with fewer samples than this has no floor; fewer floors than MIN_FLOORS: not judged
MIN_WINDOW_SAMPLES = 3
MIN_FLOORS = 4
#: metric -> the slope bounds by role
SLOPE_BOUNDS = {"rss_mb": RSS_SLOPE_MB_PER_H}
#: Spark keeps this many batches in a checkpoint's offsets and commits logs
#: (spark.sql.streaming.minBatchesToRetain): its file count grows until then by design, so a
#: checkpoint is judged from the first sample with this many offset files on (and after warm-up)
RETAINED_BATCHES = 100
#: fewer samples than this after warm-up: the series is reported, not judged
MIN_POINTS = 4


@dataclass(frozen=True)
class Sample:
    t_s: float
    wall: str
    subject: str
    metric: str
    value: float


def write_rows(f, samples: Iterable[Sample], header: bool) -> None:
    w = csv.writer(f)
    if header:
        w.writerow(FIELDS)
    for s in samples:
        w.writerow((f"{s.t_s:.1f}", s.wall, s.subject, s.metric, f"{s.value:.6g}"))


def read_rows(path: str) -> list[Sample]:
    with open(path, newline="") as f:
        return [Sample(float(r["t_s"]), r["wall"], r["subject"], r["metric"], float(r["value"]))
                for r in csv.DictReader(f)]


def series(samples: Iterable[Sample]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(subject, metric) -> [(t_s, value)] in time order."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for s in samples:
        out.setdefault((s.subject, s.metric), []).append((s.t_s, s.value))
    for points in out.values():
        points.sort()
    return out


def role(subject: str) -> str:
    return subject.rsplit("/", 1)[-1]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of value over time, per hour (t in seconds); None below 2 distinct times."""
    n = len(points)
    if n < 2:
        return None
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    sxx = sum((t - mt) ** 2 for t, _ in points)
    if sxx == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / sxx * 3600.0


def after_warmup(points: Sequence[tuple[float, float]], warmup_s: float) -> list[tuple[float, float]]:
    """The points from ``warmup_s`` after the series' first sample on (each member incarnation
    warms up from its own start)."""
    if not points:
        return []
    start = points[0][0]
    return [p for p in points if p[0] - start >= warmup_s]


def window_floors(points: Sequence[tuple[float, float]], window_s: float = FLOOR_WINDOW_S,
                  min_samples: int = MIN_WINDOW_SAMPLES) -> list[tuple[float, float]]:
    """(mid-time, lowest value) of each ``window_s`` window from the first point on that holds at
    least ``min_samples`` points spread over at least half of it: the series' lower envelope. A
    window cut short (a member killed two minutes into it) is left out: the lowest of a few
    samples is no floor of ten minutes, and it sits above the others by chance (the 2-hour soak
    of 2026-12-06: b-1's floors 70.4, 70.7, 69.3, 72.7 MB, then 109.2 from 3 samples in the 132 s
    before its kill, read as +47.7 MB/h)."""
    if not points:
        return []
    start = points[0][0]
    windows: dict[int, list[tuple[float, float]]] = {}
    for t, v in points:
        windows.setdefault(int((t - start) // window_s), []).append((t, v))
    return [(start + (i + 0.5) * window_s, min(v for _, v in pts)) for i, pts in sorted(windows.items())
            if len(pts) >= min_samples and pts[-1][0] - pts[0][0] >= window_s / 2]


def halves_max(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(max of the first half, max of the last half); an odd middle point goes to the last half."""
    mid = len(points) // 2
    return max(v for _, v in points[:mid]), max(v for _, v in points[mid:])


@dataclass(frozen=True)
class SeriesVerdict:
    subject: str
    metric: str
    rule: str  # "flat", "slope", "floor" or "ceiling"
    points: int  # samples after warm-up
    first_max: float | None = None
    last_max: float | None = None
    slope: float | None = None  # per hour
    bound: float | None = None  # slack (flat), MB/h (slope) or MB (ceiling)
    judged: bool = False
    ok: bool | None = None  # None while not judged: a series too short passes nothing

    @property
    def what(self) -> str:
        if not self.judged and self.rule == "floor":
            return (f"not judged ({self.points} samples after warm-up, {MIN_FLOORS} windows of "
                    f"{FLOOR_WINDOW_S / 60:g} min with {MIN_WINDOW_SAMPLES} samples needed)")
        if not self.judged:
            return f"not judged ({self.points} samples after warm-up, {MIN_POINTS} needed)"
        op = "<=" if self.ok else ">"
        if self.rule == "flat":
            return f"last-half max {self.last_max:g} {op} first-half max {self.first_max:g} + {self.bound:g}"
        if self.rule == "ceiling":
            return f"max {max(self.first_max, self.last_max):.0f} MB {op} {self.bound:g} MB"
        of = "floor slope" if self.rule == "floor" else "slope"
        return f"{of} {self.slope:+.1f} MB/h {op} {self.bound:g} MB/h"


def judge_series(subject: str, metric: str, points: Sequence[tuple[float, float]], warmup_s: float) -> SeriesVerdict | None:
    """The rule for this series, or None when none applies (lag, trigger, bytes: reported only)."""
    kept = after_warmup(points, warmup_s)
    if metric in FLAT_SLACK and role(subject) in (*RSS_SLOPE_MB_PER_H, *RSS_CEILING_MB, "checkpoint"):
        slack = FLAT_SLACK[metric]
        if len(kept) < MIN_POINTS:
            return SeriesVerdict(subject, metric, "flat", len(kept), bound=slack)
        first, last = halves_max(kept)
        return SeriesVerdict(subject, metric, "flat", len(kept), first, last, slope_per_hour(kept), slack,
                             judged=True, ok=last <= first + slack)
    ceiling = RSS_CEILING_MB.get(role(subject)) if metric == "rss_mb" else None
    if ceiling is not None:
        if len(kept) < MIN_POINTS:
            return SeriesVerdict(subject, metric, "ceiling", len(kept), bound=ceiling)
        first, last = halves_max(kept)
        return SeriesVerdict(subject, metric, "ceiling", len(kept), first, last, slope_per_hour(kept), ceiling,
                             judged=True, ok=max(first, last) <= ceiling)
    floor_bound = LIVE_HEAP_FLOOR_MB_PER_H.get(role(subject)) if metric == "live_heap_mb" else None
    if floor_bound is not None:
        floors = window_floors(kept)
        return _slope_verdict(subject, metric, "floor", kept, floors, len(floors) >= MIN_FLOORS, floor_bound)
    bound = SLOPE_BOUNDS.get(metric, {}).get(role(subject))
    if bound is not None:
        return _slope_verdict(subject, metric, "slope", kept, kept, len(kept) >= MIN_POINTS, bound)
    return None


def _slope_verdict(subject: str, metric: str, rule: str, kept: Sequence[tuple[float, float]],
                   fitted: Sequence[tuple[float, float]], enough: bool, bound: float) -> SeriesVerdict:
    """The slope of ``fitted`` (every kept sample, or the floors) held to ``bound`` per hour."""
    if not enough:
        return SeriesVerdict(subject, metric, rule, len(kept), bound=bound)
    first, last = halves_max(kept)
    slope = slope_per_hour(fitted)
    return SeriesVerdict(subject, metric, rule, len(kept), first, last, slope, bound,
                         judged=True, ok=slope is not None and slope <= bound)


def retained_from(offset_files: Sequence[tuple[float, float]]) -> float | None:
    """When a checkpoint first held :data:`RETAINED_BATCHES` offset files (None: never)."""
    return next((t for t, n in offset_files if n >= RETAINED_BATCHES), None)


def judge(samples: Iterable[Sample], warmup_s: float) -> list[SeriesVerdict]:
    out = []
    by = series(samples)
    for (subject, metric), points in sorted(by.items()):
        cut = warmup_s
        if role(subject) == "checkpoint" and metric == "files":
            since = retained_from(by.get((subject, "offset_files"), []))
            points = [] if since is None else [p for p in after_warmup(points, warmup_s) if p[0] >= since]
            cut = 0.0
        v = judge_series(subject, metric, points, cut)
        if v is not None:
            out.append(v)
    return out


def default_warmup_s(minutes: float) -> float:
    """A fifth of the run, at most 15 minutes, at least 2."""
    return 60.0 * min(15.0, max(2.0, minutes / 5))


def summary(samples: Iterable[Sample]) -> dict[str, float]:
    """Reported figures: the largest per-minute trigger p99 of each query incarnation, the
    largest group lag, the checkpoints' largest size."""
    out: dict[str, float] = {}
    for (subject, metric), points in series(samples).items():
        if metric in ("p99_ms", "lag", "bytes") and points:
            out[f"{subject} max {metric}"] = max(v for _, v in points)
    return dict(sorted(out.items()))


def series_table(verdicts: Sequence[SeriesVerdict]) -> str:
    head = ("subject", "metric", "rule", "samples", "first-half max", "last-half max", "slope/h", "bound", "result")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def num(x: float | None, fmt: str = "{:g}") -> str:
        return "-" if x is None else fmt.format(x)

    for v in verdicts:
        result = "ok" if v.judged and v.ok else ("**FAIL**" if v.judged else "not judged")
        lines.append("| " + " | ".join((v.subject, v.metric, v.rule, str(v.points), num(v.first_max, "{:.0f}"),
                                        num(v.last_max, "{:.0f}"), num(v.slope, "{:+.1f}"), num(v.bound), result))
                     + " |")
    return "\n".join(lines)


def parse_class_histogram(text: str) -> dict[str, tuple[int, int]]:
    """``jcmd GC.class_histogram``'s rows (``num: #instances #bytes class name (module)``) as
    class name -> (instances, bytes)."""
    rows: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith(":") and parts[1].isdigit() and parts[2].isdigit():
            rows[parts[3]] = (int(parts[1]), int(parts[2]))
    return rows


def histogram_total_mb(text: str) -> float | None:
    """The live heap, in MB (2**20 bytes), from ``jcmd GC.class_histogram``'s ``Total`` row; None
    when absent (an attach that failed)."""
    for line in reversed(text.splitlines()):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "Total" and parts[2].isdigit():
            return int(parts[2]) / 2**20
    return None


def histogram_growth(first: str, last: str, top: int = 15) -> list[tuple[str, int, int]]:
    """The classes whose live bytes grew most from one class histogram to a later one:
    (class, bytes grown, instances grown), largest growth first."""
    a, b = parse_class_histogram(first), parse_class_histogram(last)
    grown = [(name, nbytes - a.get(name, (0, 0))[1], n - a.get(name, (0, 0))[0])
             for name, (n, nbytes) in b.items()]
    return sorted((g for g in grown if g[1] > 0), key=lambda g: -g[1])[:top]


def _across_incarnations(v: SeriesVerdict) -> tuple[str, str]:
    """("a/driver_jvm", metric) for "a-2/driver_jvm": the same role of a member, any incarnation."""
    who, _, role = v.subject.partition("/")
    member, dash, n = who.rpartition("-")
    return (f"{member if dash and n.isdigit() else who}/{role}", v.metric)


def not_judged(verdicts: Sequence[SeriesVerdict]) -> list[str]:
    """The series a rule applies to that the run was too short to judge, where no other
    incarnation of the same member judged it either. An incarnation the soak's own kill cut
    short (a-1 until its member_kill9) can never have 4 heap windows; the member is judged on the
    incarnation that ran long enough, and a run where none did is not judged in full."""
    judged = {_across_incarnations(v) for v in verdicts if v.judged}
    return [f"{v.subject} {v.metric}: {v.what}" for v in verdicts
            if not v.judged and _across_incarnations(v) not in judged]


def verdict_word(ok: bool, reasons: list[str], unjudged: list[str], word: str = "PASSED") -> str:
    """PASSED (or ``word``) only when every rule was judged and held: a series too short to
    judge (the driver's live heap needs 4 ten-minute windows) is said, never counted as passed."""
    if not ok:
        return "FAILED: " + "; ".join(reasons)
    if unjudged:
        return f"NOT JUDGED in full (every judged rule held; not judged: {'; '.join(unjudged)})"
    return word
