"""The micro-batch stream: planning and the commit hook on the driver, fetch on executors.

Spark builds one reader instance in its long-lived driver-side Python runner
(``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` all run there)
and pickles another to the executors (``read``). Everything with a thread or a
socket lives in ``_Driver``, created on the first driver call and never pickled.

Completion signal: Spark runs micro-batches one after another, so when
``latestOffset(start, ...)`` is called, the batch that ended at ``start`` has
completed and been recorded. That is where its offsets are committed to the
group; Spark's own ``commit(end)`` arrives one batch later and is a fallback.
"""

from __future__ import annotations

import atexit
import json
import logging
import signal
import threading
import time
import weakref
from collections.abc import Iterator, Mapping

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from assignment.model import TopicPartition
from assignment.registry import create_assignors
from spark_groupsource import options as opt
from spark_groupsource.admission import (
    MinRowsGate,
    available_records,
    default_read_limit,
    limits_for,
)
from spark_groupsource.errors import DataLossError, OptionError
from spark_groupsource.fetch import read_partition
from spark_groupsource.logs import configure_worker_logging
from spark_groupsource.membership import GroupMembership, MembershipConfig
from spark_groupsource.offset_reader import OffsetReader
from spark_groupsource.offsets import StreamOffset, has_new_data, plan_ranges
from spark_groupsource.ranges import OffsetRange, RangeInputPartition, split_ranges

log = logging.getLogger("spark_groupsource.stream")

try:  # Spark >= 4.2: admission control for Python streaming readers (limits: admission.py)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyproject requires >= 4.2.1
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

EMPTY = StreamOffset({})


class _Driver:
    """Driver-only state: group membership, the offset reader, positions, planned batches."""

    def __init__(self, opts: opt.StreamOptions):
        configure_worker_logging()
        self.opts = opts
        assignors = tuple(create_assignors(",".join(opts.assignors), opts.assignor_options))
        self.membership = GroupMembership(
            MembershipConfig(
                group_id=opts.group_id,
                assignors=assignors,
                topics=getattr(opts.subscription, "topics", ()),
                pattern=_whole_match(getattr(opts.subscription, "pattern", None)),
                group_instance_id=opts.group_instance_id,
                client_rack=opts.client_rack,
                client_config={"api_version": (2, 3), **opt.membership_config(opts)},
                leader_sync_delay_ms=opts.leader_sync_delay_ms,
            ),
            drain_timeout_s=(opts.max_poll_interval_ms or 300_000) / 1000.0,
        )
        self.reader = OffsetReader(opt.fetcher_config(opts))
        self.lock = threading.RLock()
        # partition -> (next offset, acquisition serial it was planned under)
        self.positions: dict[TopicPartition, tuple[int, int]] = {}
        # offsets JSON planned by this process -> serial per partition at planning time
        self.planned: dict[str, dict[TopicPartition, int]] = {}
        self.recovered: StreamOffset | None = None  # last batch logged by an earlier run
        self.fresh_query = False  # initialOffset was called: startingOffsets applies
        self.planned_any = False
        self.started_positions = False
        self.caps: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow snapshot
        self.latest_seen: dict[TopicPartition, int] = {}
        self.gate = MinRowsGate(opts.max_trigger_delay_ms)  # minOffsetsPerTrigger / maxTriggerDelay
        self.closed = False
        self.membership.start()
        self._install_shutdown_hooks()
        joined = self.membership.wait_for_assignment(timeout_s=max(30.0, (opts.session_timeout_ms or 45_000) / 500.0))
        if not joined:
            log.warning("group %s: not joined yet; batches start once the group assigns partitions", opts.group_id)

    # -- shutdown: Spark never calls stop() on query.stop(); the runner gets SIGTERM --------
    def _install_shutdown_hooks(self) -> None:
        ref = weakref.ref(self)

        def close_hook(*_):
            d = ref()
            if d is not None:
                d.close()

        atexit.register(close_hook)
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGTERM)
            handling: list[int] = []

            def on_sigterm(signum, frame):
                # query.stop() can deliver SIGTERM twice within a millisecond; a nested call
                # raising SystemExit would abort the first one's LeaveGroup mid-way, so the
                # member would linger until its session expired. Let the first one finish.
                if handling:
                    return
                handling.append(signum)
                close_hook()
                if callable(previous) and previous not in (signal.SIG_DFL, signal.SIG_IGN):
                    previous(signum, frame)
                else:
                    raise SystemExit(128 + signum)

            signal.signal(signal.SIGTERM, on_sigterm)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.membership.close()
        self.reader.close()

    # -- the commit hook -------------------------------------------------------------------
    def complete(self, start_json: str | None) -> None:
        """The batch that ended at ``start`` is done: commit it (if we planned it) and release drains."""
        if not start_json:
            self.membership.batch_completed()
            return
        serials = self.planned.pop(start_json, None)
        if serials is None:
            start = StreamOffset.from_json(start_json)
            if start.ranges and self.recovered is None and not self.planned_any:
                self.recovered = start  # logged by an earlier run of this query
            self.membership.batch_completed()
            return
        for key in list(self.planned):  # older batches (replayed or superseded) are done too
            self.planned.pop(key)
        if self.opts.commit_offsets:
            start = StreamOffset.from_json(start_json)
            offsets = {tp: until for tp, (_, until) in start.ranges.items() if tp in serials}
            self._forget_lost(self.membership.commit(offsets, serials))
        self.membership.batch_completed()

    def _forget_lost(self, result) -> None:
        for tp in result.lost if result is not None else ():
            self.positions.pop(tp, None)

    # -- positions ---------------------------------------------------------------------------
    def _reset_position(self, tp: TopicPartition, low: int, high: int) -> int:
        policy = self.opts.auto_offset_reset
        if policy == "earliest":
            return low
        if policy == "latest":
            return high
        raise OptionError(
            "kafka.auto.offset.reset",
            f"partition {tp} has no committed offset in group {self.opts.group_id!r} and the policy is "
            "'none'; set it to 'earliest' or 'latest', or commit an offset for the group first",
        )

    def _starting_position(self, tp, committed, low, high) -> int:
        """Where a partition owned at the very first plan of a new query starts."""
        start = self.opts.starting
        if isinstance(start, opt.EarliestOffsets):
            return low
        if isinstance(start, opt.LatestOffsets):
            return high
        if isinstance(start, opt.TimestampOffsets):
            found = self._by_time.get(tp)
            if found is not None:
                return found
            if start.strategy == "latest" or start.timestamp_for(tp.topic, tp.partition) is None:
                return high
            raise OptionError(
                "startingOffsetsByTimestamp" if start.timestamps else "startingTimestamp",
                f"no record in {tp} has a timestamp at or after "
                f"{start.timestamp_for(tp.topic, tp.partition)}; use "
                "startingOffsetsByTimestampStrategy=latest to start at the end instead",
            )
        if isinstance(start, opt.SpecificOffsets):
            value = start.get(tp.topic, tp.partition)
            if value is opt.Position.EARLIEST:
                return low
            if value is opt.Position.LATEST:
                return high
            if value is not None:
                return int(value)
        if committed is not None:
            return committed
        return self._reset_position(tp, low, high)

    def resolve_positions(self, owned: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        fresh = [tp for tp, serial in owned.items() if self.positions.get(tp, (None, None))[1] != serial]
        out = {tp: self.positions[tp][0] for tp in owned if tp not in fresh}
        if not fresh:
            return out
        committed = self.membership.committed(fresh)
        marks = self.reader.watermarks(fresh)
        use_starting = self.fresh_query and not self.started_positions
        self._by_time: dict[TopicPartition, int | None] = {}
        if use_starting and isinstance(self.opts.starting, opt.TimestampOffsets):
            stamps = {tp: self.opts.starting.timestamp_for(tp.topic, tp.partition) for tp in fresh}
            self._by_time = self.reader.for_timestamps({tp: ts for tp, ts in stamps.items() if ts is not None})
        for tp in sorted(fresh):
            low, high = marks[tp]
            got = committed.get(tp)
            rec = self.recovered.ranges.get(tp) if self.recovered is not None else None
            if rec is not None and got in (rec[0], rec[1]) or (rec is not None and got is None):
                # the replayed batch was ours and nobody advanced the group since: keep it
                pos = rec[1]
                if got != rec[1] and self.opts.commit_offsets:
                    self.membership.commit({tp: rec[1]}, {tp: owned[tp]})
            elif use_starting:
                pos = self._starting_position(tp, got, low, high)
            else:
                pos = got if got is not None else self._reset_position(tp, low, high)
            out[tp] = pos
            self.positions[tp] = (pos, owned[tp])
            log.info("group %s: %s starts at offset %d (committed: %s)", self.opts.group_id, tp, pos, got)
        self.started_positions = True
        self.recovered = None
        return out

    def _check_beyond_end(self, positions: dict[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> None:
        """A position past the partition's end means its records were deleted (topic recreated,
        log truncated): fail, or with failOnDataLoss=false warn and go on from the new end,
        as Spark's Kafka source does. Without this the query would wait there silently."""
        for tp, pos in sorted(positions.items()):
            end = latest.get(tp)
            if end is None or pos <= end:
                continue
            if self.opts.fail_on_data_loss:
                raise DataLossError(tp.topic, tp.partition, pos, end,
                                    f"the partition now ends at {end}: records were deleted")
            log.warning("data loss in %s: position %d is beyond the end offset %d; continuing "
                        "from %d (failOnDataLoss=false)", tp, pos, end, end)
            positions[tp] = end
            self.positions[tp] = (end, self.positions[tp][1])  # resolve_positions set every owned one

    # -- planning ------------------------------------------------------------------------------
    def plan(self, start_json: str | None, max_rows: int | None, min_rows: int | None = None) -> str | None:
        with self.lock:
            self.complete(start_json)
            # offsets whose commit met a rebalance go out as soon as the generation is stable
            self._forget_lost(self.membership.flush_pending())
            snap = self.membership.snapshot()
            if not self.membership.may_plan(snap):
                return start_json  # eager: plan nothing new while partitions are handed over
            owned = {tp: s for tp, s in snap.owned.items() if tp not in snap.revoking}
            for tp in [tp for tp in self.positions if tp not in owned]:
                self.positions.pop(tp)
            if not owned:
                return start_json
            positions = self.resolve_positions(owned)
            latest = self.reader.latest(owned)
            self.latest_seen = dict(latest)
            self._check_beyond_end(positions, latest)
            caps = None
            if self.caps is not None:
                # a partition not owned at the snapshot (the join had not delivered the
                # assignment yet, or a rebalance moved it here) is read up to its end when
                # first seen; capping it at its position would read nothing and end the run
                for tp in owned:
                    self.caps.setdefault(tp, latest[tp])
                caps = {tp: self.caps[tp] for tp in owned}
            ranges = plan_ranges(positions, latest, max_rows, caps)
            if not has_new_data(ranges):
                return start_json
            if min_rows and caps is None and not self.gate.admit(
                    available_records(positions, latest), min_rows, time.monotonic() * 1000):
                return start_json  # minOffsetsPerTrigger: wait for more records or maxTriggerDelay
            if not self.membership.batch_planned(tp for tp, (s, u) in ranges.items() if u > s):
                return start_json  # a revocation began meanwhile: plan after the rebalance
            end = StreamOffset(ranges).to_json()
            self.planned[end] = {tp: owned[tp] for tp in ranges}
            self.planned_any = True
            for tp, (_, until) in ranges.items():
                self.positions[tp] = (until, owned[tp])
            return end


class GroupKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("groupkafka")``: see the README for options and guarantees."""

    def __init__(self, schema, options: Mapping[str, str]):
        self.opts = opt.parse_stream_options(options)
        self._initial: str | None = None
        self._driver_state: _Driver | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_driver_state"] = None  # threads and sockets stay on the driver
        return state

    def _driver(self) -> _Driver:
        if self._driver_state is None:
            self._driver_state = _Driver(self.opts)
        return self._driver_state

    # -- admission control (Spark >= 4.2) ----------------------------------------------------
    def getDefaultReadLimit(self):
        return default_read_limit(self.opts.max_offsets_per_trigger, self.opts.min_offsets_per_trigger)

    def initialOffset(self) -> str:
        # Spark calls this twice on a fresh start; cache so the answer cannot move.
        if self._initial is None:
            d = self._driver()
            d.fresh_query = True
            self._initial = EMPTY.to_json()
        return self._initial

    def latestOffset(self, start=None, limit=None) -> str:
        start_json = _as_json(start)
        limits = limits_for(limit, self.opts.min_offsets_per_trigger)
        end = self._driver().plan(start_json, limits.max_rows, limits.min_rows)
        return end if end is not None else (start_json or EMPTY.to_json())

    def reportLatestOffset(self):
        d = self._driver_state
        if d is None or not d.latest_seen:
            return None
        nested: dict[str, dict[str, int]] = {}
        for tp in sorted(d.latest_seen):
            nested.setdefault(tp.topic, {})[str(tp.partition)] = d.latest_seen[tp]
        return json.dumps(nested, separators=(",", ":"))

    def prepareForTriggerAvailableNow(self) -> None:
        d = self._driver()
        owned = d.membership.snapshot().owned
        d.caps = d.reader.latest(owned)
        log.info("group %s: AvailableNow reads up to %s", self.opts.group_id,
                 {str(tp): off for tp, off in sorted(d.caps.items())})

    def partitions(self, start, end) -> list[InputPartition]:
        """Pure in its arguments: a replay after restart reads exactly the same ranges."""
        ranges = [
            OffsetRange(tp.topic, tp.partition, s, u)
            for tp, (s, u) in sorted(StreamOffset.from_json(_as_json(end)).ranges.items())
            if u > s
        ]
        tasks = split_ranges(
            ranges,
            min_partitions=self.opts.min_partitions,
            max_records_per_partition=self.opts.max_records_per_partition,
        )
        return [RangeInputPartition(i, tuple(t)) for i, t in enumerate(tasks)]

    def commit(self, end) -> None:
        d = self._driver_state
        if d is not None:
            with d.lock:
                key = _as_json(end)
                if key in d.planned:
                    d.complete(key)

    def read(self, partition: RangeInputPartition) -> Iterator:
        yield from read_partition(
            opt.fetcher_config(self.opts),
            partition.ranges,
            include_headers=self.opts.include_headers,
            fail_on_data_loss=self.opts.fail_on_data_loss,
            max_records_per_batch=self.opts.max_records_per_arrow_batch,
            poll_timeout_ms=self.opts.poll_timeout_ms,
        )

    def stop(self) -> None:
        if self._driver_state is not None:
            self._driver_state.close()


def _whole_match(pattern: str | None) -> str | None:
    """kafka-python matches a pattern at the start of a topic name; Java (and our option)
    match the whole name."""
    return None if pattern is None else f"(?:{pattern})\\Z"


def _as_json(offset) -> str | None:
    if offset is None:
        return None
    if isinstance(offset, str):
        return offset
    return StreamOffset.from_json(offset).to_json()
