"""Admission control: how many records a micro-batch may take and whether it may start yet.

Spark's Kafka source semantics (SPARK-35312, ``KafkaMicroBatchStream.latestOffset``):
``maxOffsetsPerTrigger`` caps a batch; ``minOffsetsPerTrigger`` holds a batch back until that
many new records are available, unless ``maxTriggerDelay`` has passed since the previous
batch started; ``ReadAllAvailable`` (``trigger(once=True)``) overrides both.

PySpark's ``ReadMinRows`` carries no delay and there is no composite limit for Python
sources, so :func:`default_read_limit` returns the one limit Spark can carry and
:func:`limits_for` restores the pair from the options. Pure: the clock is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Limits", "MinRowsGate", "available_records", "default_read_limit", "limits_for"]


@dataclass(frozen=True)
class Limits:
    """What the next batch may read: at most ``max_rows``, not before ``min_rows`` are there."""

    max_rows: int | None = None
    min_rows: int | None = None


def default_read_limit(max_offsets: int | None, min_offsets: int | None) -> Any:
    """The ``ReadLimit`` for ``getDefaultReadLimit`` (``ReadMaxRows`` wins when both are set:
    the minimum is restored from the options by :func:`limits_for`)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    if max_offsets:
        return ReadMaxRows(max_offsets)
    if min_offsets:
        return ReadMinRows(min_offsets)
    return ReadAllAvailable()


def limits_for(limit: Any, min_offsets: int | None) -> Limits:
    """The limits for ``latestOffset(start, limit)``: ``limit``'s own bound plus the minimum
    from the options (``ReadMaxRows`` stands for both when both are set).

    ``None`` (no admission control) and ``ReadAllAvailable`` (Trigger.Once) read everything,
    as ``ReadAllAvailable`` has the highest priority in Spark's Kafka source.
    """
    if limit is None or type(limit).__name__ == "ReadAllAvailable":
        return Limits()
    return Limits(
        max_rows=getattr(limit, "max_rows", None),
        min_rows=getattr(limit, "min_rows", None) or min_offsets,
    )


def available_records(positions: Mapping[Any, int], latest: Mapping[Any, int]) -> int:
    """New records over the given partitions: sum of (end - position), never negative."""
    return sum(max(0, latest.get(tp, pos) - pos) for tp, pos in positions.items())


class MinRowsGate:
    """``minOffsetsPerTrigger`` / ``maxTriggerDelay``: may a batch with this many records start?

    The rule of Spark's ``KafkaMicroBatchStream.delayBatch``: start when ``max_delay_ms`` has
    passed since the previous batch started, else when at least ``min_rows`` records are
    available. The first batch of a run is never held (Spark's clock starts at 0).
    """

    def __init__(self, max_delay_ms: int):
        self.max_delay_ms = max_delay_ms
        self.last_start_ms: float | None = None

    def admit(self, available: int, min_rows: int, now_ms: float) -> bool:
        due = self.last_start_ms is None or now_ms - self.last_start_ms >= self.max_delay_ms
        if due or available >= min_rows:
            self.last_start_ms = now_ms
            return True
        return False
