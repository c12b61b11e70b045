"""Executor side: Confluent wire-format Avro bytes -> a typed Arrow column.

Per record: the 5-byte header (magic byte 0, the writer schema's id, big-endian), the writer
schema from the worker's bounded cache (:data:`.registry.WRITERS`, fetched once per id), then
fastavro's ``schemaless_reader(writer, reader)``: Avro schema resolution (fields added with a
default, removed, promoted, reordered), written straight without resolution when the writer is
the reader. The decoded dicts become Arrow column by column (one ``pa.array`` per field of a
top-level record, then ``StructArray.from_arrays``); measured on 100,000 records of a 10-field
schema: decoding 8.4 us a record (6.9 without resolution), Arrow from the dicts 3.5 us with
``pa.array(dicts, type=struct)``, 2.1 us column by column (docs/schema-registry.md).

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

from spark_groupsource.decode.avro_types import shaper
from spark_groupsource.decode.registry import Registry
from spark_groupsource.decode.wire import BadRecord, ColumnDecoder, DecodeError

__all__ = ["DecodeError", "AvroColumnDecoder"]


def _parse(text: str) -> Any:
    import json

    import fastavro

    return fastavro.parse_schema(json.loads(text))


class AvroColumnDecoder(ColumnDecoder):
    """Decodes one column (``key`` or ``value``) of record batches into ``arrow_type``."""

    def __init__(self, column: str, registry: Registry | None, reader_text: str, reader_id: int | None,
                 arrow_type: pa.DataType, permissive: bool):
        import json

        super().__init__(column, registry, arrow_type, permissive)
        self.reader_json = json.loads(reader_text)
        self.reader = _parse(reader_text)
        self.reader_id = reader_id
        self.shape: Callable[[Any], Any] | None = shaper(self.reader_json)
        self.record_fields = list(arrow_type) if pa.types.is_struct(arrow_type) and isinstance(
            self.reader_json, dict) and self.reader_json.get("type") in ("record", "error") else None
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

    def arrow(self, out: list[Any]) -> pa.Array:
        fields = self.record_fields
        if fields is None:
            return pa.array(out, type=self.arrow_type)
        if None in out:
            mask = pa.array([v is None for v in out])
            children = [pa.array([None if d is None else d.get(f.name) for d in out], type=f.type) for f in fields]
            return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
        children = [pa.array([d.get(f.name) for d in out], type=f.type) for f in fields]
        return pa.StructArray.from_arrays(children, fields=fields)
