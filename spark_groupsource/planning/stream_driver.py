"""The stream's driver-side state machine: what the next micro-batch reads, and its commit.

One :class:`StreamDriver` lives in Spark's long-lived driver-side Python runner for a query
(created on the first driver call, never pickled): it owns the group member, the offset reader
and the positions of the partitions this member owns. Spark's reader methods
(:mod:`spark_groupsource.stream`) call it and nothing else.

Completion signal: Spark runs micro-batches one after another, so when
``latestOffset(start, ...)`` is called, the batch that ended at ``start`` has
completed and been recorded. That is where its offsets are committed to the
group; Spark's own ``commit(end)`` arrives one batch later and is a fallback.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

from assignment.model import TopicPartition
from spark_groupsource import config as opt
from spark_groupsource.errors import BrokerError, DataLossError, MembershipError, OptionError
from spark_groupsource.group import history
from spark_groupsource.group.factory import build_membership
from spark_groupsource.group.seam import Membership
from spark_groupsource.logs import configure_worker_logging
from spark_groupsource.metrics import registry as metrics_registry
from spark_groupsource.metrics.state import (
    SKIP_DATA_LOSS,
    SKIP_RESET_LATEST,
    MetricsSnapshot,
    QueryMetrics,
    reading_of,
    secret_values,
    snapshot_of,
)
from spark_groupsource.planning.admission import (
    MinRowsGate,
    available_records,
)
from spark_groupsource.planning.late_batch import lost_ranges, resume_late_batches
from spark_groupsource.planning.offset_reader import reader_for
from spark_groupsource.planning.offsets import (
    StreamOffset,
    first_batch_end,
    has_new_data,
    plan_ranges,
    trim_replay,
)
from spark_groupsource.planning.outage import Unavailability

log = logging.getLogger("spark_groupsource.stream")

#: How long one trigger of a running stream waits for a pause that passes by itself (a join, a
#: rebalance, offsets briefly unreadable) before it reports no batch.
PAUSE_WAIT_S = 30.0
#: while the brokers answer a member waiting past groupJoinTimeoutMs, how often to ask them again
REACH_RECHECK_S = 10.0


@dataclass
class DataLossCounters:
    """Records skipped under failOnDataLoss=false, as seen by the driver's planner."""

    batches: int = 0
    offsets_skipped: int = 0
    rewound: int = 0  # partitions found beyond their log end, read again from their log start


@dataclass
class ResetSkips:
    """Records left out on purpose by ``kafka.auto.offset.reset=latest``: a partition that
    existed when the query first planned, acquired later with no offset in the group."""

    partitions: int = 0
    offsets_skipped: int = 0


class StreamDriver:
    """Driver-only state: group membership, the offset reader, positions, planned batches."""

    def __init__(self, opts: opt.StreamOptions, membership: Membership | None = None, reader=None):
        """``membership`` and ``reader`` replace the group member and the offset reader
        (unit tests of the planner, through the membership seam)."""
        configure_worker_logging()
        self.opts = opts
        self.metrics = _serve_metrics(opts)  # None unless metrics.port: then nothing below costs a thing
        self.membership: Membership = membership or build_membership(opts)
        self.reader = reader or reader_for(opts)
        self.outage = Unavailability(opts.broker_outage_timeout_ms / 1000.0)
        self.data_loss = DataLossCounters()
        self.reset_skips = ResetSkips()
        # topic -> partition count when the query first planned (StreamOffset.known): set by
        # the first plan of a new query, or read back from the checkpoint's offsets
        self.known: dict[str, int] | None = None
        self.lock = threading.RLock()
        # partition -> (next offset, acquisition serial it was planned under)
        self.positions: dict[TopicPartition, tuple[int, int]] = {}
        # offsets JSON planned by this process -> (serial per partition at planning time, the
        # ranges it was written from: complete() need not parse the JSON back)
        self.planned: dict[str, tuple[dict[TopicPartition, int], dict]] = {}
        self.recovered: StreamOffset | None = None  # last batch logged by an earlier run
        self.replayed: dict[TopicPartition, tuple[int, int]] | None = None  # what its replay read
        self.fresh_query = False  # initialOffset was called: startingOffsets applies
        self.answered = False  # latestOffset has answered once in this process (answer())
        self.planned_any = False
        self.started_positions = False
        self.caps: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow snapshot
        self.waiting_on: str | None = None  # why the last plan() had no batch, if it will pass
        self.latest_seen: dict[TopicPartition, int] = {}
        self.hold: tuple[float, int] | None = None  # (since, generation) after a refused commit
        # partition -> (end of the last batch completed while we owned it, generation then)
        self.completed: dict[TopicPartition, tuple[int, int]] = {}
        # partition -> (offset, acquisition serial) this member's last accepted commit sent
        self.committed_by_us: dict[TopicPartition, tuple[int, int]] = {}
        self.late: dict[TopicPartition, tuple[int, int]] = {}  # batches completed after their partitions left (late_batch)
        self.gate = MinRowsGate(opts.max_trigger_delay_ms)  # minOffsetsPerTrigger / maxTriggerDelay
        self.closed = False
        self.started_at = time.monotonic()
        self._join_wait_said = False  # the wait past groupJoinTimeoutMs for a rebalance was logged
        self._answered_at: float | None = None  # monotonic time of the last probe a broker answered
        self.membership.start()
        if self.metrics is not None:
            metrics_registry.register(id(self), self.metrics_snapshot)
        if reader is None:
            # Meanwhile librdkafka asks for metadata once: a refused login or TLS handshake is
            # said at once. kafka-python sometimes sees only "socket disconnected" when a broker
            # closes a refused PLAIN login (measured on Kafka 4.0.1), and would retry.
            try:
                self.reader.check_access()
            except BaseException:
                self.membership.close()
                raise
        if membership is None:
            self._install_shutdown_hooks()
        first_wait = min(opts.group_join_timeout_ms / 1000.0, max(30.0, (opts.session_timeout_ms or opt.DEFAULT_SESSION_TIMEOUT_MS) / 500.0))
        self.joined = self.membership.wait_for_assignment(timeout_s=first_wait)
        if not self.joined:
            log.warning("group %s: not joined yet; batches start once the group assigns partitions "
                        "(the query fails after groupJoinTimeoutMs=%d)", opts.group_id, opts.group_join_timeout_ms)

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
        metrics_registry.unregister(id(self))
        self.membership.close()
        self.reader.close()

    # -- metrics (metrics.port) ------------------------------------------------------------
    def metrics_snapshot(self) -> MetricsSnapshot:
        """The query's numbers now: what the planner published, and the member's own counts
        (read on the endpoint's thread: nothing here takes the planner's lock)."""
        m = self.membership
        try:
            snap = m.snapshot()
            generation, assigned = snap.generation, len(snap.owned)
        except Exception:  # noqa: BLE001 - a failed member has no generation; its error is the query's
            generation, assigned = -1, 0
        try:
            silence = m.coordinator_silence_s()
        except Exception:  # noqa: BLE001 - a client being closed
            silence = None
        reading = reading_of(m.counters, generation, assigned, silence, time.monotonic())
        skipped = {SKIP_DATA_LOSS: self.data_loss.offsets_skipped, SKIP_RESET_LATEST: self.reset_skips.offsets_skipped}
        return snapshot_of(self.metrics, reading, skipped)

    # -- the commit hook -------------------------------------------------------------------
    def complete(self, start_json: str | None) -> None:
        """The batch that ended at ``start`` is done: commit it (if we planned it) and release drains."""
        if not start_json:
            self.membership.batch_completed()
            return
        mine = self.planned.pop(start_json, None)
        if mine is None:
            start = StreamOffset.from_json(start_json)
            if start.ranges and self.recovered is None and not self.planned_any:
                # logged by an earlier run of this query; where its replay was trimmed, what
                # the replay read (a partition left out is the group's again)
                self.recovered = StreamOffset(self.replayed) if self.replayed is not None else start
            self.membership.batch_completed()
            return
        serials, ranges = mine
        for key in list(self.planned):  # older batches (replayed or superseded) are done too
            self.planned.pop(key)
        snap = self.membership.snapshot()
        self.late.update(lost_ranges(ranges, serials, snap.owned))
        for tp, (_, until) in ranges.items():
            if tp in serials and snap.owned.get(tp) == serials[tp]:
                self.completed[tp] = (until, snap.owned_generation)
            else:
                self.completed.pop(tp, None)  # lost or re-acquired meanwhile: the group decides
        if self.opts.commit_offsets:
            # an offset this member has already committed under the same acquisition is left
            # out: the group holds it (nobody else commits a partition we own), and re-sending
            # it cost an OffsetCommit of every owned partition per trigger (1,000 records in
            # __consumer_offsets for a batch that read three)
            offsets = {tp: until for tp, (_, until) in ranges.items()
                       if tp in serials and self.committed_by_us.get(tp) != (until, serials[tp])}
            result = self.membership.commit(offsets, serials)
            for tp in result.committed:
                if tp in offsets:
                    self.committed_by_us[tp] = (offsets[tp], serials[tp])
            self._forget_lost(result)
        self.membership.batch_completed()

    def _forget_lost(self, result) -> None:
        if result is None:
            return
        if result.error and self.metrics is not None:
            self.metrics.failed(result.error)
        for tp in result.lost:
            self.positions.pop(tp, None)
            self.completed.pop(tp, None)
            self.committed_by_us.pop(tp, None)
        if result.failed and _means_rebalance(result.error) and not self.membership.cooperative:
            # The coordinator refused the commit because a rebalance started: that is the
            # first sign of it (the heartbeat may learn it seconds later). Eager: plan nothing
            # more, or the next owner would re-read two batches instead of one.
            if self.hold is None:
                self.hold = (time.monotonic(), self.membership.snapshot().generation)
                log.info("group %s: commit refused, a rebalance is starting: no new batch until it is over",
                         self.opts.group_id)

    def _held(self, generation: int) -> bool:
        """True while a refused commit says a rebalance is starting that the membership has not
        seen yet; released by the new generation, a successful resend, or the bound."""
        if self.hold is None:
            return False
        since, held_generation = self.hold
        session = self.opts.session_timeout_ms or opt.DEFAULT_SESSION_TIMEOUT_MS
        bound_s = min(session, 3 * opt.heartbeat_interval_ms(session, self.opts.heartbeat_interval_ms)) / 1000.0
        if generation != held_generation or not self.membership.pending() or time.monotonic() - since > bound_s:
            self.hold = None
            return False
        return True

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

    def _existed_at_start(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` was a partition of the subscription when the query first planned
        (unknown counts as yes: the rule then falls back to ``kafka.auto.offset.reset``)."""
        return self.known is None or tp.partition < self.known.get(tp.topic, 0)

    def _unclaimed_position(self, tp: TopicPartition, low: int, high: int) -> int:
        """Where a partition starts that the group holds no offset for. Added since the query
        first planned (or its topic began to match the pattern since): at its earliest offset,
        as Spark's source starts new partitions, since every record in it was written after
        the query began. Otherwise ``kafka.auto.offset.reset``, as a Java consumer would; what
        ``latest`` leaves out is logged and counted, never silent."""
        if not self._existed_at_start(tp):
            log.info("group %s: %s was added after the query first planned (%s had %d partitions then) and the "
                     "group has no offset for it: it starts at its earliest offset %d", self.opts.group_id, tp,
                     tp.topic, self.known.get(tp.topic, 0), low)
            return low
        pos = self._reset_position(tp, low, high)
        if low is not None and pos > low:
            self.reset_skips.partitions += 1
            self.reset_skips.offsets_skipped += pos - low
            log.warning("group %s: %s has no committed offset in the group: kafka.auto.offset.reset=%s starts it "
                        "at %d, leaving out offsets [%d, %d) (%d offsets in %d partitions so far); set "
                        "kafka.auto.offset.reset=earliest to read them", self.opts.group_id, tp,
                        self.opts.auto_offset_reset, pos, low, pos, self.reset_skips.offsets_skipped,
                        self.reset_skips.partitions)
        return pos

    def _learn_known(self, offset_json: str | None) -> bool:
        """Fix ``known`` before anything is planned: from the offsets an earlier run logged, or,
        on a new query (or a checkpoint written before offsets carried it), from the
        subscription's partitions now. False while the cluster's metadata cannot be read."""
        if self.known is not None:
            return True
        if offset_json:
            logged = StreamOffset.from_json(offset_json)
            if logged.known is not None:
                self.known = dict(logged.known)
                return True
        try:
            self.known = self._subscription_counts()
        except BrokerError as exc:
            self.waiting_on = f"the subscription's partitions cannot be listed yet ({exc})"
            return False
        if offset_json and not self.fresh_query:
            log.info("group %s: the checkpoint's offsets do not say which partitions the query began with: the "
                     "%d partitions of its subscription now count as existing", self.opts.group_id,
                     sum(self.known.values()))
        return True

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

    def _kept_position(self, tp: TopicPartition, committed: int | None, generation: int) -> int | None:
        """Where we stopped reading ``tp``, when we owned it in the generation just before this
        one (so nobody else did in between) and read past the group's offset: a ``redundant``
        replica that becomes the primary, or a member whose last commit met the rebalance. The
        records below it were read in completed batches; re-reading them from the group's older
        offset would cost a handover more than one micro-batch of duplicates."""
        done = self.completed.get(tp)
        if done is None or done[1] != generation - 1 or (committed is not None and done[0] <= committed):
            return None
        log.info("group %s: %s continues from offset %d, where this member's last completed batch "
                 "ended in the previous generation (the group's offset: %s)",
                 self.opts.group_id, tp, done[0], committed)
        return done[0]

    def resolve_positions(
        self, owned: Mapping[TopicPartition, int], marks: Mapping[TopicPartition, tuple[int, int]],
        generation: int = -1,
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
        """Where each owned partition reads next, and why the others cannot be planned now. A
        partition acquired since the last plan starts from the group's committed offset (or the
        starting options); when the group's coordinator cannot answer, it is left out of this
        batch and asked again next time."""
        fresh = [tp for tp, serial in owned.items() if self._acquired_since_last_plan(tp, serial)]
        out = {tp: self.positions[tp][0] for tp in owned if tp not in fresh}
        if not fresh:
            return out, {}
        answer = self.reader.try_committed(self.opts.group_id, fresh, retries=0)
        committed = answer.found
        use_starting = self.fresh_query and not self.started_positions
        self._by_time: dict[TopicPartition, int | None] = {}
        if use_starting and isinstance(self.opts.starting, opt.TimestampOffsets):
            stamps = {tp: self.opts.starting.timestamp_for(tp.topic, tp.partition) for tp in fresh}
            self._by_time = self.reader.for_timestamps({tp: ts for tp, ts in stamps.items() if ts is not None})
        unclaimed: dict[TopicPartition, int] = {}  # no group offset: where they start, committed below
        for tp in sorted(fresh):
            if tp not in committed:
                continue  # the coordinator did not answer: planned once it does
            low, high = marks[tp]
            got = committed.get(tp)
            rec = self.recovered.ranges.get(tp) if self.recovered is not None else None
            if rec is not None and (got is None or rec[0] <= got <= rec[1]):
                # the replayed batch was ours and nobody advanced the group since: keep it
                pos = rec[1]
                if got != rec[1] and self.opts.commit_offsets:
                    self.membership.commit({tp: rec[1]}, {tp: owned[tp]})
            elif use_starting and self._existed_at_start(tp):
                pos = self._starting_position(tp, got, low, high)
            else:
                pos = got if got is not None else self._unclaimed_position(tp, low, high)
                kept = self._kept_position(tp, got, generation)
                if kept is not None:
                    pos = kept
            out[tp] = pos
            self.positions[tp] = (pos, owned[tp])
            if got is None and rec is None:
                unclaimed[tp] = pos
            log.info("group %s: %s starts at offset %d (committed: %s)", self.opts.group_id, tp, pos, got)
        self._commit_start(unclaimed, owned)
        if not answer.missing:
            self.started_positions = True
            self.recovered = None
        return out, answer.missing

    def _commit_start(self, starts: Mapping[TopicPartition, int], owned: Mapping[TopicPartition, int]) -> None:
        """Commit where partitions the group had no offset for start, as a Java consumer's
        auto-commit commits a reset position: should one be handed over before a batch of ours
        reads it, the next owner goes on from there instead of resetting again (with
        ``latest``, past every record written in between)."""
        if not starts or not self.opts.commit_offsets:
            return
        serials = {tp: owned[tp] for tp in starts}
        result = self.membership.commit(dict(starts), serials)
        for tp in result.committed:
            self.committed_by_us[tp] = (starts[tp], serials[tp])

    def _check_data_loss(self, positions: dict[TopicPartition, int],
                         marks: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """A position below the log start (retention, deleted records) or past the end (topic
        recreated, log truncated) means records are gone: fail before any data moves, or with
        failOnDataLoss=false log the partitions and ranges skipped, count them and go on at
        once. Below the log start: from the log start, as Spark's source does. Past the end:
        from the log start too (chaos finding 15). The topic was deleted and re-created (every
        record in it is new: going on from the end skipped what was written into it before
        this plan), or its log was truncated by an unclean election (the offsets above the end
        will be written again): the log start loses nothing either way, at worst re-reads."""
        # the few partitions with a gap, in order (not a sort of every position per trigger)
        # (a log start of None was not asked: the position is at the end)
        gone = sorted(tp for tp, pos in positions.items()
                      if pos > marks[tp][1] or (marks[tp][0] is not None and pos < marks[tp][0]))
        skipped, rewound = [], []
        for tp in gone:
            pos = positions[tp]
            low, high = marks[tp]
            if pos > high:
                detail = (f"position {pos} is beyond the end offset {high}: the topic was deleted and re-created, "
                          "or its log truncated")
                if self.opts.fail_on_data_loss:
                    raise DataLossError(tp.topic, tp.partition, pos, None, detail)
                new = low if low is not None else 0
                rewound.append((tp, pos, new, high))
            else:
                detail = f"offsets [{pos}, {low}) are below the log start offset {low} (retention or deleted records)"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(tp.topic, tp.partition, pos, low, detail)
                new = low
                skipped.append((tp, pos, new, detail))
            positions[tp] = new
            self.positions[tp] = (new, self.positions[tp][1])  # resolve_positions set every owned one
        if rewound:
            self.data_loss.rewound += len(rewound)
            log.warning(
                "group %s: %d partitions are beyond their log end (the topic was deleted and re-created, or its log "
                "truncated): with failOnDataLoss=false they are read again from their log start, whose records "
                "are new if the topic was re-created and read twice if the log was truncated (%d partitions so "
                "far): %s", self.opts.group_id, len(rewound), self.data_loss.rewound,
                "; ".join(f"{tp} at {pos}, log [{new}, {high})" for tp, pos, new, high in rewound),
            )
        if skipped:
            count = sum(max(0, new - pos) for _, pos, new, _ in skipped)
            self.data_loss.batches += 1
            self.data_loss.offsets_skipped += count
            log.warning(
                "group %s: data loss: skipping %d offsets in this micro-batch because "
                "failOnDataLoss=false (%d skipped since the query started): %s",
                self.opts.group_id, count, self.data_loss.offsets_skipped,
                "; ".join(f"{tp} [{pos}, {new}): {detail}" for tp, pos, new, detail in skipped),
            )

    def _check_joined(self) -> None:
        """Fail, within groupJoinTimeoutMs, a query that never got an assignment, saying what
        could not be reached, instead of staying ACTIVE and reading nothing."""
        if self.joined:
            return
        self.joined = self.membership.wait_for_assignment(timeout_s=0.05)
        waited = time.monotonic() - self.started_at
        if self.joined or waited * 1000 < self.opts.group_join_timeout_ms:
            return
        unreachable = self._reachable()
        bound_ms = opt.first_join_bound_ms(self.opts.group_join_timeout_ms, self.opts.max_poll_interval_ms)
        if unreachable is None and waited * 1000 < bound_ms:
            # the brokers answer: the group's rebalance may be waiting for another member to give
            # up its partitions at the end of its batch (chaos clock_jumps, 2026-12-02: a's revoke
            # barrier held 184 s and b failed here at 120 s while the member's own bound was 305 s)
            if not self._join_wait_said:
                self._join_wait_said = True
                log.warning("group %s: no assignment after %.0f s although the brokers answer: the group's "
                            "rebalance waits for its other members to rejoin (up to their "
                            "kafka.max.poll.interval.ms); this member waits up to %.0f s",
                            self.opts.group_id, waited, bound_ms / 1000.0)
            return
        if unreachable is not None:
            what = (f"no broker answered ({unreachable}) with {self.opts.security.describe()}; check the "
                    "addresses, that they are the listeners of that protocol, and kafka.security.protocol")
        else:
            what = ("the brokers answer, but the group's coordinator never completed a join for this member "
                    f"({self.membership.describe()})")
        raise MembershipError(
            f"group {self.opts.group_id!r} got no assignment within groupJoinTimeoutMs="
            f"{self.opts.group_join_timeout_ms} through bootstrap servers {self.opts.bootstrap_servers}: {what}"
        )

    def _reachable(self) -> str | None:
        """The brokers' answer for the join wait, probed at most every REACH_RECHECK_S while they
        answer (a trigger comes every second or so, each probe a metadata request); a probe that
        found none is never reused, so the query fails only on a fresh one."""
        now = time.monotonic()
        if self._answered_at is not None and now - self._answered_at < REACH_RECHECK_S:
            return None
        unreachable = self.reader.reachable()
        self._answered_at = now if unreachable is None else None
        return unreachable

    def _check_outage(self) -> None:
        overdue = self.outage.overdue()
        if not overdue:
            return
        tp = min(overdue, key=lambda t: overdue[t].since)
        misses = {t: a.reason for t, a in overdue.items()}
        raise BrokerError(
            self.reader.unavailable_message(
                "the offsets or committed offsets", misses, sum(a.misses for a in overdue.values()),
                since_s=self.outage.age_s(tp),
            ) + f"; brokerOutageTimeoutMs={self.opts.broker_outage_timeout_ms} ran out"
        )

    # -- Trigger.AvailableNow ------------------------------------------------------------------
    def snapshot_available_now(self) -> None:
        """The ends an AvailableNow run reads up to, taken as it starts: once the member holds
        its assignment (waited for up to groupJoinTimeoutMs, as the first plan would), the ends
        of what it owns and of every other partition of the subscription. A partition created
        later, or whose leader is away now, gets its end the first time its end is read."""
        self.membership.wait_for_assignment(self.opts.group_join_timeout_ms / 1000.0)
        marks = self.reader.try_watermarks(set(self.membership.snapshot().owned) | self._subscribed_now())
        self.caps = {tp: hi for tp, (_, hi) in marks.found.items()}
        log.info("group %s: AvailableNow reads up to %s", self.opts.group_id,
                 {str(tp): off for tp, off in sorted(self.caps.items())})

    def _subscribed_now(self) -> set[TopicPartition]:
        """Every partition of the subscription on the cluster now (none when the metadata cannot
        be read). An AvailableNow run caps them all at its start, as Spark's source does: the
        group may give this member more later (a rebalance; a leader whose metadata lacked a
        topic created just before the join assigns nothing at first: seen in a clean-clone CI
        run on the mock, where the run then read records written after it began)."""
        try:
            counts = self._subscription_counts()
        except BrokerError as exc:
            log.info("group %s: AvailableNow caps only the owned partitions: %s", self.opts.group_id, exc)
            return set()
        return {TopicPartition(t, p) for t, n in counts.items() for p in range(n)}

    def _subscription_counts(self) -> dict[str, int]:
        """topic -> partition count of every subscribed topic on the cluster now (a subscribed
        topic that does not exist counts 0: all its partitions will be new)."""
        sub = self.opts.subscription
        topics = self.reader.topics(getattr(sub, "topics", ()))
        if isinstance(sub, opt.SubscribeTopics):
            return {t: topics.get(t, 0) for t in sub.topics}
        return {t: n for t, n in topics.items() if not t.startswith("__") and sub.matches(t)}

    def plan_available_now(self, start_json: str | None, max_rows: int | None,
                           sleep=time.sleep) -> str | None:
        """Spark ends an AvailableNow run at the first plan without a batch, so a pause that
        passes by itself (no assignment yet, a rebalance, a partition leader away) must not
        read as "caught up": wait it out, bounded by groupJoinTimeoutMs (the join and outage
        bounds inside plan() still raise first), then fail rather than end having read less."""
        return self.plan_through_pauses(start_json, max_rows, None,
                                        bound_s=self.opts.group_join_timeout_ms / 1000.0,
                                        fail=True, sleep=sleep)

    def plan_stream(self, start_json: str | None, max_rows: int | None, min_rows: int | None,
                    sleep=time.sleep) -> str | None:
        """A trigger of a running stream. ``processAllAvailable()`` returns at the first trigger
        without a batch, so a pause that passes by itself must not look caught up there either:
        the trigger waits it out, up to PAUSE_WAIT_S (a long rebalance then shows as empty
        triggers; the join and outage bounds inside plan() still raise)."""
        return self.plan_through_pauses(start_json, max_rows, min_rows,
                                        bound_s=min(PAUSE_WAIT_S, self.opts.group_join_timeout_ms / 1000.0),
                                        fail=False, sleep=sleep)

    def answer(self, end_json: str) -> str:
        """What ``latestOffset`` answers for a plan that ended at ``end_json``: that, except on a
        new query's first answer, batch 0's end, which carries ``known`` (``first_batch_end``)."""
        with self.lock:
            if self.fresh_query and not self.answered:
                end_json = first_batch_end(end_json, self.known)
            self.answered = True
            return end_json

    def plan_through_pauses(self, start_json: str | None, max_rows: int | None, min_rows: int | None,
                            *, bound_s: float, fail: bool, sleep=time.sleep) -> str | None:
        """plan() again every 0.2 s while it has no batch for a reason that passes by itself
        (``waiting_on``), up to ``bound_s``; then report no batch, or raise when ``fail``."""
        deadline = time.monotonic() + bound_s
        logged = None
        while True:
            end = self.plan(start_json, max_rows, min_rows)
            if end != start_json or self.waiting_on is None or self.closed:
                return end
            if time.monotonic() > deadline:
                if not fail:
                    return end
                raise MembershipError(
                    f"group {self.opts.group_id!r}: Trigger.AvailableNow could not plan its next batch "
                    f"within groupJoinTimeoutMs={self.opts.group_join_timeout_ms}: {self.waiting_on}"
                )
            if self.waiting_on != logged:
                log.info("group %s: the next micro-batch waits (%s)", self.opts.group_id, self.waiting_on)
                logged = self.waiting_on
            sleep(0.2)

    def _settled_assignment(self, poll_s: float = 0.02) -> frozenset[TopicPartition] | None:
        """What this member owns once no rebalance is under way, waited for up to a session
        timeout; None (unknown) before the first assignment, when the wait runs out, or when it
        owns nothing. An eager
        rebalance revokes everything until it ends: read then, the empty assignment said that
        another member owned every partition, and a restart's replay was left out whole (seen
        in a clean-clone CI run: the restarted member joined while its earlier run was still
        leaving the group, whose departure began a rebalance)."""
        if not self.joined:
            return None
        deadline = time.monotonic() + (self.opts.session_timeout_ms or opt.DEFAULT_SESSION_TIMEOUT_MS) / 1000.0
        while True:
            snap = self.membership.snapshot()
            if not snap.rebalancing:
                # owning nothing says nothing either: a first generation whose leader's metadata
                # lacked the topic assigns nothing (seen in a second CI run, replay read empty)
                return frozenset(snap.owned) if snap.owned else None
            if time.monotonic() >= deadline:
                log.info("group %s: still rebalancing; the replayed batch is kept whole", self.opts.group_id)
                return None
            time.sleep(poll_s)

    def replay_ranges(self, end_json: str) -> dict[TopicPartition, tuple[int, int]]:
        """The ranges to read for the last batch an earlier run of the query logged (Spark asks
        for them at restart: to replay the batch if it did not complete, else to re-plan it and
        discard the answer): what nobody in the group has read since (``trim_replay``).
        Without commits the group's offsets are not ours to go by: the replay stays whole."""
        with self.lock:
            logged_offset = StreamOffset.from_json(end_json)
            if self.known is None and logged_offset.known is not None:
                self.known = dict(logged_offset.known)
            logged = logged_offset.ranges
            wanted = {tp: r for tp, r in logged.items() if r[1] > r[0]}
            if not self.opts.commit_offsets or not wanted:
                return wanted
            owned = self._settled_assignment()
            answer = self.reader.try_committed(self.opts.group_id, wanted, retries=0)
            kept, left_out = trim_replay(wanted, answer.found, owned)
            for tp, why in sorted(left_out.items()):
                log.warning("group %s: the last batch an earlier run of this query logged, if Spark replays it, "
                            "leaves out %s [%d, %d): %s", self.opts.group_id, tp, *wanted[tp], why)
            for tp, (start, _until) in sorted(kept.items()):
                if start != wanted[tp][0]:
                    log.warning("group %s: the last batch an earlier run of this query logged, if Spark replays it, "
                                "reads %s from %d, not %d: the group read up to there meanwhile", self.opts.group_id, tp,
                                start, wanted[tp][0])
            self.replayed = kept
            return kept

    # -- planning ------------------------------------------------------------------------------
    def plan(self, start_json: str | None, max_rows: int | None, min_rows: int | None = None) -> str | None:
        """The next batch's end offsets, or ``start_json`` when there is none now; then
        ``waiting_on`` says why, when the reason will pass by itself (None: caught up)."""
        if self.metrics is None:
            return self._plan(start_json, max_rows, min_rows)
        try:
            end = self._plan(start_json, max_rows, min_rows)
        except Exception as exc:
            self.metrics.failed(exc)
            raise
        with self.lock:
            if end != start_json and end in self.planned:
                self.metrics.planned(self.planned[end][1])
            self.metrics.publish(self.positions, self.latest_seen, self.committed_by_us)
        return end

    def _plan(self, start_json: str | None, max_rows: int | None, min_rows: int | None) -> str | None:
        with self.lock:
            self.waiting_on = None
            asked = self._ask_ahead(start_json)
            self.complete(start_json)
            self.membership.polled(self.planned)  # kafka.max.poll.interval.ms: the query is back
            # offsets whose commit met a rebalance go out as soon as the generation is stable
            self._forget_lost(self.membership.flush_pending())
            if not self._learn_known(start_json):
                return start_json
            snap = self.membership.snapshot()
            self._check_joined()
            if not self.membership.may_plan(snap) or self._held(snap.generation):
                self.waiting_on = "the group is rebalancing"
                return start_json  # eager: plan nothing new while partitions are handed over
            if self.membership.pending() and not snap.rebalancing:
                # the coordinator has not accepted the last batch's offsets (it is away, or
                # moving): should this member turn out to be out of the group, every batch
                # planned meanwhile would be re-read by the next owner. One at most, as promised
                # (measured before: two per partition when the whole cluster restarted)
                self.waiting_on = "the group's coordinator has not accepted the last micro-batch's offsets yet"
                return start_json
            owned = _plannable(snap)
            for tp in [tp for tp in self.positions if tp not in owned]:
                self.positions.pop(tp)
            self.outage.forget(owned)
            resume_late_batches(self, owned)  # a batch that completed after its partitions left
            if not owned:
                if not self.joined:
                    self.waiting_on = "the group has not assigned partitions to this member yet"
                elif snap.generation < 0 or snap.rebalancing:
                    # out of the group (session expired, a join failed: no generation, not
                    # REBALANCING either) or rejoining: owning nothing now is not "caught up"
                    self.waiting_on = "this member is rejoining the group"
                return start_json
            # a partition whose leader (or the coordinator) is away sits this batch out
            marks = self.reader.try_watermarks(owned, retries=0, asked=asked,
                                               low_needed=self._low_needed(owned))
            positions, unresolved = self.resolve_positions({tp: owned[tp] for tp in marks.found}, marks.found,
                                                           snap.owned_generation)
            left_out = {**marks.missing, **unresolved}
            self.outage.update(left_out, positions)
            self._check_outage()
            if left_out:
                log.warning("group %s: leaving %d partitions out of this micro-batch, their offsets are "
                            "unreadable: %s", self.opts.group_id, len(left_out),
                            "; ".join(f"{tp}: {why}" for tp, why in sorted(left_out.items())[:5]))
            latest = {tp: marks.found[tp][1] for tp in positions}
            self.latest_seen = {tp: latest.get(tp, self.latest_seen.get(tp)) for tp in owned
                                if tp in latest or tp in self.latest_seen}
            self._check_data_loss(positions, marks.found)
            caps = None
            if self.caps is not None:
                # a partition not owned at the snapshot (the join had not delivered the
                # assignment yet, or a rebalance moved it here) is read up to its end when
                # first seen; capping it at its position would read nothing and end the run.
                # Every end read now counts, also of a partition that sits this batch out
                # (its committed offset unanswered): records written during the next batch
                # were not there when the run began
                for tp, (_, high) in marks.found.items():
                    self.caps.setdefault(tp, high)
                caps = {tp: self.caps[tp] for tp in positions}
            ranges = plan_ranges(positions, latest, max_rows, caps)
            if not has_new_data(ranges):
                if left_out:
                    self.waiting_on = f"the offsets of {len(left_out)} partitions are unreadable"
                return start_json
            if min_rows and caps is None and not self.gate.admit(
                    available_records(positions, latest), min_rows, time.monotonic() * 1000):
                return start_json  # minOffsetsPerTrigger: wait for more records or maxTriggerDelay
            planned_at = time.monotonic()  # before the check: an ownership ends after it (group/history.py)
            if not self.membership.batch_planned({tp: owned[tp] for tp, (s, u) in ranges.items() if u > s}):
                self.waiting_on = "a revocation began"
                return start_json  # a revocation began meanwhile: plan after the rebalance
            end = StreamOffset(ranges, self.known).to_json()
            history.record("plan", planned_at, member=snap.member_id, gen=snap.owned_generation,
                           protocol=snap.protocol, end=end)
            self.planned[end] = ({tp: owned[tp] for tp in ranges}, ranges)
            self.planned_any = True
            for tp, (_, until) in ranges.items():
                self.positions[tp] = (until, owned[tp])
            return end

    def _low_needed(self, owned: Mapping[TopicPartition, int]):
        """Which partitions' log start this plan needs: those acquired since the last plan (a
        reset or starting offset may use it) and those not at their end: records beyond the
        position, or a position past the end (the data-loss check). A partition at its end
        cannot have lost records below its position: the log start never passes the end."""
        def needed(tp: TopicPartition, end: int) -> bool:
            return self._acquired_since_last_plan(tp, owned[tp]) or self.positions[tp][0] != end
        return needed

    def _acquired_since_last_plan(self, tp: TopicPartition, serial: int) -> bool:
        """No position for this acquisition yet: it starts from the group's offset (or a reset)."""
        return self.positions.get(tp, (None, None))[1] != serial

    def _ask_ahead(self, start_json: str | None):
        """Send this plan's watermark query before the commit of the batch that ended at
        ``start``, so that the two round trips overlap (at 1,000 partitions the commit was 8-9
        ms of the 31-35 ms a trigger spent in latestOffset, docs/benchmarks.md). Its answer is
        taken only if the partitions owned after the commit are the ones asked for
        (``try_watermarks``); asked only when this call commits and the group lets it plan."""
        if not self.opts.commit_offsets or not start_json or start_json not in self.planned:
            return None
        snap = self.membership.snapshot()
        if snap.rebalancing or not self.membership.may_plan(snap):
            return None
        owned = _plannable(snap)
        if not owned:
            return None
        try:
            return self.reader.send_watermarks(owned, earliest=False)  # plan() asks starts it needs
        except Exception as exc:  # noqa: BLE001 - only a head start: the plan asks again itself
            log.debug("group %s: watermark query not sent ahead: %s", self.opts.group_id, exc)
            return None


def _serve_metrics(opts: opt.StreamOptions) -> QueryMetrics | None:
    """metrics.port: the query's metrics state, its endpoint listening (before anything joins:
    a port that cannot be had fails the query at its start, naming the option)."""
    if opts.metrics_port is None:
        return None
    from spark_groupsource.metrics.exporter import serve  # prometheus_client: only with metrics on

    try:
        serve(opts.metrics_port)
    except OSError as exc:
        raise OptionError("metrics.port", str(exc)) from exc
    return QueryMetrics(
        query=opts.metrics_query_name or opts.group_id or "", group=opts.group_id or "",
        protocol=opts.group_protocol,
        secrets=secret_values([*opts.kafka_params.items(), *opts.decode_params.items()]),
    )


def _plannable(snap) -> dict[TopicPartition, int]:
    """The partitions a plan may read (owned and not being revoked), with their serials; the
    watermark query sent ahead asks exactly these (``_ask_ahead``)."""
    return {tp: s for tp, s in snap.owned.items() if tp not in snap.revoking}


def _means_rebalance(error: str | None) -> bool:
    return bool(error) and ("RebalanceInProgress" in error or "REBALANCE_IN_PROGRESS" in error)


