"""The driver as a KIP-848 group member (``kafka.group.protocol=consumer``), over librdkafka.

In the consumer rebalance protocol the broker assigns (``uniform`` or ``range``) and the member
only heartbeats (ConsumerGroupHeartbeat), acknowledges revocations and commits with its member
epoch. librdkafka (confluent-kafka) implements all of it with a background heartbeat thread and
incremental rebalance callbacks, so this member is a confluent-kafka ``Consumer`` that never
fetches: every assigned partition is paused the moment it is assigned (no Fetch request is sent,
checked with the mock's request tracking).

One thread owns the client. librdkafka runs rebalance callbacks inside ``poll()``, and a
synchronous commit issued from another thread while one thread polls was seen, in experiments,
to stall until polling stopped (confluent-kafka 2.16.1 on the mock, polls of 0.1 to 1 s), so commits and
OffsetFetch calls are handed to the member's thread, which runs them between polls and, during a
revocation, inside the revoke callback. That callback is the revoke barrier: it returns (and
librdkafka acknowledges the revocation in the next heartbeat) only after the batch reading the
revoked partitions completed and committed, or ``drain_timeout_s`` passed. Blocking it is safe:
heartbeats continue on librdkafka's thread and a blocking ``poll()`` does not count against
``max.poll.interval.ms`` (a 10 s callback under a 6 s limit kept the member, in an experiment). Partitions
not being revoked keep flowing (the protocol is incremental).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTP

from assignment.model import TopicPartition
from spark_groupsource.config.access import (
    TOPIC_DENIED,
    authorization_error,
    denial,
    denied_answer,
    subscription_denied,
)
from spark_groupsource.config.client_configs import NO_AUTO_CREATE
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import GroupUnreachableError, MembershipError
from spark_groupsource.group import history
from spark_groupsource.group.group_full import group_full_error, is_group_full
from spark_groupsource.group.handover_watch import HandoverWatch, join_grace_s
from spark_groupsource.group.poll_interval import PollWatch, leave_warning
from spark_groupsource.group.seam import (
    CommitResult,
    Counters,
    MembershipStatus,
    OwnershipBook,
    Snapshot,
    raise_failure,
)
from spark_groupsource.group.touch import (
    LOST_TOUCH_S,
    CoordinatorTouch,
    LibrdkafkaCoordinator,
    parse_stats,
    silence_s,
)

log = logging.getLogger("spark_groupsource.consumer_member")

#: Commit answers meaning our membership is gone: the offsets are dropped, the partitions lost.
FENCED_CODES = frozenset({
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.FENCED_MEMBER_EPOCH,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError.ILLEGAL_GENERATION,
})
#: Errors after which the member cannot go on (reported by raise_if_failed).
_FATAL_CODES = frozenset({
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.UNSUPPORTED_ASSIGNOR,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.INVALID_GROUP_ID,
})
REMOTE_ASSIGNORS = ("uniform", "range")
#: A commit refused as fenced drops its partitions from planning at once, but librdkafka only
#: sends its next heartbeat sooner: when the broker really fenced the member, that heartbeat
#: makes librdkafka report the loss. If librdkafka still holds the partitions this long after,
#: the refused offsets are sent again (see ``_recheck_refused``).
RECHECK_REFUSED_S = 1.0
#: After the broker gave us an epoch but no partitions, the snapshot reports a rebalance for
#: this long: librdkafka updates the epoch on the heartbeat answer but calls the assignment
#: callback only after resolving the topic ids (and a joiner's partitions arrive once their
#: owner revoked them, within the owner's next heartbeat: 5 s by default), so "nothing owned"
#: right after joining must not read as "caught up" (AvailableNow would end with zero rows).
#: Past it, the broker's target assignment decides (see handover_watch): a handover held up
#: by another member's long batch keeps reporting a rebalance until it completes. Where the
#: broker batches assignments (Kafka >= 4.3), its reported interval is added (join_grace_s).
EMPTY_ASSIGNMENT_GRACE_S = 10.0
#: librdkafka's statistics interval: how often the member looks at its coordinator's connection
TOUCH_STATS_MS = 1000
#: librdkafka's "feature" debug line for one API of a broker's ApiVersions answer
_HEARTBEAT_VERSIONS = re.compile(r"ApiKey ConsumerGroupHeartbeat \(68\) Versions (\d+)\.\.(\d+)")
#: The oldest ConsumerGroupHeartbeat librdkafka sends: v1, KIP-848 as released in Kafka 4.0.
#: Kafka 3.7-3.9 serve v0 only (their KIP-848 early access / preview, off by default), and
#: librdkafka then keeps looking for a coordinator without a word: a member waiting for it would
#: wait out groupJoinTimeoutMs.
MIN_HEARTBEAT_VERSION = 1


def heartbeat_versions_refusal(line: str) -> str | None:
    """Why brokers cannot serve the KIP-848 member, read from librdkafka's ApiVersions debug
    line for ConsumerGroupHeartbeat (pure); None when the line is another or the versions do."""
    found = _HEARTBEAT_VERSIONS.search(line)
    if found is None or int(found.group(2)) >= MIN_HEARTBEAT_VERSION:
        return None
    return (f"their ApiVersions answer offers ConsumerGroupHeartbeat v{found.group(1)}..v{found.group(2)} only: "
            "Apache Kafka before 4.0 (3.7-3.9 serve v0, for a KIP-848 preview that is off by default and "
            f"that librdkafka cannot join); the consumer group protocol needs v{MIN_HEARTBEAT_VERSION} "
            "(Apache Kafka >= 4.0)")


@dataclass(frozen=True)
class ConsumerProtocolConfig:
    group_id: str
    topics: tuple[str, ...] = ()
    # a regex that must match a whole topic name; evaluated by the broker (RE2/J on Kafka)
    pattern: str | None = None
    remote_assignor: str | None = None  # None: the broker's default (uniform on Kafka)
    group_instance_id: str | None = None
    client_rack: str | None = None
    # librdkafka properties (bootstrap, security); may hold secrets
    client_config: Mapping[str, object] = field(default_factory=dict, repr=False)
    security: SecurityConfig | None = field(default=None, repr=False)  # the principal in errors
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms: how long a revocation may take
    join_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000  # bound of one commit / committed-offsets call
    poll_interval_ms: int = 100


def _instance_in_use(code: int, text: str) -> bool:
    """UNRELEASED_INSTANCE_ID (KIP-848): the broker keeps a static member's place for the
    consumer already holding the instance id, as the Java client's UnreleasedInstanceIdException."""
    unreleased = getattr(KafkaError, "UNRELEASED_INSTANCE_ID", None)
    return (unreleased is not None and code == unreleased) or "instance id is still used" in text.lower()


class _ClientLog(logging.Handler):
    """librdkafka's log: warnings and errors go to our log; the "feature" debug lines are
    watched for a broker without ConsumerGroupHeartbeat, which librdkafka reports nowhere else
    (it keeps looking for a coordinator), so the member can fail at once, saying why."""

    def __init__(self, member: ConsumerProtocolMembership):
        super().__init__(logging.DEBUG)
        self.member = member

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            log.log(record.levelno, "group %s: librdkafka: %s", self.member.config.group_id, text)
            if "fatal" in text.lower() and denial(text):
                # an ACL revoked while the query runs: librdkafka makes a refused
                # ConsumerGroupHeartbeat a fatal error, which it says only here (no error event
                # reached the member's poll on Kafka 4.3.1); every commit then fails "Local: Fatal error"
                self.member._denied_fatal(text)
            elif "fatal" in text.lower() and (_instance_in_use(0, text) or is_group_full(text)):
                self.member._on_error(KafkaError(KafkaError._FATAL, text))  # said only here, too
        elif "ConsumerGroupHeartbeat" in text and "NOT supported" in text:
            self._unsupported("KIP-848: ConsumerGroupHeartbeat is not among their ApiVersions; Kafka >= 4.0 serves it")
        elif (why := heartbeat_versions_refusal(text)) is not None:
            self._unsupported(why)

    def _unsupported(self, why: str) -> None:
        self.member._fail(MembershipError(
            f"group {self.member.config.group_id!r}: the brokers (bootstrap servers "
            f"{_servers(self.member.config.client_config)}) do not serve the consumer group protocol "
            f"({why}). Use kafka.group.protocol=classic with these brokers."))


@dataclass
class _Call:
    """Work for the member's thread; the caller waits on ``done``."""

    fn: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


def _ours(tp: CkTP) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


def _servers(config: Mapping[str, object]) -> str:
    """Bootstrap servers for messages (nothing else: the configuration may hold secrets)."""
    return str(config.get("bootstrap.servers", "?"))


def parse_group_metadata(raw: bytes) -> tuple[int, str] | None:
    """(member epoch, member id) from librdkafka's serialized consumer group metadata
    ("CGMDv2:" int32 generation, group id NUL, member id NUL, ...); None if the format differs."""
    magic = b"CGMDv2:"
    if not isinstance(raw, (bytes, bytearray)) or not raw.startswith(magic) or len(raw) < 12:
        return None
    epoch = int.from_bytes(raw[7:11], sys.byteorder, signed=True)
    parts = bytes(raw[11:]).split(b"\0")
    if len(parts) < 3:
        return None
    return epoch, parts[1].decode(errors="replace")


class ConsumerProtocolMembership:
    """One KIP-848 member of one group; implements the ``Membership`` seam."""

    def __init__(self, config: ConsumerProtocolConfig, drain_timeout_s: float | None = None):
        if bool(config.topics) == bool(config.pattern):
            raise MembershipError("exactly one of topics or pattern is required")
        if config.remote_assignor is not None and config.remote_assignor not in REMOTE_ASSIGNORS:
            raise MembershipError(f"remote assignor must be one of {', '.join(REMOTE_ASSIGNORS)}, "
                                  f"got {config.remote_assignor!r}")
        self.config = config
        # a revocation not acknowledged within the rebalance timeout gets the member fenced
        bound = config.rebalance_timeout_ms / 1000.0 * 0.8
        self.drain_timeout_s = min(drain_timeout_s, bound) if drain_timeout_s is not None else bound
        self.counters = Counters()
        self._book = OwnershipBook()
        self._book.observer = self._history
        self._calls: queue.Queue[_Call] = queue.Queue()
        self._closed = threading.Event()
        self._assigned = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._error: BaseException | None = None
        self._epoch, self._member_id = -1, ""
        self._started = time.monotonic()
        self._assigned_at: float | None = None
        self._empty_since: float | None = None  # joined with no partitions (see _joined_empty)
        self._handover = HandoverWatch(config.client_config, config.group_id)
        # partition -> offset of a commit refused as fenced, while librdkafka still holds it
        # (the member's thread only)
        self._refused: dict[TopicPartition, int] = {}
        self._refused_checked = 0.0
        # the query's liveness (poll_interval): librdkafka's own max.poll.interval.ms never
        # expires, this member's thread polls it all the time; the drain bound above is shorter
        self._poll = PollWatch(config.rebalance_timeout_ms / 1000.0)
        self._rejoin = threading.Event()  # the query planned again after the member left
        # the coordinator unreachable said once, and its return, from librdkafka's statistics
        # (as the classic member: spark_groupsource/group/touch.py); the session is the broker's
        self._touch = CoordinatorTouch(config.group_id)
        self._waiting_since: float | None = None  # a synchronous coordinator request in flight
        self._coordinator_view = LibrdkafkaCoordinator()

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        conf: dict[str, Any] = dict(cfg.client_config)
        conf.update({
            "group.id": cfg.group_id,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "max.poll.interval.ms": cfg.rebalance_timeout_ms,
            **NO_AUTO_CREATE,  # librdkafka's consumer default, said: a deleted topic never comes back
            "error_cb": self._on_error,
            "logger": self._client_logger(),
            "stats_cb": self._on_stats,
        })
        # every second unless the query set kafka.statistics.interval.ms (0 turns the
        # lost-touch lines off): delivered to the member's poll(), on its thread
        conf.setdefault("statistics.interval.ms", TOUCH_STATS_MS)
        debug = [d for d in str(conf.get("debug", "")).split(",") if d.strip()]
        conf["debug"] = ",".join(debug + (["feature"] if "feature" not in debug and "all" not in debug else []))
        for key, value in (("group.remote.assignor", cfg.remote_assignor),
                           ("group.instance.id", cfg.group_instance_id), ("client.rack", cfg.client_rack)):
            if value:
                conf[key] = value
        try:
            consumer = Consumer(conf)
            self._subscribe(consumer)
        except KafkaException as exc:
            raise MembershipError(f"cannot create the group member for group {cfg.group_id!r}: "
                                  f"{exc.args[0].str() if exc.args else exc}") from None
        self._consumer = consumer
        self._thread = threading.Thread(target=self._run, name=f"groupkafka-kip848-{cfg.group_id}", daemon=True)
        self._thread.start()

    def _subscribe(self, consumer: Consumer) -> None:
        cfg = self.config
        subscription = list(cfg.topics) if cfg.topics else [f"^({cfg.pattern})$"]
        consumer.subscribe(subscription, on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)

    def _leave_if_overdue(self, consumer: Consumer) -> None:
        """Leave the group when the query's batch in flight outlasted ``kafka.max.poll.interval.ms``
        (``poll_interval``): its partitions are dropped from planning first (the late commit is
        skipped), then ``unsubscribe()`` makes librdkafka leave (a heartbeat with member epoch
        -1; -2 for a static member, whose partitions then wait for the session timeout) without
        the revoke barrier. Subscribed again (a new join) when the query plans again."""
        if self._rejoin.is_set():
            self._rejoin.clear()
            self._empty_since = time.monotonic()  # nothing owned until the broker assigns again
            self._subscribe(consumer)
            log.info("group %s: the query plans again after leaving for kafka.max.poll.interval.ms: "
                     "rejoining the group", self.config.group_id)
            return
        now = time.monotonic()
        overdue = self._poll.overdue(now)
        if overdue is None:
            return
        self._poll.left(now)
        self.counters.poll_timeouts += 1
        log.warning("%s", leave_warning(self.config.group_id, overdue, self._poll.batch_name(),
                                        self.config.rebalance_timeout_ms, "consumer"))
        gone = self._book.lose(set(self._book.owned()) | set(self._book.revoking()))
        self.counters.partitions_lost += len(gone)
        self._refused.clear()
        consumer.unsubscribe()

    def polled(self, batches: Mapping[str, object] | None = None) -> None:
        """The query planned: a member that left for ``kafka.max.poll.interval.ms`` joins again
        (on the member's thread, which owns the client)."""
        if self._poll.polled(time.monotonic(), batches):
            self._empty_since = time.monotonic()  # rejoining: owning nothing is not "caught up"
            self._rejoin.set()

    def _client_logger(self) -> logging.Logger:
        logger = logging.getLogger(f"spark_groupsource.consumer_member.librdkafka.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.handlers[:] = [_ClientLog(self)]
        return logger

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        timeout = self.config.poll_interval_ms / 1000.0
        try:
            while not self._closed.is_set():
                try:
                    msg = consumer.poll(timeout)
                    if msg is not None and msg.error() is not None:
                        self._on_consumer_error(msg.error())
                    elif msg is not None:
                        # cannot happen while every partition is paused; never delivered anywhere
                        log.warning("group %s: membership client received a record of %s [%d]; ignored",
                                    self.config.group_id, msg.topic(), msg.partition())
                    self._note_metadata(consumer)  # the epoch also moves without a new assignment
                    self._serve_calls()
                    self._leave_if_overdue(consumer)
                    self._recheck_refused(consumer)
                    self._check_join_bound()
                    # as the snapshot says: a join whose partitions are still on their way is one
                    # rebalance until they arrive (not one at the empty join, then one more)
                    self.counters.observe_rebalance(bool(self._book.revoking()) or not self._assigned.is_set()
                                                    or self._arriving(self._book.owned()), time.monotonic())
                except Exception as exc:  # noqa: BLE001 - kept for raise_if_failed
                    if self._closed.is_set():
                        break
                    log.warning("group %s: membership loop error: %s", self.config.group_id, exc)
                    time.sleep(0.2)
        finally:
            self._close_client(consumer)

    def _close_client(self, consumer: Consumer) -> None:
        """Leave (static members keep their assignment for the session timeout) and fail what waits."""
        try:
            consumer.close()
        except Exception as exc:  # noqa: BLE001
            log.warning("group %s: error while leaving: %s", self.config.group_id, exc)
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                break
            call.error = MembershipError(f"group {self.config.group_id!r}: the member was closed")
            call.done.set()
        log.info("group %s: left the group", self.config.group_id)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # before the member's thread leaves: from then on the broker may give the partitions away
        self._history("left", list(self._book.owned()), time.monotonic())
        with self._book.cond:
            self._book.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    # ---- the member's thread: callbacks and calls ------------------------------------------
    def _serve_calls(self) -> None:
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                call.result = call.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                call.error = exc
            call.done.set()

    def _on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        """Run ``fn`` on the member's thread (directly when already there), bounded in time."""
        if self._on_thread():
            return fn()
        if self._closed.is_set() or self._thread is None or not self._thread.is_alive():
            raise MembershipError(f"group {self.config.group_id!r}: the member is not running ({what})")
        call = _Call(fn)
        self._calls.put(call)
        # the revoke barrier serves calls too; the bound covers one call plus a drain in progress
        bound = self.config.request_timeout_ms / 1000.0 + self.drain_timeout_s + 5.0
        if not call.done.wait(bound):
            raise GroupUnreachableError(f"group {self.config.group_id!r}: {what} did not finish within "
                                        f"{bound:.0f}s (bootstrap servers {_servers(self.config.client_config)})")
        if call.error is not None:
            raise call.error
        return call.result

    def _note_metadata(self, consumer: Consumer) -> None:
        try:
            found = parse_group_metadata(consumer.consumer_group_metadata())
        except Exception:  # noqa: BLE001 - only informative
            found = None
        if found is not None:
            self._epoch, self._member_id = found
            if self._epoch > 0 and self._member_id and not self._assigned.is_set():
                self._joined_empty()

    def _joined_empty(self) -> None:
        """The broker answered our heartbeat with a member epoch: we are in the group, with the
        assignment that heartbeat carried, which may be empty (more members than partitions, or
        ours still being revoked from their owner). librdkafka calls no assignment callback for
        an empty assignment, so without this a member with nothing to read looked as if it never
        joined and failed after groupJoinTimeoutMs (as a classic member with an empty
        SyncGroup assignment counts as joined, so does this one)."""
        if self._assigned_at is None:
            self._assigned_at = time.monotonic()
        self._empty_since = time.monotonic()
        self._assigned.set()
        log.info("group %s: joined with an empty assignment (epoch %d)", self.config.group_id, self._epoch)

    def _history(self, event: str, partitions: list[TopicPartition], mono: float) -> None:
        """A change of ownership into the member's history, with the member epoch known then."""
        history.record(event, mono, member=self._member_id, gen=self._epoch, protocol="consumer",
                       partitions=history.tps(partitions))

    def _on_assign(self, consumer: Consumer, partitions: list[CkTP]) -> None:
        if partitions:  # an assignment that changes: an episode ended by the loop's next turn
            self.counters.observe_rebalance(True, time.monotonic())
        try:
            if partitions:
                consumer.incremental_assign(partitions)
                consumer.pause(partitions)  # after assigning: assign() resets the paused state
            self._book.acquire(_ours(tp) for tp in partitions)
            self._settled(partitions)
            self._note_metadata(consumer)
            if self._assigned_at is None:
                self._assigned_at = time.monotonic()
            self._assigned.set()
            if partitions:
                log.info("group %s: assigned %s (epoch %d)", self.config.group_id,
                         sorted(str(_ours(tp)) for tp in partitions), self._epoch)
        except Exception as exc:  # noqa: BLE001 - never raise into librdkafka's callback
            self._fail(MembershipError(f"group {self.config.group_id!r}: handling an assignment failed: {exc}"))

    def _on_revoke(self, consumer: Consumer, partitions: list[CkTP]) -> None:
        """The revoke barrier: give partitions up after their batch completed and committed."""
        revoked = {_ours(tp) for tp in partitions}
        self._settled(partitions)
        began = time.monotonic()
        if revoked:
            self.counters.observe_rebalance(True, began)  # ended by the loop's next turn
        try:
            if revoked and not self._poll.away:  # left for max.poll.interval.ms: nothing to wait for
                self._drain(revoked)
            self._book.finish_revoke(revoked)
            self.counters.rebalances += 1
            self.counters.revoke_barrier_s += time.monotonic() - began
            if partitions:
                consumer.incremental_unassign(partitions)
            log.info("group %s: revoked %s", self.config.group_id, sorted(map(str, revoked)))
        except Exception as exc:  # noqa: BLE001
            self._book.finish_revoke(revoked)
            log.warning("group %s: error while giving up %s: %s", self.config.group_id,
                        sorted(map(str, revoked)), exc)

    def _drain(self, revoked: set[TopicPartition]) -> None:
        self._book.begin_revoke(revoked)
        deadline = time.monotonic() + self.drain_timeout_s
        flushed = False
        while not self._closed.is_set():
            self._serve_calls()  # the planner's commit of the running batch arrives here
            busy, unsent = self._book.drain_state(revoked)
            if not busy and not unsent:
                return
            if not busy and unsent:
                if flushed:
                    log.warning("group %s: giving up %d revoked partitions whose last commit failed: the "
                                "next owner re-reads from the group's offset (at-least-once)",
                                self.config.group_id, len(unsent))
                    return
                flushed = True
                self._commit_now({}, None)  # kept offsets: one more try, the batch is done
                continue
            if time.monotonic() > deadline:
                self.counters.drain_timeouts += 1
                log.warning("group %s: in-flight batch did not complete and commit within %.0fs; giving up "
                            "%d partitions uncommitted: the next owner re-reads from the last commit "
                            "(at-least-once)", self.config.group_id, self.drain_timeout_s, len(busy | unsent))
                return
            with self._book.cond:
                self._book.cond.wait(0.05)

    def _on_lost(self, consumer: Consumer, partitions: list[CkTP]) -> None:
        """Fenced or session expired: stop planning these at once (no commit can land)."""
        gone = self._book.lose(_ours(tp) for tp in partitions)
        self._settled(partitions)
        self.counters.partitions_lost += len(gone)
        try:
            if partitions:
                consumer.incremental_unassign(partitions)
        except Exception as exc:  # noqa: BLE001
            log.debug("group %s: unassign after loss: %s", self.config.group_id, exc)
        if gone:
            log.warning("group %s: lost %d partitions (member fenced or session expired): %s",
                        self.config.group_id, len(gone), sorted(map(str, gone)))

    def _on_stats(self, raw: str) -> None:
        try:
            stats = parse_stats(raw)
        except ValueError:
            return
        reached, where = self._coordinator_view.observe(stats)
        self._touch.observe(reached, where)

    def _on_error(self, err: KafkaError) -> None:
        code = err.code()
        if code == KafkaError.GROUP_MAX_SIZE_REACHED or is_group_full(err.str()):
            # librdkafka makes it a fatal error (as Java does): the group has no place for us
            self._fail(group_full_error(self.config.group_id, "consumer", _servers(self.config.client_config),
                                        f"ConsumerGroupHeartbeat: {err.str()}"))
            return
        # librdkafka's "Fatal error" (_FATAL) event: the client is unusable from here on (seen
        # with fatal() false for a static member whose instance id another consumer holds)
        if err.fatal() or code in _FATAL_CODES or code == KafkaError._FATAL:
            what = err.str()
            if _instance_in_use(code, what):
                what += (f" (static member {self.config.group_instance_id!r}: another consumer of the group "
                         "holds the same kafka.group.instance.id; stop it, or give this query another one)")
            elif code in (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE):
                what += (" (the broker does not serve the consumer group protocol, KIP-848 / "
                         "ConsumerGroupHeartbeat: use kafka.group.protocol=classic)")
            elif code == KafkaError.FENCED_INSTANCE_ID:
                what += (f" (static member {self.config.group_instance_id!r} was fenced: another consumer "
                         "uses the same kafka.group.instance.id)")
            self._fail(MembershipError(f"group {self.config.group_id!r}: {what}"))
        else:
            log.info("group %s: client reports %s", self.config.group_id, err.str())

    def _on_consumer_error(self, err: KafkaError) -> None:
        """An error librdkafka hands to poll() as a message: how it reports what the group
        coordinator refused (FindCoordinator, ConsumerGroupHeartbeat). A missing ACL fails the
        member at once, naming principal, resource and operation, as in the classic protocol."""
        code = err.code()
        servers = _servers(self.config.client_config)
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            self._fail(authorization_error(self.config.security, "Group", self.config.group_id,
                                           "READ (ConsumerGroupHeartbeat, OffsetCommit)", servers, err.str()))
        elif code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            self._fail(subscription_denied(self.config.security, self.config.topics, self.config.pattern, servers,
                                           err.str()))
        else:
            self._on_error(err)

    def _denied_fatal(self, text: str) -> None:
        servers = _servers(self.config.client_config)
        if denial(text) == TOPIC_DENIED:
            self._fail(subscription_denied(self.config.security, self.config.topics, self.config.pattern, servers,
                                           text))
        else:
            self._fail(authorization_error(self.config.security, "Group", self.config.group_id,
                                           "READ (ConsumerGroupHeartbeat, OffsetCommit)", servers, text))

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
            log.error("%s", exc)
        with self._book.cond:
            self._book.cond.notify_all()

    def _check_join_bound(self) -> None:
        waited = time.monotonic() - self._started
        if self._assigned.is_set() or self._error is not None or waited * 1000 < self.config.join_timeout_ms:
            return
        err = GroupUnreachableError(
            f"group {self.config.group_id!r}: no assignment within {waited:.0f}s (consumer group protocol, "
            f"bootstrap servers {_servers(self.config.client_config)}; ConsumerGroupHeartbeat did not complete "
            "a join). Check that the brokers are up and serve KIP-848 groups, or raise groupJoinTimeoutMs.")
        err.step = "assignment"
        self._fail(err)

    # ---- commits -----------------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int],
               serials: Mapping[TopicPartition, int] | None = None) -> CommitResult:
        """Commit with our member epoch (librdkafka sends it); only partitions still held under the
        acquisition the offsets were planned under. Fenced: the partitions are lost, nothing kept.
        Other failures (STALE_MEMBER_EPOCH, coordinator moving): kept and sent again later."""
        offsets = dict(offsets)
        try:
            return self._call(lambda: self._commit_now(offsets, serials), "an offset commit")
        except MembershipError as exc:
            self.counters.commit_failures += 1
            return CommitResult(failed=frozenset(offsets), error=str(exc))

    def _commit_now(self, offsets: Mapping[TopicPartition, int],
                    serials: Mapping[TopicPartition, int] | None) -> CommitResult:
        snap = self.snapshot()
        mine, skipped, todo = self._book.to_commit(offsets, serials, snap.committable, snap.owned)
        self._book.settle(skipped)
        if not mine:
            return CommitResult(skipped=frozenset(skipped))
        sent = (self._member_id, self._epoch, time.monotonic())
        errors = self._send(mine)
        fenced = {tp for tp, code in errors.items() if code in FENCED_CODES}
        failed = {tp for tp, code in errors.items() if code not in FENCED_CODES}
        done = set(mine) - fenced - failed
        history.record("commit", sent[2], member=sent[0], gen=sent[1], protocol="consumer",
                       accepted=[[tp.topic, tp.partition, mine[tp]] for tp in sorted(done)],
                       fenced=history.tps(fenced), failed=history.tps(failed))
        self._book.settle(done | fenced)
        denied = denied_answer(self.config.security, self.config.group_id,
                               [(tp.topic, KafkaError(errors[tp]).name()) for tp in failed],
                               _servers(self.config.client_config), "OffsetCommit")
        if denied is None and any(errors[tp] == KafkaError._FATAL for tp in failed):
            denied = MembershipError(f"group {self.config.group_id!r}: librdkafka's member is in a fatal state "
                                     "(the commit answered 'Local: Fatal error'; the log above says why): it "
                                     "cannot commit or stay in the group any more")
        if denied is not None:  # not kept: no retry can succeed, the query fails now
            self._fail(denied)
            self.counters.commit_failures += 1
            return CommitResult(committed=frozenset(done), failed=frozenset(failed), skipped=frozenset(skipped),
                                error=str(denied))
        error = None
        if fenced:
            self.counters.fenced_commits += 1
            self.counters.partitions_lost += len(self._book.lose(fenced))
            self._refused.update({tp: mine[tp] for tp in fenced})
            self._refused_checked = time.monotonic()
            error = KafkaError(errors[next(iter(fenced))]).str()
            log.warning("group %s: commit fenced (%s); %d partitions marked lost (sent again only if "
                        "librdkafka keeps them and reports no loss)", self.config.group_id, error, len(fenced))
        if failed:
            self.counters.commit_failures += 1
            self._book.keep(failed, todo)
            error = error or KafkaError(errors[next(iter(failed))]).str()
            log.warning("group %s: commit of %d partitions failed (%s); kept and retried",
                        self.config.group_id, len(failed), error)
        if done:
            self.counters.commits += 1
            log.info("group %s: committed %s", self.config.group_id,
                     ", ".join(f"{tp}@{mine[tp]}" for tp in sorted(done)))
        return CommitResult(committed=frozenset(done), lost=frozenset(fenced), failed=frozenset(failed),
                            skipped=frozenset(skipped), error=error)

    def _settled(self, partitions: Iterable[CkTP]) -> None:
        """librdkafka reported these assigned, revoked or lost: no refused commit to check."""
        for tp in partitions:
            self._refused.pop(_ours(tp), None)

    def _recheck_refused(self, consumer: Consumer) -> None:
        """A commit refused as fenced (UNKNOWN_MEMBER_ID, ...) while the membership stands.

        A coordinator answers so when it no longer knows the member (fenced, session expired),
        and then the next heartbeat fences it and librdkafka reports the partitions lost. But
        when librdkafka goes on holding them with no loss reported, they were dropped from
        planning for good (no assignment change will bring them back). So, every
        ``RECHECK_REFUSED_S``, the refused offsets of partitions librdkafka still holds are sent
        again: the broker accepts them only from a current member with the current epoch, which
        proves the membership stands; those partitions are then taken back (new acquisition
        serials: planning resumes at the offsets just committed, nothing re-read). A refusal
        again changes nothing; a real fence ends the check through the loss callback."""
        if not self._refused or time.monotonic() - self._refused_checked < RECHECK_REFUSED_S:
            return
        self._refused_checked = time.monotonic()
        held = {_ours(tp) for tp in consumer.assignment()}
        owned = self._book.owned()
        self._refused = {tp: off for tp, off in self._refused.items() if tp in held and tp not in owned}
        if not self._refused:
            return
        errors = self._send(self._refused)
        back = {tp: off for tp, off in self._refused.items() if tp not in errors}
        if not back:
            return
        for tp in back:
            del self._refused[tp]
        self._book.acquire(back)
        self.counters.commits += 1
        log.warning("group %s: a commit refused as fenced was accepted when sent again (librdkafka kept "
                    "the partitions and reported no loss: the membership stands); taking back %s",
                    self.config.group_id, ", ".join(f"{tp}@{off}" for tp, off in sorted(back.items())))

    def _send(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """One synchronous OffsetCommit; partition -> error code for those not committed."""
        consumer = self._consumer
        assert consumer is not None
        request = [CkTP(tp.topic, tp.partition, off) for tp, off in sorted(offsets.items())]
        try:
            with self._waiting_on_coordinator("an offset commit"):
                answer = consumer.commit(offsets=request, asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            code = err.code() if err is not None else KafkaError._FAIL
            return {tp: code for tp in offsets}
        out: dict[TopicPartition, int] = {}
        for tp in answer or []:
            if tp.error is not None:
                out[_ours(tp)] = tp.error.code()
        return out

    @contextlib.contextmanager
    def _waiting_on_coordinator(self, what: str) -> Iterator[None]:
        """A synchronous request to the coordinator on the member's thread: the statistics wait
        until it returns, so its own wait is the silence the metrics read meanwhile."""
        self._waiting_since = began = time.monotonic()
        try:
            yield
        finally:
            self._waiting_since = None
            waited = time.monotonic() - began
            if waited >= LOST_TOUCH_S:
                log.warning("group %s: the group coordinator took %.1fs to answer %s", self.config.group_id,
                            waited, what)

    def flush_pending(self) -> CommitResult | None:
        if not self._book.has_pending():
            return None
        return self.commit({})

    def pending(self) -> dict[TopicPartition, int]:
        return self._book.pending()

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = [CkTP(tp.topic, tp.partition) for tp in partitions]
        if not parts:
            return {}
        bound_s = self.config.request_timeout_ms / 1000.0

        def fetch() -> list[CkTP]:
            assert self._consumer is not None
            with self._waiting_on_coordinator("an offset fetch"):
                return self._consumer.committed(parts, timeout=bound_s)

        try:
            found = self._call(fetch, "reading the group's committed offsets")
        except KafkaException as exc:
            err = GroupUnreachableError(
                f"group {self.config.group_id!r}: could not read the group's committed offsets within "
                f"{bound_s:.0f}s (OffsetFetch, bootstrap servers {_servers(self.config.client_config)}): "
                f"{exc.args[0].str() if exc.args else exc}")
            err.step = "coordinator"
            raise err from None
        return {_ours(tp): (tp.offset if tp.offset >= 0 else None) for tp in found}

    # ---- state for the planner ---------------------------------------------------------------
    @property
    def cooperative(self) -> bool:
        """KIP-848 is incremental: partitions not being revoked keep flowing."""
        return True

    def raise_if_failed(self) -> None:
        raise_failure(self._error, self.config.group_id)

    def coordinator_silence_s(self) -> float | None:
        """Seconds the coordinator's connection has been seen down in librdkafka's statistics
        (every ``statistics.interval.ms``), or a commit or offset fetch has waited on it
        (:func:`silence_s`); 0 while it is up, None before the first assignment."""
        if self._assigned_at is None:
            return None
        since = self._waiting_since
        return silence_s(self._touch.lost_for_s, None if since is None else time.monotonic() - since)

    def snapshot(self) -> Snapshot:
        self.raise_if_failed()
        owned, revoking = self._book.owned(), self._book.revoking()
        return Snapshot(generation=self._epoch, member_id=self._member_id, protocol="consumer",
                        owned=owned, committable=frozenset(owned),
                        rebalancing=bool(revoking) or self._arriving(owned), revoking=revoking)

    def _arriving(self, owned: Mapping[TopicPartition, int]) -> bool:
        """Joined with nothing: an assignment may still be on its way (EMPTY_ASSIGNMENT_GRACE_S),
        or be held up by its owner's revocation (the broker's target assignment says so)."""
        since = self._empty_since
        if owned or since is None:
            return False
        pending = self._handover.pending(self._member_id)
        grace = join_grace_s(EMPTY_ASSIGNMENT_GRACE_S, self._handover.assignment_interval_ms)
        return time.monotonic() - since < grace or bool(pending)

    def wait_for_assignment(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.raise_if_failed()
            if self._assigned.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                return True
        return self._assigned.is_set()

    def may_plan(self, snap: Snapshot | None = None) -> bool:
        return True

    def batch_planned(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int]) -> bool:
        if not self._book.batch_planned(partitions):
            return False
        self._poll.planned(time.monotonic(), partitions)
        return True

    def batch_completed(self) -> None:
        self._book.batch_completed()
        self._poll.completed(time.monotonic())

    def status(self) -> MembershipStatus:
        """What is known: an assignment implies the cluster and the coordinator were reached
        (librdkafka does not report those steps separately)."""
        def wall(mono: float | None) -> float | None:
            return None if mono is None else time.time() - (time.monotonic() - mono)

        at = wall(self._assigned_at)
        return MembershipStatus(cluster_reached_at=at, coordinator_found_at=at,
                                coordinator_missing_since=None if at is not None else wall(self._started),
                                assigned_at=at, stable=at is not None and not self._book.revoking())

    def describe(self) -> str:
        """One line of state for errors and logs (no configuration: it may hold secrets)."""
        return (f"group {self.config.group_id!r} (consumer protocol): member_id={self._member_id!r} "
                f"epoch={self._epoch} assignment_seen={self._assigned.is_set()} owned={len(self._book.owned())} "
                f"revoking={len(self._book.revoking())} error={self._error!r}")


# Properties the member sets itself (typed options) or that do not apply to a membership-only client.
_NOT_PASSED = frozenset({
    "group.id", "group.protocol", "group.protocol.type", "group.remote.assignor", "group.instance.id",
    "client.rack", "max.poll.interval.ms", "enable.auto.commit", "enable.auto.offset.store",
    "auto.offset.reset", "isolation.level", "session.timeout.ms", "heartbeat.interval.ms",
    "partition.assignment.strategy", "enable.partition.eof",
})


def consumer_membership(opts: Any, *, drain_timeout_s: float | None = None) -> ConsumerProtocolMembership:
    """The KIP-848 member for parsed stream or batch options (``kafka.group.protocol=consumer``).

    Every other ``kafka.*`` property (client.id, timeouts) goes to librdkafka as given, and the
    security settings as :mod:`spark_groupsource.config.security` renders them, as for the fetchers."""
    sub = opts.subscription
    client = {k: v for k, v in opts.kafka_params.items() if k not in _NOT_PASSED}
    client.update(opts.security.librdkafka())
    client["bootstrap.servers"] = opts.bootstrap_servers
    client.setdefault("log_level", 4)
    return ConsumerProtocolMembership(
        ConsumerProtocolConfig(
            group_id=opts.group_id or "",
            topics=tuple(getattr(sub, "topics", ())),
            pattern=getattr(sub, "pattern", None),
            remote_assignor=opts.remote_assignor,
            group_instance_id=opts.group_instance_id,
            client_rack=opts.client_rack,
            client_config=client,
            security=opts.security,
            rebalance_timeout_ms=opts.max_poll_interval_ms or 300_000,
            join_timeout_ms=opts.group_join_timeout_ms,
        ),
        drain_timeout_s=drain_timeout_s,
    )
