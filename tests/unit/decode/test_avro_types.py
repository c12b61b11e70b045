"""Avro -> Spark types as spark-avro's SchemaConverters maps them (issue 55), and the shaping of
fastavro's values into Arrow."""

from __future__ import annotations

import datetime as dt
import io
import uuid
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
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

from spark_groupsource.decode.avro_types import AvroTypeError, shaper, to_spark_type


def t(schema):
    f = to_spark_type(schema)
    return f.data_type, f.nullable


@pytest.mark.parametrize("avro, spark", [
    ("null", NullType()), ("boolean", BooleanType()), ("int", IntegerType()), ("long", LongType()),
    ("float", FloatType()), ("double", DoubleType()), ("bytes", BinaryType()), ("string", StringType()),
    ({"type": "int", "logicalType": "date"}, DateType()),
    ({"type": "long", "logicalType": "timestamp-millis"}, TimestampType()),
    ({"type": "long", "logicalType": "timestamp-micros"}, TimestampType()),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, TimestampNTZType()),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, TimestampNTZType()),
    ({"type": "int", "logicalType": "time-millis"}, IntegerType()),
    ({"type": "long", "logicalType": "time-micros"}, LongType()),
    ({"type": "string", "logicalType": "uuid"}, StringType()),
    ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}, DecimalType(10, 2)),
    ({"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4},
     DecimalType(18, 4)),
    ({"type": "fixed", "name": "F", "size": 16}, BinaryType()),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, StringType()),
    ({"type": "array", "items": "int"}, ArrayType(IntegerType(), containsNull=False)),
    ({"type": "array", "items": ["null", "int"]}, ArrayType(IntegerType(), containsNull=True)),
    ({"type": "map", "values": "long"}, MapType(StringType(), LongType(), valueContainsNull=False)),
    ({"type": "map", "values": ["null", "string"]}, MapType(StringType(), StringType(), valueContainsNull=True)),
])
def test_simple_types(avro, spark):
    assert t(avro) == (spark, avro == "null")


def test_unions():
    assert t(["null", "string"]) == (StringType(), True)
    assert t(["string", "null"]) == (StringType(), True)
    assert t(["int", "long"]) == (LongType(), False)
    assert t(["null", "float", "double"]) == (DoubleType(), True)
    members = StructType([StructField("member0", IntegerType(), True), StructField("member1", StringType(), True)])
    assert t(["int", "string"]) == (members, False)
    assert t(["null", "int", "string"]) == (members, True)


def test_record_with_named_references_and_namespaces():
    schema = {
        "type": "record", "name": "Order", "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}},
            {"name": "billing", "type": ["null", "Addr"]},
            {"name": "other", "type": "shop.Addr"},
            {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "DONE"]}},
            {"name": "status2", "type": "S"},
        ],
    }
    addr = StructType([StructField("city", StringType(), False)])
    assert t(schema) == (StructType([
        StructField("id", LongType(), False),
        StructField("note", StringType(), True),
        StructField("addr", addr, False),
        StructField("billing", addr, True),
        StructField("other", addr, False),
        StructField("status", StringType(), False),
        StructField("status2", StringType(), False),
    ]), False)


def test_recursive_record_is_refused():
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(AvroTypeError, match="recursive"):
        to_spark_type(schema)


def test_unknown_name_and_bad_decimal():
    with pytest.raises(AvroTypeError, match="unknown Avro type name"):
        to_spark_type({"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]})
    with pytest.raises(AvroTypeError, match="precision"):
        to_spark_type({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0})


def _roundtrip(schema, value):
    """fastavro's decoded value, shaped, in the Arrow type Spark expects: it must build."""
    parsed = fastavro.parse_schema(schema)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, value)
    buf.seek(0)
    out = fastavro.schemaless_reader(buf, parsed, None, return_named_type=True, return_named_type_override=True)
    shape = shaper(schema)
    out = out if shape is None else shape(out)
    arrow = to_arrow_type(to_spark_type(schema).data_type, timezone="UTC")
    return pa.array([out], type=arrow).to_pylist()[0]


def test_values_build_into_the_arrow_type():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "choice", "type": ["null", "int", "string", {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "int"}]}]},
        {"name": "two", "type": [{"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
                                 {"type": "record", "name": "B", "fields": [{"name": "a", "type": "int"}]}]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
    ]}
    u = uuid.uuid4()
    ts = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)
    got = _roundtrip(schema, {
        "u": str(u), "tm": dt.time(1, 2, 3, 4000), "d": dt.date(2024, 1, 2), "ts": ts, "dec": Decimal("12.34"),
        "m": {"a": 1}, "choice": "hi", "two": ("B", {"a": 5}), "e": "Y"})
    assert got["u"] == str(u)
    assert got["tm"] == 3_723_004
    assert got["d"] == dt.date(2024, 1, 2)
    assert got["ts"] == ts
    assert got["dec"] == Decimal("12.34")
    assert dict(got["m"]) == {"a": 1}
    assert got["choice"] == {"member0": None, "member1": "hi", "member2": None}
    assert got["two"] == {"member0": None, "member1": {"a": 5}}
    assert got["e"] == "Y"
    got = _roundtrip(schema, {
        "u": str(u), "tm": dt.time(0), "d": dt.date(2024, 1, 2), "ts": ts, "dec": Decimal("0"),
        "m": {}, "choice": {"x": 3}, "two": ("A", {"a": 1}), "e": "X"})
    assert got["choice"] == {"member0": None, "member1": None, "member2": {"x": 3}}
    assert got["two"] == {"member0": {"a": 1}, "member1": None}


def test_flat_schema_needs_no_shaping():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": {"type": "array", "items": "long"}}]}
    assert shaper(schema) is None
