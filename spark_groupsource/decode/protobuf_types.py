"""Protobuf message descriptor -> Spark type and the message -> Arrow-ready value, following
spark-protobuf's ``SchemaConverters`` / ``ProtobufDeserializer`` with their default options
(Spark 4.x). Pure: descriptors from ``google.protobuf``, no registry.

The registry's schema is a ``FileDescriptorProto`` (base64, as confluent-kafka's serializers
exchange it: ``?format=serialized``); :func:`pool_of` loads it into its own ``DescriptorPool``
beside the well-known types it may import (``google/protobuf/*.proto``) and the files it imports
from other subjects (schema references, each under its import path).

=======================================  ===================================================
Protobuf                                 Spark
=======================================  ===================================================
int32, sint32, sfixed32                  int
uint32, fixed32                          int (the bits, as Java's int: values past 2^31-1
                                         wrap; spark-protobuf without upcast.unsigned.ints)
int64, sint64, sfixed64, uint64,         bigint (uint64/fixed64: the bits, wrapping)
fixed64
float, double, bool, string, bytes       float, double, boolean, string, binary
enum                                     string: the value's name (a number the reader's
                                         enum lacks: the number as text)
message                                  struct (each field nullable unless ``required``)
repeated T                               array<T> (containsNull false), empty when unset
map<K, V>                                map<K, V> (valueContainsNull false), empty when unset
                                         (also a repeated ``<Field>Entry {key = 1; value = 2}``
                                         whose ``map_entry`` option a registry dropped)
oneof                                    its fields, each a nullable field: the one set
                                         has a value
google.protobuf.Timestamp                timestamp
google.protobuf.Duration                 interval day to second
wrappers (Int32Value, StringValue, ...)  struct<value> (spark-protobuf without
                                         unwrap.primitive.wrapper.types)
google.protobuf.Any                      struct<type_url: string, value: binary>
=======================================  ===================================================

Values as spark-protobuf emits them without ``emit.default.values``: a singular field that is
not set (for proto3 fields without presence: one at its default, 0 or "") is null.

Refused (:class:`ProtobufTypeError`): recursive messages (spark-protobuf refuses them unless
``recursive.fields.max.depth`` is set), messages with no fields (dropped by spark-protobuf;
no Spark struct can be empty), imports that are neither well-known types nor schema references.
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DayTimeIntervalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["ProtobufTypeError", "SparkField", "pool_of", "message_of", "message_at", "to_spark_type", "converter"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


class ProtobufTypeError(ValueError):
    """The Protobuf schema has no Spark type, or cannot be loaded."""


@dataclass(frozen=True)
class SparkField:
    data_type: DataType
    nullable: bool


def _well_known() -> list[Any]:
    from google.protobuf import (
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    return [any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2]


def _file_proto(serialized: str, name: str | None = None) -> Any:
    from google.protobuf import descriptor_pb2

    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(serialized))
    except Exception as exc:  # noqa: BLE001 - binascii.Error, protobuf's DecodeError
        where = f" (the import {name!r})" if name else ""
        raise ProtobufTypeError(f"not a serialized FileDescriptorProto{where}: {type(exc).__name__}: {exc}") from None
    if name:
        proto.name = name  # the import path it is referred to by, as confluent-kafka's deserializer names it
    return proto


def pool_of(serialized: str, references: tuple[Any, ...] = ()) -> Any:
    """The ``FileDescriptor`` of a registry schema (base64 ``FileDescriptorProto``), in a pool
    of its own with the well-known types and the files it imports from other subjects
    (``references``: :class:`.registry.Referenced`, each after those it imports)."""
    from google.protobuf import descriptor_pool

    proto = _file_proto(serialized)
    pool = descriptor_pool.DescriptorPool()
    known = set()
    for module in _well_known():
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
        known.add(module.DESCRIPTOR.name)
    try:
        for ref in references:
            if ref.name not in known:
                pool.Add(_file_proto(ref.schema_str, ref.name))
                known.add(ref.name)
    except ProtobufTypeError:
        raise
    except Exception as exc:  # noqa: BLE001 - TypeError/KeyError from the pool for a broken file
        raise ProtobufTypeError(f"the imported files do not load into a descriptor pool: {exc}") from None
    missing = [d for d in proto.dependency if d not in known]
    if missing:
        raise ProtobufTypeError(f"the schema imports {', '.join(missing)}, which is neither one of google/protobuf's "
                                "well-known types nor among its schema references")
    if not proto.name:
        proto.name = "default"  # what confluent-kafka's deserializer names it
    try:
        pool.Add(proto)
        return pool.FindFileByName(proto.name)
    except Exception as exc:  # noqa: BLE001 - TypeError/KeyError from the pool for a broken file
        raise ProtobufTypeError(f"the schema does not load into a descriptor pool: {exc}") from None


def message_of(serialized: str, name: str | None, references: tuple[Any, ...] = ()) -> Any:
    """The message ``name`` (full or simple name) of a registry schema; None: its first."""
    fd = pool_of(serialized, references)
    messages = list(fd.message_types_by_name.values())
    if not messages:
        raise ProtobufTypeError("the schema defines no message")
    if name is None:
        return messages[0]
    found = _find(fd, name)
    if found is None:
        names = ", ".join(sorted(_all_names(fd)))
        raise ProtobufTypeError(f"the schema has no message {name!r}; it has {names}")
    return found


def _all_names(fd: Any) -> list[str]:
    out: list[str] = []

    def walk(d: Any) -> None:
        out.append(d.full_name)
        for n in d.nested_types:
            walk(n)

    for m in fd.message_types_by_name.values():
        walk(m)
    return out


def _find(fd: Any, name: str) -> Any:
    pool = fd.pool
    for full in _all_names(fd):
        if full == name or full.rsplit(".", 1)[-1] == name and "." not in name:
            return pool.FindMessageTypeByName(full)
    return None


def message_at(fd: Any, indexes: list[int]) -> Any:
    """The message a wire-format record's message-index array names in file ``fd``."""
    current = None
    for depth, i in enumerate(indexes):
        choices = list(fd.message_types_by_name.values()) if depth == 0 else list(current.nested_types)
        if i < 0 or i >= len(choices):
            where = "top-level message(s)" if depth == 0 else f"nested message(s) in {current.full_name}"
            raise ProtobufTypeError(f"message index {i} out of range: the schema has {len(choices)} {where}")
        current = choices[i]
    return current


# -- types -------------------------------------------------------------------------------------

def _is_map(fd: Any) -> bool:
    """A map field: its entry message has the ``map_entry`` option, or, where a registry dropped
    the option (Karapace 3.16 rebuilds descriptors without message options), has protoc's shape
    of one: nested ``<FieldName>Entry`` with exactly ``key = 1`` and ``value = 2`` (the same
    bytes on the wire either way)."""
    entry = fd.message_type
    if entry is None or not fd.is_repeated:
        return False
    if entry.GetOptions().map_entry:
        return True
    camel = "".join(part[:1].upper() + part[1:] for part in fd.name.split("_"))
    return (entry.containing_type is fd.containing_type and entry.name == f"{camel}Entry"
            and [(f.name, f.number) for f in entry.fields] == [("key", 1), ("value", 2)])


def _repeated(fd: Any) -> bool:
    return bool(fd.is_repeated)


def _scalar_type(fd: Any) -> DataType:
    t = fd.type
    if t in (fd.TYPE_INT32, fd.TYPE_SINT32, fd.TYPE_SFIXED32, fd.TYPE_UINT32, fd.TYPE_FIXED32):
        return IntegerType()
    if t in (fd.TYPE_INT64, fd.TYPE_SINT64, fd.TYPE_SFIXED64, fd.TYPE_UINT64, fd.TYPE_FIXED64):
        return LongType()
    if t == fd.TYPE_FLOAT:
        return FloatType()
    if t == fd.TYPE_DOUBLE:
        return DoubleType()
    if t == fd.TYPE_BOOL:
        return BooleanType()
    if t == fd.TYPE_STRING:
        return StringType()
    if t == fd.TYPE_BYTES:
        return BinaryType()
    if t == fd.TYPE_ENUM:
        return StringType()
    raise ProtobufTypeError(f"field {fd.full_name}: unsupported type {t}")


def _special(desc: Any) -> str | None:
    names = [f.name for f in desc.fields]
    if names == ["seconds", "nanos"] and desc.name in ("Timestamp", "Duration"):
        return desc.name
    return None


def _message_type(desc: Any, seen: tuple[str, ...]) -> StructType:
    if desc.full_name in seen:
        raise ProtobufTypeError(f"message {desc.full_name} is recursive ({' -> '.join((*seen, desc.full_name))}): "
                                "a Spark struct cannot contain itself (spark-protobuf refuses it too unless "
                                "recursive.fields.max.depth is set)")
    seen = (*seen, desc.full_name)
    fields = [_field(fd, seen) for fd in desc.fields]
    if not fields:
        raise ProtobufTypeError(f"message {desc.full_name} has no fields: a Spark struct cannot be empty")
    return StructType(fields)


def _value_type(fd: Any, seen: tuple[str, ...]) -> DataType:
    if fd.message_type is None:
        return _scalar_type(fd)
    special = _special(fd.message_type)
    if special == "Timestamp":
        return TimestampType()
    if special == "Duration":
        return DayTimeIntervalType()
    return _message_type(fd.message_type, seen)


def _field(fd: Any, seen: tuple[str, ...]) -> StructField:
    if _is_map(fd):
        entry = fd.message_type
        k, v = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return StructField(fd.name, MapType(_value_type(k, seen), _value_type(v, seen), False), True)
    dt = _value_type(fd, seen)
    if _repeated(fd):
        return StructField(fd.name, ArrayType(dt, False), True)
    return StructField(fd.name, dt, not fd.is_required)


def to_spark_type(desc: Any) -> SparkField:
    """The Spark type of message ``desc`` (:class:`ProtobufTypeError` when it has none)."""
    return SparkField(_message_type(desc, ()), True)


# -- values ------------------------------------------------------------------------------------

def _wrap32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def _wrap64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _timestamp(m: Any) -> Any:
    return _EPOCH + _dt.timedelta(seconds=m.seconds, microseconds=m.nanos // 1000)


def _duration(m: Any) -> Any:
    return _dt.timedelta(seconds=m.seconds, microseconds=int(m.nanos / 1000))


def _value_converter(fd: Any, cache: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any] | None:
    """How one (non-repeated) value of ``fd`` becomes what pa.array takes (None: as it is)."""
    if fd.message_type is not None:
        special = _special(fd.message_type)
        if special == "Timestamp":
            return _timestamp
        if special == "Duration":
            return _duration
        return _message_converter(fd.message_type, cache)
    t = fd.type
    if t in (fd.TYPE_UINT32, fd.TYPE_FIXED32):
        return _wrap32
    if t in (fd.TYPE_UINT64, fd.TYPE_FIXED64):
        return _wrap64
    if t == fd.TYPE_ENUM:
        names = {v.number: v.name for v in fd.enum_type.values}
        return lambda n, names=names: names.get(n, str(n))
    return None


def _message_converter(desc: Any, cache: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    found = cache.get(desc.full_name)
    if found is not None:
        return found
    plan: dict[int, tuple[str, int, Callable[[Any], Any] | None, Callable[[Any], Any] | None]] = {}
    empties: dict[str, Any] = {}
    for fd in desc.fields:
        if _is_map(fd):
            entry = fd.message_type
            kc = _value_converter(entry.fields_by_name["key"], cache)
            vc = _value_converter(entry.fields_by_name["value"], cache)
            plan[fd.number] = (fd.name, 2, kc, vc)
            empties[fd.name] = []
        elif _repeated(fd):
            plan[fd.number] = (fd.name, 1, _value_converter(fd, cache), None)
            empties[fd.name] = []
        else:
            plan[fd.number] = (fd.name, 0, _value_converter(fd, cache), None)

    def convert(msg: Any) -> dict[str, Any]:
        out = dict(empties)
        for fd, value in msg.ListFields():
            step = plan.get(fd.number)
            if step is None:  # an extension: not in the reader's columns
                continue
            name, kind, c, vc = step
            if kind == 0:
                out[name] = value if c is None else c(value)
            elif kind == 1:
                out[name] = list(value) if c is None else [c(v) for v in value]
            elif hasattr(value, "items"):  # a map container
                out[name] = [(k if c is None else c(k), v if vc is None else vc(v)) for k, v in value.items()]
            else:  # entry messages (a map whose entry lost its map_entry option)
                out[name] = [(e.key if c is None else c(e.key), e.value if vc is None else vc(e.value))
                             for e in value]
        return out

    cache[desc.full_name] = convert
    return convert


def converter(desc: Any) -> Callable[[Any], dict[str, Any]]:
    """Parsed message of ``desc`` -> the dict ``pa.array`` takes for :func:`to_spark_type`."""
    return _message_converter(desc, {})
