"""The rows this source produces: exactly the schema of Spark's built-in Kafka source.

Column for column what ``KafkaRecordToRowConverter`` declares (every field nullable)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]   -- only with includeHeaders=true

``timestampType`` carries the Java client's ``TimestampType.id``: 0 CreateTime, 1 LogAppendTime,
-1 when the record has no timestamp (then ``timestamp`` is -1 ms, as Spark shows it).

``arrow_schema`` is what executors must yield: pyspark 4.2+ compares every
``pyarrow.RecordBatch`` strictly with ``to_arrow_schema(spark_schema, timezone="UTC")``.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
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

__all__ = ["spark_schema", "arrow_schema", "HEADER_TYPE", "COLUMNS"]

#: Column names in output order (without ``headers``).
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")

_SPARK_BASE = (
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
)
_SPARK_HEADERS = StructField(
    "headers",
    ArrayType(
        StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]),
        containsNull=True,
    ),
    True,
)

#: Arrow type of one header: what the ``headers`` list column holds.
HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


def spark_schema(include_headers: bool = False) -> StructType:
    """The Spark schema of this source's rows."""
    fields = list(_SPARK_BASE)
    if include_headers:
        fields.append(_SPARK_HEADERS)
    return StructType(fields)


@lru_cache(maxsize=2)
def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema of the record batches executors yield (equal to Spark's conversion)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.field("element", HEADER_TYPE))))
    return pa.schema(fields)
