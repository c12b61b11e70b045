"""Stream offsets and batch planning: pure functions over plain data.

A stream offset records, for every partition planned in a batch, the range
``[from, until)`` that batch reads. ``partitions(start, end)`` then needs only
``end``, so a batch replayed after a restart reads exactly the same records,
including partitions acquired since the previous batch, whose start came from
the group's committed offset and not from our previous offset.

It also carries ``known``: the partition count of every subscribed topic when the query
first planned, the same in every batch of the query. A partition beyond it was added (or its
topic began to match) later, so it starts at its earliest offset when the group holds no
offset for it, as in Spark's source; carried in every offset so that a restart from the
checkpoint tells them apart too (``StreamDriver._unclaimed_position``). A new query logs it
with batch 0 even when it reads nothing (``first_batch_end``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from assignment.model import TopicPartition
from spark_groupsource.errors import GroupKafkaError

FORMAT_VERSION = 1
_EXAMPLE = '{"v":1,"ranges":{"topicA":{"0":[10,25],"1":[7,7]}},"known":{"topicA":2}}'


class OffsetFormatError(GroupKafkaError, ValueError):
    """A stored stream offset cannot be read (corrupt checkpoint or foreign format)."""


@dataclass(frozen=True)
class StreamOffset:
    """Ranges per partition; ``until`` is the next offset to read after the batch."""

    ranges: Mapping[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    # topic -> partition count when the query first planned (None: not recorded, e.g. an
    # offset written before groupkafka recorded it)
    known: Mapping[str, int] | None = None

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: until for tp, (_, until) in self.ranges.items()}

    def to_json(self) -> str:
        # Fixed key order (topics by name, partitions by number): Spark compares offsets as
        # raw JSON strings. Partitions sorted as tuples come in exactly that order.
        nested: dict[str, dict[str, list[int]]] = {}
        for tp in sorted(self.ranges):
            start, until = self.ranges[tp]
            nested.setdefault(tp.topic, {})[str(tp.partition)] = [start, until]
        data: dict[str, object] = {"v": FORMAT_VERSION, "ranges": nested}
        if self.known is not None:
            data["known"] = {topic: self.known[topic] for topic in sorted(self.known)}
        return json.dumps(data, separators=(",", ":"))

    @staticmethod
    def from_json(text: str | dict) -> StreamOffset:
        try:
            data = json.loads(text) if isinstance(text, str) else text
        except (TypeError, json.JSONDecodeError) as exc:
            raise OffsetFormatError(f"stream offset is not JSON: expected e.g. {_EXAMPLE}, got {text!r}") from exc
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION or not isinstance(data.get("ranges"), dict):
            raise OffsetFormatError(f"unknown stream offset format: expected e.g. {_EXAMPLE}, got {text!r}")
        ranges: dict[TopicPartition, tuple[int, int]] = {}
        try:
            for topic, parts in data["ranges"].items():
                for p, (start, until) in parts.items():
                    start, until = int(start), int(until)
                    if start < 0 or until < start:
                        raise ValueError(f"bad range [{start}, {until}) for {topic}-{p}")
                    ranges[TopicPartition(topic, int(p))] = (start, until)
            known = data.get("known")
            if known is not None:
                known = {str(topic): int(count) for topic, count in known.items()}
                if any(count < 0 for count in known.values()):
                    raise ValueError(f"negative partition count in known={data['known']}")
        except (TypeError, ValueError, AttributeError) as exc:
            raise OffsetFormatError(f"bad stream offset: expected e.g. {_EXAMPLE}, got {text!r} ({exc})") from exc
        return StreamOffset(ranges, known)


def first_batch_end(end_json: str, known: Mapping[str, int] | None) -> str:
    """What a new query's first ``latestOffset`` answers: batch 0's end, which Spark logs in the
    checkpoint and runs whatever it is (no start offset yet, so any end counts as new data).
    A first plan with no batch answers the start (no ranges, no ``known``); it gets ``known``
    added, so that a query stopped before it read anything still says after a restart which
    partitions it began with (Spark's own source writes its initial offsets to its checkpoint
    for the same reason). Nothing else changes: an end with ranges is a planned batch (it
    carries ``known`` already) or one logged by an earlier run, and with no ``known`` (the
    partitions could not be listed) there is nothing to add."""
    end = StreamOffset.from_json(end_json)
    if known is None or end.known is not None or end.ranges:
        return end_json
    return StreamOffset({}, known).to_json()


def fair_share(lags: Mapping[TopicPartition, int], budget: int) -> dict[TopicPartition, int]:
    """Split ``budget`` records over partitions by water-filling: small lags are served
    in full, the rest get equal shares; leftovers go to partitions in sorted order."""
    grant = {tp: 0 for tp in lags}
    pending = sorted((tp for tp, lag in lags.items() if lag > 0), key=lambda tp: (lags[tp], tp))
    remaining = max(0, budget)
    while pending and remaining > 0:
        share = remaining // len(pending)
        if share == 0:
            for tp in sorted(pending)[:remaining]:
                grant[tp] += 1
            break
        still = []
        for tp in pending:
            need = lags[tp] - grant[tp]
            give = min(need, share)
            grant[tp] += give
            remaining -= give
            if grant[tp] < lags[tp]:
                still.append(tp)
        pending = still
    return grant


def plan_ranges(
    positions: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_rows: int | None = None,
    caps: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, tuple[int, int]]:
    """Next batch's ranges for the partitions in ``positions`` (those owned now).

    ``latest`` is each partition's end (high watermark or last stable offset);
    ``caps`` bounds a partition (Trigger.AvailableNow's snapshot); ``max_rows``
    is Spark's ReadMaxRows limit, shared fairly between partitions.
    """
    ends: dict[TopicPartition, int] = {}
    for tp, pos in positions.items():
        end = latest.get(tp, pos)
        if caps is not None:
            end = min(end, caps.get(tp, pos))
        ends[tp] = max(pos, end)
    if max_rows is not None:
        grant = fair_share({tp: ends[tp] - positions[tp] for tp in positions}, max_rows)
        ends = {tp: positions[tp] + grant[tp] for tp in positions}
    return {tp: (positions[tp], ends[tp]) for tp in sorted(positions)}


def has_new_data(ranges: Mapping[TopicPartition, tuple[int, int]]) -> bool:
    return any(until > start for start, until in ranges.values())


def trim_replay(
    ranges: Mapping[TopicPartition, tuple[int, int]],
    committed: Mapping[TopicPartition, int | None],
    owned: frozenset[TopicPartition] | None,
) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, str]]:
    """The part of a batch logged by an earlier run of the query (Spark replays it at restart)
    that nobody in the group has read since, and why the rest is left out.

    That run committed each completed batch's end, so the group's offset is the replayed
    batch's start unless another member took the partition over meanwhile and read on from
    there: its records below the group's offset are read, and a partition owned by another
    member now is read by that member from the group's offset. Replaying them would only
    duplicate them (measured on Kafka: a query stopped mid-batch and restarted re-read 99
    records another member had read). ``committed`` lacks a partition whose offset is
    unknown, ``owned`` is None when the assignment is unknown: those ranges are kept whole.
    """
    kept: dict[TopicPartition, tuple[int, int]] = {}
    left_out: dict[TopicPartition, str] = {}
    for tp, (start, until) in sorted(ranges.items()):
        if owned is not None and tp not in owned:
            left_out[tp] = "another member owns it now and reads it from the group's offset"
            continue
        got = committed.get(tp)
        if got is None or got <= start:
            kept[tp] = (start, until)
        elif got >= until:
            left_out[tp] = f"the group's offset {got} is past the batch's end {until}"
        else:
            kept[tp] = (got, until)
    return kept, left_out
