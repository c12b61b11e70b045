"""Avro schema -> Spark type, following spark-avro's ``SchemaConverters.toSqlType`` (Spark 4.x).

Pure: no registry, no Spark session; the Spark types come from ``pyspark.sql.types``.

=================================  ===============================================
Avro                               Spark
=================================  ===============================================
null                               NullType
boolean / int / long               Boolean / Integer / Long
float / double                     Float / Double
string (also logical ``uuid``)     String
enum                               String
bytes, fixed                       Binary
bytes/fixed + ``decimal``          Decimal(precision, scale)
int + ``date``                     Date
long + ``timestamp-millis|micros`` Timestamp
long + ``local-timestamp-*``       TimestampNTZ
int + ``time-millis``, long +      Integer / Long (spark-avro keeps the number;
``time-micros``                    fastavro's ``datetime.time`` is turned back)
record                             Struct (field by field)
array                              Array(element, containsNull: element nullable)
map                                Map(String, value, valueContainsNull)
union [null, T]                    T, nullable
union [int, long] / [float,        Long / Double
double] (with or without null)
other unions                       Struct ``member0..memberN`` (each nullable), one
                                   set per value: the branch it was written as
=================================  ===============================================

A recursive record is refused (spark-avro refuses it too unless recursiveFieldMaxDepth is set).

:func:`shaper` compiles, for one reader schema, the conversion of fastavro's decoded values into
what ``pyarrow.array(values, type=...)`` takes: ``None`` when the values need none (the usual
case: records, arrays, maps, primitives, decimals, dates and timestamps pass as they are).
"""

from __future__ import annotations

import datetime as _dt
import uuid as _uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["AvroTypeError", "to_spark_type", "shaper", "SparkField"]

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class AvroTypeError(ValueError):
    """The Avro schema has no Spark type (recursion, an unknown name, a malformed schema)."""


@dataclass(frozen=True)
class SparkField:
    """A Spark type and whether it may be null."""

    data_type: DataType
    nullable: bool


class _Names:
    """Named types (record, enum, fixed) by full name, as an Avro parser resolves them."""

    def __init__(self) -> None:
        self.types: dict[str, dict] = {}

    @staticmethod
    def full(name: str, namespace: str | None) -> str:
        if "." in name or not namespace:
            return name
        return f"{namespace}.{name}"

    def define(self, schema: dict, namespace: str | None) -> tuple[str, str | None]:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise AvroTypeError(f"a named type without a name: {schema!r}")
        full = self.full(name, schema.get("namespace", namespace))
        self.types[full] = schema
        space = full.rsplit(".", 1)[0] if "." in full else None
        return full, space

    def lookup(self, name: str, namespace: str | None) -> tuple[str, dict]:
        for candidate in (self.full(name, namespace), name):
            if candidate in self.types:
                return candidate, self.types[candidate]
        raise AvroTypeError(f"unknown Avro type name {name!r}")


def to_spark_type(schema: Any) -> SparkField:
    """The Spark type of an Avro schema (a parsed JSON value: str, dict or list)."""
    return _convert(schema, _Names(), None, ())


def _convert(schema: Any, names: _Names, namespace: str | None, stack: tuple[str, ...]) -> SparkField:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _primitive(schema, None, {})
        full, named = names.lookup(schema, namespace)
        if full in stack:
            raise AvroTypeError(
                f"found recursive reference in Avro schema, which can not be processed by Spark: {full}")
        return _convert(named, names, full.rsplit(".", 1)[0] if "." in full else None, stack)
    if isinstance(schema, list):
        return _union(schema, names, namespace, stack)
    if not isinstance(schema, dict) or "type" not in schema:
        raise AvroTypeError(f"not an Avro schema: {schema!r}")
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        return _convert(kind, names, namespace, stack)
    if kind in _PRIMITIVES:
        return _primitive(kind, schema.get("logicalType"), schema)
    if kind == "record" or kind == "error":
        full, space = names.define(schema, namespace)
        if full in stack:
            raise AvroTypeError(
                f"found recursive reference in Avro schema, which can not be processed by Spark: {full}")
        fields = []
        for f in schema.get("fields", ()):
            sub = _convert(f["type"], names, space, stack + (full,))
            fields.append(StructField(f["name"], sub.data_type, sub.nullable))
        return SparkField(StructType(fields), False)
    if kind == "enum":
        names.define(schema, namespace)
        return SparkField(StringType(), False)
    if kind == "fixed":
        names.define(schema, namespace)
        if schema.get("logicalType") == "decimal":
            return SparkField(_decimal(schema), False)
        return SparkField(BinaryType(), False)
    if kind == "array":
        sub = _convert(schema["items"], names, namespace, stack)
        return SparkField(ArrayType(sub.data_type, containsNull=sub.nullable), False)
    if kind == "map":
        sub = _convert(schema["values"], names, namespace, stack)
        return SparkField(MapType(StringType(), sub.data_type, valueContainsNull=sub.nullable), False)
    if isinstance(kind, str):  # a named type referenced as {"type": "Name"}
        return _convert(kind, names, namespace, stack)
    raise AvroTypeError(f"unsupported Avro type {kind!r}")


def _decimal(schema: dict) -> DecimalType:
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not 0 < precision <= 38 or not 0 <= scale <= precision:
        raise AvroTypeError(
            f"decimal precision {precision} and scale {scale}: Spark takes a precision of 1-38 and a "
            "scale between 0 and the precision")
    return DecimalType(precision, scale)


def _primitive(kind: str, logical: str | None, schema: dict) -> SparkField:
    if kind == "null":
        return SparkField(NullType(), True)
    if kind == "int" and logical == "date":
        return SparkField(DateType(), False)
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return SparkField(TimestampType(), False)
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return SparkField(TimestampNTZType(), False)
    if kind == "bytes" and logical == "decimal":
        return SparkField(_decimal(schema), False)
    return SparkField(
        {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
         "double": DoubleType(), "bytes": BinaryType(), "string": StringType()}[kind],
        False,
    )


def _branch_kind(schema: Any, names: _Names, namespace: str | None) -> str:
    """The Avro type name of a union branch (named references resolved)."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema
        return str(names.lookup(schema, namespace)[1]["type"])
    if isinstance(schema, dict):
        kind = schema.get("type")
        return kind if isinstance(kind, str) else "complex"
    return "union"


def _union(branches: list, names: _Names, namespace: str | None, stack: tuple[str, ...]) -> SparkField:
    others = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    nullable = len(others) < len(branches)
    if not others:
        return SparkField(NullType(), True)
    if len(others) == 1:
        sub = _convert(others[0], names, namespace, stack)
        return SparkField(sub.data_type, nullable or sub.nullable)
    kinds = {_branch_kind(b, names, namespace) for b in others}
    if all(isinstance(b, str) or "logicalType" not in b for b in others):
        if kinds == {"int", "long"}:
            return SparkField(LongType(), nullable)
        if kinds == {"float", "double"}:
            return SparkField(DoubleType(), nullable)
    fields = []
    for i, b in enumerate(others):
        sub = _convert(b, names, namespace, stack)
        fields.append(StructField(f"member{i}", sub.data_type, True))
    return SparkField(StructType(fields), nullable)


# -- fastavro values -> what pyarrow takes ------------------------------------------------------

Shape = Callable[[Any], Any]


def shaper(schema: Any) -> Shape | None:
    """The conversion of fastavro's decoded values (read with ``return_named_type=True`` and
    ``return_named_type_override=True``) into pyarrow input for :func:`to_spark_type`'s type,
    or None when they pass as they are."""
    return _shape(schema, _Names(), None, ())


def _shape(schema: Any, names: _Names, namespace: str | None, stack: tuple[str, ...]) -> Shape | None:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return None
        full, named = names.lookup(schema, namespace)
        if full in stack:
            return None
        return _shape(named, names, full.rsplit(".", 1)[0] if "." in full else None, stack)
    if isinstance(schema, list):
        return _shape_union(schema, names, namespace, stack)
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        return _shape(kind, names, namespace, stack)
    logical = schema.get("logicalType")
    if kind == "string" and logical == "uuid":
        return _uuid_str
    if kind == "int" and logical == "time-millis":
        return _time_millis
    if kind == "long" and logical == "time-micros":
        return _time_micros
    if kind in _PRIMITIVES:
        return None
    if kind in ("record", "error"):
        full, space = names.define(schema, namespace)
        subs = [(f["name"], _shape(f["type"], names, space, stack + (full,))) for f in schema.get("fields", ())]
        subs = [(n, s) for n, s in subs if s is not None]
        if not subs:
            return None

        def record(value: Any, subs=subs) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, sub in subs:
                out[name] = sub(out.get(name))
            return out

        return record
    if kind in ("enum", "fixed"):
        names.define(schema, namespace)
        return None
    if kind == "array":
        sub = _shape(schema["items"], names, namespace, stack)
        if sub is None:
            return None
        return lambda value, sub=sub: None if value is None else [sub(v) for v in value]
    if kind == "map":
        sub = _shape(schema["values"], names, namespace, stack)
        if sub is None:
            return None
        return lambda value, sub=sub: None if value is None else {k: sub(v) for k, v in value.items()}
    return None


def _uuid_str(value: Any) -> Any:
    return str(value) if isinstance(value, _uuid.UUID) else value


def _time_millis(value: Any) -> Any:
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return value


def _time_micros(value: Any) -> Any:
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return value


def _shape_union(branches: list, names: _Names, namespace: str | None, stack: tuple[str, ...]) -> Shape | None:
    others = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    if not others:
        return None
    if len(others) == 1:
        return _shape(others[0], names, namespace, stack)
    kinds = {_branch_kind(b, names, namespace) for b in others}
    if all(isinstance(b, str) or "logicalType" not in b for b in others) and kinds in (
        {"int", "long"}, {"float", "double"}
    ):
        return None
    members = []
    for b in others:
        members.append((_matcher(b, names, namespace), _shape(b, names, namespace, stack), _named(b, names, namespace)))
    keys = [f"member{i}" for i in range(len(members))]

    def union(value: Any) -> Any:
        if value is None:
            return None
        name = None
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            name, value = value  # fastavro's (name, value) for a union of several named types
        for key, (match, sub, full) in zip(keys, members, strict=False):
            if (full is not None and name == full) or (name is None and match(value)):
                return {key: sub(value) if sub is not None else value}
        return {}  # cannot happen for a value fastavro decoded with this schema

    return union


def _named(schema: Any, names: _Names, namespace: str | None) -> str | None:
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        return names.lookup(schema, namespace)[0]
    if isinstance(schema, dict) and schema.get("type") in ("record", "error", "enum", "fixed"):
        return _Names.full(schema["name"], schema.get("namespace", namespace))
    return None


def _matcher(schema: Any, names: _Names, namespace: str | None) -> Callable[[Any], bool]:
    kind = _branch_kind(schema, names, namespace)
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
        return lambda v: isinstance(v, _dt.datetime)
    if logical == "date":
        return lambda v: isinstance(v, _dt.date) and not isinstance(v, _dt.datetime)
    if logical == "decimal":
        from decimal import Decimal

        return lambda v: isinstance(v, Decimal)
    if logical == "uuid":
        return lambda v: isinstance(v, (_uuid.UUID, str))
    if logical in ("time-millis", "time-micros"):
        return lambda v: isinstance(v, _dt.time)
    return {
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float),
        "string": lambda v: isinstance(v, str),
        "enum": lambda v: isinstance(v, str),
        "bytes": lambda v: isinstance(v, bytes),
        "fixed": lambda v: isinstance(v, bytes),
        "record": lambda v: isinstance(v, dict),
        "error": lambda v: isinstance(v, dict),
        "map": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
    }.get(kind, lambda v: False)
