"""Executor side, every format: Confluent's wire-format header, bad records, Arrow columns.

A record in the wire format is the magic byte 0, the writer schema's id (4 bytes, big-endian),
then the format's payload (Avro binary, JSON text, Protobuf message indexes and message).
:class:`ColumnDecoder` is the per-batch loop every format shares: a null (tombstone) stays a
null; a record that cannot be decoded fails the task with :class:`DecodeError` naming topic,
partition, offset and why, or, with ``mode=PERMISSIVE``, becomes a null with its raw bytes and
the reason in the error columns (counted and logged); a registry that does not answer is never
a null. A format only says how one payload becomes a value ``pyarrow.array`` takes
(:meth:`ColumnDecoder.payload`).

A value that decodes but does not fit the column's Arrow type (a JSON integer past 64 bits)
is found after the fact: the column is built in one ``pa.array`` call and, only when that
fails, record by record, so the bad one is named and the good ones are kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from spark_groupsource.decode.registry import (
    WRITERS,
    ReferenceNotFoundError,
    Registry,
    RegistryError,
    ResolvedSchema,
    SchemaNotFoundError,
)
from spark_groupsource.errors import GroupKafkaError

__all__ = ["DecodeError", "BadRecord", "ColumnDecoder", "schema_id_of"]

log = logging.getLogger("spark_groupsource.decode")

#: what a value that does not fit its Arrow type raises in ``pa.array``
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)


class DecodeError(GroupKafkaError):
    """A record's bytes could not be decoded (mode FAILFAST)."""

    def __init__(self, column: str, topic: str, partition: int, offset: int, why: str):
        super().__init__(
            f"cannot decode the {column} of the record at {topic}-{partition} offset {offset}: {why}. "
            "Set mode=PERMISSIVE to keep such records with a null "
            f"{column} and their bytes and the reason in extra columns")
        self.topic, self.partition, self.offset, self.why = topic, partition, offset, why


class BadRecord(Exception):
    """One record's reason for a null (PERMISSIVE) or a DecodeError (FAILFAST)."""


def schema_id_of(data: bytes) -> int:
    """The writer schema id of a wire-format record; :class:`BadRecord` when it is none."""
    if len(data) < 5 or data[0] != 0:
        first = f"first byte {data[0]:#04x}" if data else "no bytes"
        raise BadRecord(f"not in the Confluent wire format (magic byte 0 and a 4-byte schema id; "
                        f"{len(data)} bytes, {first})")
    return int.from_bytes(data[1:5], "big")


class ColumnDecoder:
    """Decodes one column (``key`` or ``value``) of record batches into ``arrow_type``."""

    def __init__(self, column: str, registry: Registry | None, arrow_type: pa.DataType, permissive: bool):
        self.column = column
        self.registry = registry
        self.arrow_type = arrow_type
        self.permissive = permissive
        self.bad_records = 0
        # the last writer schema looked up: a batch is mostly one id, and the worker's shared
        # cache costs a lock and its LRU bookkeeping per record (bench/registry_decode.py profile)
        self._last: tuple[int, str, Any] | None = None

    # -- what a format provides -------------------------------------------------------------
    def payload(self, schema_id: int, data: bytes) -> Any:
        """The value of one record (``data`` whole, header included); :class:`BadRecord` if none."""
        raise NotImplementedError

    def arrow(self, out: list[Any]) -> pa.Array:
        """The column from the decoded values (None for a null)."""
        return pa.array(out, type=self.arrow_type)

    # -- shared ------------------------------------------------------------------------------
    def seed(self, reader_id: int | None, kind: str, parsed: Any) -> None:
        """The reader schema (which came with the plan) as this worker's writer schema of its
        id: records written with it need no registry."""
        if self.registry is not None and reader_id is not None:
            WRITERS.put(self.registry.url, reader_id, kind, parsed)

    def writer(self, schema_id: int, parse: Callable[[ResolvedSchema], Any], kind: str = "AVRO") -> Any:
        """Schema ``schema_id`` (with its references) parsed, from this worker's cache (fetched
        once per id)."""
        last = self._last
        if last is not None and last[0] == schema_id and last[1] == kind:
            return last[2]
        if self.registry is None:
            raise BadRecord(f"schema id {schema_id}: no schemaRegistry.url to look it up")
        try:
            writer = WRITERS.get(self.registry, schema_id, parse, kind)
            self._last = (schema_id, kind, writer)
            return writer
        except ReferenceNotFoundError as exc:
            raise BadRecord(f"writer schema id {schema_id}: {exc}") from None
        except SchemaNotFoundError:
            raise BadRecord(f"unknown schema id {schema_id}: the Schema Registry at {self.registry.url} "
                            "has none") from None
        except RegistryError as exc:
            if type(exc) is RegistryError:  # a definite refusal (another format, references, 401/403)
                raise BadRecord(str(exc)) from None
            raise  # unavailable: never a silent null

    def decode(self, data: pa.Array, topic: str, partition: int, offsets: pa.Array
               ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        """The typed column, and (PERMISSIVE) the raw bytes and reasons of bad records."""
        values = data.to_pylist()
        out: list[Any] = []
        why: list[str | None] | None = None
        payload = self.payload
        for i, b in enumerate(values):
            if b is None:
                out.append(None)  # a null (tombstone) is a null, not a bad record
                continue
            try:
                out.append(payload(schema_id_of(b), b))
            except BadRecord as bad:
                why = self._bad(why, len(values), i, str(bad), topic, partition, offsets)
                out.append(None)
        try:
            column = self.arrow(out)
        except _ARROW_ERRORS:
            for i, v in enumerate(out):
                if v is None:
                    continue
                try:
                    pa.array([v], type=self.arrow_type)
                except _ARROW_ERRORS as exc:
                    why = self._bad(why, len(values), i, f"the decoded {self.column} does not fit its column "
                                    f"type {self.arrow_type}: {type(exc).__name__}: {exc}", topic, partition, offsets)
                    out[i] = None
            column = self.arrow(out)
        if why is None:
            return column, None, None
        raw = [b if w is not None else None for b, w in zip(values, why, strict=True)]
        n = sum(w is not None for w in why)
        self.bad_records += n
        first = next(i for i, w in enumerate(why) if w is not None)
        log.warning("mode=PERMISSIVE: %d records of %s-%d with an undecodable %s kept with a null %s "
                    "(first at offset %d: %s)", n, topic, partition, self.column, self.column,
                    offsets[first].as_py(), why[first])
        return column, pa.array(raw, pa.binary()), pa.array(why, pa.string())

    def _bad(self, why: list[str | None] | None, n: int, i: int, reason: str, topic: str, partition: int,
             offsets: pa.Array) -> list[str | None]:
        if not self.permissive:
            raise DecodeError(self.column, topic, partition, offsets[i].as_py(), reason) from None
        if why is None:
            why = [None] * n
        why[i] = reason
        return why
