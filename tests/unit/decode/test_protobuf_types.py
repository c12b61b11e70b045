"""Protobuf descriptor -> Spark type (spark-protobuf's SchemaConverters, default options) and
message -> the value Arrow takes: nested messages, repeated, maps, enums as names, oneof,
Timestamp/Duration/wrappers, unsigned ints as Java's bits; recursion refused."""

from __future__ import annotations

import base64
import datetime as dt
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    DayTimeIntervalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from protobuf_orders import order, order_classes, order_file  # noqa: E402

from spark_groupsource.decode.protobuf_types import (  # noqa: E402
    ProtobufTypeError,
    converter,
    message_at,
    message_of,
    pool_of,
    to_spark_type,
)


def b64(f) -> str:
    return base64.standard_b64encode(f.SerializeToString()).decode()


def test_spark_type_follows_spark_protobuf():
    t = to_spark_type(message_of(b64(order_file(2)), None)).data_type
    assert t["id"] == StructField("id", LongType(), True)
    assert t["qty"].dataType == IntegerType() and t["big"].dataType == IntegerType()
    assert t["price"].dataType == DoubleType()
    assert t["tags"].dataType == ArrayType(StringType(), False)
    assert t["attrs"].dataType == MapType(StringType(), LongType(), False)
    assert t["state"].dataType == StringType()
    assert t["at"].dataType == TimestampType() and t["took"].dataType == DayTimeIntervalType()
    assert t["note"].dataType == StructType([StructField("value", StringType(), True)])
    assert t["ship"].dataType == StructType([StructField("city", StringType(), True)])
    assert "card" in t.fieldNames() and "voucher" in t.fieldNames() and "channel" in t.fieldNames()
    assert to_spark_type(message_of(b64(order_file()), "Refund")).data_type.fieldNames() == ["order_id"]
    with pytest.raises(ProtobufTypeError, match="has no message 'Nope'; it has shop.Order"):
        message_of(b64(order_file()), "Nope")


def test_values_as_arrow_takes_them():
    Order, _ = order_classes(1)
    desc = message_of(b64(order_file(1)), "shop.Order")
    conv = converter(desc)
    msg = Order.FromString(order(Order, 1).SerializeToString())
    v = conv(msg)
    assert v["big"] == -2 and v["state"] == "PAID" and v["attrs"] == [("n", 1)] and v["voucher"] == 10
    assert "card" not in v and "note" not in v and v["ship"] == {"city": "c1"}
    assert v["at"] == dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert v["took"] == dt.timedelta(seconds=1, microseconds=5)
    empty = conv(Order())
    assert empty["tags"] == [] and empty["attrs"] == [] and "id" not in empty  # unset: null; repeated: empty
    arrow = to_arrow_type(to_spark_type(desc).data_type, timezone="UTC")
    col = pa.array([v, empty, None], type=arrow)
    assert col[0]["took"].as_py() == dt.timedelta(seconds=1, microseconds=5) and col[1]["id"].as_py() is None


def test_message_indexes_and_refusals():
    fd = pool_of(b64(order_file()))
    assert message_at(fd, [0]).full_name == "shop.Order" and message_at(fd, [1]).full_name == "shop.Refund"
    assert message_at(fd, [0, 1]).full_name == "shop.Order.Address"
    with pytest.raises(ProtobufTypeError, match="message index 5 out of range"):
        message_at(fd, [5])
    from google.protobuf import descriptor_pb2 as d

    F = d.FieldDescriptorProto
    rec = d.FileDescriptorProto(name="r.proto", package="p", syntax="proto3")
    node = rec.message_type.add(name="Node")
    node.field.add(name="next", number=1, type=F.TYPE_MESSAGE, type_name=".p.Node", label=F.LABEL_OPTIONAL)
    with pytest.raises(ProtobufTypeError, match="recursive"):
        to_spark_type(message_of(b64(rec), None))
    other = d.FileDescriptorProto(name="o.proto", package="p", dependency=["other/thing.proto"])
    with pytest.raises(ProtobufTypeError, match="schema references"):
        pool_of(b64(other))


def test_a_map_whose_entry_lost_its_option_is_still_a_map():
    """Karapace 3.16 serves descriptors rebuilt without message options: map_entry is gone."""
    f = order_file()
    f.message_type[0].nested_type[0].ClearField("options")
    desc = message_of(b64(f), None)
    assert to_spark_type(desc).data_type["attrs"].dataType == MapType(StringType(), LongType(), False)
    from google.protobuf.message_factory import GetMessageClass

    Order, _ = order_classes(1)
    m = GetMessageClass(desc).FromString(order(Order, 0).SerializeToString())
    assert converter(desc)(m)["attrs"] == [("n", 0)]  # the value at its default is 0, not null
