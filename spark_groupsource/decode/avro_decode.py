"""Executor side: Confluent wire-format Avro bytes -> a typed Arrow column.

Per record: the 5-byte header (magic byte 0, the writer schema's id, big-endian), the writer
schema from the worker's bounded cache (:data:`.registry.WRITERS`, fetched once per id), then
fastavro's ``schemaless_reader(writer, reader)``: Avro schema resolution (fields added with a
default, removed, promoted, reordered), written straight without resolution when the writer is
the reader. A batch is split by header (one group in the usual batch, two during a producer's
schema roll-out); each group goes first to the C decoder (:mod:`.avro_native`: flat records
straight into Arrow buffers, resolved once per writer schema id), else is read in one comprehension and becomes Arrow in one
``pa.array(dicts, type=struct)`` (bench/decode_micro.py, 2026-12-02: 1.5 us a record at 100 B
against 2.9 us column by column); when any record fails, the record-by-record loop of
:class:`.wire.ColumnDecoder` decodes the batch again and names the bad ones.

A record that cannot be decoded (no magic byte, an id the registry does not know, bytes that
do not decode under the writer schema, a writer schema that does not resolve to the reader's)
fails the task with :class:`DecodeError` naming topic, partition, offset and why, or, with
``mode=PERMISSIVE``, becomes a null value with its raw bytes and the reason in the error
columns. A registry that does not answer is never a null: it fails once retries run out.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from spark_groupsource.decode import avro_native
from spark_groupsource.decode.avro_types import shaper
from spark_groupsource.decode.references import avro_text
from spark_groupsource.decode.registry import Referenced, Registry, ResolvedSchema
from spark_groupsource.decode.wire import BadRecord, ColumnDecoder, DecodeError

__all__ = ["DecodeError", "AvroColumnDecoder"]


def _parse_text(text: str) -> Any:
    import json

    import fastavro

    return fastavro.parse_schema(json.loads(text))


def _parse(schema: ResolvedSchema) -> Any:
    """A writer schema with the named types of its references in it (:mod:`.references`)."""
    return _parse_text(avro_text(schema.schema_str, schema.references))


def _payloads(data: pa.Array) -> list[bytes | None]:
    """Each record's bytes past the 5-byte header. The slice's end is the longest record, not
    left open: pyarrow 26.0.1's ``binary_slice(data, 5)`` fails on some lengths (2 records:
    "Negative buffer resize: -12", an overflow of its output size estimate)."""
    import pyarrow.compute as pc

    longest = pc.max(pc.binary_length(data)).as_py() or 5
    return pc.binary_slice(data, 5, max(longest, 5)).to_pylist()


class AvroColumnDecoder(ColumnDecoder):
    """Decodes one column (``key`` or ``value``) of record batches into ``arrow_type``."""

    def __init__(self, column: str, registry: Registry | None, reader_text: str, reader_id: int | None,
                 arrow_type: pa.DataType, permissive: bool, references: tuple[Referenced, ...] = ()):
        import json

        super().__init__(column, registry, arrow_type, permissive)
        reader_text = avro_text(reader_text, references)  # self-contained: the references' types in it
        self.reader_json = json.loads(reader_text)
        self.reader = _parse_text(reader_text)
        self.reader_id = reader_id
        self.seed(reader_id, "AVRO", self.reader)
        self.shape: Callable[[Any], Any] | None = shaper(self.reader_json)
        avro_native.warn_once_if_unavailable()
        self.native = avro_native.plan(self.reader, arrow_type)
        #: per writer schema id: its C decoder program resolved to the reader's (None: fastavro's)
        self._resolved: dict[int, avro_native.NativePlan | None] = {}
        from fastavro import schemaless_reader

        self._read = schemaless_reader

    def payload(self, schema_id: int, data: bytes) -> Any:
        writer = self.writer(schema_id, _parse)
        fo = io.BytesIO(data)
        fo.seek(5)
        try:
            if schema_id == self.reader_id:
                v = self._read(fo, writer, None, return_named_type=True, return_named_type_override=True)
            else:
                v = self._read(fo, writer, self.reader, return_named_type=True, return_named_type_override=True)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for bad bytes
            kind = type(exc).__name__
            if kind == "SchemaResolutionError":
                raise BadRecord(f"writer schema id {schema_id} does not resolve to the reader schema: {exc}") from None
            raise BadRecord(f"undecodable with writer schema id {schema_id}: {kind}: {exc}") from None
        return v if self.shape is None else self.shape(v)

    def decode(self, data: pa.Array, topic: str, partition: int, offsets: pa.Array
               ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        fast = self._by_writer(data)
        if fast is not None:
            return fast, None, None
        return super().decode(data, topic, partition, offsets)

    def _by_writer(self, data: pa.Array) -> pa.Array | None:
        """The column decoded one writer schema id at a time, or None: the record-by-record loop
        then finds which record is bad and why. During a producer's schema roll-out a batch
        holds records of two writer ids; grouping them by header (in Arrow, no Python per
        record) keeps such batches on the group decoders (:meth:`_one_writer`) instead of the
        per-record loop. The groups are decoded from the batch sorted by header and put back in
        the batch's order with the inverse permutation; nulls sort last and stay nulls."""
        import pyarrow.compute as pc

        if len(data) == data.null_count:
            return None
        heads = pc.binary_slice(data, 0, 5)
        if pc.count_distinct(heads).as_py() == 1:
            return self._one_writer(data, pc.min(heads).as_py())
        order = pc.array_sort_indices(heads, null_placement="at_end")
        ordered = data.take(order)
        # the runs of equal heads in the sorted batch, in their order (value_counts: first seen first)
        runs = pc.value_counts(heads.take(order).drop_null())
        parts: list[pa.Array] = []
        at = 0
        for head, count in zip(runs.field("values").to_pylist(), runs.field("counts").to_pylist(), strict=True):
            part = self._one_writer(ordered.slice(at, count), head)
            if part is None:
                return None
            parts.append(part)
            at += count
        if at < len(data):
            parts.append(pa.nulls(len(data) - at, self.arrow_type))
        return pa.concat_arrays(parts).take(pc.array_sort_indices(order))

    def _one_writer(self, data: pa.Array, head: bytes) -> pa.Array | None:
        """The column of records that all start with ``head`` (or are null), when they decode:
        by the C decoder where it takes the schemas and every record, else in one fastavro
        comprehension without the per-record wrapper; None otherwise."""
        if len(head) != 5 or head[0] != 0:
            return None
        schema_id = int.from_bytes(head[1:5], "big")
        try:
            writer = self.writer(schema_id, _parse)
        except BadRecord:
            return None
        reader = None if schema_id == self.reader_id or writer == self.reader else self.reader
        if self.native is not None:
            if reader is None:
                program = self.native
            elif schema_id in self._resolved:
                program = self._resolved[schema_id]
            else:  # resolved once per writer schema, not per record
                program = self._resolved[schema_id] = avro_native.plan(self.reader, self.arrow_type, writer)
            column = avro_native.decode(program, data, head) if program is not None else None
            if column is not None:
                return column
        read = self._read
        try:
            out = [None if p is None else read(io.BytesIO(p), writer, reader, return_named_type=True,
                                               return_named_type_override=True)
                   for p in _payloads(data)]
            if self.shape is not None:
                out = [self.shape(v) for v in out]
            return self.arrow(out)
        except Exception:  # noqa: BLE001 - a bad record: the loop names it
            return None
