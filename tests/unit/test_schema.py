"""The output schema is Spark's Kafka source schema, and its Arrow form is what Spark checks."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_groupsource.schema import arrow_schema, spark_schema

SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def test_spark_schema_matches_spark_kafka_source() -> None:
    assert spark_schema(False) == SPARK_KAFKA_SCHEMA
    assert spark_schema(True) == StructType([*SPARK_KAFKA_SCHEMA.fields, HEADERS])
    assert spark_schema() == spark_schema(False)


def test_everything_is_nullable() -> None:
    s = spark_schema(True)
    assert all(f.nullable for f in s.fields)
    headers = s["headers"].dataType
    assert headers.containsNull and all(f.nullable for f in headers.elementType.fields)


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_spark_expects(include_headers: bool) -> None:
    expected = to_arrow_schema(spark_schema(include_headers), timezone="UTC")
    actual = arrow_schema(include_headers)
    assert actual.equals(expected, check_metadata=True)
    assert actual == expected


def test_arrow_types_are_the_strict_ones() -> None:
    s = arrow_schema(True)
    assert s.field("key").type == pa.binary() and s.field("value").type == pa.binary()
    assert s.field("topic").type == pa.string()
    assert s.field("partition").type == pa.int32() and s.field("offset").type == pa.int64()
    assert s.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert s.field("timestampType").type == pa.int32()
    assert s.field("headers").type.value_type == pa.struct(
        [pa.field("key", pa.string()), pa.field("value", pa.binary())]
    )
    assert all(f.nullable for f in s)
