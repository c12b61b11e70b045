"""Partitions the planner had to leave out because the cluster could not answer for them.

A broker restart, a leader election or a coordinator move makes some partitions' offsets
unreadable for a while. The planner leaves those partitions out of the micro-batch (they are
planned again once they answer: nothing is read wrongly) and keeps going with the rest. What
it must not do is wait forever: a partition that stays unanswered longer than the bound fails
the query with an error that says which partitions, since when and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from assignment.model import TopicPartition


@dataclass(frozen=True)
class Away:
    since: float  # clock time of the first unanswered query in this stretch
    reason: str  # the last error
    misses: int  # unanswered queries in this stretch


class Unavailability:
    """Since when each partition has been unanswered; pure bookkeeping over a clock."""

    def __init__(self, bound_s: float, clock: Callable[[], float] = time.monotonic):
        self.bound_s = bound_s
        self._clock = clock
        self._away: dict[TopicPartition, Away] = {}
        #: partitions left out of a micro-batch, counted once per planning round
        self.partitions_left_out = 0

    def update(self, missing: Mapping[TopicPartition, str], answered: Iterable[TopicPartition]) -> None:
        now = self._clock()
        for tp in answered:
            self._away.pop(tp, None)
        for tp, reason in missing.items():
            prev = self._away.get(tp)
            self._away[tp] = Away(prev.since if prev else now, reason, (prev.misses if prev else 0) + 1)
        self.partitions_left_out += len(missing)

    def forget(self, keep: Iterable[TopicPartition]) -> None:
        """Drop partitions we no longer own (their outage is not ours to wait out)."""
        keep = set(keep)
        for tp in [tp for tp in self._away if tp not in keep]:
            del self._away[tp]

    def away(self) -> dict[TopicPartition, Away]:
        return dict(self._away)

    def overdue(self) -> dict[TopicPartition, Away]:
        """Partitions unanswered for longer than the bound."""
        now = self._clock()
        return {tp: a for tp, a in self._away.items() if now - a.since > self.bound_s}

    def age_s(self, tp: TopicPartition) -> float:
        a = self._away.get(tp)
        return 0.0 if a is None else self._clock() - a.since
