"""The only module that touches kafka-python's internals: a kafka-python release that moves
them breaks this module alone.

kafka-python 3.0.12 drives the classic group protocol for us (connections, SASL/SSL, version
negotiation, coordinator discovery, heartbeats, request encoding). Some of its coordinator's
methods are replaced here, on our instance only, because as shipped they make us a bad group
citizen:

* ``join_group_async`` starts a new JoinGroup when the previous join task ``is_done``
  without reading its result: a ``poll()`` whose timer ran out while a join was in flight
  throws away a JoinGroup+SyncGroup round that succeeded, and the whole group rebalances
  again. Ours always reads a finished task's result first. It also asks for a rejoin only
  when an answer carried an error: a leader whose SyncGroup was lost with the connection, after
  a rejoin for changed metadata, stopped rejoining (chaos finding 13). Ours asks after every
  failed join, as Java's ``joinGroupIfNeeded`` does.
* ``need_rejoin`` says False while such a finished task waits to be read (the rejoin that
  caused it may have been a metadata change that is settled by then), so the result would
  sit unread until the session expired. Ours says True while a join task exists.
* ``_do_join_and_sync_async`` ran the leader's assignor on the IO thread. Ours runs it on a
  worker thread, heartbeats meanwhile (a leader round longer than the session must not cost
  the session), schedules the optional leader SyncGroup delay on the IO loop (never a sleep
  there), and notices a JoinGroup answer without a leader: a KIP-848 consumer group that
  hosts us as a classic member and assigns by itself.

* ``_send_heartbeat_request``: an answer of ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID to a
  Heartbeat resets the member's generation even when the heartbeat was sent under an older
  generation than the member holds now (it rejoined while the answer was on its way). The new
  generation is thrown away: the join in flight completes with no protocol ("Coordinator
  selected invalid assignment protocol: None") and the next commit goes out fenced, its
  partitions lost and their last batch read twice (seen on Kafka 4.0.1, loaded CI machine).
  Ours remembers what each heartbeat was sent with and ignores such an answer once the
  generation changed, as the Java client does (``AbstractCoordinator.HeartbeatResponseHandler``:
  ``generationUnchanged()``).

* ``_send_group_coordinator_request`` (``lookup_coordinator`` sends it, one at a time): a
  FindCoordinator that names a coordinator this member cannot connect to is followed by the
  next one at once, from the join path and from the heartbeat loop alike: while the
  coordinator's broker was down, one member sent about 1,700 FindCoordinator requests a second
  and kept a core busy (make chaos broker_outage, mock, 2026-11-26). Ours paces successive
  lookups as Java's ``AbstractCoordinator`` does after an unusable answer:
  ``retry_backoff_ms``, doubling to 1 s, 20 % jitter (:class:`LookupPacer`).

Its Metadata requests never allow topic auto-creation: kafka-python passes the consumer's
``allow_auto_create_topics`` nowhere, and its cluster metadata's own default is true, so a topic
deleted under a query was created again on a broker with ``auto.create.topics.enable=true``.
The consumer is given a client factory that says false there: ``no_auto_create.py``.

Two more hooks serve an option for coordinators that answer each member's JoinGroup and
SyncGroup on their own timers (Tansu): ``request_rejoin`` and the heartbeat handler, so that
the KIP-429 follow-up JoinGroup after a cooperative revocation can wait
``followup_join_delay_ms`` (checked in ``need_rejoin``; nothing sleeps) unless the group is
already rebalancing. See :class:`KafkaGroupClient`.

The member never fetches: it polls only the coordinator (``KafkaConsumer.poll`` would look up
fetch positions), and its reconnect backoff stops at Java's 1 s, not kafka-python's 30 s.

Everything else the membership needs from the client goes through :class:`KafkaGroupClient`:
its state, what it reached, one bounded OffsetCommit, OffsetFetch, pause and close.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka import errors as kerr
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.structs import MemberState
from kafka.structs import TopicPartition as KpTP

from assignment.model import TopicPartition
from spark_groupsource.config.options import heartbeat_interval_ms
from spark_groupsource.group.no_auto_create import member_client

log = logging.getLogger("spark_groupsource.membership")

# OffsetCommit answers
FENCES = (kerr.IllegalGenerationError, kerr.UnknownMemberIdError, kerr.FencedInstanceIdError)
_COORDINATOR_MOVED = (kerr.NotCoordinatorError, kerr.CoordinatorNotAvailableError, kerr.RequestTimedOutError)
_RETRY_SAME = (kerr.CoordinatorLoadInProgressError,)
# join errors after which retrying cannot help
FATAL_JOIN_ERRORS = (
    kerr.GroupAuthorizationFailedError,
    kerr.InconsistentGroupProtocolError,
    kerr.FencedInstanceIdError,
    kerr.InvalidSessionTimeoutError,
)
#: The longest pause between connection attempts to one broker (``reconnect.backoff.max.ms``
#: unless the user sets it): the Java client's default. kafka-python's own, 30 s, let the
#: failed attempts of an outage push the next one far past the broker's return: a member whose
#: one-node Kafka 4.0.1 was down 25 s committed again 7.5-14.9 s after the node was back,
#: 0.8-1.4 s with 1 s (2026-11-29); on the mock a member missed its session that way.
RECONNECT_BACKOFF_MAX_MS = 1_000

KafkaError = kerr.KafkaError
GroupAuthorizationFailedError = kerr.GroupAuthorizationFailedError
TopicAuthorizationFailedError = kerr.TopicAuthorizationFailedError
GroupMaxSizeReachedError = kerr.GroupMaxSizeReachedError
KafkaTimeoutError = kerr.KafkaTimeoutError
FencedInstanceIdError = kerr.FencedInstanceIdError


@dataclass(frozen=True)
class GroupState:
    generation: int
    member_id: str
    protocol: str | None
    rebalancing: bool  # a JoinGroup/SyncGroup round is under way
    stable: bool  # joined and not rebalancing: commits can carry this generation
    # the generation whose assignment we hold (-1: none, or membership reset): what the
    # subscription's KIP-792 generation field reports next to the owned partitions
    assigned_generation: int = -1


@dataclass
class CommitOutcome:
    done: set[TopicPartition]
    failed: set[TopicPartition]  # not committed; may be sent again later
    fenced: set[TopicPartition]
    error: BaseException | None
    fenced_instance: bool = False  # FENCED_INSTANCE_ID: another process has our instance id
    # partition -> the error class the broker answered for it (of those in ``failed``)
    answers: dict[TopicPartition, type] = field(default_factory=dict)


@dataclass
class JoinStats:
    """Per-generation bookkeeping of our join rounds (tests count rebalances with it)."""

    synced: list[int] = field(default_factory=list)  # generations whose SyncGroup succeeded
    applied: list[int] = field(default_factory=list)  # generations whose assignment we applied
    led: list[int] = field(default_factory=list)  # generations we assigned as leader
    broker_assigned: list[int] = field(default_factory=list)  # JoinGroup answers with no leader

    def discarded(self) -> list[int]:
        """Generations that synced but were never applied (the race this module closes)."""
        applied = set(self.applied)
        latest = max(self.synced, default=None)
        return [g for g in self.synced if g not in applied and g != latest]


@dataclass(frozen=True)
class Callbacks:
    """Our side of a rebalance (partitions in our own type). ``revoked`` may await."""

    revoked: Callable[[set[TopicPartition]], Awaitable[None]]
    assigned: Callable[[set[TopicPartition]], None]
    lost: Callable[[set[TopicPartition]], None]
    # leader: (protocol name, [(member id, instance id, metadata bytes)], cluster) -> (bytes per member, topics)
    assign: Callable[[str, list, object], tuple[dict[str, bytes], set[str]]]
    # a JoinGroup answer named no leader: the broker assigns (KIP-848 consumer group)
    broker_assigns: Callable[[int, str | None], None]
    # FENCED_INSTANCE_ID in a Heartbeat answer: another member took our group.instance.id.
    # kafka-python only stops heartbeating there and keeps the assignment as if stable.
    fenced_instance: Callable[[str], None] = lambda where: None
    # GROUP_AUTHORIZATION_FAILED in a Heartbeat answer (the group's ACL revoked while we run):
    # kafka-python only logs it and heartbeats on until the session expires
    denied: Callable[[str], None] = lambda where: None


def _ours(tp) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


class _Listener(AsyncConsumerRebalanceListener):
    """Runs on kafka-python's IO thread; awaits (never blocks) while batches drain."""

    def __init__(self, cb: Callbacks):
        self.cb = cb

    async def on_partitions_revoked(self, revoked):
        await self.cb.revoked({_ours(tp) for tp in revoked})

    async def on_partitions_assigned(self, assigned):
        self.cb.assigned({_ours(tp) for tp in assigned})

    async def on_partitions_lost(self, lost):
        self.cb.lost({_ours(tp) for tp in lost})


class KafkaGroupClient:
    """A membership-only KafkaConsumer (every partition paused, no Fetch) with our fixes."""

    def __init__(
        self,
        *,
        group_id: str,
        topics: Iterable[str],
        pattern: str | None,
        group_instance_id: str | None,
        client_rack: str | None,
        client_config: Mapping[str, object],
        partition_assignors: list,
        callbacks: Callbacks,
        leader_sync_delay_ms: int = 0,
        followup_join_delay_ms: int = 0,
        on_connect: Callable[[BaseException | None], None] | None = None,
    ):
        """``on_connect``: told the outcome of every connection attempt (None: connected, else
        why not), from the IO thread; kafka-python itself only logs it and reconnects."""
        kwargs = dict(client_config)
        kwargs["heartbeat_interval_ms"] = heartbeat_interval_ms(
            kwargs.get("session_timeout_ms"), kwargs.get("heartbeat_interval_ms"))
        kwargs.setdefault("reconnect_backoff_max_ms", RECONNECT_BACKOFF_MAX_MS)
        kwargs.update(
            group_id=group_id,
            group_instance_id=group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=partition_assignors,
            # never creating a topic (a deleted one would come back): the keyword alone does not reach the Metadata
            # requests, the client factory does (no_auto_create.py)
            allow_auto_create_topics=False,
            kafka_client=member_client,
        )
        if client_rack:
            kwargs.setdefault("client_rack", client_rack)
        self.callbacks = callbacks
        self.stats = JoinStats()
        self.assigned_generation = -1  # set when an assignment is applied (see GroupState)
        #: (member id, generation, monotonic time) of the last OffsetCommit sent (None: none sent
        #: by the last commit()): what the member's history says the commit carried
        self.commit_sent: tuple[str, int, float] | None = None
        self.join_sent_at = 0.0  # monotonic time the JoinGroup/SyncGroup round in flight began
        self.lookups = LookupPacer(int(kwargs.get("retry_backoff_ms", 100)) / 1000.0)
        self._sync_delay_s = leader_sync_delay_ms / 1000.0
        # The KIP-429 follow-up JoinGroup after a cooperative revocation waits this long. Kafka
        # answers every member's JoinGroup at once and every parked SyncGroup with the leader's,
        # so it needs none (0, as Java and librdkafka). Tansu answers each member's JoinGroup
        # session/2 after that member sent it and polls parked SyncGroups once a second: a
        # follow-up sent at once opens the next generation while members that learned of the
        # rebalance a heartbeat later still wait for this one, and they miss it (their
        # revocations then cost one more generation).
        self._followup_delay_s = followup_join_delay_ms / 1000.0
        self._followup_at: float | None = None  # monotonic time the deferred follow-up may go
        self._completing = False  # applying an assignment (kafka-python's on_join_complete)
        self._rebalance_signalled = False  # a heartbeat said the group is rebalancing
        self._heartbeat_s = int(kwargs["heartbeat_interval_ms"]) / 1000.0
        self._consumer = KafkaConsumer(**kwargs)
        self._coord = self._consumer._coordinator
        _install(self._coord, self)
        if on_connect is not None:
            _watch_connections(self._coord._manager, on_connect)
        listener = _Listener(callbacks)
        if pattern:
            self._consumer.subscribe(pattern=pattern, listener=listener)
        else:
            self._consumer.subscribe(topics=list(topics), listener=listener)

    # ---- driving --------------------------------------------------------------------------
    def poll(self, timeout_ms: int) -> None:
        """One turn of the membership loop: join/heartbeat bookkeeping, keep everything paused.

        Only the coordinator is polled. ``KafkaConsumer.poll`` would also look up a position for
        every assigned partition (OffsetFetch, ListOffsets to each leader, OffsetForLeaderEpoch
        after a leader change) for a consumer that never fetches; with a leader down, each poll
        raised UnknownBrokerIdError out of that lookup (mock, 2026-11-29), and each cost the
        membership loop a turn."""
        c = self._consumer
        if c._closed:
            raise kerr.IllegalStateError("the group client is closed")
        self._coord.poll(timeout_ms=timeout_ms)
        assigned = c.assignment()
        if assigned:
            paused = c.paused()
            todo = [tp for tp in assigned if tp not in paused]
            if todo:
                c.pause(*todo)

    def bootstrapping(self) -> bool:
        """True until the first bootstrap succeeded, which this starts (again, after a failed
        one) if need be. A poll before it completes looks the coordinator up with no broker
        known, fails NodeNotReady and kafka-python then sleeps ``retry_backoff_ms`` (100 ms):
        measured on Kafka 4.0.1, 100 of the ~220 ms of a first join."""
        manager = self._coord._manager
        if manager.bootstrapped:
            return False
        manager.bootstrap_async(refresh=True)  # the running attempt, or a new one after a failure
        return True

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        parts = [KpTP(tp.topic, tp.partition) for tp in partitions]
        if parts:
            self._consumer.pause(*parts)

    def sleep(self, seconds: float):
        """An awaitable pause on kafka-python's IO loop (for rebalance callbacks)."""
        return self._coord._net.sleep(seconds)

    def close(self) -> None:
        """Leave (dynamic members only: a static member keeps its slot for a restart)."""
        self._consumer.close(autocommit=False)

    def leave(self, reason: str, timeout_ms: int) -> None:
        """Leave the group now and keep the client: LeaveGroup (a static member only resets its
        generation and stops heartbeating, as Java's ``maybeLeaveGroup``; the coordinator then
        moves its partitions once the session expires). The next ``poll()`` joins again, as a
        new member."""
        self._coord.maybe_leave_group(reason=reason, timeout_ms=timeout_ms)

    # ---- state --------------------------------------------------------------------------
    def session_lapsed(self) -> bool:
        """Joined, but no heartbeat answered for a whole session (kafka-python's own test): the
        coordinator may have dropped this member already, as when its process was frozen or
        starved (chaos member_frozen: a thawed member planned a batch over partitions another
        member had taken over, before its first heartbeat learnt it was out)."""
        coord = self._coord
        heartbeat = getattr(coord, "heartbeat", None)
        return bool(heartbeat is not None and coord.generation_if_stable() is not None
                    and heartbeat.session_timeout_expired())

    def since_answer_s(self) -> float | None:
        """Seconds since the coordinator last answered a heartbeat, or a join reset the session
        clock (kafka-python's Heartbeat, monotonic); None before either."""
        heartbeat = getattr(self._coord, "heartbeat", None)
        if heartbeat is None:
            return None
        last = max(heartbeat.last_receive, heartbeat.last_reset if self._coord.generation_if_stable() else float("-inf"))
        return None if last == float("-inf") else max(0.0, time.monotonic() - last)

    def state(self) -> GroupState:
        coord = self._coord
        gen = coord._generation
        stable = coord.generation_if_stable() is not None
        generation = gen.generation_id if gen is not None else -1
        return GroupState(
            generation=generation,
            member_id=gen.member_id if gen is not None else "",
            protocol=gen.protocol if gen is not None else None,
            rebalancing=coord.rebalance_in_progress(),
            stable=stable and coord.state is MemberState.STABLE,
            # a reset membership (lost, fenced) holds no generation's assignment any more
            assigned_generation=self.assigned_generation if generation >= 0 else -1,
        )

    def reached(self) -> tuple[bool, bool]:
        """(bootstrapped, coordinator known and connected)."""
        coord = self._coord
        node = coord.coordinator_id
        return bool(coord._manager.bootstrapped), node is not None and coord._client.connected(node)

    def coordinator_label(self) -> str:
        """The coordinator's broker for log lines ("broker 2 at 127.0.0.1:9092"; "" while none is known)."""
        node = self._coord.coordinator_id
        if node is None:
            return ""
        try:
            broker = self._coord._manager.cluster.broker_metadata(node)
        except Exception:  # noqa: BLE001 - a label only
            broker = None
        label = f"broker {str(node).removeprefix('coordinator-')}"  # kafka-python's own id for its connection
        return label + (f" at {broker.host}:{broker.port}" if broker is not None else "")

    def unauthorized_topics(self) -> set[str]:
        """Topics the brokers' metadata answers said this principal may not DESCRIBE
        (kafka-python only logs them and retries its bootstrap)."""
        return set(getattr(self._coord._manager.cluster, "unauthorized_topics", ()) or ())

    def describe(self) -> str:
        coord = self._coord
        task = coord._join_task
        join = ("none" if task is None else "done" if task.is_done
                else f"in flight {time.monotonic() - self.join_sent_at:.1f}s")
        return (f"state={coord.state} generation={coord._generation} coordinator={coord.coordinator_id} "
                f"rebalancing={coord.rebalance_in_progress()} join={join}")

    # ---- offsets ------------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float, backoff_s: float,
               stop: threading.Event) -> CommitOutcome:
        """OffsetCommit with the stable generation, bounded by ``timeout_s``.

        Sent by us rather than through ``KafkaConsumer.commit``: kafka-python requests a
        rejoin when a commit is refused with REBALANCE_IN_PROGRESS, and every retry of the
        refused commit then adds one (a rebalance storm under churn). Here a refusal only
        reports the offsets as failed. A moved or loading coordinator is looked up again and
        the commit retried with backoff until the timeout. A fence resets the generation (the
        member rejoins), as Java's coordinator does.
        """
        coord = self._coord
        deadline = time.monotonic() + timeout_s
        todo = dict(offsets)
        self.commit_sent = None
        done: set[TopicPartition] = set()
        last: BaseException | None = None
        while True:
            gen = coord.generation_if_stable()
            if gen is None:
                return CommitOutcome(done, set(todo), set(),
                                     last or kerr.RebalanceInProgressError("member is rebalancing"))
            left_ms = (deadline - time.monotonic()) * 1000
            try:
                if coord.coordinator() is None:
                    if not coord.ensure_coordinator_ready(timeout_ms=max(1, left_ms)):
                        raise kerr.CoordinatorNotAvailableError("no coordinator within the commit timeout")
                    left_ms = (deadline - time.monotonic()) * 1000
                self.commit_sent = (gen.member_id, gen.generation_id, time.monotonic())
                answers = coord._net.run(_commit_request, coord, gen, todo, max(1, left_ms))
            except (kerr.KafkaError, OSError) as exc:
                last = exc
                if isinstance(exc, FENCES):
                    return self._fenced(gen, type(exc), done, todo)
                if not isinstance(exc, kerr.CoordinatorNotAvailableError):
                    coord.coordinator_dead(exc)
            else:
                done |= {tp for tp, err in answers.items() if err is kerr.NoError}
                for tp in done:
                    todo.pop(tp, None)
                fence = next((answers[tp] for tp in todo if issubclass(answers[tp], FENCES)), None)
                if fence is not None:  # a fence is group-wide: nothing left of this commit lands
                    return self._fenced(gen, fence, done, todo)
                if not todo:
                    return CommitOutcome(done, set(), set(), None)
                errors = {answers[tp] for tp in todo}
                last = next(iter(errors))()
                if any(issubclass(e, _COORDINATOR_MOVED) for e in errors):
                    coord.coordinator_dead(last)
                elif not all(issubclass(e, _RETRY_SAME) for e in errors):
                    # REBALANCE_IN_PROGRESS and anything else: report, do not retry now
                    return CommitOutcome(done, set(todo), set(), last, answers={tp: answers[tp] for tp in todo})
            if time.monotonic() + backoff_s >= deadline or stop.is_set():
                return CommitOutcome(done, set(todo), set(), last)
            time.sleep(backoff_s)

    def _fenced(self, gen, err: type, done, todo) -> CommitOutcome:
        """A fencing answer to a commit sent in ``gen``. Once the member has rejoined or is
        rejoining, the answer says nothing about what it holds now (the join decides): the
        offsets are reported failed, kept and sent again, and nothing is reset. Resetting
        then threw the new generation away (the join in flight completed with no protocol)
        and the partitions kept through a cooperative rebalance were reported lost (seen on
        Kafka 4.0.1, loaded CI machine). Java's ``OffsetCommitResponseHandler`` has the same
        rule (``generationUnchanged()``, else RebalanceInProgressException)."""
        coord = self._coord
        instance = issubclass(err, kerr.FencedInstanceIdError)
        with coord._lock:  # the same lock reset_generation takes: no join completes between
            if _stale_fence((gen.generation_id, gen.member_id), coord._generation, coord.state):
                log.info("group %s: a commit sent in generation %s was answered %s after this member "
                         "began rejoining (now generation %s): kept for the next generation, nothing "
                         "reset (the Java client's rule)", coord.group_id, gen.generation_id,
                         err.__name__, coord._generation.generation_id)
                return CommitOutcome(done, set(todo), set(), kerr.RebalanceInProgressError(
                    f"{err.__name__} answered to a commit of generation {gen.generation_id} after this "
                    "member began rejoining"))
            if issubclass(err, kerr.IllegalGenerationError):
                coord.reset_generation(member_id=gen.member_id)
            elif not instance:
                coord.reset_generation()
        return CommitOutcome(done, set(), set(todo), err(), fenced_instance=instance)

    def committed(self, partitions: Iterable[TopicPartition], timeout_ms: int) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed). Raises KafkaTimeoutError
        when the coordinator cannot answer within ``timeout_ms`` (kafka-python retries a moved
        or loading coordinator with backoff meanwhile)."""
        parts = {KpTP(tp.topic, tp.partition) for tp in partitions}
        if not parts:
            return {}
        found = self._fetch_committed(parts, timeout_ms)
        out: dict[TopicPartition, int | None] = {}
        for tp in parts:
            om = found.get(tp)
            out[_ours(tp)] = om.offset if om is not None and om.offset >= 0 else None
        return out


    def _fetch_committed(self, parts: set[KpTP], timeout_ms: int) -> dict:
        """One fresh OffsetFetch, retried while the coordinator moves or loads, within the bound.

        Not ``fetch_committed_offsets``: kafka-python shares one future per partition set, kept
        until the caller that started it reads it. Its own poll fetches the committed offsets of
        newly assigned partitions (to set positions) and, when our short poll's timer runs out
        first, leaves that future behind; a later call for the same partitions got its answer,
        from before any commit since (seen on Kafka 4.3.1 in a loaded CI run: a member's
        commit of 7 and 3 read back as nothing committed)."""
        coord = self._coord
        deadline = time.monotonic() + timeout_ms / 1000.0
        backoff_s = coord.config["retry_backoff_ms"] / 1000.0
        while True:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                raise kerr.KafkaTimeoutError(f"no OffsetFetch answer within {timeout_ms} ms")
            try:
                if coord.coordinator() is None and not coord.ensure_coordinator_ready(timeout_ms=left_ms):
                    raise kerr.CoordinatorNotAvailableError("no coordinator within the bound")
                return coord._net.run(coord._send_offset_fetch_request, list(parts))
            except kerr.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("group %s: OffsetFetch retried after %s", coord.group_id, type(exc).__name__)
            time.sleep(max(0.0, min(backoff_s, deadline - time.monotonic())))

def offset_commit_request(group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                          offsets: Mapping[TopicPartition, int]) -> OffsetCommitRequest:
    """The OffsetCommit (up to v8) the member sends for ``offsets``; apart so that its size can
    be measured (bench/many_partitions.py: ``len(request.encode(version=8))``)."""
    by_topic: dict[str, dict[int, int]] = {}
    for tp, off in offsets.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = off
    topic_t = OffsetCommitRequest.OffsetCommitRequestTopic
    part_t = topic_t.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        max_version=8,
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[topic_t(name=t, partitions=[
            part_t(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
            for p, o in sorted(ps.items())]) for t, ps in sorted(by_topic.items())],
    )


async def _commit_request(coord, gen, offsets: Mapping[TopicPartition, int], timeout_ms: float):
    """One OffsetCommit round trip on kafka-python's IO loop: partition -> error class."""
    node = coord.coordinator()
    if node is None:
        raise kerr.CoordinatorNotAvailableError("coordinator unknown")
    request = offset_commit_request(coord.group_id, gen.generation_id, gen.member_id, coord.group_instance_id,
                                    offsets)
    response = await coord._manager.wait_for(coord._manager.send(request, node_id=node), timeout_ms)
    out: dict[TopicPartition, type] = {}
    for topic, partitions in response.topics:
        for partition, code in partitions:
            out[TopicPartition(topic, partition)] = kerr.for_code(code)
    for tp in offsets:  # a partition the broker left out of its answer is not committed
        out.setdefault(tp, kerr.UnknownError)
    return out


# ---- the coordinator fixes ------------------------------------------------------------------
class LookupPacer:
    """When the next coordinator lookup may go out: at once after a quiet spell, else
    ``base_s`` after the previous one, doubling up to ``max_s`` (Java's retry.backoff.ms and
    retry.backoff.max.ms, 100 ms and 1 s), with +-20 % jitter. Lookups follow each other only
    while no usable coordinator is found, so the pause grows only then."""

    def __init__(self, base_s: float, max_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random):
        self.base_s, self.max_s = base_s, max(max_s, base_s)
        self._clock, self._rand = clock, rand
        self._attempts = 0
        self._last_done: float | None = None

    def next_delay(self) -> float:
        """Seconds to wait before the lookup about to start (and count it)."""
        if self._last_done is None or self._clock() - self._last_done > 2 * self.max_s:
            self._attempts = 0  # the first lookup after a quiet spell goes at once
        attempts, self._attempts = self._attempts, self._attempts + 1
        if attempts == 0:
            return 0.0
        return min(self.base_s * 2 ** (attempts - 1), self.max_s) * (0.8 + 0.4 * self._rand())

    def done(self) -> None:
        """A lookup ended (answered or failed)."""
        self._last_done = self._clock()


def _watch_connections(manager, on_connect: Callable[[BaseException | None], None]) -> None:
    """Report each connection attempt's outcome: a refused SASL login or a failed TLS handshake
    is in the connection's init future, which kafka-python's manager logs and drops."""
    base_connect = manager._connect

    async def _connect(node, conn, *args, **kwargs):
        await base_connect(node, conn, *args, **kwargs)
        fut = conn._init_future
        if fut.is_done:
            try:
                on_connect(fut.exception)
            except Exception:  # noqa: BLE001 - a watcher must never break the IO loop
                log.exception("connection watcher failed")

    manager._connect = _connect


def _install(coord, owner: KafkaGroupClient) -> None:
    coord._groupkafka = owner
    base_need_rejoin = coord.need_rejoin
    base_join_complete = coord._on_join_complete_async
    base_request_rejoin = coord.request_rejoin
    base_heartbeat_response = coord._handle_heartbeat_response
    base_send_find_coordinator = coord._send_group_coordinator_request

    def need_rejoin():
        # a finished join whose result is not read yet must be read, whatever else changed
        if coord._join_task is not None:
            return True
        if owner._followup_at is not None:
            if time.monotonic() < owner._followup_at:
                return False  # the deferred KIP-429 follow-up (see KafkaGroupClient)
            owner._followup_at = None
        return base_need_rejoin()

    def request_rejoin():
        if not owner._completing:
            owner._followup_at = None  # any other reason to rejoin does not wait
        base_request_rejoin()

    def handle_heartbeat_response(response, send_time, sent=None):
        if sent is not None and _stale_answer(response.error_code, sent, coord._generation):
            log.info("group %s: a heartbeat sent in generation %s was answered %s after this member "
                     "moved to generation %s: ignored (the Java client's rule)", coord.group_id, sent[0],
                     kerr.for_code(response.error_code).__name__, coord._generation.generation_id)
            return None
        if response.error_code == kerr.FencedInstanceIdError.errno:
            owner.callbacks.fenced_instance("Heartbeat")
        if response.error_code == kerr.GroupAuthorizationFailedError.errno:
            owner.callbacks.denied("Heartbeat")
        if response.error_code == kerr.RebalanceInProgressError.errno:
            owner._rebalance_signalled = True  # the group moved on: our follow-up joins it now
            owner._followup_at = None
        return base_heartbeat_response(response, send_time)

    async def send_group_coordinator_request():
        # kafka-python's lookup_coordinator sends one of these at a time: pace them there
        delay = owner.lookups.next_delay()
        if delay > 0:
            await coord._net.sleep(delay)
        try:
            return await base_send_find_coordinator()
        finally:
            owner.lookups.done()

    async def on_join_complete(generation, member_id, protocol, assignment_bytes):
        owner.stats.applied.append(generation)
        owner.assigned_generation = generation
        owner._rebalance_signalled = False
        owner._completing = True
        try:
            return await base_join_complete(generation, member_id, protocol, assignment_bytes)
        finally:
            owner._completing = False
            # kafka-python requests the follow-up rebalance after a cooperative revocation
            if coord.rejoin_needed and owner._followup_delay_s > 0 and not owner._rebalance_signalled:
                owner._followup_at = time.monotonic() + owner._followup_delay_s

    coord.need_rejoin = need_rejoin
    coord.request_rejoin = request_rejoin
    coord._handle_heartbeat_response = handle_heartbeat_response
    coord._send_heartbeat_request = types.MethodType(_send_heartbeat_request, coord)
    coord._on_join_complete_async = on_join_complete
    coord._send_group_coordinator_request = send_group_coordinator_request
    coord.join_group_async = types.MethodType(_join_group_async, coord)
    coord._do_join_and_sync_async = types.MethodType(_do_join_and_sync_async, coord)


#: heartbeat answers that reset the member's generation (kafka-python's handler)
_RESETTING = frozenset({kerr.IllegalGenerationError.errno, kerr.UnknownMemberIdError.errno})


def _stale_answer(error_code: int, sent: tuple[int, str], now) -> bool:
    """True when a heartbeat answer would reset a generation it was not sent in."""
    return error_code in _RESETTING and sent != (now.generation_id, now.member_id)


def _stale_fence(sent: tuple[int, str], now, state: MemberState) -> bool:
    """True when a fencing answer to a commit sent in generation ``sent`` (id, member id)
    came while the member is joining or after it joined a newer generation. Not once it
    was reset (UNJOINED): then the fence agrees with what the member already knows."""
    if state is MemberState.REBALANCING:
        return True
    return state is MemberState.STABLE and sent != (now.generation_id, now.member_id)


async def _send_heartbeat_request(self):
    """kafka-python 3.0.12's ``_send_heartbeat_request`` with one change: the answer is handled
    knowing the generation the request was sent in (``_stale_answer``)."""
    if self.coordinator_unknown():
        raise kerr.CoordinatorNotAvailableError(self.coordinator_id)
    sent = (self._generation.generation_id, self._generation.member_id)
    request = HeartbeatRequest(
        group_id=self.group_id,
        generation_id=sent[0],
        member_id=sent[1],
        group_instance_id=self.group_instance_id,
    )
    try:
        send_time = time.monotonic()
        response = await self._manager.send(request, node_id=self.coordinator_id)
    except kerr.KafkaError as exc:
        self._failed_request(self.coordinator_id, request, exc)
        raise
    return self._handle_heartbeat_response(response, send_time, sent)


async def _join_group_async(self, timeout_ms=None):
    """kafka-python 3.0.12's ``BaseCoordinator.join_group_async`` with two changes: a join task
    that finished while nobody awaited it is read, never replaced by a new JoinGroup; and a
    join that failed requests a rejoin (``_failed_join``), as Java's ``joinGroupIfNeeded``
    does."""
    from kafka.util import Timer

    timer = Timer(timeout_ms)
    while self.need_rejoin():
        if self._join_task is None:
            if not await self.ensure_coordinator_ready_async(timeout_ms=timer.timeout_ms):
                return False
            if not self.rejoining:
                await self._on_join_prepare_async(
                    self._generation.generation_id, self._generation.member_id, timeout_ms=timer.timeout_ms)
                self.rejoining = True
                self._disable_heartbeat()
            self._join_task = self._manager.call_soon(self._do_join_and_sync_async)
            self._groupkafka.join_sent_at = time.monotonic()
        try:
            assignment_bytes = await self._manager.wait_for(self._join_task, timer.timeout_ms)
        except kerr.KafkaTimeoutError:
            task = self._join_task
            if not task.is_done:
                return False  # still in flight: the next poll reads it
            if task.failed() and isinstance(task.exception, kerr.KafkaTimeoutError):
                _failed_join(self)  # the request itself timed out: join again
                if timer.expired:
                    return False
            continue  # finished meanwhile: read its result
        except (kerr.UnknownMemberIdError, kerr.RebalanceInProgressError,
                kerr.IllegalGenerationError, kerr.MemberIdRequiredError):
            _failed_join(self)
            continue
        except kerr.RetriableError:
            _failed_join(self)
            if timer.expired:
                return False
            backoff_ms = self.config["retry_backoff_ms"]
            if timer.timeout_ms is not None:
                backoff_ms = min(backoff_ms, timer.timeout_ms)
            if backoff_ms > 0:
                await self._manager._net.sleep(backoff_ms / 1000)
            continue
        except BaseException:
            _failed_join(self)
            raise
        self._join_task = None
        with self._lock:
            self.rejoining = False
            self.rejoin_needed = False
            self.state = MemberState.STABLE
            self._enable_heartbeat()
        await self._on_join_complete_async(
            self._generation.generation_id, self._generation.member_id,
            self._generation.protocol, assignment_bytes)
        return True
    return True


def _failed_join(coord) -> None:
    """Forget a failed join and ask for another. kafka-python asks only when an answer carried
    an error: a SyncGroup lost with its connection (a coordinator that crashed or moved) left
    ``rejoin_needed`` False, and a leader whose rejoin was for changed metadata had already
    taken its new assignment snapshot, so its loop found nothing to rejoin for and stopped,
    the member REBALANCING with heartbeats off until the coordinator dropped it (chaos finding
    13; tests/integration/test_membership_outages.py)."""
    coord._join_task = None
    coord.rejoin_needed = True


async def _do_join_and_sync_async(self):
    """kafka-python 3.0.12's ``_do_join_and_sync_async`` with our leader round."""
    owner: KafkaGroupClient = self._groupkafka
    if self.coordinator_unknown():
        raise kerr.CoordinatorNotAvailableError(self.coordinator_id)
    with self._lock:
        self.state = MemberState.REBALANCING
    join_request = JoinGroupRequest(
        group_id=self.group_id,
        session_timeout_ms=self.config["session_timeout_ms"],
        rebalance_timeout_ms=self.config["max_poll_interval_ms"],
        member_id=self._generation.member_id,
        group_instance_id=self.group_instance_id,
        protocol_type=self.protocol_type(),
        protocols=self.group_protocols(),
        max_version=7)
    sent = time.monotonic()
    # the broker holds a JoinGroup up to the rebalance timeout (Java: rebalance timeout + 5 s)
    join_timeout_ms = max(self.config["request_timeout_ms"], self.config["max_poll_interval_ms"] + 5000)
    join_response = await self._manager.send(join_request, node_id=self.coordinator_id,
                                             request_timeout_ms=join_timeout_ms)
    self._process_join_group_response(join_response, sent)
    generation = self._generation.generation_id
    if not join_response.leader:
        # KIP-848 consumer group hosting classic members: no leader, the broker assigns
        owner.stats.broker_assigned.append(generation)
        owner.callbacks.broker_assigns(generation, join_response.protocol_name)
        assignments = []
    elif join_response.leader == join_response.member_id:
        assignments = await _leader_round(self, owner, join_response)
        owner.stats.led.append(generation)
    else:
        assignments = []
    sync_request = SyncGroupRequest(
        group_id=self.group_id,
        generation_id=generation,
        member_id=self._generation.member_id,
        group_instance_id=self.group_instance_id,
        protocol_type=self.protocol_type(),
        protocol_name=self._generation.protocol,
        assignments=assignments,
        max_version=5)
    sync_sent = time.monotonic()
    sync_response = await self._manager.send(sync_request, node_id=self.coordinator_id)
    assignment = self._process_sync_group_response(sync_response, sync_sent)
    owner.stats.synced.append(generation)
    return assignment


async def _leader_round(coord, owner: KafkaGroupClient, join_response) -> list:
    """Run our assignor on a worker thread while the IO loop keeps heartbeating; then wait out
    the optional sync delay on the loop. Returns SyncGroup's (member id, bytes) pairs."""
    started = time.monotonic()
    box: dict[str, object] = {}
    members = [(m.member_id, getattr(m, "group_instance_id", None), bytes(m.metadata))
               for m in join_response.members]

    def work() -> None:
        try:
            box["ok"] = owner.callbacks.assign(join_response.protocol_name, members, coord._cluster)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the loop
            box["error"] = exc

    worker = threading.Thread(target=work, daemon=True, name=f"groupkafka-assign-{coord.group_id}")
    worker.start()
    next_heartbeat = started + owner._heartbeat_s
    while worker.is_alive():
        await coord._net.sleep(0.01)
        if time.monotonic() >= next_heartbeat:
            next_heartbeat += owner._heartbeat_s
            _heartbeat_no_wait(coord)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    encoded, topics = box["ok"]  # type: ignore[misc]
    # what kafka-python's own leader path does, so its metadata watch keeps working
    coord._subscription.group_subscribe(topics)
    coord._cluster.set_topics(coord._subscription.group_subscription())
    coord._cluster.request_update()
    coord._is_leader = True
    coord._assignment_snapshot = coord._metadata_snapshot
    if owner._sync_delay_s and len(members) > 1:
        rest = owner._sync_delay_s - (time.monotonic() - started)
        if rest > 0:
            await coord._net.sleep(rest)
    return list(encoded.items())


def _heartbeat_no_wait(coord) -> None:
    """A Heartbeat with the generation being formed; the answer (REBALANCE_IN_PROGRESS or
    none) does not matter: it keeps our session alive during a long leader round."""
    request = HeartbeatRequest(
        group_id=coord.group_id,
        generation_id=coord._generation.generation_id,
        member_id=coord._generation.member_id,
        group_instance_id=coord.group_instance_id,
    )
    future = coord._manager.send(request, node_id=coord.coordinator_id)
    future.add_errback(lambda exc: log.debug("group %s: heartbeat during the leader round: %s",
                                             coord.group_id, exc))
