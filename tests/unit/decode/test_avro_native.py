"""The C decoder (avro_native, _avro_arrow.c) gives what fastavro + pa.array give, or declines.

The reference is the fastavro path of avro_decode: ``schemaless_reader`` per record, then
``pa.array(dicts, type=struct)``. Whatever the C decoder does not take as fastavro would give
it must come back as None (the batch then goes to fastavro, which names a bad record)."""

from __future__ import annotations

import io
import random
import struct

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_type

from spark_groupsource.decode import avro_native
from spark_groupsource.decode.avro_types import to_spark_type

pytestmark = pytest.mark.skipif(avro_native.unavailable_reason() is not None,
                                reason=str(avro_native.unavailable_reason()))

HEADER = b"\x00" + struct.pack(">I", 42)
SCHEMA = {
    "type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ns", "type": ["null", "string"], "default": None},
        {"name": "nl", "type": ["long", "null"]},
        {"name": "ne", "type": ["null", {"type": "enum", "name": "E2", "symbols": ["A", "B", "C"]}]},
    ],
}
PARSED = fastavro.parse_schema(SCHEMA)


def arrow_type(schema=SCHEMA):
    return to_arrow_type(to_spark_type(schema).data_type, timezone="UTC")


def record(rng: random.Random) -> dict:
    return {
        "b": rng.random() < 0.5, "i": rng.randint(-2**31, 2**31 - 1), "l": rng.randint(-2**63, 2**63 - 1),
        "f": rng.choice([0.0, 1.5, -2.25, float("inf")]), "d": rng.uniform(-1e300, 1e300),
        "s": rng.choice(["", "a", "héllo", "日本語", "emoji 😀", "x" * 300]), "y": rng.randbytes(rng.randrange(20)),
        "e": rng.choice("ABC"), "day": rng.randint(-719162, 2932896),
        "ms": rng.randint(-62135596800000, 253402300799999), "us": rng.randint(-62135596800000000, 253402300799999999),
        "ns": rng.choice([None, "n", ""]), "nl": rng.choice([None, 0, -1, 2**40]), "ne": rng.choice([None, "A", "C"]),
    }


def wire(rec: dict, schema=PARSED, header: bytes = HEADER) -> bytes:
    out = io.BytesIO()
    out.write(header)
    fastavro.schemaless_writer(out, schema, rec)
    return out.getvalue()


def reference(values: list, typ: pa.DataType) -> pa.Array:
    out = [None if v is None else fastavro.schemaless_reader(io.BytesIO(v[5:]), PARSED, None) for v in values]
    return pa.array(out, type=typ)


def native(values, typ=None):
    typ = typ or arrow_type()
    p = avro_native.plan(SCHEMA, typ)
    assert p is not None
    return avro_native.decode(p, pa.array(values, pa.binary()), HEADER)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 60), tombstones=st.booleans())
def test_same_as_fastavro(seed, n, tombstones):
    rng = random.Random(seed)
    values = [None if tombstones and rng.random() < 0.2 else wire(record(rng)) for _ in range(n)]
    got = native(values)
    assert got is not None
    assert got.equals(reference(values, arrow_type()))
    got.validate(full=True)


def test_slices_and_large_binary():
    rng = random.Random(1)
    values = [wire(record(rng)) for _ in range(50)] + [None]
    typ = arrow_type()
    p = avro_native.plan(SCHEMA, typ)
    column = pa.array(values, pa.binary())
    assert avro_native.decode(p, column.slice(7, 30), HEADER).equals(reference(values[7:37], typ))
    assert avro_native.decode(p, pa.array(values, pa.large_binary()), HEADER).equals(reference(values, typ))


def _with_field(index: int, field: dict) -> dict:
    """SCHEMA with field ``index`` replaced: a writer whose bytes the reader SCHEMA misreads."""
    fields = list(SCHEMA["fields"])
    fields[index] = field
    return fastavro.parse_schema({**SCHEMA, "fields": fields})


def _bad_variants() -> dict[str, bytes]:
    rec = record(random.Random(2))
    good = wire(rec)
    return {
        "another schema id": wire(rec, header=b"\x00" + struct.pack(">I", 43)),
        "no magic byte": b"\x01" + good[1:],
        "shorter than a header": b"\x00\x00",
        "trailing bytes (fastavro ignores them)": good + b"\x00",
        "truncated": good[:-3],
        "invalid UTF-8": wire({**rec, "s": "ab"}).replace(b"\x04ab", b"\x04\xff\xfe", 1),
        "a surrogate": wire({**rec, "s": "abc"}).replace(b"\x06abc", b"\x06\xed\xa0\x80", 1),
        "an enum index out of range": wire(
            {**rec, "e": "D"}, _with_field(7, {"name": "e", "type": {"type": "enum", "name": "E",
                                                                    "symbols": ["A", "B", "C", "D"]}})),
        "an int past 32 bits": wire({**rec, "i": 2**40}, _with_field(1, {"name": "i", "type": "long"})),
        "a union index past the null union": wire({**rec, "nl": "x"}, _with_field(
            12, {"name": "nl", "type": ["long", "null", "string"]})),
    }


@pytest.mark.parametrize("what", list(_bad_variants()))
def test_declines_what_it_does_not_take_as_fastavro(what):
    good = wire(record(random.Random(3)))
    assert native([good, _bad_variants()[what], good]) is None
    assert native([good, good]) is not None


def test_out_of_python_datetime_range_is_declined():
    rec = record(random.Random(4))
    for field, value in (("day", 2932897), ("ms", 253402300800000), ("us", -62135596800000001)):
        assert native([wire({**rec, field: value})]) is None


@pytest.mark.parametrize("field", [
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
    {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "r", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "long"}]}},
    {"name": "x", "type": {"type": "fixed", "name": "F", "size": 4}},
    {"name": "n3", "type": ["null", "long", "string"]},
    {"name": "il", "type": ["int", "long"]},
    {"name": "ref", "type": "E"},
])
def test_plans_only_flat_records_it_takes(field):
    schema = {**SCHEMA, "fields": [*SCHEMA["fields"], field]}
    assert avro_native.plan(schema, arrow_type(schema)) is None
    assert avro_native.plan(SCHEMA, arrow_type()) is not None
    assert avro_native.plan("long", pa.int64()) is None


def _resolved(writer: dict, reader: dict, recs: list[dict]):
    """(the C decoder's column or None, fastavro's resolution + pa.array) for records written
    with ``writer`` and read as ``reader``."""
    typ = arrow_type(reader)
    w, r = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    values = [wire(rec, w) for rec in recs]
    p = avro_native.plan(r, typ, w)
    got = None if p is None else avro_native.decode(p, pa.array(values, pa.binary()), HEADER)
    want = pa.array([fastavro.schemaless_reader(io.BytesIO(v[5:]), w, r) for v in values], type=typ)
    return got, want


def _fields(*names_types) -> dict:
    return {"type": "record", "name": "R", "fields": [{"name": n, "type": t, **extra} for n, t, extra in names_types]}


ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}


@pytest.mark.parametrize("writer, reader", [
    # reordered, a writer field the reader lacks, reader fields the writer lacks with defaults
    (_fields(("a", "long", {}), ("gone", "string", {}), ("s", "string", {})),
     _fields(("s", "string", {}), ("a", "long", {}), ("n", ["null", "string"], {"default": None}),
             ("k", "int", {"default": 7}), ("t", "string", {"default": "x"}), ("d", "double", {"default": 1}))),
    # a non-null writer field read as nullable; an enum read by name into a reader with more symbols
    (_fields(("a", "long", {}), ("e", ENUM, {})),
     _fields(("a", ["null", "long"], {}), ("e", {**ENUM, "symbols": ["B", "A", "C"]}, {}))),
])
def test_resolution_same_as_fastavro(writer, reader):
    recs = [{"a": i, "gone": "g" * i, "s": f"s{i}", "e": "AB"[i % 2]} for i in range(20)]
    got, want = _resolved(writer, reader, recs)
    assert got is not None and got.equals(want)


@pytest.mark.parametrize("writer, reader", [
    (_fields(("a", "int", {})), _fields(("a", "long", {}))),  # a promotion: fastavro's
    (_fields(("a", ["null", "long"], {})), _fields(("a", "long", {}))),  # a null has nowhere to go
    (_fields(("a", "long", {})), _fields(("a", "long", {}), ("b", "long", {}))),  # no default: fastavro's error
    (_fields(("e", ENUM, {})), _fields(("e", {**ENUM, "symbols": ["A"]}, {}))),  # a symbol the reader lacks
    (_fields(("e", ENUM, {})), _fields(("e", {**ENUM, "name": "F"}, {}))),  # another enum
    (_fields(("a", "long", {})), {**_fields(("a", "long", {})), "name": "Other"}),  # another record
    (_fields(("a", "long", {})), _fields(("b", "long", {"aliases": ["a"]}))),  # aliases: fastavro's
])
def test_resolution_it_leaves_to_fastavro(writer, reader):
    assert avro_native.plan(fastavro.parse_schema(reader), arrow_type(reader), fastavro.parse_schema(writer)) is None
