"""Batch plans: one offset range per subscribed partition, resolved once on the driver.

:func:`resolve_ranges` is pure: given the parsed :class:`~spark_groupsource.config.BatchOptions`
and a :class:`BrokerView` (the few broker queries planning needs), it turns the start and end
specs (earliest / group / JSON / timestamps; latest / JSON / timestamps) into one
:class:`~spark_groupsource.ranges.OffsetRange` per subscribed partition, or raises before
any data moves: :class:`OptionError` naming the option for impossible ranges,
:class:`DataLossError` for a start below the log start offset (``failOnDataLoss=true``).

JSON offsets follow Spark's rule: they must name every partition of the subscription
(``-2`` = earliest in a start, ``-1`` = latest in an end). A partition whose start equals its
end reads nothing, which is how a plan limits itself to some partitions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from assignment.model import TopicPartition
from spark_groupsource import config as opt
from spark_groupsource.errors import BrokerError, DataLossError, OptionError
from spark_groupsource.ranges import OffsetRange, RangeInputPartition, split_ranges

__all__ = [
    "BrokerView",
    "offsets_json",
    "plan_tasks",
    "resolve_ranges",
    "subscribed_partitions",
]

log = logging.getLogger("spark_groupsource.batch")


# --------------------------------------------------------------------------- broker queries


class BrokerView(Protocol):
    """The broker queries batch planning needs: :class:`OffsetReader` over confluent-kafka, or
    plain data in the planner's unit tests."""

    def topics(self, named: Iterable[str] = ()) -> dict[str, int]:
        """Every topic of the cluster with its partition count (``named``: topics the query
        names, checked one by one when the cluster's list lacks them, so that a missing ACL is
        reported as such rather than as a missing topic)."""

    def watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, end offset) per partition."""

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset with a timestamp >= the given ms; None past the end."""

    def committed(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed)."""


# --------------------------------------------------------------------------- option names


def start_option(spec: opt.OffsetsSpec) -> str:
    """The option that set the start (Spark's precedence already applied by config.parsing)."""
    if isinstance(spec, opt.TimestampOffsets):
        return "startingTimestamp" if spec.timestamp is not None else "startingOffsetsByTimestamp"
    return "startingOffsets"


def end_option(spec: opt.OffsetsSpec) -> str:
    if isinstance(spec, opt.TimestampOffsets):
        return "endingTimestamp" if spec.timestamp is not None else "endingOffsetsByTimestamp"
    return "endingOffsets"


# --------------------------------------------------------------------------- planning (pure)


def subscribed_partitions(subscription: opt.Subscription, topics: Mapping[str, int]) -> list[TopicPartition]:
    """The partitions of the subscription on the cluster, sorted; errors name the option."""
    if isinstance(subscription, opt.SubscribeTopics):
        missing = [t for t in subscription.topics if t not in topics]
        if missing:
            raise OptionError("subscribe", f"topic(s) not found on the cluster: {', '.join(missing)}")
        chosen = list(subscription.topics)
    else:
        chosen = sorted(t for t in topics if not t.startswith("__") and subscription.matches(t))
        if not chosen:
            pattern = getattr(subscription, "pattern", "?")
            raise OptionError("subscribePattern", f"{pattern!r} matches no topic on the cluster")
    return sorted(TopicPartition(t, p) for t in chosen for p in range(topics[t]))


def _covered(option: str, named: Iterable[tuple[str, int]], partitions: Sequence[TopicPartition]) -> None:
    """Spark's rule for JSON offsets: exactly the subscribed partitions."""
    named = set(named)
    wanted = {(tp.topic, tp.partition) for tp in partitions}
    extra = sorted(named - wanted)
    missing = sorted(wanted - named)
    if extra:
        shown = ", ".join(f"{t}-{p}" for t, p in extra[:10])
        raise OptionError(option, f"names partitions outside the subscription: {shown}")
    if missing:
        shown = ", ".join(f"{t}-{p}" for t, p in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise OptionError(
            option,
            f"must give every subscribed partition (as Spark's Kafka source requires; use -2 for "
            f"earliest, -1 for latest, or the same offset as the start to skip one); missing {shown}{more}",
        )


def _stamps(option: str, spec: opt.TimestampOffsets, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    if spec.timestamp is None:
        _covered(option, ((t, p) for t, p, _ in spec.timestamps), partitions)
    return {tp: spec.timestamp_for(tp.topic, tp.partition) for tp in partitions}  # type: ignore[misc]


def _resolve_start(
    opts: opt.BatchOptions,
    view: BrokerView,
    partitions: Sequence[TopicPartition],
    marks: Mapping[TopicPartition, tuple[int, int]],
) -> dict[TopicPartition, int]:
    spec = opts.starting
    name = start_option(spec)
    if isinstance(spec, opt.EarliestOffsets):
        return {tp: marks[tp][0] for tp in partitions}
    if isinstance(spec, opt.LatestOffsets):
        raise OptionError(name, "'latest' is not valid for a batch query (it would read nothing)")
    if isinstance(spec, opt.GroupOffsets):
        committed = view.committed(opts.group_id or "", partitions)
        return {tp: _group_start(opts, tp, committed.get(tp), marks[tp]) for tp in partitions}
    if isinstance(spec, opt.SpecificOffsets):
        _covered(name, ((t, p) for t, p, _ in spec.offsets), partitions)
        out = {}
        for t, p, value in spec.offsets:
            tp = TopicPartition(t, p)
            if value is opt.Position.LATEST:
                raise OptionError(name, f"{tp}: -1 (latest) is not valid as a batch start (it would read nothing)")
            out[tp] = marks[tp][0] if value is opt.Position.EARLIEST else int(value)
        return out
    if isinstance(spec, opt.TimestampOffsets):
        stamps = _stamps(name, spec, partitions)
        found = view.for_timestamps(stamps)
        out = {}
        for tp in partitions:
            offset = found.get(tp)
            if offset is None:
                if spec.strategy != "latest":
                    raise OptionError(
                        name,
                        f"no record in {tp} has a timestamp at or after {stamps[tp]}; set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead",
                    )
                offset = marks[tp][1]
            out[tp] = offset
        return out
    raise OptionError(name, f"unsupported start {spec!r}")  # pragma: no cover


def _group_start(opts: opt.BatchOptions, tp: TopicPartition, committed: int | None, mark: tuple[int, int]) -> int:
    if committed is not None:
        return committed
    if opts.auto_offset_reset == "earliest":
        return mark[0]
    if opts.auto_offset_reset == "latest":
        return mark[1]
    raise OptionError(
        "kafka.auto.offset.reset",
        f"{tp} has no committed offset in group {opts.group_id!r} and the policy is 'none'; "
        "set it to earliest or latest, or commit an offset for the group first",
    )


def _resolve_end(
    opts: opt.BatchOptions,
    view: BrokerView,
    partitions: Sequence[TopicPartition],
    marks: Mapping[TopicPartition, tuple[int, int]],
) -> dict[TopicPartition, int]:
    spec = opts.ending
    name = end_option(spec)
    if isinstance(spec, opt.LatestOffsets):
        return {tp: marks[tp][1] for tp in partitions}
    if isinstance(spec, opt.SpecificOffsets):
        _covered(name, ((t, p) for t, p, _ in spec.offsets), partitions)
        out = {}
        for t, p, value in spec.offsets:
            tp = TopicPartition(t, p)
            if value is opt.Position.EARLIEST:
                raise OptionError(name, f"{tp}: -2 (earliest) is not valid as a batch end")
            out[tp] = marks[tp][1] if value is opt.Position.LATEST else int(value)
        return out
    if isinstance(spec, opt.TimestampOffsets):
        found = view.for_timestamps(_stamps(name, spec, partitions))
        # No record at or after the end timestamp: the range runs to the current end.
        return {tp: (found.get(tp) if found.get(tp) is not None else marks[tp][1]) for tp in partitions}
    raise OptionError(name, f"unsupported end {spec!r}")  # pragma: no cover


def _check_timestamp_order(opts: opt.BatchOptions, partitions: Sequence[TopicPartition]) -> None:
    s, e = opts.starting, opts.ending
    if not (isinstance(s, opt.TimestampOffsets) and isinstance(e, opt.TimestampOffsets)):
        return
    for tp in partitions:
        ts_s, ts_e = s.timestamp_for(tp.topic, tp.partition), e.timestamp_for(tp.topic, tp.partition)
        if ts_s is not None and ts_e is not None and ts_e < ts_s:
            raise OptionError(
                end_option(e), f"{tp}: ends at timestamp {ts_e}, before its start timestamp {ts_s} ({start_option(s)})"
            )


def resolve_ranges(
    opts: opt.BatchOptions,
    view: BrokerView,
    *,
    only: Iterable[TopicPartition] | None = None,
    start_override: Mapping[TopicPartition, int] | None = None,
) -> list[OffsetRange]:
    """Resolve the batch's start and end to one range per subscribed partition (sorted).

    ``only``: partitions this plan reads (a group-coordinated backfill's assignment); the
    others get an empty range at their end offset. ``start_override``: starts that win over
    ``startingOffsets`` (the group's committed offsets in a coordinated backfill).
    Raises :class:`OptionError` (naming the option) for impossible ranges and
    :class:`DataLossError` for a start below the log start offset with ``failOnDataLoss``.
    """
    partitions = subscribed_partitions(opts.subscription, view.topics(getattr(opts.subscription, "topics", ())))
    _check_timestamp_order(opts, partitions)
    marks = view.watermarks(partitions)
    missing = [tp for tp in partitions if tp not in marks]
    if missing:
        raise BrokerError(f"no offsets for {', '.join(map(str, missing[:10]))}")
    starts = _resolve_start(opts, view, partitions, marks)
    ends = _resolve_end(opts, view, partitions, marks)
    if start_override:
        starts.update({tp: off for tp, off in start_override.items() if tp in starts})
    reading = set(partitions) if only is None else set(only)
    s_name, e_name = start_option(opts.starting), end_option(opts.ending)
    out = []
    for tp in partitions:
        low, high = marks[tp]
        if tp not in reading:
            out.append(OffsetRange(tp.topic, tp.partition, high, high))
            continue
        start, end = starts[tp], ends[tp]
        if end < start:
            raise OptionError(
                e_name, f"{tp}: ends at {end}, before its start {start} ({s_name}); the end must not precede the start"
            )
        if end > high:
            # Offsets the plan names do not exist (yet, or any more: a recreated or truncated
            # topic); Spark's Kafka source treats this as data loss as well.
            start, end = _on_data_loss(
                opts, tp, expected=end - 1, available=None, keep=(min(start, high), high),
                detail=f"the range [{start}, {end}) goes beyond the end offset {high} "
                "(the topic may have been recreated or truncated)",
            )
        if start < low:
            start, end = _on_data_loss(
                opts, tp, expected=start, available=low, keep=(min(low, end), end),
                detail=f"offsets [{start}, {min(low, end)}) are below the log start offset {low} "
                "(retention or deleted records)",
            )
        out.append(OffsetRange(tp.topic, tp.partition, start, end))
    return out


def _on_data_loss(
    opts: opt.BatchOptions, tp: TopicPartition, *, expected: int, available: int | None,
    keep: tuple[int, int], detail: str,
) -> tuple[int, int]:
    """The driver's half of the data-loss policy (the executors' is fetch.report_data_loss):
    raise, or warn and read ``keep`` instead."""
    if opts.fail_on_data_loss:
        raise DataLossError(tp.topic, tp.partition, expected, available, detail)
    log.warning("data loss in %s: %s; reading [%d, %d) because failOnDataLoss=false", tp, detail, *keep)
    return keep


def plan_tasks(ranges: Iterable[OffsetRange], opts: opt.CommonOptions) -> list[RangeInputPartition]:
    """The Spark tasks of a batch or micro-batch (minPartitions, maxRecordsPerPartition,
    maxPartitions, smallRangesPerTask)."""
    tasks = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition,
                         opts.max_partitions, opts.small_ranges_per_task)
    return [RangeInputPartition(i, tuple(t)) for i, t in enumerate(tasks)]


def offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """``{"topic":{"0":23,...}}`` with sorted topics and numerically sorted partitions."""
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return json.dumps(nested, separators=(",", ":"))
