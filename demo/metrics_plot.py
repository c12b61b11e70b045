"""Lag and rebalances over time, drawn from what Prometheus scraped of a query's ``metrics.port``.

    python -m demo.metrics_plot --prometheus http://127.0.0.1:9090 --query qa --minutes 15 \\
        --out build/demo/metrics.png

Asks Prometheus's HTTP API (``query_range``) for the query's pending records and the most
records behind on one partition, the partitions it owns, the rebalance under way, and the
commits that failed or were fenced, and draws them on one time axis. matplotlib comes from the
optional ``demo`` extra. tests/integration/test_metrics_prometheus.py draws its scenario with it.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

#: what is drawn: label -> PromQL over the query's series (``{sel}`` is its label selector)
SERIES = {
    "pending records (Flink's pendingRecords)": "sum(groupkafka_pendingRecords{sel})",
    "max records behind on a partition (Spark's maxOffsetsBehindLatest)": "max(groupkafka_maxOffsetsBehindLatest{sel})",
    "partitions assigned": "max(groupkafka_partitions_assigned{sel})",
    "rebalance under way (s)": "max(groupkafka_rebalance_in_progress_seconds{sel})",
    "rebalances": "max(groupkafka_rebalances_total{sel})",
    "commits failed": "max(groupkafka_commitsFailed_total{sel})",
    "commits fenced": "max(groupkafka_commits_fenced_total{sel})",
    "coordinator silent (s)": "max(groupkafka_coordinator_silence_seconds{sel})",
}


def fetch(prometheus: str, query: str, start: float, end: float, step_s: float = 1.0) -> dict[str, list[tuple[float, float]]]:
    """label -> [(unix time, value)] for every series of :data:`SERIES` over [start, end]."""
    sel = "{" + f'query="{query}"' + "}"
    out = {}
    for label, expr in SERIES.items():
        params = urllib.parse.urlencode({"query": expr.format(sel=sel), "start": start, "end": end, "step": step_s})
        with urllib.request.urlopen(f"{prometheus.rstrip('/')}/api/v1/query_range?{params}", timeout=30) as r:
            data = json.load(r)["data"]["result"]
        out[label] = [(float(t), float(v)) for t, v in data[0]["values"]] if data else []
    return out


def draw(series: dict[str, list[tuple[float, float]]], path: Path, title: str) -> None:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - make demo installs the extra first
        raise SystemExit("the picture needs matplotlib: pip install -e '.[demo]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = min((pts[0][0] for pts in series.values() if pts), default=0.0)
    fig, (lag, group, commits) = plt.subplots(3, 1, figsize=(12, 7.5), sharex=True,
                                              gridspec_kw={"height_ratios": [2.2, 1.4, 1.2]})

    def line(ax, label, **kw):
        pts = series.get(label) or []
        ax.step([t - t0 for t, _ in pts], [v for _, v in pts], where="post", label=label, linewidth=1.4, **kw)

    line(lag, "pending records (Flink's pendingRecords)", color="#1f77b4")
    line(lag, "max records behind on a partition (Spark's maxOffsetsBehindLatest)", color="#ff7f0e")
    lag.set_ylabel("records")
    line(group, "partitions assigned", color="#2ca02c")
    line(group, "rebalances", color="#9467bd")
    group.set_ylabel("count")
    right = group.twinx()
    pts = series.get("rebalance under way (s)") or []
    right.fill_between([t - t0 for t, _ in pts], [v for _, v in pts], step="post", color="#d62728", alpha=0.25,
                       label="rebalance under way (s)")
    right.set_ylabel("seconds")
    line(commits, "commits failed", color="#d62728")
    line(commits, "commits fenced", color="#8c564b", linestyle="--")
    line(commits, "coordinator silent (s)", color="#7f7f7f")
    commits.set_xlabel("seconds")
    for ax in (lag, group, commits):
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(bottom=0)
    handles, labels = group.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    group.legend(handles + more, labels + more_labels, loc="upper left", bbox_to_anchor=(1.06, 1.0), fontsize=8,
                 frameon=False)
    for ax in (lag, commits):
        ax.legend(loc="upper left", bbox_to_anchor=(1.06, 1.0), fontsize=8, frameon=False)
    lag.set_title(title, fontsize=11, loc="left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m demo.metrics_plot", description=__doc__.split("\n\n")[0])
    p.add_argument("--prometheus", required=True, help="Prometheus's address, e.g. http://127.0.0.1:9090")
    p.add_argument("--query", required=True, help="the query label (metrics.queryName, default the group id)")
    p.add_argument("--minutes", type=float, default=15.0, help="how far back (default 15)")
    p.add_argument("--out", type=Path, default=Path("build/demo/metrics.png"))
    args = p.parse_args(argv)
    end = time.time()
    series = fetch(args.prometheus, args.query, end - 60 * args.minutes, end)
    if not any(series.values()):
        raise SystemExit(f"Prometheus at {args.prometheus} has no groupkafka series with query={args.query!r}")
    draw(series, args.out, f"groupkafka metrics of query {args.query!r}, as Prometheus scraped them")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
