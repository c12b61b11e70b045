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
import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from spark_groupsource.decode.avro_types import shaper
from spark_groupsource.decode.registry import WRITERS, Registry, RegistryError, SchemaNotFoundError
from spark_groupsource.errors import GroupKafkaError

__all__ = ["DecodeError", "AvroColumnDecoder"]

log = logging.getLogger("spark_groupsource.decode")


class DecodeError(GroupKafkaError):
    """A record's bytes could not be decoded (mode FAILFAST)."""

    def __init__(self, column: str, topic: str, partition: int, offset: int, why: str):
        super().__init__(
            f"cannot decode the {column} of the record at {topic}-{partition} offset {offset}: {why}. "
            "Set mode=PERMISSIVE to keep such records with a null "
            f"{column} and their bytes and the reason in extra columns")
        self.topic, self.partition, self.offset, self.why = topic, partition, offset, why


class _Bad(Exception):
    """One record's reason for a null."""


def _parse(text: str) -> Any:
    import json

    import fastavro

    return fastavro.parse_schema(json.loads(text))


class AvroColumnDecoder:
    """Decodes one column (``key`` or ``value``) of record batches into ``arrow_type``."""

    def __init__(self, column: str, registry: Registry | None, reader_text: str, reader_id: int | None,
                 arrow_type: pa.DataType, permissive: bool):
        import json

        self.column = column
        self.registry = registry
        self.reader_json = json.loads(reader_text)
        self.reader = _parse(reader_text)
        self.reader_id = reader_id
        self.arrow_type = arrow_type
        self.permissive = permissive
        self.shape: Callable[[Any], Any] | None = shaper(self.reader_json)
        self.record_fields = list(arrow_type) if pa.types.is_struct(arrow_type) and isinstance(
            self.reader_json, dict) and self.reader_json.get("type") in ("record", "error") else None
        self.bad_records = 0
        from fastavro import schemaless_reader

        self._read = schemaless_reader
        self._unresolvable: dict[int, str] = {}

    def _writer(self, schema_id: int) -> Any:
        if self.registry is None:
            raise _Bad(f"schema id {schema_id}: no schemaRegistry.url to look it up")
        try:
            return WRITERS.get(self.registry, schema_id, _parse)
        except SchemaNotFoundError:
            raise _Bad(f"unknown schema id {schema_id}: the Schema Registry at {self.registry.url} has none") from None
        except RegistryError as exc:
            if type(exc) is RegistryError:  # a definite refusal (not Avro, references, 401/403)
                raise _Bad(str(exc)) from None
            raise  # unavailable: never a silent null

    def _one(self, data: bytes) -> Any:
        if len(data) < 5 or data[0] != 0:
            first = f"first byte {data[0]:#04x}" if data else "no bytes"
            raise _Bad(f"not in the Confluent wire format (magic byte 0 and a 4-byte schema id; "
                       f"{len(data)} bytes, {first})")
        schema_id = int.from_bytes(data[1:5], "big")
        writer = self._writer(schema_id)
        fo = io.BytesIO(data)
        fo.seek(5)
        try:
            if schema_id == self.reader_id:
                return self._read(fo, writer, None, return_named_type=True, return_named_type_override=True)
            return self._read(fo, writer, self.reader, return_named_type=True, return_named_type_override=True)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for bad bytes
            kind = type(exc).__name__
            if kind == "SchemaResolutionError":
                raise _Bad(f"writer schema id {schema_id} does not resolve to the reader schema: {exc}") from None
            raise _Bad(f"undecodable with writer schema id {schema_id}: {kind}: {exc}") from None

    def decode(self, data: pa.Array, topic: str, partition: int, offsets: pa.Array
               ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        """The typed column, and (PERMISSIVE) the raw bytes and reasons of bad records."""
        values = data.to_pylist()
        out: list[Any] = []
        raw: list[bytes | None] | None = None
        why: list[str | None] | None = None
        one, shape = self._one, self.shape
        for i, b in enumerate(values):
            if b is None:
                out.append(None)  # a null (tombstone) is a null, not a bad record
                continue
            try:
                v = one(b)
            except _Bad as bad:
                if not self.permissive:
                    raise DecodeError(self.column, topic, partition, offsets[i].as_py(), str(bad)) from None
                if raw is None:
                    raw, why = [None] * len(values), [None] * len(values)
                raw[i], why[i] = b, str(bad)  # type: ignore[index]
                out.append(None)
                continue
            out.append(v if shape is None else shape(v))
        if raw is not None:
            n = sum(r is not None for r in raw)
            self.bad_records += n
            first = next(i for i, r in enumerate(raw) if r is not None)
            log.warning("mode=PERMISSIVE: %d records of %s-%d with an undecodable %s kept with a null %s "
                        "(first at offset %d: %s)", n, topic, partition, self.column, self.column,
                        offsets[first].as_py(), why[first])  # type: ignore[index]
        column = self._arrow(out)
        if raw is None:
            return column, None, None
        return column, pa.array(raw, pa.binary()), pa.array(why, pa.string())

    def _arrow(self, out: list[Any]) -> pa.Array:
        fields = self.record_fields
        if fields is None:
            return pa.array(out, type=self.arrow_type)
        if None in out:
            mask = pa.array([v is None for v in out])
            children = [pa.array([None if d is None else d.get(f.name) for d in out], type=f.type) for f in fields]
            return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
        children = [pa.array([d.get(f.name) for d in out], type=f.type) for f in fields]
        return pa.StructArray.from_arrays(children, fields=fields)
