"""Every broker offset query the driver's planner makes, behind one small interface.

Planning code asks this object for numbers and never talks to Kafka itself, so
the planning functions stay pure and the I/O stays here (Spark's
KafkaOffsetReader plays the same role).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, OffsetSpec
from confluent_kafka.cimpl import _AdminClientImpl

from assignment.model import TopicPartition
from spark_groupsource import config as opt
from spark_groupsource.config import admin_config
from spark_groupsource.config.access import RefusalWatch, authorization_error
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import BrokerError

log = logging.getLogger("spark_groupsource.offsets")

#: The request ``AdminClient.list_offsets`` wraps (one future for the whole answer, a dict
#: partition -> ListOffsetsResultInfo or KafkaError), where this confluent-kafka has it.
_direct_list_offsets = getattr(_AdminClientImpl, "list_offsets", None)


@dataclass
class _Sent:
    """A ListOffsets sent: one future for the whole answer, futures per partition, or the error."""

    partitions: list[TopicPartition]
    whole: Future | None = None
    futures: dict | None = None
    error: KafkaException | None = None

@dataclass
class WatermarksAsked:
    """The ListOffsets of a watermark query sent ahead (:meth:`OffsetReader.send_watermarks`);
    ``earliest`` is None when only the ends were asked."""

    partitions: list[TopicPartition]
    earliest: _Sent | None
    latest: _Sent


T = TypeVar("T")

@dataclass(frozen=True)
class RetryPolicy:
    """How driver-side offset queries ride out a broker or coordinator that is away.

    Each query is one request per broker bounded by ``request_timeout_ms``; what failed is asked
    again ``num_retries`` times, ``retry_interval_ms`` apart (Spark's ``fetchOffset.numRetries``
    and ``fetchOffset.retryIntervalMs``). A query therefore gives up after at most
    ``(num_retries + 1) * request_timeout_ms + num_retries * retry_interval_ms``.
    """

    num_retries: int = 3
    retry_interval_ms: int = 1_000
    request_timeout_ms: int = 5_000

    @property
    def bound_s(self) -> float:
        n = self.num_retries
        return ((n + 1) * self.request_timeout_ms + n * self.retry_interval_ms) / 1000.0


@dataclass(frozen=True)
class Partial:
    """What a query could answer, and why the rest could not be answered."""

    found: dict
    missing: dict[TopicPartition, str]
    attempts: int


def reader_for(opts: opt.CommonOptions) -> OffsetReader:
    """The offset reader a query's options describe (client config and retry policy)."""
    policy = RetryPolicy(opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms)
    return OffsetReader(opt.fetcher_config(opts), policy=policy, security=opts.security)


class OffsetReader:
    """Watermarks, timestamp lookups, metadata and a group's committed offsets through
    confluent-kafka clients that never join a group (reading commits disturbs nobody).

    Offsets are read with one ``AdminClient`` request per broker, so a broker that is away
    costs only its own partitions: the ``try_*`` methods return what was answered and name
    what was not (the stream leaves those partitions out of one micro-batch); the plain
    methods raise :class:`BrokerError` once the :class:`RetryPolicy` is spent. Committed
    offsets are read by a consumer of the group that never subscribes (see :meth:`_ask_committed`).
    """

    def __init__(self, config: Mapping[str, object], timeout_s: float = 30.0, policy: RetryPolicy | None = None,
                 security: SecurityConfig | None = None):
        self._config = dict(config)
        self._timeout = timeout_s
        self.policy = policy or RetryPolicy()
        self.bootstrap = str(self._config.get("bootstrap.servers", ""))
        committed = str(self._config.get("isolation.level", "read_uncommitted")) == "read_committed"
        self._isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        self._admin: AdminClient | None = None
        self._group_readers: dict[str, Consumer] = {}  # group -> its OffsetFetch client
        # refused logins and TLS handshakes, from librdkafka's error_cb (it only reconnects)
        self.refusals = RefusalWatch(security, self.bootstrap, "librdkafka")
        self._security = security
        self._contacted = False  # the first contact was made (once per reader, see _first_contact)
        self._public_list_offsets = False  # the binding's direct request answered oddly once

    def _on_client_error(self, err: KafkaError) -> None:
        self.refusals.observe(f"{err.name()}: {err.str()}")

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({**admin_config(self._config), "error_cb": self._on_client_error})
            if not self._contacted:
                self._contacted = True
                self._first_contact(self._admin)
        return self._admin

    def check_access(self) -> None:
        """Reach the cluster once (bounded by the request timeout): raises a refused login or TLS
        handshake as a :class:`SecurityError`; an outage is left to the callers' bounds."""
        self._admin_client()

    def _first_contact(self, admin: AdminClient) -> None:
        """The reader's first client asks for metadata in short slices, so that a refused login
        or TLS handshake is raised within a second or so rather than after a whole request
        timeout; an ordinary outage is left to the retry policy as before. Once per reader: the
        clients made again after an unanswered query go straight to their requests."""
        deadline = time.monotonic() + self.policy.request_timeout_ms / 1000.0
        while time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=0.5)
                return
            except KafkaException:
                admin.poll(0)
                self.refusals.raise_if_refused()

    def _raise_if_refused(self) -> None:
        """A refused login or TLS handshake fails the query at once (callbacks are served by
        poll; no retry can fix them)."""
        if self._admin is not None:
            self._admin.poll(0)
        self.refusals.raise_if_refused()

    def _raise_if_denied(self, missing: Mapping[TopicPartition, str], group: str | None = None) -> None:
        """A missing ACL fails at once too, naming principal, resource and operation."""
        for tp, why in sorted(missing.items()):
            if "GROUP_AUTHORIZATION_FAILED" in why:
                raise authorization_error(self._security, "Group", group or "?", "DESCRIBE (OffsetFetch)",
                                          self.bootstrap, why)
            if "TOPIC_AUTHORIZATION_FAILED" in why:
                raise authorization_error(self._security, "Topic", tp.topic, "DESCRIBE (ListOffsets, Metadata)",
                                          self.bootstrap, why)

    def _fresh_clients(self) -> None:
        """After any unanswered query, the next one goes through new clients. librdkafka's
        admin client does not always recover from a leader change or a cluster restart by
        itself; measured on a 3-node Kafka: FENCED_LEADER_EPOCH, or no answer from the dead
        leader, for the whole 120 s outage bound after a broker's kill -9 while the new leader
        served (Java had the same, KAFKA-9535), and "No leaders found" for 90 s after the whole
        cluster had restarted. A new client starts from fresh metadata."""
        self.close()

    def close(self) -> None:
        self._admin = None
        readers, self._group_readers = self._group_readers, {}
        for consumer in readers.values():
            consumer.close()

    def _group_reader(self, group: str) -> Consumer:
        """A consumer of ``group`` that never subscribes, so never joins: its OffsetFetch."""
        consumer = self._group_readers.get(group)
        if consumer is None:
            consumer = Consumer({**self._config, "group.id": group, "enable.auto.commit": False,
                                 # as the admin request: committed offsets whether or not stable
                                 "isolation.level": "read_uncommitted",
                                 "error_cb": self._on_client_error})
            self._group_readers[group] = consumer
        return consumer

    # -- retries ---------------------------------------------------------------------------
    def _with_retries(self, keys: list[T], ask: Callable[[list[T]], tuple[dict, dict[T, str]]],
                      retries: int | None = None, group: str | None = None) -> Partial:
        """Ask for ``keys``; ask again for what failed, per the policy (or ``retries`` times)."""
        found: dict = {}
        missing: dict[T, str] = {}
        todo = list(keys)
        attempts = 0
        for attempt in range(1 + (self.policy.num_retries if retries is None else retries)):
            if attempt:
                time.sleep(self.policy.retry_interval_ms / 1000.0)
            attempts += 1
            got, missing = ask(todo)
            found.update(got)
            todo = [k for k in todo if k in missing]
            if not todo:
                break
            self._raise_if_refused()
            self._raise_if_denied(missing, group)
            self._fresh_clients()
            log.info("offset query: %d unanswered after attempt %d (%s)", len(todo), attempts,
                     next(iter(missing.values())))
        return Partial(found, {k: missing[k] for k in todo}, attempts)

    def _raise_missing(self, what: str, partial: Partial) -> None:
        if partial.missing:
            raise BrokerError(self.unavailable_message(what, partial.missing, partial.attempts))

    def unavailable_message(self, what: str, missing: Mapping[TopicPartition, str], attempts: int,
                            since_s: float | None = None) -> str:
        """Names the partitions, their leaders, the bootstrap servers and what was tried."""
        parts = sorted(missing)
        shown = ", ".join(map(str, parts[:10])) + (f" and {len(parts) - 10} more" if len(parts) > 10 else "")
        leaders = self.leaders(parts)
        where = "; ".join(f"{tp}: leader {leaders[tp]}" for tp in parts[:10] if tp in leaders) or (
            "cluster metadata unavailable"
        )
        took = f" for {since_s:.0f}s" if since_s is not None else ""
        reason = missing[parts[0]]
        return (
            f"cannot read {what} of {shown}{took} ({where}) through bootstrap servers {self.bootstrap}: "
            f"{attempts} attempts, each bounded by {self.policy.request_timeout_ms} ms, "
            f"{self.policy.retry_interval_ms} ms apart (fetchOffset.numRetries="
            f"{self.policy.num_retries}, fetchOffset.retryIntervalMs={self.policy.retry_interval_ms}); "
            f"last error: {reason}"
        )

    # -- watermarks ------------------------------------------------------------------------
    def _send_list_offsets(self, partitions: list[TopicPartition],
                           spec: OffsetSpec | Mapping[TopicPartition, OffsetSpec]) -> _Sent:
        """Send one ListOffsets per leader; what to wait on (or why it could not be sent).
        ``spec``: one for every partition, or one per partition (timestamp lookups).

        ``AdminClient.list_offsets`` makes a ``concurrent.futures.Future`` (each with its own
        ``threading.Condition``) per partition and resolves them one by one from a callback:
        at 1,000 partitions and two specs per trigger that was most of the driver's planning
        time (profiled: about 2,000 futures made, resolved and awaited per trigger). Through
        the binding's own request (the one ``list_offsets`` wraps) one future carries the
        whole answer; the public method stays the way whenever that one is not there or
        answers in an unexpected shape."""
        timeout = self.policy.request_timeout_ms / 1000.0
        specs = spec if isinstance(spec, Mapping) else dict.fromkeys(partitions, spec)
        keys = [CkTP(tp.topic, tp.partition, specs[tp]._value) for tp in partitions]
        try:
            if _direct_list_offsets is not None and not self._public_list_offsets:
                whole: Future = Future()
                whole.set_running_or_notify_cancel()
                _direct_list_offsets(self._admin_client(), keys, whole,
                                     isolation_level_value=self._isolation.value, request_timeout=timeout)
                return _Sent(partitions, whole=whole)
            futures = self._admin_client().list_offsets(
                {CkTP(tp.topic, tp.partition): specs[tp] for tp in partitions},
                isolation_level=self._isolation,
                request_timeout=timeout,
            )
            return _Sent(partitions, futures=futures)
        except KafkaException as exc:
            return _Sent(partitions, error=exc)

    def _collect_offsets(self, sent: _Sent, spec: OffsetSpec | Mapping[TopicPartition, OffsetSpec],
                         none_past_end: bool = False) -> tuple[dict, dict]:
        """The offsets answered, and why the others were not. ``none_past_end``: an offset of
        -1 is an answer, None (a timestamp lookup past the partition's last record); for the
        log start and end it means the leader did not answer."""
        partitions = sent.partitions
        if sent.error is not None:
            return {}, {tp: _reason(sent.error) for tp in partitions}
        timeout = self.policy.request_timeout_ms / 1000.0
        if sent.whole is not None:
            try:
                answers = sent.whole.result(timeout=timeout + 5)
            except Exception as exc:  # noqa: BLE001 - KafkaException or a future timeout
                return {}, {tp: _reason(exc) for tp in partitions}
            if not isinstance(answers, dict) or len(answers) != len(partitions):
                log.warning("confluent-kafka's ListOffsets answered in an unexpected shape (%s); using "
                            "AdminClient.list_offsets from now on", type(answers).__name__)
                self._public_list_offsets = True
                return self._collect_offsets(self._send_list_offsets(partitions, spec), spec, none_past_end)
            results = {TopicPartition(ck.topic, ck.partition): value for ck, value in answers.items()}
        else:
            results = {}
            for ck, fut in sent.futures.items():
                try:
                    results[TopicPartition(ck.topic, ck.partition)] = fut.result(timeout=timeout + 5)
                except Exception as exc:  # noqa: BLE001 - KafkaException or a future timeout
                    results[TopicPartition(ck.topic, ck.partition)] = exc
        found, missing = {}, {}
        for tp in partitions:
            value = results.get(tp)
            if isinstance(value, KafkaError):
                value = KafkaException(value)
            if isinstance(value, BaseException):
                missing[tp] = _reason(value)
                continue
            offset = getattr(value, "offset", None)
            if none_past_end and offset == -1:
                found[tp] = None
            elif offset is None or offset < 0:
                missing[tp] = f"no answer within {self.policy.request_timeout_ms} ms (leader unavailable)"
            else:
                found[tp] = offset
        return found, missing

    def send_watermarks(self, partitions: Iterable[TopicPartition], earliest: bool = True) -> WatermarksAsked:
        """Send a watermark query without waiting: :meth:`try_watermarks` with ``asked`` takes
        its answer (both questions go out before either answer is awaited: one round trip).
        ``earliest=False``: the ends only (for ``try_watermarks(..., low_needed=...)``)."""
        parts = sorted(set(partitions))
        return WatermarksAsked(parts, self._send_list_offsets(parts, OffsetSpec.earliest()) if earliest else None,
                               self._send_list_offsets(parts, OffsetSpec.latest()))

    def _collect_watermarks(self, asked: WatermarksAsked) -> tuple[dict, dict]:
        # a partition counts only when both questions were answered
        lows, lows_missing = self._collect_offsets(asked.earliest, OffsetSpec.earliest())
        highs, highs_missing = self._collect_offsets(asked.latest, OffsetSpec.latest())
        found = {tp: (lows[tp], highs[tp]) for tp in asked.partitions if tp in lows and tp in highs}
        return found, {**highs_missing, **lows_missing}

    def _ask_watermarks(self, partitions: list[TopicPartition]) -> tuple[dict, dict]:
        return self._collect_watermarks(self.send_watermarks(partitions))

    def try_watermarks(self, partitions: Iterable[TopicPartition], retries: int | None = None,
                       asked: WatermarksAsked | None = None,
                       low_needed: Callable[[TopicPartition, int], bool] | None = None) -> Partial:
        """(log start, end) of the partitions that answered; the end respects the isolation
        level. Partitions whose leader did not answer within the policy are in ``missing``.
        ``asked``: a query sent earlier for exactly these partitions answers the first attempt.
        ``low_needed(partition, end)``: the ends are asked first, then the log start only of the
        partitions it names; the others' log start is None."""
        parts = sorted(set(partitions))
        if not parts:
            return Partial({}, {}, 0)
        if low_needed is not None:
            return self._ends_then_starts(parts, retries, asked, low_needed)
        ask = self._ask_watermarks
        if asked is not None and asked.partitions == parts and asked.earliest is not None:
            ahead = [asked]

            def ask(todo: list[TopicPartition]) -> tuple[dict, dict]:
                return self._collect_watermarks(ahead.pop()) if ahead else self._ask_watermarks(todo)

        return self._with_retries(parts, ask, retries)

    def _ends_then_starts(self, parts: list[TopicPartition], retries: int | None, asked: WatermarksAsked | None,
                          low_needed: Callable[[TopicPartition, int], bool]) -> Partial:
        """A stream's trigger needs the log start only where it reads or resumes: a partition
        with nothing new (position at its end) cannot have lost records below its position,
        and asking 1,000 log starts cost about 8 ms of driver CPU per trigger (measured)."""
        latest, earliest = OffsetSpec.latest(), OffsetSpec.earliest()
        ahead = [asked] if asked is not None and asked.partitions == parts else []

        def ask_ends(todo: list[TopicPartition]) -> tuple[dict, dict]:
            sent = ahead.pop().latest if ahead else self._send_list_offsets(todo, latest)
            return self._collect_offsets(sent, latest)

        def ask_starts(todo: list[TopicPartition]) -> tuple[dict, dict]:
            return self._collect_offsets(self._send_list_offsets(todo, earliest), earliest)

        ends = self._with_retries(parts, ask_ends, retries)
        need = [tp for tp in parts if tp in ends.found and low_needed(tp, ends.found[tp])]
        starts = self._with_retries(need, ask_starts, retries) if need else Partial({}, {}, 0)
        found = {tp: (starts.found.get(tp), high) for tp, high in ends.found.items() if tp not in starts.missing}
        return Partial(found, {**ends.missing, **starts.missing}, max(ends.attempts, starts.attempts))

    def watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, end) per partition; :class:`BrokerError` when some stay unanswered."""
        partial = self.try_watermarks(partitions)
        self._raise_missing("the offsets", partial)
        return partial.found

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: hi for tp, (_, hi) in self.watermarks(partitions).items()}

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: lo for tp, (lo, _) in self.watermarks(partitions).items()}

    # -- committed offsets -----------------------------------------------------------------
    def _ask_committed(self, group: str, partitions: list[TopicPartition]) -> tuple[dict, dict]:
        """OffsetFetch through a consumer-type client, never the admin client: librdkafka's
        admin client (2.16) answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE re-queries
        the coordinator through a consumer group it does not have, a NULL dereference that
        kills the process (rd_kafka_handle_OffsetFetch; confluentinc/librdkafka#5318). Kafka
        answers so while a group's coordinator moves or loads, e.g. for a new group on a new
        cluster under load (a plain backfill's driver died so at its commit, 2026-12-07). The
        admin client first asks for the group (DescribeGroups): a missing ACL is then said at
        once, where the consumer would only wait out its timeout on a refused FindCoordinator."""
        timeout = self.policy.request_timeout_ms / 1000.0
        try:
            self._check_group_access(group, timeout)
            answer = self._group_reader(group).committed(
                [CkTP(tp.topic, tp.partition) for tp in partitions], timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - KafkaException or a future timeout
            why = f"group coordinator of {group!r}: {_reason(exc)}"
            return {}, {tp: why for tp in partitions}
        found, missing = {}, {}
        for ck in answer:
            tp = TopicPartition(ck.topic, ck.partition)
            if ck.error is not None:
                missing[tp] = f"group {group!r}: {ck.error}"
            else:
                found[tp] = ck.offset if ck.offset >= 0 else None
        for tp in partitions:
            if tp not in found and tp not in missing:
                missing[tp] = f"group {group!r}: no answer for {tp}"
        return found, missing

    def _check_group_access(self, group: str, timeout: float) -> None:
        """Raise the admin client's GROUP_AUTHORIZATION_FAILED for ``group``; anything else
        (a broker without DescribeGroups, such as librdkafka's mock; the coordinator away) is
        left to the OffsetFetch that follows."""
        future = self._admin_client().describe_consumer_groups([group], request_timeout=timeout)[group]
        try:
            future.result(timeout=timeout + 5)
        except KafkaException as exc:
            if exc.args and isinstance(exc.args[0], KafkaError) \
                    and exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                raise
        except Exception:  # noqa: BLE001,S110 - a future timeout: the OffsetFetch says what is wrong
            pass

    def try_committed(self, group: str, partitions: Iterable[TopicPartition], retries: int | None = None) -> Partial:
        """The group's committed offsets (None where nothing is committed), read with
        OffsetFetch from a client that does not join the group."""
        parts = sorted(set(partitions))
        if not parts:
            return Partial({}, {}, 0)
        return self._with_retries(parts, lambda todo: self._ask_committed(group, todo), retries, group=group)

    def committed(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        partial = self.try_committed(group, partitions)
        self._raise_missing(f"the committed offsets of group {group!r}", partial)
        return partial.found

    # -- metadata ----------------------------------------------------------------------------
    def topics(self, named: Iterable[str] = ()) -> dict[str, int]:
        """Every topic of the cluster with its partition count. A ``named`` topic missing from
        the list is asked for by name: the cluster's list leaves out what the principal may not
        DESCRIBE, which must fail as a missing ACL, not as a missing topic."""
        md = self._metadata(what="cluster metadata")
        found = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None and t.partitions}
        for name in named:
            if name in found:
                continue
            try:
                meta = self._admin_client().list_topics(topic=name, timeout=self.policy.request_timeout_ms / 1000.0)
            except KafkaException:
                continue
            topic = meta.topics.get(name)
            if topic is not None and topic.error is not None \
                    and topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise authorization_error(self._security, "Topic", name, "DESCRIBE (Metadata) and READ",
                                          self.bootstrap, topic.error.str())
        return found

    def _metadata(self, what: str):
        timeout = self.policy.request_timeout_ms / 1000.0
        last: Exception | None = None
        for attempt in range(self.policy.num_retries + 1):
            if attempt:
                time.sleep(self.policy.retry_interval_ms / 1000.0)
            try:
                return self._admin_client().list_topics(timeout=timeout)
            except KafkaException as exc:
                last = exc
                self._raise_if_refused()
        raise BrokerError(
            f"cannot read {what} from bootstrap servers {self.bootstrap}: no broker answered "
            f"{self.policy.num_retries + 1} metadata requests of {self.policy.request_timeout_ms} ms "
            f"each (is the cluster reachable, and are kafka.security.protocol / SASL settings right?); "
            f"last error: {_reason(last)}"
        ) from last

    def reachable(self) -> str | None:
        """None when a broker answers a metadata request; else why not (one short attempt)."""
        try:
            self._admin_client().list_topics(timeout=min(5.0, self.policy.request_timeout_ms / 1000.0))
            return None
        except KafkaException as exc:
            self._raise_if_refused()
            return _reason(exc)

    def leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """Who leads each partition, in words for error messages; {} if metadata is unavailable."""
        try:
            md = self._admin_client().list_topics(timeout=2.0)
        except KafkaException:
            return {}
        out = {}
        for tp in partitions:
            topic = md.topics.get(tp.topic)
            meta = topic.partitions.get(tp.partition) if topic is not None else None
            if meta is None:
                out[tp] = "unknown (no such partition in metadata)"
                continue
            broker = md.brokers.get(meta.leader)
            if meta.leader < 0:
                out[tp] = "no leader (election under way)"
            elif broker is None:
                out[tp] = f"broker {meta.leader} (not among the brokers the cluster lists: away)"
            else:
                out[tp] = f"broker {meta.leader} ({broker.host}:{broker.port})"
        return out

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset whose timestamp is >= the given ms; None when past the end.

        The broker's ListOffsets answer is checked against the records around it: some
        Kafka-protocol brokers answer timestamp lookups wrongly (librdkafka's mock cluster always
        says "none", the Tansu snapshot always says 0). Each answer costs at most two one-record
        fetches to check; a wrong one is replaced by a binary search over the partition (exact
        when timestamps grow with offsets, as with LogAppendTime).
        """
        if not stamps:
            return {}
        found = self._broker_for_timestamps(stamps)
        marks = self.watermarks(stamps)
        probe = _RecordProbe(self._config, self._timeout)
        try:
            out = {}
            for tp, ts in sorted(stamps.items()):
                low, high = marks[tp]
                answer = found.get(tp)
                if not probe.confirms(tp, ts, answer, low, high):
                    searched = probe.search(tp, ts, low, high)
                    log.warning(
                        "broker answered offset %s for %s at timestamp %d; records say %s "
                        "(the broker does not implement ListOffsets by timestamp)",
                        answer, tp, ts, searched,
                    )
                    answer = searched
                out[tp] = answer
            return out
        finally:
            probe.close()

    def _broker_for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """ListOffsets by timestamp through the admin client, with the retry policy of every
        other offset query. A consumer's ``offsets_for_times`` needs a ``group.id``, and a
        client with one keeps librdkafka's group handler, which in an outage reconnects to
        every broker many times a second for as long as the query lives (see
        docs/delivery-and-faults.md)."""
        specs = {tp: OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()}

        def ask(todo: list[TopicPartition]) -> tuple[dict, dict]:
            sent = self._send_list_offsets(todo, specs)
            return self._collect_offsets(sent, specs, none_past_end=True)

        partial = self._with_retries(sorted(specs), ask)
        self._raise_missing("the offsets by timestamp", partial)
        return partial.found

    def __enter__(self) -> OffsetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RecordProbe:
    """Reads single records to check or search timestamp lookups (driver side, rarely used)."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float):
        # assign() needs a group.id; the probe never commits and lives for one lookup
        self._consumer = Consumer({"group.id": opt.FETCHER_PLACEHOLDER_GROUP, **dict(config),
                                   "enable.partition.eof": True, "enable.auto.commit": False})
        self._timeout = timeout_s
        self._cache: dict[tuple[TopicPartition, int], tuple[int, int] | None] = {}

    def close(self) -> None:
        self._consumer.close()

    def first_at(self, tp: TopicPartition, offset: int, high: int) -> tuple[int, int] | None:
        """(offset, timestamp ms) of the first record at or after ``offset``; None if none."""
        if offset >= high:
            return None
        key = (tp, offset)
        if key in self._cache:
            return self._cache[key]
        self._consumer.assign([CkTP(tp.topic, tp.partition, offset)])
        deadline = time.monotonic() + self._timeout
        result = None
        while time.monotonic() < deadline:
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise BrokerError(f"cannot read {tp} at {offset}: {msg.error()}")
            result = (msg.offset(), msg.timestamp()[1])
            break
        else:
            raise BrokerError(f"no record of {tp} at or after {offset} within {self._timeout:.0f}s")
        self._consumer.unassign()
        self._cache[key] = result
        return result

    def confirms(self, tp: TopicPartition, ts: int, answer: int | None, low: int, high: int) -> bool:
        if answer is None:
            if high <= low:
                return True
            last = self.first_at(tp, high - 1, high)
            return last is None or last[1] < ts
        if answer < low or answer > high:
            return False
        at = self.first_at(tp, answer, high)
        if at is None or at[1] < ts:
            return False
        if answer > low:
            before = self.first_at(tp, answer - 1, high)
            if before is not None and before[0] < answer and before[1] >= ts:
                return False
        return True

    def search(self, tp: TopicPartition, ts: int, low: int, high: int) -> int | None:
        lo, hi = low, high
        while lo < hi:
            mid = (lo + hi) // 2
            rec = self.first_at(tp, mid, high)
            if rec is not None and rec[1] >= ts:
                hi = mid
            else:
                lo = (rec[0] + 1) if rec is not None else high
        rec = self.first_at(tp, lo, high)
        return rec[0] if rec is not None else None


def _reason(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown"
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return f"{err.name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"
