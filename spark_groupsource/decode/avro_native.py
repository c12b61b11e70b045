"""Executor side: a flat Avro record straight into Arrow buffers (``_avro_arrow.c``).

fastavro gives a dict of Python objects per record, which pyarrow reads again; the C decoder
writes each field into its Arrow column as it reads the bytes. It takes the common case only:
a top-level record whose fields are boolean, int, long, float, double, string, bytes, an enum,
int ``date`` or long ``timestamp-millis``/``timestamp-micros``, each optionally in a union
with null; every record of the batch with the same header; the writer schema the reader's (no
resolution). Anything else, and any record it does not take as fastavro would give it
(:mod:`._avro_arrow`'s comment lists them), leaves the batch to fastavro
(:mod:`.avro_decode`), so the values, the bad records and their reasons do not change.

Without the C extension (no compiler where the package was installed) :func:`plan` returns
None and every batch goes through fastavro; :func:`unavailable_reason` says why and
:func:`warn_once_if_unavailable` tells the user once per process, with what it costs.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["NativePlan", "plan", "decode", "unavailable_reason", "warn_once_if_unavailable"]

log = logging.getLogger("spark_groupsource.decode")

try:
    from spark_groupsource.decode import _avro_arrow as _ext
except ImportError as exc:  # pragma: no cover - an install without a C compiler
    _ext, _WHY = None, f"the C extension spark_groupsource.decode._avro_arrow is not built ({exc})"
else:
    _WHY = None

_BOOL, _INT, _LONG, _FLOAT, _DOUBLE, _STRING, _BYTES, _ENUM, _DATE, _TS_MILLIS, _TS_MICROS = range(1, 12)
_PRIMITIVE = {"boolean": _BOOL, "int": _INT, "long": _LONG, "float": _FLOAT, "double": _DOUBLE,
              "string": _STRING, "bytes": _BYTES}
#: the Arrow type each kind fills (the column's type must be it: to_spark_type + to_arrow_type)
_ARROW = {_BOOL: pa.bool_(), _INT: pa.int32(), _LONG: pa.int64(), _FLOAT: pa.float32(), _DOUBLE: pa.float64(),
          _STRING: pa.string(), _BYTES: pa.binary(), _ENUM: pa.string(), _DATE: pa.date32()}


def unavailable_reason() -> str | None:
    """Why the C decoder cannot be used in this process (None: it can)."""
    return _WHY


_said = False


def warn_once_if_unavailable() -> None:
    """A warning, once per process, where the C decoder is absent: an install without a
    compiler decodes correctly but at several times the CPU, and should know it."""
    global _said
    if _said or unavailable_reason() is None:
        return
    _said = True
    log.warning("decoding Avro with fastavro alone, not the C decoder: %s; the decode took 5-45 times "
                "the C decoder's CPU per record (1 KB and 100 B records, docs/benchmarks.md 'The decode "
                "alone'). Install the wheel built for this platform, or pip install where a C compiler is "
                "at hand (said once per Python worker, pid %d)", unavailable_reason(), os.getpid())


@dataclass(frozen=True)
class NativePlan:
    """A writer schema compiled for the C decoder (three int64 per writer field), and how its
    fields become the reader's columns."""

    ops: bytes
    arrow_type: pa.StructType
    writer_types: tuple[pa.DataType, ...]  # the Arrow type each writer field's buffers are
    symbols: tuple[pa.Array | None, ...]  # per writer field: an enum's symbols (strings), else None
    columns: tuple[int | None, ...]  # per reader column: its writer field, None: the reader's default
    defaults: tuple[Any, ...]  # per reader column, where ``columns`` says None


def plan(reader: Any, arrow_type: pa.DataType, writer: Any = None) -> NativePlan | None:
    """The C decoder's program for records written with ``writer`` (None: the reader schema)
    and read as ``reader`` into ``arrow_type`` (schemas as parsed JSON, or fastavro's parsed
    form), or None when the C decoder would not give what fastavro's resolution gives (then
    fastavro decodes those batches). Resolution it takes: fields reordered, writer fields the
    reader lacks skipped, reader fields the writer lacks filled with a null, boolean, number or
    string default, an enum read by name; not promotions, aliases, or other defaults."""
    if _ext is None or not _is_record(reader) or not pa.types.is_struct(arrow_type):
        return None
    writer = reader if writer is None else writer
    if not _is_record(writer) or writer.get("name") != reader.get("name"):
        return None
    if arrow_type.num_fields != len(reader["fields"]):
        return None
    ops: list[int] = []
    writer_types: list[pa.DataType] = []
    symbols: list[pa.Array | None] = []
    compiled = {}
    for f in writer["fields"]:
        kind, null_branch, enum = _field(f.get("type"))
        if kind is None:
            return None
        compiled[f.get("name")] = len(writer_types), kind, null_branch, enum
        ops += [kind, null_branch, len(enum["symbols"]) if enum else 0]
        writer_types.append(pa.timestamp("us", tz="UTC") if kind in (_TS_MILLIS, _TS_MICROS) else _ARROW[kind])
        symbols.append(None if enum is None else pa.array(enum["symbols"], pa.string()))
    columns: list[int | None] = []
    defaults: list[Any] = []
    for f, column in zip(reader["fields"], arrow_type, strict=True):
        kind, null_branch, enum = _field(f.get("type"))
        if kind is None or column.name != f.get("name") or f.get("aliases") or not _fills(kind, column.type):
            return None
        found = compiled.get(f["name"])
        if found is None:  # added to the reader: its default on every record
            default = f.get("default", _NONE)
            if not (default is None and null_branch >= 0 or _simple_default(kind, default)):
                return None
            columns.append(None)
            defaults.append(default)
            continue
        at, w_kind, w_null, w_enum = found
        if w_kind != kind or (w_null >= 0 and null_branch < 0):
            return None
        if enum is not None and (w_enum.get("name") != enum.get("name")
                                 or not set(w_enum["symbols"]) <= set(enum["symbols"])):
            return None
        columns.append(at)
        defaults.append(None)
    return NativePlan(struct.pack(f"<{len(ops)}q", *ops), arrow_type, tuple(writer_types), tuple(symbols),
                      tuple(columns), tuple(defaults))


_NONE = object()


def _is_record(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") in ("record", "error") and isinstance(
        schema.get("fields"), list)


def _simple_default(kind: int, default: Any) -> bool:
    """A default that fastavro hands over as it is and pyarrow takes for the column as it is."""
    if kind == _BOOL:
        return isinstance(default, bool)
    if kind in (_INT, _LONG):
        return isinstance(default, int) and not isinstance(default, bool)
    if kind in (_FLOAT, _DOUBLE):
        return isinstance(default, (int, float)) and not isinstance(default, bool)
    return kind == _STRING and isinstance(default, str)


def _field(t: Any) -> tuple[int | None, int, dict | None]:
    null_branch = -1
    if isinstance(t, list):
        if len(t) != 2 or "null" not in t:
            return None, -1, None
        null_branch = t.index("null")
        t = t[1 - null_branch]
    if isinstance(t, str):
        return _PRIMITIVE.get(t), null_branch, None
    if not isinstance(t, dict) or not isinstance(t.get("type"), str):
        return None, -1, None
    kind, logical = t["type"], t.get("logicalType")
    if kind == "enum" and isinstance(t.get("symbols"), list):
        return _ENUM, null_branch, t
    if logical is None:
        return _PRIMITIVE.get(kind), null_branch, None
    found = {("int", "date"): _DATE, ("long", "timestamp-millis"): _TS_MILLIS,
             ("long", "timestamp-micros"): _TS_MICROS}.get((kind, logical))
    return found, null_branch, None


def _fills(kind: int, arrow: pa.DataType) -> bool:
    if kind in (_TS_MILLIS, _TS_MICROS):
        return pa.types.is_timestamp(arrow) and arrow.unit == "us" and arrow.tz is not None
    return _ARROW[kind] == arrow


def decode(p: NativePlan, data: pa.Array, header: bytes) -> pa.Array | None:
    """The struct column of ``data`` (binary, every non-null record starting with ``header``),
    or None when the C decoder does not take some record: fastavro decodes the batch then."""
    if not (pa.types.is_binary(data.type) or pa.types.is_large_binary(data.type)):
        return None
    validity, offsets, values = data.buffers()[:3]
    got = _ext.decode(p.ops, header, validity, offsets, values if values is not None else b"",  # type: ignore[union-attr]
                      data.offset, len(data), pa.types.is_large_binary(data.type))
    if got is None:
        return None
    valid, nulls, fields = got
    n = len(data)
    written = []
    for (fvalid, fnulls, fvalues, foffsets), typ, syms in zip(fields, p.writer_types, p.symbols, strict=True):
        bitmap = pa.py_buffer(fvalid) if fnulls else None
        if syms is not None:
            index = pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(fvalues)], null_count=fnulls)
            written.append(syms.take(index))
        elif foffsets is not None:
            written.append(pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(foffsets), pa.py_buffer(fvalues)],
                                                 null_count=fnulls))
        else:
            written.append(pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(fvalues)], null_count=fnulls))
    children = []
    for column, at, default in zip(p.arrow_type, p.columns, p.defaults, strict=True):
        if at is None:
            children.append(pa.nulls(n, column.type) if default is None else pa.repeat(pa.scalar(default, column.type), n))
        else:
            children.append(written[at] if written[at].type == column.type else written[at].cast(column.type))
    return pa.Array.from_buffers(p.arrow_type, n, [pa.py_buffer(valid) if nulls else None], null_count=nulls,
                                 children=children)
