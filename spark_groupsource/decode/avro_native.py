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
None and every batch goes through fastavro; :func:`unavailable_reason` says why.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["NativePlan", "plan", "decode", "unavailable_reason"]

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


@dataclass(frozen=True)
class NativePlan:
    """One reader schema compiled for the C decoder: three int64 per field."""

    ops: bytes
    arrow_type: pa.StructType
    symbols: tuple[pa.Array | None, ...]  # an enum field's symbols (a string array), else None


def plan(schema: Any, arrow_type: pa.DataType) -> NativePlan | None:
    """The C decoder's program for a parsed Avro schema (JSON) decoded into ``arrow_type``, or
    None when it has a field the C decoder does not take (then fastavro decodes every batch)."""
    if _ext is None or not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    if not pa.types.is_struct(arrow_type) or arrow_type.num_fields != len(schema.get("fields", ())):
        return None
    ops: list[int] = []
    symbols: list[pa.Array | None] = []
    for f, column in zip(schema["fields"], arrow_type, strict=True):
        kind, null_branch, syms = _field(f.get("type"))
        if kind is None or column.name != f.get("name") or not _fills(kind, column.type):
            return None
        ops += [kind, null_branch, len(syms or ())]
        symbols.append(None if syms is None else pa.array(syms, pa.string()))
    return NativePlan(struct.pack(f"<{len(ops)}q", *ops), arrow_type, tuple(symbols))


def _field(t: Any) -> tuple[int | None, int, list | None]:
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
        return _ENUM, null_branch, list(t["symbols"])
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
    children = []
    for (fvalid, fnulls, fvalues, foffsets), column, syms in zip(fields, p.arrow_type, p.symbols, strict=True):
        bitmap = pa.py_buffer(fvalid) if fnulls else None
        if syms is not None:
            index = pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(fvalues)], null_count=fnulls)
            children.append(syms.take(index))
        elif foffsets is not None:
            children.append(pa.Array.from_buffers(column.type, n, [bitmap, pa.py_buffer(foffsets),
                                                                   pa.py_buffer(fvalues)], null_count=fnulls))
        else:
            children.append(pa.Array.from_buffers(column.type, n, [bitmap, pa.py_buffer(fvalues)], null_count=fnulls))
    return pa.Array.from_buffers(p.arrow_type, n, [pa.py_buffer(valid) if nulls else None], null_count=nulls,
                                 children=children)
