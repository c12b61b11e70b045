"""The driver's membership in the consumer group, behind the ``seam.Membership`` interface.

``kafka_client.KafkaGroupClient`` (the only module that touches kafka-python) drives the
classic group protocol from kafka-python's IO thread; this module polls it from one
background thread, runs our assignors when the coordinator elects us leader, and exposes what
the stream planner needs: which partitions we own now (with an acquisition serial, so a
partition that comes back is never resumed from a stale position), commits that report
fencing, the drain hand-shake that lets an in-flight micro-batch finish and commit before its
partitions are given up, and a bounded wait for the cluster (``join_timeout_ms``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from assignment.base import Assignor
from assignment.errors import AssignmentError
from assignment.model import RebalanceProtocol, TopicPartition
from assignment.redundant import RedundantAssignor, primary_partitions
from spark_groupsource.config.access import (
    RefusalWatch,
    authorization_error,
    denied_answer,
    subscription_denied,
)
from spark_groupsource.config.options import first_join_bound_ms, heartbeat_interval_ms
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import (
    AuthorizationError,
    FencedError,
    GroupFullError,
    GroupUnreachableError,
    MembershipError,
)
from spark_groupsource.group import client_log, history, kafka_client
from spark_groupsource.group.assignor_bridge import (
    BridgedAssignor,
    perform_assignment,
    rebalance_protocol_of,
)
from spark_groupsource.group.group_full import group_full_error
from spark_groupsource.group.poll_interval import PollWatch, leave_warning
from spark_groupsource.group.seam import (
    CommitResult,
    Counters,
    MembershipStatus,
    OwnershipBook,
    Snapshot,
    raise_failure,
)
from spark_groupsource.group.touch import CoordinatorTouch

__all__ = ["CommitResult", "Counters", "GroupMembership", "MembershipConfig", "MembershipStatus", "Snapshot"]

#: The membership loop's pause while bootstrapping or joining.
_JOINING_POLL_S = 0.01
#: The longest the membership loop blocks inside kafka-python's poll().
_POLL_BLOCK_MS = 20

log = logging.getLogger("spark_groupsource.membership")


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
    # SyncGroup arriving after the leader's: the leader waits this long before syncing
    # (scheduled on the IO loop, never a sleep there).
    leader_sync_delay_ms: int = 0
    # Workaround for coordinators that answer each member's JoinGroup and SyncGroup on their
    # own timers (Tansu): after a cooperative revocation, the KIP-429 follow-up JoinGroup
    # waits this long (unless the group is already rebalancing), so that members still
    # completing the current generation get it. 0 (Kafka, as Java and librdkafka do); Tansu:
    # twice the members' heartbeat interval. Never a sleep on the IO loop.
    followup_join_delay_ms: int = 0
    # How long the member may go without reaching the cluster or without a coordinator (and,
    # at least this long, without a first assignment) before raise_if_failed() reports it.
    join_timeout_ms: int = 120_000
    # the security settings the client_config was rendered from (for refusal messages)
    security: SecurityConfig | None = None


class _Member:
    """A member of the group as the membership uses it (kept as kafka-python's members are)."""

    def __init__(self, member_id: str, group_instance_id: str | None, metadata: bytes):
        self.member_id, self.group_instance_id, self.metadata = member_id, group_instance_id, metadata


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
            return "bootstrap" if now - self.started > join_bound_s else None
        if self.coordinator_missing is not None and now - self.coordinator_missing > join_bound_s:
            return "coordinator"
        if self.assigned_at is None and now - self.started > first_join_bound_s:
            return "assignment"
        return None

    @staticmethod
    def wall(mono: float | None) -> float | None:
        # wall time for status() reports only (MembershipStatus); the bounds above are monotonic
        return None if mono is None else time.time() - (time.monotonic() - mono)


class GroupMembership:
    """One member of one group, for the lifetime of a streaming query run."""

    def __init__(self, config: MembershipConfig, drain_timeout_s: float = 60.0):
        if not config.assignors:
            raise MembershipError("at least one assignor is required")
        self.config = config
        client = dict(config.client_config)
        # The revoke barrier must end while the coordinator still waits for our JoinGroup: it
        # removes a member that has not rejoined within the rebalance timeout
        # (max.poll.interval.ms), counted from when the rebalance began there, which we learn
        # up to one heartbeat interval later. Measured on Kafka 4.0.1 with a barrier held past
        # it: the member was removed, the other member got every partition while the drain
        # still held them here, and a second rebalance followed (see test_kafka_coordinator).
        self.rebalance_timeout_s = int(client.get("max_poll_interval_ms", 300_000)) / 1000.0
        heartbeat_s = heartbeat_interval_ms(client.get("session_timeout_ms"), client.get("heartbeat_interval_ms")) / 1000.0
        bound = max(0.25 * self.rebalance_timeout_s, 0.8 * self.rebalance_timeout_s - heartbeat_s)
        self.drain_timeout_s = min(drain_timeout_s, bound)
        # the query's liveness: a micro-batch in flight longer than max.poll.interval.ms with no
        # plan since makes the member leave (poll_interval); the drain bound above is shorter
        self._poll = PollWatch(self.rebalance_timeout_s)
        self.counters = Counters()
        self._assignors = {a.name: a for a in config.assignors}
        self._protocol = rebalance_protocol_of(list(config.assignors))
        self._book = OwnershipBook()
        self._book.observer = self._history
        self._cond = self._book.cond
        self._commit_lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: kafka_client.KafkaGroupClient | None = None
        self._error: BaseException | None = None
        self._bridges: list[BridgedAssignor] = []
        # set once a SyncGroup result has been applied
        self._assignment_seen = threading.Event()
        # the broker, not our assignor, decides (KIP-848 group hosting us); warned once
        self._broker_assigns: str | None = None
        self._reach = _Reach()
        # rebalance marks for the metrics (_observe_rebalance): monotonic seconds, 0.0 for none
        self._revoke_began = 0.0
        self._marks_seen = 0.0
        # the coordinator unreachable said once, and its return, not silence for the whole cut
        # (spark_groupsource/group/touch.py)
        self._lapse_said = False  # the session lapse (may_plan) was logged
        self._touch = CoordinatorTouch(config.group_id, int(client.get("session_timeout_ms", 45_000)) / 1000.0)
        self._refusals = RefusalWatch(config.security, _servers(config.client_config), "kafka-python")
        self._request_timeout_s = int(client.get("request_timeout_ms", 30_000)) / 1000.0
        self._retry_backoff_s = max(0.05, int(client.get("retry_backoff_ms", 100)) / 1000.0)
        # the first join may legitimately wait for other members' rebalance timeout
        poll_interval = client.get("max_poll_interval_ms")
        self._first_join_bound_s = first_join_bound_ms(
            config.join_timeout_ms, int(poll_interval) if poll_interval is not None else None) / 1000.0

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self._bridges = [BridgedAssignor(a, self._owned_for_metadata, cfg.client_rack) for a in cfg.assignors]
        callbacks = kafka_client.Callbacks(
            revoked=self._revoke, assigned=self._assigned,
            lost=lambda tps: self._lost(tps, "membership lost (session expired or fenced)"),
            assign=self._assign, broker_assigns=self._on_broker_assigns,
            fenced_instance=self._fenced_instance, denied=self._heartbeat_denied,
        )
        try:
            self._client = kafka_client.KafkaGroupClient(
                group_id=cfg.group_id, topics=cfg.topics, pattern=cfg.pattern,
                group_instance_id=cfg.group_instance_id, client_rack=cfg.client_rack,
                client_config=cfg.client_config, partition_assignors=self._bridges,
                callbacks=callbacks, leader_sync_delay_ms=cfg.leader_sync_delay_ms,
                followup_join_delay_ms=cfg.followup_join_delay_ms,
                on_connect=self._on_connect,
            )
        except kafka_client.KafkaError as exc:
            raise MembershipError(f"cannot create the group client for group {cfg.group_id!r}: {exc}") from exc
        self._log_repeats = client_log.install()  # kafka-python's repeated lines counted, not hundreds
        self._thread = threading.Thread(target=self._run, name=f"groupkafka-member-{cfg.group_id}", daemon=True)
        self._thread.start()

    def _on_connect(self, error: BaseException | None) -> None:
        if error is None:
            self._refusals.connected()
        else:
            self._refusals.observe(f"{type(error).__name__}: {error}")

    def _assign(self, protocol_name: str, members: list, cluster) -> tuple[dict[str, bytes], set[str]]:
        """Leader: run our assignor (on a worker thread, see kafka_client)."""
        try:
            return perform_assignment(self._assignors, cluster, protocol_name,
                                      [_Member(*m) for m in members])
        except AssignmentError as exc:
            # a configuration the group cannot satisfy (e.g. more redundant replicas than
            # members, co-partitioned topics of different sizes): fail the query clearly
            # instead of rejoining forever
            with self._cond:
                self._error = exc
                self._cond.notify_all()
            raise

    def _run(self) -> None:
        client = self._client
        assert client is not None
        interval = self.config.poll_interval_ms / 1000.0
        while not self._closed.is_set() and not isinstance(self._error, FencedError):
            try:
                started = time.monotonic()
                if self._poll.away:
                    # left for kafka.max.poll.interval.ms: no poll (it would join again) until
                    # the query plans again (polled)
                    self._closed.wait(_JOINING_POLL_S)
                    continue
                if client.bootstrapping():  # no broker known yet: a poll would back off 100 ms
                    self._closed.wait(_JOINING_POLL_S)
                    self._check_reach(client)
                    continue
                # Never call into the client while holding self._cond: kafka-python runs our
                # callbacks on its IO thread, which takes self._cond (lock-order deadlock).
                # At most _POLL_BLOCK_MS inside poll(), the rest of the interval on _closed:
                # a wait inside kafka-python cannot be cut short by close() (a whole interval
                # was ~90 ms of every query's stop, measured on Kafka 4.0.1)
                if self._leave_if_overdue(client):
                    continue
                client.poll(min(self.config.poll_interval_ms, _POLL_BLOCK_MS))
                # poll() returns at once while a join is in flight: do not spin (the GIL is
                # shared with kafka-python's IO thread, which does the actual work)
                rest = interval - (time.monotonic() - started)
                if rest > 0:
                    state = client.state()
                    if not state.stable or state.rebalancing:
                        # a join under way: its next step (JoinGroup once the coordinator is
                        # known) starts in a poll(), so poll again soon
                        rest = min(rest, _JOINING_POLL_S)
                    self._closed.wait(rest)
                self._check_reach(client)
                self._observe_rebalance(client)
            except Exception as exc:  # noqa: BLE001 - kept for the planner to raise
                if self._closed.is_set():
                    break
                if isinstance(exc, kafka_client.FencedInstanceIdError):
                    self._fenced_instance("JoinGroup/SyncGroup")
                    return
                log.warning("group %s: membership loop error: %s", self.config.group_id, exc)
                exc = self._as_denied(exc)
                if isinstance(exc, (*kafka_client.FATAL_JOIN_ERRORS, AuthorizationError, GroupFullError)):
                    with self._cond:
                        self._error = exc
                        self._cond.notify_all()
                    return
                self._closed.wait(0.2)

    def _observe_rebalance(self, client: kafka_client.KafkaGroupClient) -> None:
        """Time rebalances for the metrics, once per loop turn: a whole rebalance can begin and
        end inside one poll(), so its marks (a revoke barrier began, a JoinGroup was sent) count
        as its start when the turn did not see it under way."""
        marks = [m for m in (self._revoke_began, client.join_sent_at) if m > self._marks_seen]
        if marks:
            self._marks_seen = max(marks)
            self.counters.observe_rebalance(True, min(marks))
        state = client.state()
        self.counters.observe_rebalance(not state.stable or state.rebalancing or bool(self._book.revoking()),
                                        time.monotonic())

    def _leave_if_overdue(self, client: kafka_client.KafkaGroupClient) -> bool:
        """Leave the group when the query's batch in flight outlasted ``kafka.max.poll.interval.ms``
        (``poll_interval``). Its partitions are dropped from planning first, so its late commit is
        skipped (and would be refused: the generation is gone). Not while a join or a revocation
        is under way: each ends within its own bound (the drain gives up within 80% of the
        interval), and the leave follows. True when it left."""
        now = time.monotonic()
        overdue = self._poll.overdue(now)
        if overdue is None or self._book.revoking() or client.state().rebalancing:
            return False
        self._poll.left(now)
        self.counters.poll_timeouts += 1
        log.warning("%s", leave_warning(self.config.group_id, overdue, self._poll.batch_name(),
                                        int(self.rebalance_timeout_s * 1000), "classic"))
        self._lost(set(self._book.owned()) | set(self._book.revoking()),
                   "left the group: the query's micro-batch outlasted kafka.max.poll.interval.ms")
        try:
            client.leave("consumer poll timeout has expired (groupkafka: the query's micro-batch outlasted "
                         "max.poll.interval.ms)", int(self._request_timeout_s * 1000))
        except Exception as exc:  # noqa: BLE001 - the generation is reset either way
            log.warning("group %s: LeaveGroup failed (%s): the coordinator moves the partitions once the "
                        "session expires", self.config.group_id, exc)
        return True

    def polled(self, batches: Mapping[str, object] | None = None) -> None:
        """The query planned: a member that left for ``kafka.max.poll.interval.ms`` joins again
        (the membership loop polls the client again, which sends JoinGroup)."""
        if self._poll.polled(time.monotonic(), batches):
            log.info("group %s: the query plans again after leaving for kafka.max.poll.interval.ms: "
                     "rejoining the group", self.config.group_id)

    def _refused(self, error: AuthorizationError) -> None:
        """An ACL missing while the query runs (revoked): fatal at once, whatever the session
        timeout; the planner raises it at its next call (raise_if_failed, snapshot)."""
        with self._cond:
            if self._error is None:
                self._error = error
                log.error("%s", error)
            self._cond.notify_all()

    def _heartbeat_denied(self, where: str) -> None:
        self._refused(authorization_error(self.config.security, "Group", self.config.group_id, f"READ ({where})",
                                          _servers(self.config.client_config)))

    def _as_denied(self, exc: BaseException) -> BaseException:
        """A missing ACL as an :class:`AuthorizationError` naming principal, resource, operation; a
        full group (GROUP_MAX_SIZE_REACHED) as a :class:`GroupFullError` naming the limit."""
        servers = _servers(self.config.client_config)
        if isinstance(exc, kafka_client.GroupAuthorizationFailedError):
            return authorization_error(self.config.security, "Group", self.config.group_id,
                                       "READ (JoinGroup, OffsetCommit)", servers, str(exc))
        if isinstance(exc, kafka_client.TopicAuthorizationFailedError):
            return subscription_denied(self.config.security, self.config.topics, self.config.pattern, servers,
                                       str(exc))
        if isinstance(exc, kafka_client.GroupMaxSizeReachedError):
            return group_full_error(self.config.group_id, "classic", servers, f"JoinGroup: {exc}")
        return exc

    def _check_reach(self, client: kafka_client.KafkaGroupClient) -> None:
        """Record what the member reached; past the bound, fail with what could not be reached.
        A refused login or TLS handshake, or a subscribed topic the principal may not describe,
        fails at once (retrying cannot fix it)."""
        refused = self._refusals.error()
        denied = client.unauthorized_topics() & set(self.config.topics)
        if denied and refused is None:
            refused = authorization_error(self.config.security, "Topic", ", ".join(sorted(denied)),
                                          "DESCRIBE (Metadata) and READ", _servers(self.config.client_config))
        if refused is not None and self._error is None:
            log.error("%s", refused)
            with self._cond:
                self._error = refused
                self._cond.notify_all()
            return
        bootstrapped, coordinator = client.reached()
        self._reach.observe(bootstrapped, coordinator, self._assignment_seen.is_set())
        self._touch.observe(coordinator, client.coordinator_label())
        self._log_repeats.flush()
        bound_s = self.config.join_timeout_ms / 1000.0
        step = self._reach.overdue(bound_s, self._first_join_bound_s)
        if step is None or self._error is not None:
            return
        group, servers = self.config.group_id, _servers(self.config.client_config)
        if step == "bootstrap":
            protocol = str(self.config.client_config.get("security_protocol", "PLAINTEXT"))
            last = f"; last connection error: {self._refusals.last}" if self._refusals.last else ""
            what = (f"could not reach any bootstrap server ({servers}) within {bound_s:.0f}s "
                    f"(tried to connect and fetch metadata with security.protocol={protocol}, with "
                    f"backoff{last})")
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

    def close(self) -> None:
        """Leave the group (dynamic members; static ones keep their assignment) and stop."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        # before LeaveGroup: from then on the coordinator may give the partitions to another member
        self._history("left", list(self._book.owned()), time.monotonic())
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # noqa: BLE001
                log.warning("group %s: error while leaving: %s", self.config.group_id, exc)
        log.info("group %s: left the group", self.config.group_id)

    # ---- state for the planner -------------------------------------------------------
    def raise_if_failed(self) -> None:
        raise_failure(self._error, self.config.group_id)

    def status(self) -> MembershipStatus:
        r, c = self._reach, self._client
        return MembershipStatus(
            cluster_reached_at=r.wall(r.cluster_at),
            coordinator_found_at=r.wall(r.coordinator_at),
            coordinator_missing_since=r.wall(r.coordinator_missing),
            assigned_at=r.wall(r.assigned_at),
            stable=bool(c is not None and c.state().stable),
        )

    def coordinator_silence_s(self) -> float | None:
        """Seconds since the coordinator last answered a heartbeat or completed a join."""
        return self._client.since_answer_s() if self._client is not None else None

    def join_stats(self) -> kafka_client.JoinStats:
        """Generations synced, applied, led, and assigned by the broker (tests count with it)."""
        return self._client.stats if self._client is not None else kafka_client.JoinStats()

    def snapshot(self) -> Snapshot:
        self.raise_if_failed()
        state = self._client.state() if self._client is not None else None
        owned, revoking = self._book.owned(), self._book.revoking()
        committable = frozenset(owned)
        protocol = state.protocol if state is not None else None
        bridge = next((b for b in self._bridges if b.name == protocol), None)
        if (self._broker_assigns is None and bridge is not None and bridge.last_assignment is not None
                and isinstance(bridge.assignor, RedundantAssignor)):
            committable = primary_partitions(bridge.last_assignment) & committable
        return Snapshot(
            generation=state.generation if state is not None else -1,
            member_id=state.member_id if state is not None else "",
            protocol=protocol,
            owned=owned,
            committable=committable,
            rebalancing=bool(state and state.rebalancing) or bool(revoking),
            revoking=revoking,
            assigned_generation=state.assigned_generation if state is not None else -1,
        )

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Block until the first rebalance completed (or timeout); True when joined."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.raise_if_failed()
            c = self._client
            if c is not None and self._assignment_seen.is_set():
                state = c.state()
                if state.stable and not state.rebalancing:
                    return True
            time.sleep(0.01)  # the first batch waits on this: a coarse poll is start-up latency
        return False

    def describe(self) -> str:
        """One line of state for errors and logs (no configuration: it may hold secrets)."""
        c = self._client
        owned, revoking = len(self._book.owned()), len(self._book.revoking())
        return (
            f"group {self.config.group_id!r}: {c.describe() if c is not None else 'not started'} "
            f"assignment_seen={self._assignment_seen.is_set()} owned={owned} revoking={revoking} "
            f"error={self._error!r}"
        )

    # ---- the drain hand-shake ---------------------------------------------------------
    def batch_planned(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int]) -> bool:
        """Record the batch about to run; False (nothing recorded) when a revocation started
        since the planner looked, so the planner must not hand that batch to Spark."""
        if not self._book.batch_planned(partitions):
            return False
        self._poll.planned(time.monotonic(), partitions)
        return True

    def batch_completed(self) -> None:
        self._book.batch_completed()
        self._poll.completed(time.monotonic())

    @property
    def cooperative(self) -> bool:
        """KIP-429: partitions not being revoked keep flowing through a rebalance."""
        return self._protocol is RebalanceProtocol.COOPERATIVE

    def may_plan(self, snap: Snapshot | None = None) -> bool:
        """Eager: no new batch while a rebalance is under way. Cooperative: always (the
        planner leaves out the partitions being revoked; commits that meet the rebalance are
        kept and sent once it is over)."""
        if self._session_lapsed():
            return False
        if self.cooperative:
            return True
        return not (snap or self.snapshot()).rebalancing

    def _session_lapsed(self) -> bool:
        """No new batch while no heartbeat has been answered for a whole session: the member may
        be out of the group, its partitions another's (a frozen or starved process; a
        coordinator away, where the commit of the last batch is pending too). The next answer,
        or the rejoin that a refused heartbeat starts, ends it; said once per lapse."""
        client = self._client
        lapsed = client is not None and client.session_lapsed()
        if lapsed and not self._lapse_said:
            log.warning("group %s: no heartbeat answered for a whole session (kafka.session.timeout.ms): the "
                        "member may be out of the group; no new micro-batch until the coordinator answers",
                        self.config.group_id)
        self._lapse_said = lapsed
        return lapsed

    async def _revoke(self, revoked: set[TopicPartition]) -> None:
        """Give partitions up only after the batch reading them has completed and committed.
        Runs on kafka-python's IO loop: awaits, never blocks."""
        self._revoke_began = time.monotonic()
        if not revoked:
            return
        self._book.begin_revoke(revoked)
        began = time.monotonic()
        deadline = began + self.drain_timeout_s
        flusher: threading.Thread | None = None
        joined = self._client.state()
        while not self._closed.is_set():
            if self._removed_since(joined):
                # heartbeats go on while we wait; an UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION
                # answer means the coordinator has already given these partitions to another
                # member: stop planning them now, not when the wait ends
                self._lost(revoked, "removed from the group while the revocation waited for the in-flight "
                                    "batch (UNKNOWN_MEMBER_ID/ILLEGAL_GENERATION); its late commit is skipped")
                return
            busy, unsent = self._book.drain_state(revoked)
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
                    "group %s: in-flight batch did not complete and commit within %.1fs (at most "
                    "80%% of the rebalance timeout kafka.max.poll.interval.ms=%.0fs less a heartbeat "
                    "interval, so that the coordinator does not remove this member); giving up %d "
                    "partitions uncommitted: the next owner re-reads from the last commit "
                    "(at-least-once); the batch's late commit of them is skipped",
                    self.config.group_id, self.drain_timeout_s, self.rebalance_timeout_s, len(busy | unsent),
                )
                break
            await self._client.sleep(0.05)
        self._book.finish_revoke(revoked)
        self.counters.rebalances += 1
        self.counters.revoke_barrier_s += time.monotonic() - began
        log.info("group %s: revoked %s", self.config.group_id, sorted(map(str, revoked)))

    def _removed_since(self, joined: kafka_client.GroupState) -> bool:
        """The heartbeat thread reset our generation (the coordinator no longer knows the
        member or its generation) after ``joined`` was taken."""
        if joined.generation < 0 or self._client is None:
            return False
        now = self._client.state()
        return now.generation < 0 or now.member_id != joined.member_id

    def _assigned(self, added: set[TopicPartition]) -> None:
        self._book.acquire(added)
        self._assignment_seen.set()
        if self._client is not None and added:
            try:
                self._client.pause(added)
            except Exception:  # noqa: BLE001 - the loop pauses anything left
                pass
        log.info("group %s: assigned %s", self.config.group_id, sorted(map(str, added)))

    def _history(self, event: str, partitions: list[TopicPartition], mono: float) -> None:
        """A change of ownership into the member's history, with the generation it belongs to
        (an acquisition: the generation whose assignment brought it)."""
        if not history.enabled():
            return
        state = self._client.state() if self._client is not None else None
        gen = -1 if state is None else state.generation
        if state is not None and event == "acquired" and state.assigned_generation >= 0:
            gen = state.assigned_generation
        history.record(event, mono, member=state.member_id if state is not None else "", gen=gen,
                       protocol="classic", partitions=history.tps(partitions))

    def _lost(self, lost: set[TopicPartition], why: str) -> None:
        gone = self._book.lose(lost)
        self.counters.partitions_lost += len(gone)
        if gone:
            log.warning("group %s: lost %d partitions (%s): %s", self.config.group_id, len(gone), why,
                        sorted(map(str, gone)))

    def _fenced_instance(self, where: str) -> None:
        """FENCED_INSTANCE_ID: another member joined with our ``group.instance.id`` and the
        coordinator gave it our place (KIP-345: the newest member with an instance id wins).
        Fatal: every partition is dropped from planning at once (the other member owns them
        now), nothing more is committed, the membership loop stops (rejoining would only fence
        the other member in turn), and the planner fails the query with this error."""
        with self._cond:
            if isinstance(self._error, FencedError):
                return
            instance = self.config.group_instance_id
            self._error = FencedError(
                f"group {self.config.group_id!r}: this member was fenced by the group coordinator "
                f"(FENCED_INSTANCE_ID, answer to {where}): another member uses group.instance.id "
                f"{instance!r} and took this member's place and partitions. Each running query or "
                f"consumer of the group needs its own kafka.group.instance.id: stop the other one or "
                f"give this query a different kafka.group.instance.id, then restart it.")
            self._cond.notify_all()
        self._lost(set(self._book.owned()) | set(self._book.revoking()),
                   f"fenced: group.instance.id {instance!r} taken by another member")
        log.error("%s", self._error)

    def _on_broker_assigns(self, generation: int, protocol: str | None) -> None:
        """A JoinGroup answer without a leader: a KIP-848 consumer group hosts us as a classic
        member and its server-side assignor decides; our configured assignor never runs."""
        self.counters.broker_assigned_joins += 1
        if self._broker_assigns is None:
            self._broker_assigns = protocol or "?"
            log.warning(
                "group %s: the group is a KIP-848 consumer group (converted by a new-protocol member): "
                "the broker's server-side assignor decides the assignment, not our configured assignor "
                "%s (generation %d). Reading and committing continue with what the broker assigns; "
                "options of our assignor (e.g. redundant's replicas) no longer apply.",
                self.config.group_id, ",".join(self._assignors), generation,
            )

    @property
    def broker_assigns(self) -> bool:
        """True once the group was seen assigning by itself (our assignor is not deciding)."""
        return self._broker_assigns is not None

    def _owned_for_metadata(self) -> tuple[frozenset[TopicPartition], int]:
        """What the subscription reports: owned partitions and the generation that assigned
        them. Not the generation of the latest JoinGroup answer (Java's choice): after a round
        whose SyncGroup failed (REBALANCE_IN_PROGRESS), that one changed although nothing we
        own did, and a follower rejoining a stable group with changed metadata makes the
        coordinator (Kafka's and Tansu's alike) rebalance the whole group again instead of
        handing it the current generation's assignment."""
        owned = frozenset(self._book.owned())
        gen = self._client.state().assigned_generation if self._client is not None else -1
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
        stays ours under the same acquisition. Never blocks beyond the request timeout.
        """
        with self._commit_lock:  # one commit at a time: a stale offset must never land last
            snap = self.snapshot()
            mine, skipped, todo = self._book.to_commit(offsets, serials, snap.committable, snap.owned)
            if not mine:
                self._book.settle(skipped)
                return CommitResult(skipped=frozenset(skipped))
            out = self._client.commit(mine, self._request_timeout_s, self._retry_backoff_s, self._closed)
            self._book.settle(out.done | skipped)
            sent = self._client.commit_sent
            if sent is not None:
                history.record("commit", sent[2], member=sent[0], gen=sent[1], protocol="classic",
                               accepted=[[tp.topic, tp.partition, mine[tp]] for tp in sorted(out.done)],
                               fenced=history.tps(out.fenced), failed=history.tps(out.failed))
            if out.fenced_instance:
                self._fenced_instance("OffsetCommit")
            if out.fenced:
                self.counters.fenced_commits += 1
                self._lost(out.fenced, f"commit fenced: {type(out.error).__name__}")
                log.warning("group %s: commit fenced (%s); %d partitions marked lost, not retried",
                            self.config.group_id, out.error, len(out.fenced))
                return CommitResult(committed=frozenset(out.done), lost=frozenset(out.fenced),
                                    skipped=frozenset(skipped), error=str(out.error))
            if out.failed:
                self.counters.commit_failures += 1
                denied = denied_answer(self.config.security, self.config.group_id,
                                       [(tp.topic, err.__name__) for tp, err in out.answers.items()],
                                       _servers(self.config.client_config), "OffsetCommit")
                if denied is not None:  # not kept: no retry can succeed, the query fails now
                    self._refused(denied)
                    return CommitResult(committed=frozenset(out.done), failed=frozenset(out.failed),
                                        skipped=frozenset(skipped), error=str(denied))
                self._book.keep(out.failed, todo)
                log.warning("group %s: commit of %d partitions failed (%s); kept and retried once the "
                            "group is stable", self.config.group_id, len(out.failed), out.error)
                return CommitResult(committed=frozenset(out.done), failed=frozenset(out.failed),
                                    skipped=frozenset(skipped), error=str(out.error))
            self.counters.commits += 1
            log.info("group %s: committed %s", self.config.group_id,
                     ", ".join(f"{tp}@{off}" for tp, off in sorted(mine.items())))
            return CommitResult(committed=frozenset(mine), skipped=frozenset(skipped))

    def flush_pending(self) -> CommitResult | None:
        """Send the offsets kept from failed commits once the generation is stable again;
        None when there is nothing to send or the member is still rebalancing."""
        if not self._book.has_pending():
            return None
        if self._client is None or not self._client.state().stable:
            return None
        return self.commit({})

    def pending(self) -> dict[TopicPartition, int]:
        return self._book.pending()

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = list(partitions)
        if not parts:
            return {}
        bound_ms = self.config.join_timeout_ms
        try:  # kafka-python retries a moved or loading coordinator with backoff within the bound
            return self._client.committed(parts, bound_ms)
        except kafka_client.KafkaTimeoutError as exc:
            err = GroupUnreachableError(
                f"group {self.config.group_id!r}: could not read the group's committed offsets within "
                f"{bound_ms / 1000:.0f}s (OffsetFetch to the coordinator, bootstrap servers "
                f"{_servers(self.config.client_config)}, retried with backoff): {type(exc).__name__}. "
                "Check that the brokers are up, or raise groupJoinTimeoutMs.")
            err.step = "coordinator"
            raise err from exc
        except kafka_client.KafkaError as exc:
            denied = denied_answer(self.config.security, self.config.group_id,
                                   [(", ".join(sorted({tp.topic for tp in parts})), type(exc).__name__)],
                                   _servers(self.config.client_config), "OffsetFetch")
            if denied is not None:
                self._refused(denied)
                raise denied from exc
            raise MembershipError(f"group {self.config.group_id!r}: reading committed offsets failed: "
                                  f"{exc}") from exc
