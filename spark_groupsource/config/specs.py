"""What to read, as values: the subscription (topics or a pattern) and start/stop offset specs.

Parsed from options once (:mod:`.parsing`); the planners resolve them against the broker.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Subscription:
    """What the driver's member subscribes to: a closed set of two kinds."""

    def matches(self, topic: str) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class SubscribeTopics(Subscription):
    topics: tuple[str, ...]

    def matches(self, topic: str) -> bool:
        return topic in self.topics


@dataclass(frozen=True)
class SubscribePattern(Subscription):
    """A regex that must match the whole topic name (``java.util.regex.Matcher.matches``)."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


class Position(enum.Enum):
    """A symbolic position inside a JSON offsets map (``-2`` / ``-1`` in Spark's syntax)."""

    EARLIEST = -2
    LATEST = -1


class OffsetsSpec:
    """Where reading starts (or a batch stops): resolved to numbers by the offset reader."""


@dataclass(frozen=True)
class GroupOffsets(OffsetsSpec):
    """The group's committed offsets; partitions without one start at ``reset``."""

    reset: str = "latest"  # latest | earliest | none


@dataclass(frozen=True)
class EarliestOffsets(OffsetsSpec):
    pass


@dataclass(frozen=True)
class LatestOffsets(OffsetsSpec):
    pass


@dataclass(frozen=True)
class SpecificOffsets(OffsetsSpec):
    """Explicit offsets per partition, sorted by (topic, partition)."""

    offsets: tuple[tuple[str, int, int | Position], ...]

    def as_dict(self) -> dict[tuple[str, int], int | Position]:
        return {(t, p): o for t, p, o in self.offsets}

    def get(self, topic: str, partition: int) -> int | Position | None:
        return self.as_dict().get((topic, partition))


@dataclass(frozen=True)
class TimestampOffsets(OffsetsSpec):
    """The first offset whose timestamp is >= a time (ms since the epoch).

    ``timestamp`` applies to every partition (``startingTimestamp``); otherwise
    ``timestamps`` lists them per partition (``...OffsetsByTimestamp``). ``strategy``:
    what a start does when no such offset exists: ``error`` or ``latest``.
    """

    timestamp: int | None = None
    timestamps: tuple[tuple[str, int, int], ...] = ()
    strategy: str = "error"

    def timestamp_for(self, topic: str, partition: int) -> int | None:
        if self.timestamp is not None:
            return self.timestamp
        for t, p, ts in self.timestamps:
            if t == topic and p == partition:
                return ts
        return None


