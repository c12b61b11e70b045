"""What the offset reader would answer, for the planner's unit tests: watermarks per partition,
and the group's committed offsets as an ``InMemoryMembership`` holds them."""

from __future__ import annotations

from assignment.model import TopicPartition
from spark_groupsource.group.memory_member import InMemoryMembership
from spark_groupsource.planning.offset_reader import Partial


class LogDouble:
    """What the offset reader would answer: watermarks per partition, and the group's committed
    offsets as the in-memory group holds them."""

    def __init__(self, ends: dict[TopicPartition, int], group: InMemoryMembership | None = None,
                 starts: dict[TopicPartition, int] | None = None):
        self.ends = dict(ends)
        self.starts = dict(starts or {})
        self.group = group
        self.starts_asked: list[set[TopicPartition]] = []  # per query: whose log start was asked
        self.committed_asked = 0  # how many times the group's offsets were asked

    def send_watermarks(self, parts, earliest=True):
        return sorted(set(parts))  # the log answers when asked (try_watermarks)

    def try_watermarks(self, parts, retries=None, asked=None, low_needed=None):
        """As OffsetReader: with ``low_needed`` the log start only where it says so."""
        need = {tp for tp in parts if low_needed is None or low_needed(tp, self.ends[tp])}
        self.starts_asked.append(need)
        return Partial({tp: (self.starts.get(tp, 0) if tp in need else None, self.ends[tp]) for tp in parts}, {}, 1)

    def topics(self, named=()):
        counts: dict[str, int] = {}
        for tp in self.ends:
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
        return counts

    def try_committed(self, group_id, parts, retries=None):
        self.committed_asked += 1
        return Partial(self.group.committed(parts) if self.group else dict.fromkeys(parts), {}, 1)

    def reachable(self):
        return None

    def for_timestamps(self, stamps):
        return {}

    def close(self):
        pass
