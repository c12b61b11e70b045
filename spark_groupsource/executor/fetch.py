"""Executor side: read offset ranges and yield Arrow record batches.

One fetcher per task (:func:`read_partition`) reads the task's ranges one after the other. It
assigns each partition at the range start, never subscribes and never commits: the native
fetcher has no group at all, confluent-kafka's a ``group.id`` only because its assign() needs
one (and with it librdkafka's group handler, whose coordinator lookups defeat the reconnect
backoff while no broker is up). Fetchers are pooled per Python worker
(:class:`ConsumerPool`) and reused by later tasks. Two paths (option ``fetcher``,
:func:`fetcher_kind`): the native one (:mod:`.native`, librdkafka straight into Arrow buffers)
and confluent-kafka's ``Consumer``; the range reader below applies the same rules to both.

How a range ends (offsets may have gaps: compaction, transaction markers):

* a record at or beyond ``until`` arrives (it is dropped), or the last offset ``until - 1``;
* librdkafka reports the partition end (``enable.partition.eof``) at an offset >= ``until``;
* the partition end is below ``until``: confirmed with a watermark query, that is
  truncation, reported as data loss (Spark does the same);
* nothing arrives for a while: the watermarks decide between "gone" (data loss) and "slow"
  (keep waiting up to ``poll_timeout_ms``, then :class:`BrokerError`).

Data loss (records the range needs are below the log start offset, or the range lies beyond
the partition end) goes through one policy, :func:`report_data_loss`: raise
:class:`DataLossError`, or log a warning, count the lost offsets and go on from the first
available offset. Gaps between offsets that do exist are not loss.

Rows follow Spark's Kafka source (see :mod:`spark_groupsource.schema`): ``timestampType`` is the
Java ``TimestampType`` id (librdkafka's type minus one) and a record without timestamp shows
-1 ms with type -1; ``headers`` is null for a record without headers.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, chain
from operator import methodcaller
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from spark_groupsource.config.access import RefusalWatch, authorization_error
from spark_groupsource.config.client_configs import (
    PREFETCH_KBYTES,
    PREFETCH_KBYTES_KEY,
    fetcher_config,
    prefetch_adapts,
)
from spark_groupsource.config.options import CommonOptions
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import AuthorizationError, BrokerError, DataLossError, OptionError
from spark_groupsource.executor import native
from spark_groupsource.executor.heap import freeze_once, freeze_settled
from spark_groupsource.executor.native import NativeConsumer
from spark_groupsource.executor.prefetch import RecordSizes, prefetch_config
from spark_groupsource.executor.refusal_probe import refused_fetch
from spark_groupsource.executor.silence import ClusterSilence
from spark_groupsource.executor.task_socket import speed_up_task_socket
from spark_groupsource.ranges import OffsetRange
from spark_groupsource.schema import arrow_schema

__all__ = ["ConsumerPool", "FetchStats", "fetch_range", "read_partition", "report_data_loss", "to_record_batch"]

log = logging.getLogger("spark_groupsource.fetch")

#: Longest single ``consume()`` wait. librdkafka's batch consume waits for the full count or
#: the timeout even after a partition-end event, so a range whose end holds no record (gaps,
#: markers) costs at most this much once.
_CONSUME_SLICE_S = 0.1
#: Time without progress after which the watermarks are asked whether anything is coming.
_STUCK_CHECK_S = 1.0
_WATERMARK_TIMEOUT_S = 10.0
#: partition -> since when (monotonic) no broker has answered for it in this Python worker
#: (which Spark reuses for the next task unless the task failed; across workers of the host,
#: ``ClusterSilence`` remembers the whole cluster's silence)
_UNREACHABLE: dict[tuple[str, int], float] = {}
#: The watermark query's timeout once the cluster is known (``ClusterSilence``) to have been
#: silent past brokerOutageTimeoutMs: a broker that is up answers well within it.
_KNOWN_DOWN_WATERMARK_TIMEOUT_S = 2.0
#: Time without progress, records waiting at ``next`` or no watermarks, after which a fresh
#: client is asked once per topic and task whether the partition is refused to us (:mod:`.refusal_probe`),
#: and how long it may take.
_PROBE_AFTER_S = 2.0
_PROBE_TIMEOUT_S = 3.0
_MAX_RESETS = 5

_ts_type = pa.timestamp("us", tz="UTC")
_get_offset = methodcaller("offset")
_msg_key, _msg_value, _msg_offset = Message.key, Message.value, Message.offset
_msg_timestamp, _msg_headers, _msg_error = Message.timestamp, Message.headers, Message.error
_GONE_ERRORS = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


@dataclass
class FetchStats:
    """What a task read. ``gaps``: offsets inside the ranges that held no record and were not
    lost (compaction, transaction markers); ``lost_records``: offsets skipped as data loss."""

    records: int = 0
    batches: int = 0
    lost_records: int = 0
    gaps: int = 0


def report_data_loss(
    rng: OffsetRange,
    expected: int,
    available: int | None,
    lost_until: int,
    detail: str,
    *,
    fail_on_data_loss: bool,
    stats: FetchStats | None,
) -> None:
    """The single data-loss policy: raise, or warn and count ``[expected, lost_until)``."""
    if fail_on_data_loss:
        raise DataLossError(rng.topic, rng.partition, expected, available, detail)
    lost = max(0, lost_until - expected)
    log.warning(
        "data loss in %s-%d: offsets [%d, %d) of range [%d, %d) cannot be read (%s); "
        "skipping %d offsets because failOnDataLoss=false",
        rng.topic,
        rng.partition,
        expected,
        lost_until,
        rng.start,
        rng.until,
        detail,
        lost,
    )
    if stats is not None:
        stats.lost_records += lost


def fetch_range(
    config: dict[str, Any],
    rng: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    max_records_per_batch: int,
    poll_timeout_ms: int,
    outage_timeout_ms: int | None = None,
    stats: FetchStats | None = None,
    security: SecurityConfig | None = None,
    max_bytes_per_batch: int | None = None,
    fetcher: str = "auto",
) -> Iterator[pa.RecordBatch]:
    """Yield the records of one range as batches of at most ``max_records_per_batch`` rows."""
    yield from read_partition(
        config,
        (rng,),
        include_headers=include_headers,
        fail_on_data_loss=fail_on_data_loss,
        max_records_per_batch=max_records_per_batch,
        max_bytes_per_batch=max_bytes_per_batch,
        poll_timeout_ms=poll_timeout_ms,
        outage_timeout_ms=outage_timeout_ms,
        stats=stats,
        security=security,
        fetcher=fetcher,
    )


def read_ranges(
    opts: CommonOptions,
    ranges: Iterable[OffsetRange],
    transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_partition` with a query's options, so that the batch and the stream reader
    (and whatever reads for them later) fetch with the same settings."""
    return read_partition(
        fetcher_config(opts),
        ranges,
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        max_records_per_batch=opts.max_records_per_arrow_batch,
        max_bytes_per_batch=opts.max_bytes_per_arrow_batch,
        poll_timeout_ms=opts.poll_timeout_ms,
        outage_timeout_ms=opts.broker_outage_timeout_ms,
        security=opts.security,
        fetcher=opts.fetcher,
        gc_freeze=opts.worker_gc_freeze,
        tcp_no_delay=opts.worker_tcp_no_delay,
        adapt_prefetch=prefetch_adapts(opts),
        transform=transform,
    )


def read_partition(
    config: dict[str, Any],
    ranges: Iterable[OffsetRange],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    max_records_per_batch: int,
    poll_timeout_ms: int,
    outage_timeout_ms: int | None = None,
    stats: FetchStats | None = None,
    security: SecurityConfig | None = None,
    max_bytes_per_batch: int | None = None,
    fetcher: str = "auto",
    gc_freeze: bool = True,
    tcp_no_delay: bool = True,
    adapt_prefetch: bool = False,
    transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Read ``ranges`` in order with one consumer (created here, closed when done).
    ``outage_timeout_ms`` (brokerOutageTimeoutMs): how long a range may make no progress while
    no broker answers for its partition before the task fails (sooner than ``poll_timeout_ms``).
    A batch ends at ``max_records_per_batch`` rows or once its values reach
    ``max_bytes_per_batch`` bytes (maxBytesPerArrowBatch), whichever comes first.
    ``fetcher`` (the option): ``auto``, ``native`` or ``python`` (:func:`fetcher_kind`).
    ``gc_freeze`` (workerGcFreeze): :func:`spark_groupsource.executor.heap.freeze_once` at the
    start, :func:`~spark_groupsource.executor.heap.freeze_settled` at the end.
    ``tcp_no_delay`` (workerTcpNoDelay): :func:`spark_groupsource.executor.task_socket.speed_up_task_socket`.
    ``adapt_prefetch``: the prefetch is ours to choose (the user set no
    ``kafka.queued.max.messages.kbytes``): deeper for a task of long ranges
    (:func:`spark_groupsource.executor.prefetch.prefetch_config`).
    ``transform``: what each batch goes through before it is yielded (typed columns:
    :func:`spark_groupsource.decode.batch_transform`).

    ``config`` is :func:`spark_groupsource.config.fetcher_config` output; it may carry
    secrets and is never logged.
    """
    if max_records_per_batch < 1:
        raise ValueError(f"max_records_per_batch must be positive, got {max_records_per_batch}")
    if max_bytes_per_batch is not None and max_bytes_per_batch < 1:
        raise ValueError(f"max_bytes_per_batch must be positive, got {max_bytes_per_batch}")
    ranges = [r for r in ranges if r.size > 0]
    if not ranges:
        return
    stats = stats if stats is not None else FetchStats()
    if gc_freeze:
        freeze_once()
    if tcp_no_delay:
        speed_up_task_socket()
    config = prefetch_config(config, ranges, _SIZES, adapt_prefetch)
    kind = fetcher_kind(config, fetcher, include_headers)
    consumer = _POOL.acquire(config, kind)
    ahead = _Ahead(consumer, ranges, config) if isinstance(consumer, NativeConsumer) else None
    probed: set[str] = set()  # topics a refusal probe has asked about in this task: once each
    healthy = False
    try:
        for i, rng in enumerate(ranges):
            if ahead is not None:
                ahead.fill(i)
            reader = _RangeReader(
                consumer,
                rng,
                include_headers=include_headers,
                fail_on_data_loss=fail_on_data_loss,
                max_records_per_batch=max_records_per_batch,
                max_bytes_per_batch=max_bytes_per_batch,
                poll_timeout_s=poll_timeout_ms / 1000.0,
                outage_timeout_s=None if outage_timeout_ms is None else outage_timeout_ms / 1000.0,
                stats=stats,
                refusals=RefusalWatch(security, str(config.get("bootstrap.servers", "")), "librdkafka"),
                cluster=str(config.get("bootstrap.servers", "")),
                probe_config=config,
                probed=probed,
            )
            nbytes = 0
            for batch in reader.run():
                nbytes += batch.get_total_buffer_size()
                yield batch if transform is None else transform(batch)
            _SIZES.saw(rng.topic, nbytes, reader.records)
            if ahead is not None and i + 1 < len(ranges):
                ahead.done(rng)  # the last range's partition goes with the pool's unassign of all
        healthy = True
    finally:
        _POOL.release(config, consumer, healthy, kind)
    if gc_freeze:
        freeze_settled()


#: Most partitions a native fetcher keeps assigned at once (the one being read and the next
#: ranges'): a task's small ranges (smallRangesPerTask packs up to 16) are fetched four at a
#: time, so each costs a fraction of a fetch round trip (3 ms against 12 at a partition's end).
_AHEAD_PARTITIONS = 4
#: ... and at most this much prefetch (KiB) across them: librdkafka holds up to
#: queued.max.messages.kbytes per partition queue (a task of long ranges, 16 MiB: one partition).
_AHEAD_KBYTES = 4 * PREFETCH_KBYTES


class _Ahead:
    """Which partitions the native fetcher has assigned while a task reads its ranges in order:
    the current range's and those of the next ranges (a window of distinct partitions), each at
    its range's start, so librdkafka fetches them in the same requests. A range's reader then
    assigns at the same offset and finds what was fetched; its partition is released when it
    is done, the task's last one by the pool's unassign of all (one round trip to librdkafka's
    thread, not two)."""

    def __init__(self, consumer: NativeConsumer, ranges: list[OffsetRange], config: dict[str, Any]):
        self.consumer = consumer
        self.ranges = ranges
        per_partition = int(config.get(PREFETCH_KBYTES_KEY, PREFETCH_KBYTES))
        self.window = max(1, min(_AHEAD_PARTITIONS, _AHEAD_KBYTES // max(1, per_partition)))
        self.assigned: set[tuple[str, int]] = set()
        self.next = 0  # the first range not assigned ahead yet

    def fill(self, current: int) -> None:
        self.next = max(self.next, current)
        while self.next < len(self.ranges) and len(self.assigned) < self.window:
            rng = self.ranges[self.next]
            key = (rng.topic, rng.partition)
            if key in self.assigned:
                break  # a later range of a partition being read: assigned once that one is done
            self.consumer.prefetch(rng.topic, rng.partition, rng.start)
            self.assigned.add(key)
            self.next += 1

    def done(self, rng: OffsetRange) -> None:
        self.consumer.release(rng.topic, rng.partition)
        self.assigned.discard((rng.topic, rng.partition))


#: A fetcher's kind: the pure-Python path, or the native one with or without headers.
PYTHON, NATIVE, NATIVE_HEADERS = "python", "native", "native+headers"
_said_path = False
#: What reading without the native path costs, as measured (docs/benchmarks.md, "Without a C
#: compiler"): said where an install without a compiler falls back, so the user knows the price.
PURE_PYTHON_COST = ("the fetch took 3 times the native path's CPU per record (3.1x for 1 KB records, 3.3x "
                    "for 100 B, on Apache Kafka: docs/benchmarks.md 'Without a C compiler')")


def fetcher_kind(config: dict[str, Any], fetcher: str, include_headers: bool) -> str:
    """Which path reads (the ``fetcher`` option): ``native`` where the extension is built and
    the configuration is plain values, else confluent-kafka's Consumer; ``native`` asked for
    where it cannot run is an error, ``python`` always takes the pure-Python path."""
    global _said_path
    if fetcher == PYTHON:
        return PYTHON
    reason = missing = native.unavailable_reason()
    if reason is None and any(callable(v) for v in config.values()):
        reason = "the Kafka client configuration holds callbacks only confluent-kafka runs"
    if reason is not None:
        if fetcher == NATIVE:
            raise OptionError(
                "fetcher",
                f"native, but this executor cannot use the native fetch path: {reason}. "
                "Install the package's wheel built for this platform (or `pip install` it where a C "
                "compiler is at hand), or set it to auto to fall back to confluent-kafka's Consumer")
        if not _said_path:
            _said_path = True
            if missing is None:  # the configuration's choice: nothing to install
                log.info("reading with confluent-kafka's Consumer, not the native fetch path: %s", reason)
            else:  # an install without the extension: once per Python worker, with what it costs
                log.warning("reading with confluent-kafka's Consumer, not the native fetch path: %s; %s. "
                            "Install the wheel built for this platform, or pip install where a C compiler "
                            "is at hand; fetcher=python reads this way without this warning "
                            "(said once per Python worker, pid %d)", reason, PURE_PYTHON_COST, os.getpid())
        return PYTHON
    return NATIVE_HEADERS if include_headers else NATIVE


class ConsumerPool:
    """Idle fetchers kept per configuration in a Python worker, which Spark reuses across tasks
    (as Spark's Kafka source keeps its consumers): a micro-batch of many small ranges should
    not pay a connection and metadata round trip per task. A consumer goes back unassigned
    (librdkafka drops what it had fetched) and only after a task that ended normally."""

    def __init__(self, max_idle_per_config: int = 2, idle_timeout_s: float = 300.0):
        self.max_idle = max_idle_per_config
        self.idle_timeout_s = idle_timeout_s
        self._idle: dict[tuple, list[tuple[float, Consumer | NativeConsumer]]] = {}
        self._lock = threading.Lock()
        self.created = 0
        self.reused = 0

    @staticmethod
    def _key(config: dict[str, Any], kind: str) -> tuple:
        # holds secret values: only ever compared, never logged
        return (kind, *sorted((str(k), repr(v)) for k, v in config.items()))

    def _expire(self, now: float) -> list[Consumer | NativeConsumer]:
        """Take the fetchers idle for longer than the timeout out of the pool, whatever their
        configuration (under the lock; the caller closes them outside it). A worker outlives
        its queries: the fetchers of a finished query (another group, other options) would
        otherwise stay, each with its threads, connections and tens of MiB of buffers."""
        stale = []
        for key in list(self._idle):
            entries = self._idle[key]
            stale.extend(c for since, c in entries if now - since > self.idle_timeout_s)
            fresh = [(since, c) for since, c in entries if now - since <= self.idle_timeout_s]
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]
        return stale

    def idle_count(self) -> int:
        """Fetchers in the pool now."""
        with self._lock:
            return sum(len(entries) for entries in self._idle.values())

    def acquire(self, config: dict[str, Any], kind: str = PYTHON) -> Consumer | NativeConsumer:
        key, now = self._key(config, kind), time.monotonic()
        with self._lock:
            stale = self._expire(now)
            fresh = self._idle.get(key, [])
            found = fresh.pop()[1] if fresh else None
            if not fresh:
                self._idle.pop(key, None)
            if found is not None:
                self.reused += 1
            else:
                self.created += 1
        for consumer in stale:
            _close_quietly(consumer)
        if found is not None:
            return found
        if kind == PYTHON:
            return Consumer(config)
        return NativeConsumer(config, include_headers=kind == NATIVE_HEADERS)

    def release(self, config: dict[str, Any], consumer: Consumer | NativeConsumer, healthy: bool,
                kind: str = PYTHON) -> None:
        if healthy:
            try:
                consumer.unassign()
            except KafkaException:
                healthy = False
        if not healthy or self.max_idle < 1:
            _close_quietly(consumer)
            return
        with self._lock:
            now = time.monotonic()
            stale = self._expire(now)
            idle = self._idle.setdefault(self._key(config, kind), [])
            idle.append((now, consumer))
            extra = idle[: max(0, len(idle) - self.max_idle)]
            del idle[: len(extra)]
        for old in [*stale, *(c for _, c in extra)]:
            _close_quietly(old)

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for entries in idle.values():
            for _, consumer in entries:
                _close_quietly(consumer)


def _close_quietly(consumer: Consumer | NativeConsumer) -> None:
    try:
        consumer.close()
    except Exception as exc:  # noqa: BLE001 - a fetcher that cannot close is dropped anyway
        log.debug("closing a fetcher: %s", exc)


_POOL = ConsumerPool()
#: bytes per record this worker saw per topic: how long a range is (prefetch_config)
_SIZES = RecordSizes()


class _RangeReader:
    """Reads one range with a consumer it borrows; all per-range state lives here."""

    def __init__(
        self,
        consumer: Consumer | NativeConsumer,
        rng: OffsetRange,
        *,
        include_headers: bool,
        fail_on_data_loss: bool,
        max_records_per_batch: int,
        poll_timeout_s: float,
        stats: FetchStats,
        outage_timeout_s: float | None = None,
        refusals: RefusalWatch | None = None,
        cluster: str = "",
        max_bytes_per_batch: int | None = None,
        probe_config: dict[str, Any] | None = None,
        probed: set[str] | None = None,
    ):
        self.consumer = consumer
        self.probe_config = probe_config  # None: no refusal probe (carries secrets: never logged)
        self.rng = rng
        self.cluster = cluster
        self.silence = ClusterSilence(cluster)
        self.heard = False  # this reader got an answer: the host-wide silence record is cleared
        self.refusals = refusals or RefusalWatch(None, "", "librdkafka")
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.max_batch = max_records_per_batch
        self.max_bytes = max_bytes_per_batch
        self.poll_timeout_s = poll_timeout_s
        self.outage_timeout_s = outage_timeout_s
        self.stats = stats
        self.schema = arrow_schema(include_headers)
        self.next = rng.start  # next offset this range still needs
        self.records = 0
        self.lost = 0
        self.done = False
        self.resets = 0
        self.check_first_gap = True
        self.probed = probed if probed is not None else set()  # topics probed in this task
        self.native = isinstance(consumer, NativeConsumer)
        # the pure-Python path's pending records (the native path keeps them in C)
        self.pending: list[Any] = []
        self.pending_sizes: list[int] = []  # value bytes of each pending record (with a byte bound)
        self.pending_bytes = 0
        self.record_bytes = 1  # the largest value of the last consume(): sizes the next one

    # -- main loop ------------------------------------------------------------------------------
    def run(self) -> Iterator[pa.RecordBatch]:
        rng = self.rng
        self._assign(self.next)
        step = self._step_native if self.native else self._step_python
        last_progress = time.monotonic()
        last_check = last_progress
        while not self.done and self.next < rng.until:
            progressed = yield from step()
            now = time.monotonic()
            if progressed:
                last_progress = last_check = now
                _UNREACHABLE.pop((rng.topic, rng.partition), None)
                self._heard()
            if self.done or self.next >= rng.until:
                break
            if now - last_progress >= self.poll_timeout_s:
                self._on_timeout()
            elif now - last_check >= _STUCK_CHECK_S:
                last_check = now
                self._on_quiet(now - last_progress)
        if self.native:
            if self.consumer.pending()[0]:
                yield self._take()
        elif self.pending:
            yield self._flush(self.pending)
        self.stats.records += self.records
        self.stats.gaps += max(0, rng.size - self.records - self.lost)

    def _step_native(self) -> Generator[pa.RecordBatch, None, bool]:
        """One poll of the native fetcher (records go into its pending batch in C); True if
        the range moved forward."""
        rng, before = self.rng, self.next
        status, self.next, self.check_first_gap, done, detail = self.consumer.poll(
            rng.topic, rng.partition, self.next, rng.until, self.check_first_gap,
            self.max_batch, self.max_bytes, _CONSUME_SLICE_S)
        progressed = self.next > before or done
        self.done = self.done or done
        if status == NativeConsumer.FULL:
            yield self._take()
        elif status == NativeConsumer.GAP:
            self._check_start_gap(detail)  # the record is handled by the next poll
        elif status == NativeConsumer.EVENT and not self.done:
            progressed = self._on_error(detail) or progressed
        return progressed

    def _step_python(self) -> Generator[pa.RecordBatch, None, bool]:
        """One ``consume()`` of confluent-kafka's Consumer; True if the range moved forward."""
        rng, max_bytes = self.rng, self.max_bytes
        want = min(self.max_batch - len(self.pending), rng.until - self.next)
        if max_bytes is not None:
            # one consume() may return `want` records whatever their size: ask for no
            # more than the byte budget holds at the last sizes seen (at least one)
            want = max(1, min(want, (max_bytes - self.pending_bytes) // self.record_bytes))
        msgs = self.consumer.consume(num_messages=want, timeout=_CONSUME_SLICE_S)
        if not msgs:
            return False
        if any(map(_msg_error, msgs)):  # in C: a generator here was 12% of a task's CPU
            errors = [m for m in msgs if m.error() is not None]
            msgs = [m for m in msgs if m.error() is None]
        else:
            errors = ()
        progressed = False
        if msgs:
            accepted = self._accept(msgs)
            self.pending.extend(accepted)
            if max_bytes is not None and accepted:
                sizes = list(map(len, accepted))  # len(Message): its value's bytes
                self.pending_sizes.extend(sizes)
                self.pending_bytes += sum(sizes)
                self.record_bytes = max(1, max(sizes))
            progressed = bool(accepted) or self.done
        for err in errors:
            if self.done:
                break
            progressed = self._on_error(err) or progressed
        if max_bytes is not None and self.pending_bytes >= max_bytes:
            begin = 0
            for end in byte_cuts(self.pending_sizes, max_bytes):
                yield self._flush(self.pending[begin:end])
                begin = end
            del self.pending[:begin], self.pending_sizes[:begin]
            self.pending_bytes = sum(self.pending_sizes)
        if len(self.pending) >= self.max_batch:
            yield self._flush(self.pending)
            self.pending, self.pending_sizes, self.pending_bytes = [], [], 0
        return progressed

    def _assign(self, offset: int) -> None:
        self.next = offset
        self.check_first_gap = True
        if self.native:
            self.consumer.assign(self.rng.topic, self.rng.partition, offset)
        else:
            self.consumer.assign([TopicPartition(self.rng.topic, self.rng.partition, offset)])

    def _accept(self, msgs: list[Any]) -> list[Any]:
        """Keep the records below ``until``; advance ``next``; check a gap after (re)positioning."""
        rng = self.rng
        first = msgs[0]
        if first.topic() != rng.topic or first.partition() != rng.partition:
            # Leftovers of an earlier assignment; librdkafka normally drops them itself.
            msgs = [m for m in msgs if m.topic() == rng.topic and m.partition() == rng.partition]
            if not msgs:
                return []
        if msgs[0].offset() < self.next:
            # below what this range still needs: a record delivered twice, never data
            msgs = [m for m in msgs if m.offset() >= self.next]
            if not msgs:
                return []
        if msgs[-1].offset() >= rng.until:
            msgs = msgs[: bisect_left(msgs, rng.until, key=_get_offset)]
            self.done = True
            if not msgs:
                return []
        first_offset = msgs[0].offset()
        if self.check_first_gap:
            self.check_first_gap = False
            if first_offset > self.next:
                self._check_start_gap(first_offset)
        self.next = max(self.next, msgs[-1].offset() + 1)
        self.records += len(msgs)
        return msgs

    def _flush(self, msgs: list[Any]) -> pa.RecordBatch:
        self.stats.batches += 1
        return to_record_batch(msgs, self.rng.topic, self.rng.partition, self.schema)

    def _take(self) -> pa.RecordBatch:
        """The native fetcher's pending batch (records are counted here on that path)."""
        self.stats.batches += 1
        batch = self.consumer.take(self.rng.topic, self.rng.partition, self.schema)
        self.records += batch.num_rows
        return batch

    # -- end of partition, errors, silence ------------------------------------------------------
    def _on_error(self, msg: Any) -> bool:
        """Handle an error event; True if it moved the range forward (end, reposition)."""
        err: KafkaError = msg.error()
        code = err.code()
        rng = self.rng
        mine = msg.topic() == rng.topic and msg.partition() == rng.partition
        if code == KafkaError._PARTITION_EOF:
            if not mine:
                return False
            end = msg.offset()
            if end >= rng.until:
                self.done = True
            else:
                # Everything below the end was delivered: offsets in [next, end) are gaps.
                self.next = max(self.next, end)
                self._ends_before()
            return True
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            if mine or msg.topic() is None:
                self._on_out_of_range()
                return True
            return False
        if code in _GONE_ERRORS and (mine or msg.topic() == rng.topic):
            self._lose_until(
                rng.until, None, f"{err.name()}: the topic or partition no longer exists"
            )
            return True
        if err.fatal():
            raise BrokerError(f"fatal Kafka client error while reading {rng}: {err.str()}")
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise self._denied(err.str())
        # a refused login or TLS handshake: librdkafka would reconnect until poll_timeout_ms
        self.refusals.observe(f"{err.name()}: {err.str()}")
        self.refusals.raise_if_refused()
        # Transient (connection, leader change): librdkafka retries; silence is bounded by
        # poll_timeout_ms.
        log.debug("reading %s: %s", rng, err.str())
        return False

    def _ends_before(self, wm: tuple[int, int] | None = None) -> None:
        """The partition seems to end before ``until``: loss if the broker confirms it."""
        wm = wm or self._watermarks()
        if wm is None or wm[1] >= self.rng.until:
            return  # more is (or may be) coming: keep polling
        low, high = wm
        if low > self.next:
            self._on_out_of_range(wm)
            return
        if high > self.next:
            return  # records between next and the end are still to come
        self._lose_until(
            self.rng.until,
            None,
            f"the partition ends at offset {high}, before the range end: truncated, or the "
            "topic was deleted and recreated",
        )

    def _on_out_of_range(self, wm: tuple[int, int] | None = None) -> None:
        wm = wm or self._watermarks()
        if wm is None:
            raise BrokerError(
                f"offset {self.next} of {self.rng.topic}-{self.rng.partition} is out of range and "
                "the partition's watermarks cannot be read"
            )
        low, high = wm
        if self.next < low:
            self._lose_until(low, low, "below the log start offset (retention or deleted records)")
            if not self.done:
                self._reassign(low)
        elif self.next > high:
            self._lose_until(
                self.rng.until,
                None,
                f"the partition ends at offset {high}: truncated, or the topic was deleted and "
                "recreated",
            )
        else:
            self._reassign(self.next)  # in range again (e.g. after a leader change)

    def _on_quiet(self, stalled_s: float = 0.0) -> None:
        """Nothing arrived for a while: is there anything left to read? And is anyone there?"""
        key = (self.rng.topic, self.rng.partition)
        # monotonic throughout (the host's record too): a wall clock stepped during the watermark
        # query must not move the outage bound (chaos clock_jumps steps it)
        asked = time.monotonic()
        silent_since = self.silence.since_monotonic() if self.outage_timeout_s is not None else None
        known_down = silent_since is not None and asked - silent_since >= self.outage_timeout_s
        wm = self._watermarks(_KNOWN_DOWN_WATERMARK_TIMEOUT_S if known_down else _WATERMARK_TIMEOUT_S)
        if wm is not None:
            _UNREACHABLE.pop(key, None)
            self._heard()
        if not known_down and (wm is None or wm[0] <= self.next < wm[1]):
            self._probe_refusal(time.monotonic() - asked + stalled_s)
        if wm is None:
            now = time.monotonic()
            since = _UNREACHABLE.setdefault(key, asked - stalled_s)  # stalled_s: as of ``asked``
            # the host's record: since when no task here got any answer from this cluster
            begun = self.silence.silent_monotonic(since)
            stalled_s = max(stalled_s, now - since, now - begun if known_down else 0.0)
            if self.outage_timeout_s is not None and stalled_s >= self.outage_timeout_s:
                # the driver gives the same bound to offsets it cannot read; without it a task
                # waited pollTimeoutMs per attempt while the whole cluster was down (measured:
                # the query did not fail for minutes after its member had given up)
                raise BrokerError(
                    f"no record of {self.rng} at offset {self.next} for {stalled_s:.0f}s and no broker "
                    f"answers for the partition (bootstrap servers {self.cluster or '?'}): "
                    f"brokerOutageTimeoutMs={int(self.outage_timeout_s * 1000)} ran out. Check that the "
                    f"brokers are up and reachable, or raise brokerOutageTimeoutMs")
            return
        if self.next < wm[0]:
            self._on_out_of_range(wm)
        elif wm[1] <= self.next:
            # No record and no end-of-partition event although the broker has nothing at
            # next: a broker that answers out-of-range fetches with empty data.
            self._ends_before(wm)

    def _probe_refusal(self, stalled_s: float) -> None:
        """Records wait at ``next`` (or no watermarks came) and none arrives: once per topic and
        task, ask a fresh client whether the topic's READ was revoked, which this fetcher may never be
        told (:mod:`.refusal_probe`)."""
        rng = self.rng
        if rng.topic in self.probed or self.probe_config is None or stalled_s < _PROBE_AFTER_S:
            return
        self.probed.add(rng.topic)
        refused = refused_fetch(self.probe_config, rng.topic, rng.partition, self.next, _PROBE_TIMEOUT_S)
        if refused is not None:
            raise self._denied(refused)

    def _denied(self, detail: str) -> AuthorizationError:
        """The task's error for a topic whose READ the broker refuses us (whoever found out)."""
        return authorization_error(self.refusals.security, "Topic", self.rng.topic, "READ (Fetch)",
                                   self.refusals.bootstrap, detail)

    def _on_timeout(self) -> None:
        wm = self._watermarks()
        where = f"partition watermarks {wm}" if wm else "watermarks unavailable"
        raise BrokerError(
            f"no record of {self.rng} at offset {self.next} arrived within "
            f"kafkaConsumer.pollTimeoutMs={int(self.poll_timeout_s * 1000)} ({where})"
        )

    def _check_start_gap(self, first_offset: int) -> None:
        """The first record after (re)positioning is beyond ``next``: compaction, or loss?"""
        wm = self._watermarks()
        if wm is not None and wm[0] > self.next:
            low = min(wm[0], first_offset)
            report_data_loss(
                self.rng,
                self.next,
                low,
                low,
                "below the log start offset (retention or deleted records)",
                fail_on_data_loss=self.fail_on_data_loss,
                stats=self.stats,
            )
            self.lost += low - self.next

    def _lose_until(self, lost_until: int, available: int | None, detail: str) -> None:
        lost_until = min(lost_until, self.rng.until)
        report_data_loss(
            self.rng,
            self.next,
            available,
            lost_until,
            detail,
            fail_on_data_loss=self.fail_on_data_loss,
            stats=self.stats,
        )
        self.lost += lost_until - self.next
        self.next = lost_until
        if lost_until >= self.rng.until:
            self.done = True

    def _reassign(self, offset: int) -> None:
        self.resets += 1
        if self.resets > _MAX_RESETS:
            raise BrokerError(
                f"reading {self.rng}: offset {offset} keeps falling out of range "
                f"({_MAX_RESETS} repositionings)"
            )
        self._assign(offset)

    def _heard(self) -> None:
        if not self.heard:
            self.heard = True
            self.silence.answered()

    def _watermarks(self, timeout_s: float = _WATERMARK_TIMEOUT_S) -> tuple[int, int] | None:
        timeout_s = min(timeout_s, self.poll_timeout_s)
        try:
            if self.native:
                return self.consumer.watermarks(self.rng.topic, self.rng.partition, timeout_s)
            return self.consumer.get_watermark_offsets(
                TopicPartition(self.rng.topic, self.rng.partition), timeout=timeout_s, cached=False)
        except KafkaException as exc:
            err = exc.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise self._denied(f"ListOffsets refused: {err.str()}") from None
            log.debug("watermark query for %s failed: %s", self.rng, exc)
            return None


def byte_cuts(sizes: list[int], max_bytes: int) -> list[int]:
    """Where to end batches of records of ``sizes`` bytes: each batch ends at the record that
    brings it to ``max_bytes`` (so it holds less than ``max_bytes`` before its last record, and
    a record of ``max_bytes`` or more is a batch of its own); the records after the last cut
    have not reached the bound and wait for more."""
    totals = list(accumulate(sizes))
    cuts: list[int] = []
    base, begin = 0, 0
    while True:
        k = bisect_left(totals, base + max_bytes, lo=begin)
        if k >= len(totals):
            return cuts
        cuts.append(k + 1)
        base, begin = totals[k], k + 1


def to_record_batch(msgs: list[Any], topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """Build one batch of ``schema`` from confluent-kafka messages of one partition.

    Per record only C calls (``map`` over ``Message``'s own methods, ``numpy.fromiter``): the
    (type, timestamp) pairs are flattened straight into one int64 array and split by slicing
    (``zip(*pairs)`` over 10,000 tuples was most of this function's time once, and a flat
    Python list still 60% of it); offsets without a gap (a partition's offsets only grow, so
    first and last tell) are a range, not read record by record. Measured at 100 B values:
    0.73 -> 0.25 -> 0.14 CPU-s per million records."""
    n = len(msgs)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    first = msgs[0].offset()
    if msgs[-1].offset() - first == n - 1:
        offsets = pa.array(np.arange(first, first + n, dtype=np.int64))
    else:  # gaps: compaction, transaction markers
        offsets = pa.array(list(map(_msg_offset, msgs)), pa.int64())
    stamps = np.fromiter(chain.from_iterable(map(_msg_timestamp, msgs)), np.int64, 2 * n)  # type, ms, ...
    columns = [
        pa.array(list(map(_msg_key, msgs)), pa.binary()),
        pa.array(list(map(_msg_value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        pa.array(stamps[1::2] * 1000, _ts_type),  # ms -> us; a record without one: -1 ms
        # librdkafka: 0 not available, 1 CreateTime, 2 LogAppendTime; Java's ids are one less.
        pa.array((stamps[0::2] - 1).astype(np.int32)),
    ]
    if len(schema) > 7:
        columns.append(pa.array(list(map(_msg_headers, msgs)), schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
