"""JSON Schema -> Spark type (valueFormat=json): what is taken, what is refused and why, and the
shaping of decoded documents for Arrow (defaults, any-value nodes as JSON text)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from spark_groupsource.decode.json_types import JsonTypeError, shaper, to_spark_type

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object", "additionalProperties": False,
    "required": ["id", "item"],
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "paid": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ship": {"$ref": "#/definitions/Address"},
        "state": {"enum": ["NEW", "PAID"]},
        "maybe": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
        "any": {},
        "channel": {"type": "string", "default": "web"},
    },
    "definitions": {"Address": {"type": "object", "required": ["city"],
                                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}},
}


def test_objects_arrays_scalars_refs_and_nullability():
    f = to_spark_type(ORDER)
    assert not f.nullable  # the root object's type admits no null
    t = f.data_type
    assert t == StructType([
        StructField("id", LongType(), False),
        StructField("item", StringType(), False),
        StructField("price", DoubleType(), True),
        StructField("paid", BooleanType(), True),
        StructField("note", StringType(), True),
        StructField("tags", ArrayType(StringType(), False), True),
        StructField("attrs", MapType(StringType(), LongType(), False), True),
        StructField("ship", StructType([StructField("city", StringType(), False),
                                        StructField("zip", StringType(), True)]), True),
        StructField("state", StringType(), True),
        StructField("maybe", LongType(), True),
        StructField("any", StringType(), True),
        StructField("channel", StringType(), True),
    ])


def test_shaper_fills_defaults_and_writes_any_values_as_json_text():
    shape = shaper(ORDER)
    doc = {"id": 1, "item": "x", "any": {"b": [1, 2]}, "ship": {"city": "Oslo"}}
    got = shape(doc)
    assert got["channel"] == "web" and got["any"] == '{"b":[1,2]}' and "price" not in got
    assert shape({"id": 2, "item": "y", "any": "plain", "channel": "app"})["any"] == "plain"
    arrow = to_arrow_type(to_spark_type(ORDER).data_type)
    col = pa.array([got, None], type=arrow)  # what the decoder builds
    assert col[0]["channel"].as_py() == "web" and col[0]["ship"]["city"].as_py() == "Oslo"
    assert shaper({"type": "object", "properties": {"a": {"type": "integer"}}}) is None  # nothing to convert


def test_numbers_and_open_objects():
    assert to_spark_type({"type": ["integer", "number"]}).data_type == DoubleType()
    assert to_spark_type({"type": "object"}).data_type == MapType(StringType(), StringType(), True)
    assert to_spark_type({"type": "array"}).data_type == ArrayType(StringType(), True)
    assert to_spark_type({"anyOf": [{"type": "string"}, {"type": "null"}]}).nullable


@pytest.mark.parametrize("schema, why", [
    ({"type": ["string", "integer"]}, "several non-null types"),
    ({"oneOf": [{"type": "string"}, {"type": "object"}]}, "non-null alternatives"),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, "allOf of several"),
    ({"type": "array", "items": [{"type": "string"}]}, "tuple items"),
    ({"enum": ["a", 1]}, "several kinds"),
    ({"type": "object", "properties": {"next": {"$ref": "#"}}}, "recursive $ref"),
    ({"type": "object", "properties": {"a": {"$ref": "other.json"}}}, "does not resolve within the schema"),
    (False, "admits no value"),
])
def test_refused_with_the_reason(schema, why):
    with pytest.raises(JsonTypeError, match=why.replace("$", r"\$")):
        to_spark_type(schema)
