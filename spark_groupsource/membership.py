"""The driver's membership in the consumer group.

kafka-python drives the classic group protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) from its IO thread; this module keeps a membership-only consumer
(every partition paused, no Fetch) polled from one background thread, runs our
assignors when the coordinator elects us leader, and exposes what the stream
planner needs: which partitions we own now (with an acquisition serial, so a
partition that comes back is never resumed from a stale position), commits that
report fencing, and the drain hand-shake that lets an in-flight micro-batch
finish and commit before its partitions are given up.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka import errors as kerr
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.structs import MemberState
from kafka.structs import TopicPartition as KpTP

from assignment.base import Assignor
from assignment.errors import AssignmentError
from assignment.model import RebalanceProtocol, TopicPartition
from assignment.redundant import RedundantAssignor, primary_partitions
from spark_groupsource.assignor_bridge import (
    BridgedAssignor,
    perform_assignment,
    rebalance_protocol_of,
)
from spark_groupsource.errors import GroupUnreachableError, MembershipError

log = logging.getLogger("spark_groupsource.membership")

_FENCES = (kerr.IllegalGenerationError, kerr.UnknownMemberIdError, kerr.FencedInstanceIdError)
# OffsetCommit answers that mean "the coordinator moved or is busy": look it up again and retry
_COORDINATOR_MOVED = (kerr.NotCoordinatorError, kerr.CoordinatorNotAvailableError, kerr.RequestTimedOutError)
_RETRY_SAME = (kerr.CoordinatorLoadInProgressError,)


@dataclass(frozen=True)
class MembershipConfig:
    group_id: str
    assignors: tuple[Assignor, ...]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    group_instance_id: str | None = None
    client_rack: str | None = None
    # kafka-python keyword arguments (bootstrap, security, timeouts); may hold secrets
    client_config: Mapping[str, object] = field(default_factory=dict, repr=False)
    poll_interval_ms: int = 100
    # Workaround for brokers (librdkafka's mock cluster) that reject a follower's
    # SyncGroup arriving after the leader's: the leader waits this long before syncing.
    leader_sync_delay_ms: int = 0
    # How long the member may go without reaching the cluster, without a coordinator, or
    # (first join) without an assignment before raise_if_failed() reports it (issue #8).
    join_timeout_ms: int = 120_000


@dataclass(frozen=True)
class Snapshot:
    """What the planner may rely on right now."""

    generation: int
    member_id: str
    protocol: str | None
    # partition -> acquisition serial (changes each time we newly acquire it)
    owned: Mapping[TopicPartition, int]
    # partitions whose offsets this member may commit (redundant: primaries only)
    committable: frozenset[TopicPartition]
    rebalancing: bool
    revoking: frozenset[TopicPartition]


@dataclass(frozen=True)
class CommitResult:
    committed: frozenset[TopicPartition] = frozenset()
    lost: frozenset[TopicPartition] = frozenset()  # fenced: ownership gone, not retried
    failed: frozenset[TopicPartition] = frozenset()  # other errors: retried with the next batch
    skipped: frozenset[TopicPartition] = frozenset()  # not ours (any more) or not primary
    error: str | None = None


@dataclass(frozen=True)
class MembershipStatus:
    """What the member has reached, and since when (``time.time()`` seconds; None: never)."""

    cluster_reached_at: float | None
    coordinator_found_at: float | None  # last time a coordinator became known
    coordinator_missing_since: float | None  # None while a coordinator is known
    assigned_at: float | None  # first completed join (SyncGroup applied)
    stable: bool


@dataclass
class _CommitOutcome:
    done: set[TopicPartition]
    failed: set[TopicPartition]  # kept and retried later
    fenced: set[TopicPartition]
    error: BaseException | None


@dataclass
class Counters:
    commits: int = 0
    commit_failures: int = 0
    fenced_commits: int = 0
    partitions_lost: int = 0
    rebalances: int = 0
    drain_timeouts: int = 0


def _kp(tp: TopicPartition) -> KpTP:
    return KpTP(tp.topic, tp.partition)


def _ours(tp) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


class _Listener(AsyncConsumerRebalanceListener):
    """Runs on kafka-python's IO thread; awaits (never blocks) while batches drain."""

    def __init__(self, owner: GroupMembership):
        self.owner = owner

    async def on_partitions_revoked(self, revoked):
        await self.owner._revoke({_ours(tp) for tp in revoked})

    async def on_partitions_assigned(self, assigned):
        self.owner._assigned({_ours(tp) for tp in assigned})

    async def on_partitions_lost(self, lost):
        self.owner._lost({_ours(tp) for tp in lost}, "membership lost (session expired or fenced)")


def _servers(client_config: Mapping[str, object]) -> str:
    """Bootstrap servers for messages (never any other configuration: it may hold secrets)."""
    raw = client_config.get("bootstrap_servers", "localhost:9092")
    return ",".join(raw) if isinstance(raw, (list, tuple)) else str(raw)


class _Reach:
    """Monotonic bookkeeping of what the member reached, for status() and the join bound."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.cluster_at: float | None = None
        self.coordinator_at: float | None = None
        self.coordinator_missing: float | None = self.started
        self.assigned_at: float | None = None

    def observe(self, bootstrapped: bool, coordinator: bool, assigned: bool) -> None:
        now = time.monotonic()
        if bootstrapped and self.cluster_at is None:
            self.cluster_at = now
        if coordinator:
            if self.coordinator_missing is not None:
                self.coordinator_at = now
            self.coordinator_missing = None
        elif self.coordinator_missing is None:
            self.coordinator_missing = now
        if assigned and self.assigned_at is None:
            self.assigned_at = now

    def overdue(self, join_bound_s: float, first_join_bound_s: float) -> str | None:
        """Which step is later than its bound (None: all within bounds)."""
        now = time.monotonic()
        if self.cluster_at is None:
            if now - self.started > join_bound_s:
                return "bootstrap"
            return None
        if self.coordinator_missing is not None and now - self.coordinator_missing > join_bound_s:
            return "coordinator"
        if self.assigned_at is None and now - self.started > first_join_bound_s:
            return "assignment"
        return None

    @staticmethod
    def wall(mono: float | None) -> float | None:
        return None if mono is None else time.time() - (time.monotonic() - mono)


class GroupMembership:
    """One member of one group, for the lifetime of a streaming query run."""

    def __init__(self, config: MembershipConfig, drain_timeout_s: float = 60.0):
        if not config.assignors:
            raise MembershipError("at least one assignor is required")
        self.config = config
        self.drain_timeout_s = drain_timeout_s
        self.counters = Counters()
        self._assignors = {a.name: a for a in config.assignors}
        self._protocol = rebalance_protocol_of(list(config.assignors))
        self._cond = threading.Condition()
        self._owned: dict[TopicPartition, int] = {}
        self._serial = itertools.count(1)
        self._revoking: set[TopicPartition] = set()
        self._inflight: frozenset[TopicPartition] = frozenset()
        # offsets whose commit failed for a non-fencing reason: partition -> (offset, serial)
        self._pending: dict[TopicPartition, tuple[int, int | None]] = {}
        self._commit_lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: KafkaConsumer | None = None
        self._error: BaseException | None = None
        self._bridges: list[BridgedAssignor] = []
        # set once our listener has applied a SyncGroup result: kafka-python marks the member
        # STABLE just before it calls the listener
        self._assignment_seen = threading.Event()
        self._reach = _Reach()
        client = dict(config.client_config)
        self._request_timeout_s = int(client.get("request_timeout_ms", 30_000)) / 1000.0
        self._retry_backoff_s = max(0.05, int(client.get("retry_backoff_ms", 100)) / 1000.0)
        # the first join may legitimately wait for other members' rebalance timeout
        self._first_join_bound_s = max(
            config.join_timeout_ms, int(client.get("max_poll_interval_ms", 300_000)) + 5_000
        ) / 1000.0

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self._bridges = [BridgedAssignor(a, self._owned_for_metadata, cfg.client_rack) for a in cfg.assignors]
        kwargs = dict(cfg.client_config)
        session = int(kwargs.get("session_timeout_ms", 45_000))
        # Java's rule of thumb: heartbeat at most a third of the session timeout
        kwargs.setdefault("heartbeat_interval_ms", max(100, min(3_000, session // 3)))
        kwargs.update(
            group_id=cfg.group_id,
            group_instance_id=cfg.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=self._bridges,
        )
        if cfg.client_rack:
            kwargs.setdefault("client_rack", cfg.client_rack)
        try:
            consumer = KafkaConsumer(**kwargs)
        except kerr.KafkaError as exc:
            raise MembershipError(f"cannot create the group client for group {cfg.group_id!r}: {exc}") from exc
        coord = consumer._coordinator

        def _perform(leader_id, protocol_name, members):
            try:
                encoded, topics = perform_assignment(self._assignors, coord._cluster, protocol_name, members)
            except AssignmentError as exc:
                # a configuration the group cannot satisfy (e.g. more redundant replicas than
                # members, co-partitioned topics of different sizes): fail the query clearly
                # instead of rejoining forever
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                raise
            if cfg.leader_sync_delay_ms and len(members) > 1:
                time.sleep(cfg.leader_sync_delay_ms / 1000.0)
            # what kafka-python's own leader path does, so its metadata watch keeps working
            coord._subscription.group_subscribe(topics)
            coord._cluster.set_topics(coord._subscription.group_subscription())
            coord._cluster.request_update()
            coord._is_leader = True
            coord._assignment_snapshot = coord._metadata_snapshot
            return encoded

        coord._perform_assignment = _perform
        listener = _Listener(self)
        if cfg.pattern:
            consumer.subscribe(pattern=cfg.pattern, listener=listener)
        else:
            consumer.subscribe(topics=list(cfg.topics), listener=listener)
        self._consumer = consumer
        self._thread = threading.Thread(target=self._run, name=f"groupkafka-member-{cfg.group_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        interval = self.config.poll_interval_ms / 1000.0
        while not self._closed.is_set():
            try:
                started = time.monotonic()
                consumer.poll(timeout_ms=self.config.poll_interval_ms, max_records=1)
                # poll() returns at once while a join is in flight: do not spin (the GIL is
                # shared with kafka-python's IO thread, which does the actual work)
                rest = interval - (time.monotonic() - started)
                if rest > 0:
                    self._closed.wait(rest)
                # Never call into the consumer while holding self._cond: kafka-python runs our
                # listener on its IO thread, which takes self._cond (lock-order deadlock).
                self._recover_orphaned_join(consumer._coordinator)
                self._check_reach(consumer._coordinator)
                assigned = consumer.assignment()
                if assigned:
                    paused = consumer.paused()
                    todo = [tp for tp in assigned if tp not in paused]
                    if todo:
                        consumer.pause(*todo)
            except Exception as exc:  # noqa: BLE001 - kept for the planner to raise
                if self._closed.is_set():
                    break
                log.warning("group %s: membership loop error: %s", self.config.group_id, exc)
                if isinstance(exc, (kerr.GroupAuthorizationFailedError, kerr.InconsistentGroupProtocolError,
                                    kerr.FencedInstanceIdError, kerr.InvalidSessionTimeoutError)):
                    with self._cond:
                        self._error = exc
                        self._cond.notify_all()
                    return
                time.sleep(0.2)

    def _check_reach(self, coord) -> None:
        """Record what the member reached; past the bound, fail with what could not be reached."""
        self._reach.observe(
            bootstrapped=bool(coord._manager.bootstrapped),
            # known and connected: kafka-python finds a dead coordinator again and again
            coordinator=(node := coord.coordinator_id) is not None and coord._client.connected(node),
            assigned=self._assignment_seen.is_set(),
        )
        bound_s = self.config.join_timeout_ms / 1000.0
        step = self._reach.overdue(bound_s, self._first_join_bound_s)
        if step is None or self._error is not None:
            return
        group, servers = self.config.group_id, _servers(self.config.client_config)
        if step == "bootstrap":
            what = (f"could not reach any bootstrap server ({servers}) within {bound_s:.0f}s "
                    "(tried to connect and fetch metadata, with backoff)")
        elif step == "coordinator":
            what = (f"no group coordinator for {bound_s:.0f}s (bootstrap servers {servers}; tried "
                    "FindCoordinator and connecting to the coordinator, with backoff)")
        else:
            what = (f"coordinator found but no assignment within {self._first_join_bound_s:.0f}s "
                    f"(bootstrap servers {servers}; JoinGroup/SyncGroup did not complete)")
        exc = GroupUnreachableError(f"group {group!r}: {what}. Check that the brokers are up and "
                                    f"reachable, or raise groupJoinTimeoutMs. State: {self.describe()}")
        exc.step = step
        log.error("%s", exc)
        with self._cond:
            self._error = exc
            self._cond.notify_all()

    def status(self) -> MembershipStatus:
        r, c = self._reach, self._consumer
        return MembershipStatus(
            cluster_reached_at=r.wall(r.cluster_at),
            coordinator_found_at=r.wall(r.coordinator_at),
            coordinator_missing_since=r.wall(r.coordinator_missing),
            assigned_at=r.wall(r.assigned_at),
            stable=bool(c is not None and c._coordinator.generation_if_stable() is not None),
        )

    @staticmethod
    def _recover_orphaned_join(coord) -> None:
        """kafka-python 3.0.12 forgets a join whose result arrived after poll()'s timer ran out
        when the rejoin was caused by a metadata change (the leader's snapshots match again
        once it has assigned): the member then sits in REBALANCING until its session expires.
        Seen as: state REBALANCING, join task done, no rejoin needed. Ask for a fresh join."""
        task = getattr(coord, "_join_task", None)
        if (
            coord.state is MemberState.REBALANCING
            and task is not None
            and task.is_done
            and not coord.need_rejoin()
        ):
            log.info("group %s: recovering a join whose result was not picked up", coord.group_id)
            coord.rejoin_needed = True

    def close(self) -> None:
        """Leave the group (dynamic members; static ones keep their assignment) and stop."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._consumer is not None:
            try:
                # kafka-python sends LeaveGroup only for dynamic members (static ones keep
                # their assignment across a restart within the session timeout)
                self._consumer.close(autocommit=False)
            except Exception as exc:  # noqa: BLE001
                log.warning("group %s: error while leaving: %s", self.config.group_id, exc)
        log.info("group %s: left the group", self.config.group_id)

    # ---- state for the planner -------------------------------------------------------
    def raise_if_failed(self) -> None:
        err = self._error
        if isinstance(err, MembershipError):
            raise err
        if err is not None:
            raise MembershipError(f"group {self.config.group_id!r}: {err}") from err

    def snapshot(self) -> Snapshot:
        self.raise_if_failed()
        consumer = self._consumer
        gen = consumer._coordinator._generation if consumer else None
        with self._cond:
            owned = dict(self._owned)
            revoking = frozenset(self._revoking)
        committable = frozenset(owned)
        protocol = gen.protocol if gen is not None else None
        bridge = next((b for b in self._bridges if b.name == protocol), None)
        if bridge is not None and bridge.last_assignment is not None and isinstance(bridge.assignor, RedundantAssignor):
            committable = primary_partitions(bridge.last_assignment) & committable
        rebalancing = bool(consumer and consumer._coordinator.rebalance_in_progress()) or bool(revoking)
        return Snapshot(
            generation=gen.generation_id if gen is not None else -1,
            member_id=gen.member_id if gen is not None else "",
            protocol=protocol,
            owned=owned,
            committable=committable,
            rebalancing=rebalancing,
            revoking=revoking,
        )

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Block until the first rebalance completed (or timeout); True when joined."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.raise_if_failed()
            c = self._consumer
            if (
                c is not None
                and self._assignment_seen.is_set()
                and c._coordinator.state is MemberState.STABLE
                and not c._coordinator.rebalance_in_progress()
            ):
                return True
            time.sleep(0.05)
        return False

    def describe(self) -> str:
        """One line of state for errors and logs (no configuration: it may hold secrets)."""
        c = self._consumer
        coord = c._coordinator if c is not None else None
        with self._cond:
            owned, revoking = len(self._owned), len(self._revoking)
        return (
            f"group {self.config.group_id!r}: state={getattr(coord, 'state', None)} "
            f"generation={getattr(coord, '_generation', None)} "
            f"rebalancing={coord.rebalance_in_progress() if coord else None} "
            f"assignment_seen={self._assignment_seen.is_set()} owned={owned} revoking={revoking} "
            f"error={self._error!r}"
        )

    # ---- the drain hand-shake ---------------------------------------------------------
    def batch_planned(self, partitions: Iterable[TopicPartition]) -> bool:
        """Record the batch about to run; False (nothing recorded) when a revocation started
        since the planner looked, so the planner must not hand that batch to Spark."""
        parts = frozenset(partitions)
        with self._cond:
            if self._revoking & parts:
                return False
            self._inflight = parts
            return True

    def batch_completed(self) -> None:
        with self._cond:
            self._inflight = frozenset()
            self._cond.notify_all()

    @property
    def cooperative(self) -> bool:
        """KIP-429: partitions not being revoked keep flowing through a rebalance."""
        return self._protocol is RebalanceProtocol.COOPERATIVE

    def may_plan(self, snap: Snapshot | None = None) -> bool:
        """Eager: no new batch while a rebalance is under way. Cooperative: always (the
        planner leaves out the partitions being revoked; commits that meet the rebalance are
        kept and sent once it is over)."""
        if self.cooperative:
            return True
        return not (snap or self.snapshot()).rebalancing

    async def _revoke(self, revoked: set[TopicPartition]) -> None:
        """Give partitions up only after the batch reading them has completed and committed."""
        if not revoked:
            return
        with self._cond:
            self._revoking |= revoked
        deadline = time.monotonic() + self.drain_timeout_s
        flusher: threading.Thread | None = None
        net = self._consumer._coordinator._net if self._consumer else None
        while True:
            with self._cond:
                busy = self._inflight & revoked
                unsent = set(self._pending) & revoked
            if self._closed.is_set():
                break
            if not busy:
                if not unsent:
                    break
                # offsets kept from a commit that met the rebalance: one more try now that
                # the batch is done (the planner may be busy with a long batch elsewhere)
                if flusher is None:
                    flusher = threading.Thread(target=self.flush_pending, daemon=True,
                                               name=f"groupkafka-flush-{self.config.group_id}")
                    flusher.start()
                elif not flusher.is_alive():
                    log.warning("group %s: giving up %d revoked partitions whose last commit failed: "
                                "the next owner re-reads from the group's offset (at-least-once)",
                                self.config.group_id, len(unsent))
                    break
            if time.monotonic() > deadline:
                self.counters.drain_timeouts += 1
                log.warning(
                    "group %s: in-flight batch did not complete and commit within %.0fs; giving up %d "
                    "partitions uncommitted: the next owner re-reads from the last commit (at-least-once)",
                    self.config.group_id, self.drain_timeout_s, len(busy | unsent),
                )
                break
            if net is not None:
                await net.sleep(0.05)
            else:  # pragma: no cover
                time.sleep(0.05)
        with self._cond:
            for tp in revoked:
                self._owned.pop(tp, None)
                self._pending.pop(tp, None)
            self._revoking -= revoked
            self.counters.rebalances += 1
        log.info("group %s: revoked %s", self.config.group_id, sorted(map(str, revoked)))

    def _assigned(self, added: set[TopicPartition]) -> None:
        with self._cond:
            for tp in added:
                if tp not in self._owned:
                    self._owned[tp] = next(self._serial)
        self._assignment_seen.set()
        if self._consumer is not None and added:
            try:
                self._consumer.pause(*[_kp(tp) for tp in added])
            except Exception:  # noqa: BLE001 - the loop pauses anything left
                pass
        log.info("group %s: assigned %s", self.config.group_id, sorted(map(str, added)))

    def _lost(self, lost: set[TopicPartition], why: str) -> None:
        with self._cond:
            gone = [tp for tp in lost if self._owned.pop(tp, None) is not None]
            for tp in lost:
                self._pending.pop(tp, None)
            self._revoking -= lost
            self.counters.partitions_lost += len(gone)
        if gone:
            log.warning("group %s: lost %d partitions (%s): %s", self.config.group_id, len(gone), why,
                        sorted(map(str, gone)))

    def _owned_for_metadata(self) -> tuple[frozenset[TopicPartition], int]:
        with self._cond:
            owned = frozenset(self._owned)
        consumer = self._consumer
        gen = consumer._coordinator._generation.generation_id if consumer is not None else -1
        if self._protocol is RebalanceProtocol.EAGER:
            return frozenset(), gen
        return owned, gen

    # ---- offsets -----------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int], serials: Mapping[TopicPartition, int] | None = None) -> CommitResult:
        """Commit with our member id and generation; only partitions we still own.

        ``serials`` (partition -> acquisition serial when the range was planned) keeps us
        from committing a position planned under an earlier ownership. Offsets that fail for
        a reason other than fencing (a rebalance under way, the coordinator moving) are kept
        and sent again with the next commit or ``flush_pending``, as long as the partition
        stays ours under the same acquisition.
        """
        with self._commit_lock:  # one commit at a time: a stale offset must never land last
            snap = self.snapshot()
            with self._cond:
                todo = dict(self._pending)
            for tp, off in offsets.items():
                todo[tp] = (off, None if serials is None else serials.get(tp, -1))
            mine, skipped = {}, set()
            for tp, (off, serial) in todo.items():
                if tp in snap.committable and (serial is None or snap.owned.get(tp) == serial):
                    mine[tp] = off
                else:
                    skipped.add(tp)
            if not mine:
                self._settle_pending(skipped)
                return CommitResult(skipped=frozenset(skipped))
            outcome = self._send_commit(mine)
            if outcome.fenced:
                self._settle_pending(set(outcome.done))
                return self._fenced(outcome.fenced, skipped, outcome.error, committed=set(outcome.done))
            if outcome.failed:
                self._settle_pending(set(outcome.done))
                return self._deferred(outcome.failed, todo, skipped, outcome.error, committed=set(outcome.done))
            self._settle_pending(set(mine) | skipped)
            self.counters.commits += 1
            log.info("group %s: committed %s", self.config.group_id,
                     ", ".join(f"{tp}@{off}" for tp, off in sorted(mine.items())))
            return CommitResult(committed=frozenset(mine), skipped=frozenset(skipped))

    def _send_commit(self, offsets: dict[TopicPartition, int]) -> _CommitOutcome:
        """OffsetCommit with our generation, bounded by the request timeout.

        Sent by us rather than through ``KafkaConsumer.commit``: kafka-python requests a rejoin
        when a commit is refused with REBALANCE_IN_PROGRESS, and every retry of the refused
        commit then adds one (a rebalance storm under churn). Here a refusal only keeps the
        offsets. A moved or loading coordinator is looked up again and the commit retried with
        backoff until the request timeout; whatever is left then is kept for the next commit.
        """
        consumer = self._consumer
        assert consumer is not None
        coord = consumer._coordinator
        deadline = time.monotonic() + self._request_timeout_s
        todo = dict(offsets)
        done: set[TopicPartition] = set()
        last: BaseException | None = None
        while True:
            gen = coord.generation_if_stable()
            if gen is None:
                return _CommitOutcome(done, set(todo), set(),
                                      last or kerr.RebalanceInProgressError("member is rebalancing"))
            left_ms = (deadline - time.monotonic()) * 1000
            answers: dict[TopicPartition, type] = {}
            try:
                if coord.coordinator() is None:
                    if not coord.ensure_coordinator_ready(timeout_ms=max(1, left_ms)):
                        raise kerr.CoordinatorNotAvailableError("no coordinator within the commit timeout")
                    left_ms = (deadline - time.monotonic()) * 1000
                answers = coord._net.run(self._commit_request, coord, gen, todo, max(1, left_ms))
            except (kerr.KafkaError, OSError) as exc:
                last = exc
                if isinstance(exc, _FENCES):
                    self._after_fence(coord, gen, type(exc))
                    return _CommitOutcome(done, set(), set(todo), exc)
                if not isinstance(exc, kerr.CoordinatorNotAvailableError):
                    coord.coordinator_dead(exc)
            else:
                fenced = {tp for tp, err in answers.items() if issubclass(err, _FENCES)}
                done |= {tp for tp, err in answers.items() if err is kerr.NoError}
                for tp in done:
                    todo.pop(tp, None)
                if fenced:  # a fence is group-wide: nothing left of this commit can land
                    err = next(answers[tp] for tp in fenced)
                    self._after_fence(coord, gen, err)
                    return _CommitOutcome(done, set(), set(todo), err())
                if not todo:
                    return _CommitOutcome(done, set(), set(), None)
                errors = {answers[tp] for tp in todo}
                last = next(iter(errors))()
                if any(issubclass(e, _COORDINATOR_MOVED) for e in errors):
                    coord.coordinator_dead(last)
                elif not all(issubclass(e, _RETRY_SAME) for e in errors):
                    # REBALANCE_IN_PROGRESS and anything else: keep, do not retry now
                    return _CommitOutcome(done, set(todo), set(), last)
            if time.monotonic() + self._retry_backoff_s >= deadline or self._closed.is_set():
                return _CommitOutcome(done, set(todo), set(), last)
            time.sleep(self._retry_backoff_s)

    def _after_fence(self, coord, gen, err: type) -> None:
        """What Java's coordinator does on a fenced commit: our generation is gone, rejoin (a
        fenced static instance is fatal: another process holds our group.instance.id)."""
        if issubclass(err, kerr.FencedInstanceIdError):
            with self._cond:
                self._error = MembershipError(
                    f"group {self.config.group_id!r}: static member {self.config.group_instance_id!r} was "
                    "fenced (FENCED_INSTANCE_ID): another consumer uses the same kafka.group.instance.id")
                self._cond.notify_all()
        elif issubclass(err, kerr.IllegalGenerationError):
            coord.reset_generation(member_id=gen.member_id)
        else:
            coord.reset_generation()

    @staticmethod
    async def _commit_request(coord, gen, offsets: dict[TopicPartition, int], timeout_ms: float):
        """One OffsetCommit round trip on kafka-python's IO loop: partition -> error class."""
        node = coord.coordinator()
        if node is None:
            raise kerr.CoordinatorNotAvailableError("coordinator unknown")
        by_topic: dict[str, dict[int, int]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = off
        topic_t = OffsetCommitRequest.OffsetCommitRequestTopic
        part_t = topic_t.OffsetCommitRequestPartition
        request = OffsetCommitRequest(
            max_version=8,
            group_id=coord.group_id,
            generation_id_or_member_epoch=gen.generation_id,
            member_id=gen.member_id,
            group_instance_id=coord.group_instance_id,
            topics=[topic_t(name=t, partitions=[
                part_t(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                for p, o in sorted(ps.items())]) for t, ps in sorted(by_topic.items())],
        )
        future = coord._manager.send(request, node_id=node)
        response = await coord._manager.wait_for(future, timeout_ms)
        out: dict[TopicPartition, type] = {}
        for topic, partitions in response.topics:
            for partition, code in partitions:
                out[TopicPartition(topic, partition)] = kerr.for_code(code)
        for tp in offsets:  # a partition the broker left out of its answer is not committed
            out.setdefault(tp, kerr.UnknownError)
        return out

    def flush_pending(self) -> CommitResult | None:
        """Send the offsets kept from failed commits once the generation is stable again;
        None when there is nothing to send or the member is still rebalancing."""
        with self._cond:
            if not self._pending:
                return None
        consumer = self._consumer
        if consumer is None or consumer._coordinator.generation_if_stable() is None:
            return None
        return self.commit({})

    def pending(self) -> dict[TopicPartition, int]:
        with self._cond:
            return {tp: off for tp, (off, _) in self._pending.items()}

    def _settle_pending(self, done: set[TopicPartition]) -> None:
        with self._cond:
            for tp in done:
                self._pending.pop(tp, None)
            self._cond.notify_all()

    def _deferred(self, mine, todo, skipped, exc, committed=frozenset()) -> CommitResult:
        self.counters.commit_failures += 1
        with self._cond:
            for tp in skipped:
                self._pending.pop(tp, None)
            for tp in mine:
                if tp in self._owned:  # not revoked or lost meanwhile
                    self._pending[tp] = todo[tp]
            self._cond.notify_all()
        log.warning("group %s: commit of %d partitions failed (%s); kept and retried once the group "
                    "is stable", self.config.group_id, len(mine), exc)
        return CommitResult(committed=frozenset(committed), failed=frozenset(mine), skipped=frozenset(skipped),
                            error=str(exc))

    def _fenced(self, mine, skipped, exc, committed=frozenset()) -> CommitResult:
        self.counters.fenced_commits += 1
        self._settle_pending(set(mine) | skipped)
        self._lost(set(mine), f"commit fenced: {type(exc).__name__}")
        log.warning("group %s: commit fenced (%s); %d partitions marked lost, not retried",
                    self.config.group_id, exc, len(mine))
        return CommitResult(committed=frozenset(committed), lost=frozenset(mine), skipped=frozenset(skipped),
                            error=str(exc))

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = {_kp(tp) for tp in partitions}
        if not parts:
            return {}
        coord = self._consumer._coordinator
        bound_ms = self.config.join_timeout_ms
        try:  # kafka-python retries a moved or loading coordinator with backoff within the bound
            found = coord.fetch_committed_offsets(parts, timeout_ms=bound_ms)
        except kerr.KafkaTimeoutError as exc:
            err = GroupUnreachableError(
                f"group {self.config.group_id!r}: could not read the group's committed offsets within "
                f"{bound_ms / 1000:.0f}s (OffsetFetch to the coordinator, bootstrap servers "
                f"{_servers(self.config.client_config)}, retried with backoff). Check that the brokers "
                "are up, or raise groupJoinTimeoutMs.")
            err.step = "coordinator"
            raise err from exc
        out: dict[TopicPartition, int | None] = {}
        for tp in parts:
            om = found.get(tp)
            out[_ours(tp)] = om.offset if om is not None and om.offset >= 0 else None
        return out
