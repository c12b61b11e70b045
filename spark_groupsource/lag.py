"""Records behind latest, per partition and in total, from a streaming query's progress.

Python streaming sources cannot report custom metrics to Spark's progress (``metrics`` is
always ``{}``), but each source's progress holds the end offset of the last batch and, from
``reportLatestOffset``, the partitions' ends when it was planned. Their difference is what
Spark's Kafka source reports as ``offsetsBehindLatest``::

    from spark_groupsource.lag import lag_from_progress

    for source in lag_from_progress(query.lastProgress):
        print(source.total, [(p.topic, p.partition, p.lag) for p in source.partitions])

Pure: works on ``query.lastProgress``, a ``StreamingQueryProgress``, its ``.json`` string
or a dict read back from a listener's log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_groupsource.planning.offsets import OffsetFormatError, StreamOffset

__all__ = ["PartitionLag", "SourceLag", "lag_from_progress"]


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    #: next offset after the last planned batch (what the query has read up to)
    consumed: int
    #: the partition's end when that batch was planned
    latest: int

    @property
    def lag(self) -> int:
        return max(0, self.latest - self.consumed)


@dataclass(frozen=True)
class SourceLag:
    """Lag of one groupkafka source (``index`` in the progress's ``sources``)."""

    index: int
    description: str
    partitions: tuple[PartitionLag, ...]
    #: False when the progress has no latest offsets (a batch replayed after a restart, or
    #: before the first plan): then ``partitions`` is empty and ``total`` is None.
    known: bool = True

    @property
    def total(self) -> int | None:
        return sum(p.lag for p in self.partitions) if self.known else None


def lag_from_progress(progress: Any) -> list[SourceLag]:
    """Lag of every groupkafka source in one progress report (``[]`` for ``None``).

    A source is ours when its end offset has this connector's format; other sources of a
    union or join are skipped.
    """
    data = _as_dict(progress)
    if not data:
        return []
    out = []
    for index, source in enumerate(data.get("sources") or ()):
        end = _decoded(source.get("endOffset"))
        try:
            consumed = StreamOffset.from_json(end).positions() if isinstance(end, dict) else None
        except OffsetFormatError:
            consumed = None
        if consumed is None:
            continue  # not a groupkafka source
        latest = _decoded(source.get("latestOffset"))
        description = str(source.get("description", ""))
        if not isinstance(latest, Mapping):
            out.append(SourceLag(index, description, (), known=False))
            continue
        parts = []
        for tp in sorted(consumed):
            end_of_log = latest.get(tp.topic, {}).get(str(tp.partition))
            if isinstance(end_of_log, int):
                parts.append(PartitionLag(tp.topic, tp.partition, consumed[tp], end_of_log))
        out.append(SourceLag(index, description, tuple(parts)))
    return out


def _as_dict(progress: Any) -> dict | None:
    if progress is None:
        return None
    if hasattr(progress, "json") and not isinstance(progress, Mapping):
        progress = progress.json  # StreamingQueryProgress
    if isinstance(progress, str | bytes):
        progress = json.loads(progress)
    if isinstance(progress, Mapping):
        return dict(progress)
    raise TypeError(f"expected a streaming query progress (dict or JSON), got {type(progress).__name__}")


def _decoded(value: Any) -> Any:
    """Offsets appear as JSON text (sometimes encoded twice); decode to the object."""
    for _ in range(3):
        if not isinstance(value, str | bytes):
            return value
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value
