"""Backfills that can commit: a batch plan resolved in the driver, read, written, then committed.

``spark.read.format("groupkafka")`` plans inside a Spark Python worker and never commits. A
backfill that must commit its end offsets to the group (or share work with other backfills
through the group) resolves its plan here, in the user's driver process, with the same
planning functions (:func:`spark_groupsource.batch.resolve_ranges`), and hands Spark the
resolved numbers as explicit JSON offsets::

    from spark_groupsource.backfill import BackfillPlan

    with BackfillPlan.resolve(options) as plan:      # options as for spark.read
        df = plan.read(spark)                        # startingOffsets/endingOffsets = the plan
        df.write.parquet(out)
        plan.commit()                                # only after the write succeeded

Plain plan (``groupCoordinated`` false): ``commit()`` commits the ends of the partitions it
read with a client that is not a group member (OffsetCommit with generation -1). A Kafka
coordinator accepts such a commit only when the group has no live members; otherwise it
answers UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS, which is turned into
:class:`UnsafeCommitError`. (Checked on both dev brokers: librdkafka's mock, which lacks
DescribeGroups, and Tansu, whose DescribeGroups lists no members, refuse it the same way.)
It also never moves a group's committed offset backwards.

Group-coordinated plan (``groupCoordinated=true``): the driver joins the group as a full
member (same assignors as the stream), waits until the assignment is settled (no rebalance
and no change for ``settle_s``), and plans only the partitions assigned to it, from the
group's committed offsets (``startingOffsets`` where nothing is committed) to the end. It
stays in the group until ``close()``, holding off the revocation of the planned partitions
(the membership's drain hand-shake) until ``commit()``, which commits with its generation.
Several backfills started together thus split the partitions; one started later waits for
the running ones to commit and then reads only what is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from spark_groupsource import config as opt
from spark_groupsource.config.access import authorization_error
from spark_groupsource.errors import (
    AuthorizationError,
    BrokerError,
    CommitError,
    GroupKafkaError,
    MembershipError,
)
from spark_groupsource.group.factory import build_membership
from spark_groupsource.planning.batch_plan import offsets_json, resolve_ranges
from spark_groupsource.planning.offset_reader import reader_for
from spark_groupsource.ranges import OffsetRange

__all__ = ["BackfillCommit", "BackfillPlan", "UnsafeCommitError", "commit_plain"]

log = logging.getLogger("spark_groupsource.backfill")

#: Options replaced by the resolved plan in :meth:`BackfillPlan.read_options`.
_PLAN_KEYS = frozenset(
    {
        "subscribe",
        "subscribepattern",
        "startingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingoffsets",
        "endingtimestamp",
        "endingoffsetsbytimestamp",
        "groupcoordinated",
        "commitoffsets",
    }
)
_UNSAFE_CODES = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


class UnsafeCommitError(CommitError):
    """Committing would overwrite the position of partitions that a live member owns."""


@dataclass(frozen=True)
class BackfillCommit:
    """What :meth:`BackfillPlan.commit` did: offsets committed, partitions left alone (why)."""

    group: str
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)
    skipped: Mapping[TopicPartition, str] = field(default_factory=dict)

    def __str__(self) -> str:
        done = ", ".join(f"{tp}@{o}" for tp, o in sorted(self.committed.items())) or "nothing"
        out = f"group {self.group}: committed {done}"
        if self.skipped:
            out += "; skipped " + ", ".join(f"{tp} ({why})" for tp, why in sorted(self.skipped.items()))
        return out


class BackfillPlan:
    """A batch plan resolved in the driver process; see the module docstring."""

    def __init__(
        self,
        opts: opt.BatchOptions,
        ranges: list[OffsetRange],
        raw: Mapping[str, str] | None = None,
        membership: Any = None,
        serials: Mapping[TopicPartition, int] | None = None,
        generation: int | None = None,
    ):
        self.opts = opts
        self.ranges = tuple(ranges)
        self._raw = dict(raw) if raw is not None else None
        self._membership = membership
        self._serials = dict(serials or {})
        self.generation = generation
        self.committed: BackfillCommit | None = None

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def resolve(
        cls,
        options: Mapping[str, str],
        *,
        settle_s: float | None = None,
        assignment_timeout_s: float | None = None,
        leader_sync_delay_ms: int | None = None,
    ) -> BackfillPlan:
        """Parse ``options`` (as for ``spark.read``) and resolve the plan now."""
        raw = {str(k).lower(): str(v) for k, v in options.items()}
        opts = opt.parse_batch_options(raw)
        return cls.from_options(
            opts, raw=raw, settle_s=settle_s, assignment_timeout_s=assignment_timeout_s,
            leader_sync_delay_ms=leader_sync_delay_ms,
        )

    @classmethod
    def from_options(
        cls,
        opts: opt.BatchOptions,
        *,
        raw: Mapping[str, str] | None = None,
        settle_s: float | None = None,
        assignment_timeout_s: float | None = None,
        leader_sync_delay_ms: int | None = None,
    ) -> BackfillPlan:
        """Resolve a plan from parsed options. Coordinated plans: ``settle_s`` (default two
        heartbeat intervals plus 1 s) is how long the assignment must stay unchanged before
        planning; ``leader_sync_delay_ms`` works around the librdkafka mock's SyncGroup quirk."""
        if not opts.group_coordinated:
            with reader_for(opts) as view:
                return cls(opts, resolve_ranges(opts, view), raw)
        # None: the option's value (the member factory falls back to it)
        return cls._coordinated(opts, raw, settle_s, assignment_timeout_s, leader_sync_delay_ms)

    @classmethod
    def _coordinated(cls, opts, raw, settle_s, assignment_timeout_s, leader_sync_delay_ms) -> BackfillPlan:
        heartbeat_s = opt.heartbeat_interval_ms(opts.session_timeout_ms, opts.heartbeat_interval_ms) / 1000.0
        settle = settle_s if settle_s is not None else 2 * heartbeat_s + 1.0
        timeout = assignment_timeout_s if assignment_timeout_s is not None else opts.group_join_timeout_ms / 1000.0
        membership = build_membership(opts, leader_sync_delay_ms=leader_sync_delay_ms)
        membership.start()
        try:
            with reader_for(opts) as view:
                view.check_access()  # a refused login or TLS handshake: said now, not after the join bound
                snap = _settled(membership, opts, settle, timeout, view)
                owned = set(snap.owned)
                committed = view.committed(opts.group_id or "", owned)
                override = {tp: off for tp, off in committed.items() if off is not None}
                ranges = resolve_ranges(opts, view, only=owned, start_override=override)
            reading = [TopicPartition(r.topic, r.partition) for r in ranges if r.size > 0]
            # Hold off revocation of what we read until commit() or close().
            membership.batch_planned(reading)
        except BaseException:
            membership.close()
            raise
        log.info(
            "group %s: backfill generation %d owns %s; reads %s",
            opts.group_id, snap.generation, sorted(map(str, owned)),
            ", ".join(str(r) for r in ranges if r.size) or "nothing",
        )
        return cls(opts, ranges, raw, membership, {tp: snap.owned[tp] for tp in owned}, snap.generation)

    # ---- what the plan reads -----------------------------------------------------------
    @property
    def coordinated(self) -> bool:
        return self.opts.group_coordinated

    @property
    def group(self) -> str | None:
        return self.opts.group_id

    def starting_offsets(self) -> dict[TopicPartition, int]:
        return {TopicPartition(r.topic, r.partition): r.start for r in self.ranges}

    def ending_offsets(self) -> dict[TopicPartition, int]:
        return {TopicPartition(r.topic, r.partition): r.until for r in self.ranges}

    @property
    def records(self) -> int:
        """Offsets in the plan (records, unless the log has gaps)."""
        return sum(r.size for r in self.ranges)

    def read_options(self) -> dict[str, str]:
        """Options for ``spark.read.format("groupkafka")`` that read exactly this plan."""
        if self._raw is None:
            raise ValueError("read_options() needs a plan made with BackfillPlan.resolve(options)")
        out = {k: v for k, v in self._raw.items() if k not in _PLAN_KEYS}
        out["subscribe"] = ",".join(sorted({r.topic for r in self.ranges}))
        out["startingOffsets"] = offsets_json(self.starting_offsets())
        out["endingOffsets"] = offsets_json(self.ending_offsets())
        return out

    def read(self, spark: Any) -> Any:
        """The DataFrame of this plan (``spark.read`` with :meth:`read_options`)."""
        return spark.read.format("groupkafka").options(**self.read_options()).load()

    def describe(self) -> str:
        parts = [r for r in self.ranges if r.size]
        return (
            f"{self.records} offsets in {len(parts)} partitions: "
            + (", ".join(str(r) for r in parts) or "nothing")
        )

    # ---- commit --------------------------------------------------------------------------
    def commit(self) -> BackfillCommit:
        """Commit the end offsets of the partitions this plan read. Call after the write."""
        if self.committed is not None:
            return self.committed
        group = self.opts.group_id
        if not group:
            raise CommitError("cannot commit a backfill without kafka.group.id")
        ends = {TopicPartition(r.topic, r.partition): r.until for r in self.ranges if r.size > 0}
        if self._membership is not None:
            result = self._commit_member(group, ends)
        else:
            result = commit_plain(self.opts, group, ends)
        self.committed = result
        return result

    def _commit_member(self, group: str, ends: dict[TopicPartition, int]) -> BackfillCommit:
        m = self._membership
        try:
            res = m.commit(ends, self._serials)
        finally:
            m.batch_completed()
        if res.lost or res.failed or res.skipped:
            bad = sorted(map(str, res.lost | res.failed | res.skipped))
            why = res.error or "the partitions are no longer assigned to this backfill"
            raise CommitError(
                f"group {group}: could not commit {', '.join(bad)} with generation {self.generation} "
                f"({why}); another member now owns them and reads them again from the last commit"
            )
        return BackfillCommit(group, {tp: ends[tp] for tp in sorted(res.committed)})

    def close(self) -> None:
        """Leave the group (coordinated plans). Uncommitted partitions are re-read by their next owner."""
        m, self._membership = self._membership, None
        if m is not None:
            m.batch_completed()
            m.close()

    def __enter__(self) -> BackfillPlan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BackfillPlan(group={self.group!r}, coordinated={self.coordinated}, {self.describe()})"


def _settled(membership: Any, opts: opt.BatchOptions, settle_s: float, timeout_s: float, view: Any) -> Any:
    """Wait until joined and the assignment has not changed (nor rebalanced) for ``settle_s``."""
    group = opts.group_id
    deadline = time.monotonic() + timeout_s
    if not membership.wait_for_assignment(timeout_s):
        unreachable = view.reachable()
        what = (f"no broker answered ({unreachable})" if unreachable is not None
                else f"the brokers answer, but the join never completed ({membership.describe()})")
        raise MembershipError(
            f"group {group!r}: no assignment within {timeout_s:.0f}s (groupJoinTimeoutMs) through "
            f"bootstrap servers {opts.bootstrap_servers}: {what}"
        )
    last_key, stable_since = None, time.monotonic()
    while True:
        snap = membership.snapshot()
        key = (snap.generation, frozenset(snap.owned))
        now = time.monotonic()
        if snap.rebalancing or key != last_key:
            last_key, stable_since = (None if snap.rebalancing else key), now
        elif now - stable_since >= settle_s:
            return snap
        if now > deadline:
            raise MembershipError(f"group {group!r}: assignment did not settle within {timeout_s:.0f}s")
        time.sleep(0.1)


def commit_plain(opts: opt.CommonOptions, group: str, ends: Mapping[TopicPartition, int]) -> BackfillCommit:
    """Commit ``ends`` to ``group`` without joining it; refused when the group has live members.

    Partitions whose committed offset is already beyond the end are left alone (a backfill
    never moves a group backwards). The committed offsets are read with the offset reader, not
    the committing consumer: a consumer that may not describe the group hears of it only in
    poll(), so its committed() waited out its timeout; the reader fails at once, naming the ACL.
    """
    if not ends:
        return BackfillCommit(group)
    try:
        with reader_for(opts) as view:
            current = view.committed(group, sorted(ends))
    except BrokerError as exc:
        raise CommitError(f"group {group}: cannot read committed offsets: {exc}") from exc
    except AuthorizationError as exc:
        if "GROUP_AUTHORIZATION_FAILED" not in str(exc):
            raise
        # the reader names what it was refused (DESCRIBE); committing needs READ, which implies it
        raise authorization_error(opts.security, "Group", group, "READ (OffsetFetch, OffsetCommit)",
                                  opts.bootstrap_servers, "its committed offsets could not be read") from None
    skipped: dict[TopicPartition, str] = {}
    todo: dict[TopicPartition, int] = {}
    for tp in sorted(ends):
        at = current.get(tp)
        if at is not None and at > ends[tp]:
            skipped[tp] = f"group already at {at}"
        else:
            todo[tp] = ends[tp]
    if skipped:
        log.warning("group %s: not moving committed offsets backwards: %s", group,
                    ", ".join(f"{tp} {why}" for tp, why in sorted(skipped.items())))
    if not todo:
        return BackfillCommit(group, {}, skipped)
    consumer = Consumer({**opt.fetcher_config(opts), "group.id": group})
    try:
        try:
            result = consumer.commit(
                offsets=[CkTP(tp.topic, tp.partition, off) for tp, off in sorted(todo.items())],
                asynchronous=False,
            )
        except KafkaException as exc:
            raise _commit_error(opts, group, exc.args[0]) from exc
        for ck in result or []:
            if ck.error is not None:
                raise _commit_error(opts, group, ck.error)
    finally:
        consumer.close()
    log.info("group %s: committed backfill %s", group,
             ", ".join(f"{tp}@{off}" for tp, off in sorted(todo.items())))
    return BackfillCommit(group, todo, skipped)


def _commit_error(opts: opt.CommonOptions, group: str, err: Any) -> GroupKafkaError:
    code = err.code() if hasattr(err, "code") else None
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return authorization_error(opts.security, "Group", group, "READ (OffsetCommit)",
                                   opts.bootstrap_servers, err.str() if hasattr(err, "str") else str(err))
    if code in _UNSAFE_CODES:
        return UnsafeCommitError(
            f"group {group} has live members (the coordinator refused a non-member commit: {err}); "
            "committing would overwrite the positions of partitions they own. Stop the group's "
            "consumers first, or run the backfill with groupCoordinated=true so it joins the group"
        )
    return CommitError(f"group {group}: commit failed: {err}")
