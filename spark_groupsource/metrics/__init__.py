"""The driver's group member as metrics: lag, rebalances, commits (docs/metrics.md).

A stream with ``metrics.port`` serves them for Prometheus from the process that runs its
driver side. Spark runs that in a Python process of its own (one per source and query), not in
the process of your ``SparkSession``, so your own code reads the same numbers from the endpoint::

    from spark_groupsource import metrics

    for snap in metrics.scrape("localhost:9464"):     # e.g. in a StreamingQueryListener
        print(snap.query, snap.max_offsets_behind_latest, snap.member.rebalances)

``snapshot()`` gives them without HTTP to code in the runner's own process (tests, tools).
"""

from __future__ import annotations

from spark_groupsource.metrics.exporter import scrape
from spark_groupsource.metrics.registry import snapshots
from spark_groupsource.metrics.state import MemberReading, MetricsSnapshot, Offsets

__all__ = ["MemberReading", "MetricsSnapshot", "Offsets", "scrape", "snapshot", "snapshots"]


def snapshot(query: str | None = None) -> MetricsSnapshot | None:
    """The numbers of the query labelled ``query`` (``metrics.queryName``, default its group id)
    in this process; with no name, the only one. None when there is none."""
    found = [s for s in snapshots() if query is None or s.query == query]
    return found[0] if len(found) == 1 or (found and query is not None) else None
