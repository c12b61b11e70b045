"""The native fetch path: librdkafka straight into Arrow buffers (``_rdkafka_arrow.c``).

:class:`NativeConsumer` offers the few calls of confluent-kafka's ``Consumer`` that the range
reader makes (assign, unassign, watermarks, close) plus :meth:`NativeConsumer.poll`, which
reads records into the pending batch in C, and :meth:`NativeConsumer.prefetch` /
:meth:`NativeConsumer.release`, which keep the partitions of a task's next ranges assigned
(each on a queue of its own) while it reads one ("assigned": consumed with librdkafka's
partition consumer, without a group, see the C file); :meth:`NativeConsumer.take` turns that
batch into a ``pyarrow.RecordBatch`` without a Python object per record. Errors come back as
:class:`Event` objects shaped like confluent-kafka's error messages, so both paths share one
policy for partition ends, data loss, refusals and outages (:mod:`.fetch`).

:func:`available` says whether the extension was built and librdkafka loads; the pure-Python
path (confluent-kafka's ``Consumer``) remains for where it is not, and where a configuration
holds what only confluent-kafka understands (callables).
"""

from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from spark_groupsource.config.secrets import REDACTED, is_secret

log = logging.getLogger("spark_groupsource.fetch")

__all__ = ["Event", "NativeConsumer", "available", "unavailable_reason"]

try:
    from spark_groupsource.executor import _rdkafka_arrow as _ext
except ImportError as exc:  # not built (a source checkout without `make setup`, a zip on --py-files)
    _ext = None
    _IMPORT_ERROR: str | None = f"the extension is not built ({exc})"
else:
    _IMPORT_ERROR = None

#: Properties of a consumer group, which a native fetcher is not a member of (it still gets
#: enable.auto.commit=false: nothing is ever committed or stored).
_GROUP_ONLY = frozenset({"group.id", "group.instance.id", "group.protocol", "group.remote.assignor",
                         "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
                         "max.poll.interval.ms", "auto.commit.interval.ms"})

_loaded: int | None = None
_load_error: str | None = None

def _librdkafka_path() -> str | None:
    """The librdkafka confluent-kafka itself loads: its wheel's copy, else the system's."""
    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    if found:
        return found[0]
    import ctypes.util  # noqa: PLC0415

    return ctypes.util.find_library("rdkafka")


def unavailable_reason() -> str | None:
    """None when the native path can be used here, else why not (for the log and errors)."""
    global _loaded, _load_error
    if _ext is None:
        return _IMPORT_ERROR
    if _loaded is None and _load_error is None:
        path = _librdkafka_path()
        if path is None:
            _load_error = "no librdkafka found beside confluent-kafka or on the system"
        else:
            try:
                _loaded = _ext.load(path)
            except ImportError as exc:
                _load_error = str(exc)
    return _load_error


def available() -> bool:
    return unavailable_reason() is None


#: A column buffer take() hands over: the extension's ``Block`` (the buffer protocol over the
#: fetcher's memory), which ``pa.py_buffer`` wraps without a copy.
Block = Any


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _raise(err: tuple[int, str, str]) -> None:
    code, _name, text = err
    raise KafkaException(KafkaError(code, text))


@dataclass(frozen=True)
class Event:
    """An error message of the poll, shaped as confluent-kafka's ``Message`` for the range
    reader's ``_on_error``: ``error()``, ``topic()``, ``partition()``, ``offset()``."""

    err: KafkaError
    topic_: str | None
    partition_: int
    offset_: int

    def error(self) -> KafkaError:
        return self.err

    def topic(self) -> str | None:
        return self.topic_

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.offset_


class NativeConsumer:
    """A fetcher on the native path. Not thread-safe: one task uses it at a time (the pool)."""

    # what poll() stopped at: the extension's own values (None where it is not built, where no
    # NativeConsumer can exist either)
    DRAINED = getattr(_ext, "DRAINED", None)
    FULL = getattr(_ext, "FULL", None)
    GAP = getattr(_ext, "GAP", None)
    EVENT = getattr(_ext, "EVENT", None)

    def __init__(self, config: dict[str, Any], include_headers: bool):
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"the native fetch path is unavailable: {reason}")
        # No group.id: the partitions are consumed without a consumer-group handler (see the C
        # file's header: that handler's coordinator lookups defeat the reconnect backoff).
        conf = {str(k): _conf_value(v) for k, v in config.items() if k not in _GROUP_ONLY}
        try:
            self._f = _ext.Fetcher(conf, include_headers)
        except ValueError as exc:
            # librdkafka quotes a refused value in its message: never a secret's
            text = str(exc)
            for key, value in conf.items():
                if is_secret(key) and value:
                    text = text.replace(value, REDACTED)
            raise ValueError(text) from None

    # -- what the range reader calls on either path ----------------------------------------------
    def assign(self, topic: str, partition: int, offset: int) -> None:
        err = self._f.assign(topic, partition, offset)
        if err is not None:
            _raise(err)

    def prefetch(self, topic: str, partition: int, offset: int) -> None:
        """Assign a later range's partition ahead, so its records are fetched meanwhile (with
        the partitions already assigned, in the same fetch requests); :meth:`assign` at the
        same offset then reads what came."""
        err = self._f.prefetch(topic, partition, offset)
        if err is not None:
            _raise(err)

    def release(self, topic: str, partition: int) -> None:
        """A range is done with its partition: unassign it (what was fetched ahead is dropped)."""
        err = self._f.release(topic, partition)
        if err is not None:
            _raise(err)

    def assigned(self) -> list[tuple[str, int, int, bool]]:
        """(topic, partition, offset assigned at, assigned ahead and not read yet) of each
        partition assigned now."""
        return self._f.assigned()

    def unassign(self) -> None:
        err = self._f.unassign()
        if err is not None:
            _raise(err)

    def watermarks(self, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
        """(low, high); raises ``KafkaException`` as confluent-kafka's query would."""
        answer = self._f.watermarks(topic, partition, max(1, int(timeout_s * 1000)))
        if len(answer) == 1:
            _raise(answer[0])
        return answer

    def close(self) -> None:
        self._f.close()

    # -- reading ----------------------------------------------------------------------------------
    def poll(self, topic: str, partition: int, next_offset: int, until: int, check_gap: bool,
             max_rows: int, max_bytes: int | None, timeout_s: float) -> tuple[int, int, bool, bool, Any]:
        """One step (see ``Fetcher_poll`` in the C file): ``(status, next, check_gap, done,
        detail)``; ``detail`` is the gap's first offset for GAP, an :class:`Event` for EVENT."""
        status, nxt, gap, done, detail = self._f.poll(
            topic, partition, next_offset, until, check_gap, max_rows, max_bytes or 0,
            int(timeout_s * 1000))
        if status == self.EVENT:
            code, _name, text, etopic, epartition, eoffset, fatal = detail
            detail = Event(KafkaError(code, text, fatal=bool(fatal)), etopic, epartition, eoffset)
        return status, nxt, bool(gap), bool(done), detail

    def pending(self) -> tuple[int, int]:
        """(rows, value bytes) of the batch being built."""
        return self._f.pending()

    def take(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        """The pending rows as one batch of ``schema``; the next batch starts empty. The
        batch's buffers are the fetcher's own memory, handed over (no copy): each is freed when
        Arrow lets go of it, and the fetcher writes the next batch elsewhere."""
        rows, key, value, offsets, stamps, types, headers = self._f.take()
        # every type from the schema (spark_groupsource.schema), in its column order
        key_t, value_t, topic_t, partition_t, offset_t, stamp_t, type_t = schema.types[:7]

        def fixed(kind: pa.DataType, data: Block) -> pa.Array:
            return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)], null_count=0)

        columns = [
            _binary(key_t, rows, key),
            _binary(value_t, rows, value),
            pa.repeat(pa.scalar(topic, topic_t), rows),
            pa.repeat(pa.scalar(partition, partition_t), rows),
            fixed(offset_t, offsets),
            fixed(stamp_t, stamps),
            fixed(type_t, types),
        ]
        if len(schema) > 7:
            list_type = schema.field("headers").type
            entry_key, entry_value = list_type.value_type
            valid, nulls, list_offsets, count, hkey, hvalue = headers
            entries = pa.StructArray.from_arrays(
                [_binary(entry_key.type, count, hkey), _binary(entry_value.type, count, hvalue)],
                fields=[entry_key, entry_value],
            )
            columns.append(pa.Array.from_buffers(
                list_type, rows, [_bitmap(valid), pa.py_buffer(list_offsets)], null_count=nulls,
                children=[entries]))
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _bitmap(valid: Block | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(valid)


def _binary(kind: pa.DataType, rows: int, parts: tuple) -> pa.Array:
    valid, nulls, offsets, data = parts
    return pa.Array.from_buffers(
        kind, rows, [_bitmap(valid), pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)
