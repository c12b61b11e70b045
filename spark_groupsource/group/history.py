"""The member's history as one structured log line per event, for a checker that judges a run
from outside (the chaos suite's ``chaos/history.py``): what the member owned and from when,
each batch it planned and the generation it planned under, each commit and the generation it
carried. Logger ``spark_groupsource.history``, INFO; off unless that level is on.

Times are ``time.monotonic()``: on Linux one clock for every process of the host, so the
members' events order against each other and against the harness's, also when a wall clock
is stepped (the chaos suite's clock_jumps)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from assignment.model import TopicPartition

#: every history line's message starts with this, then one JSON object
PREFIX = "groupkafka-history "

log = logging.getLogger("spark_groupsource.history")


def enabled() -> bool:
    return log.isEnabledFor(logging.INFO)


def record(event: str, mono: float, **fields: object) -> None:
    """One line: ``event`` at ``mono`` (taken by the caller where the event's order is decided)."""
    if enabled():
        log.info("%s%s", PREFIX, json.dumps({"ev": event, "mono": round(mono, 4), **fields}, separators=(",", ":")))


def tps(partitions: Iterable[TopicPartition]) -> list[list]:
    """Partitions as ``[[topic, partition], ...]``, sorted."""
    return [[tp.topic, tp.partition] for tp in sorted(partitions)]
