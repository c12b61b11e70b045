"""The queries of this process whose metrics are on: what the endpoint and ``snapshot()`` read.

Spark runs each streaming source's driver side in a Python process of its own (its
``python_streaming_source_runner``), so a runner holds one query; tests may hold several.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from spark_groupsource.metrics.state import MetricsSnapshot

_lock = threading.Lock()
_sources: dict[int, Callable[[], MetricsSnapshot]] = {}


def register(key: int, read: Callable[[], MetricsSnapshot]) -> None:
    with _lock:
        _sources[key] = read


def unregister(key: int) -> None:
    with _lock:
        _sources.pop(key, None)


def snapshots() -> list[MetricsSnapshot]:
    """Every registered query's numbers now, sorted by query and group."""
    with _lock:
        reads = list(_sources.values())
    return sorted((read() for read in reads), key=lambda s: (s.query, s.group))
