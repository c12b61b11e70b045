"""valueFormat=protobuf (Confluent's Protobuf wire format: magic byte, schema id, message-index
array, message) through a real Schema Registry (Karapace 3.16.0) on Apache Kafka (issue 55):
records written by confluent-kafka's own ProtobufSerializer, evolution (a field added, both
versions in one batch), the bad-record cases in both modes (no magic byte, unknown schema id,
an undecodable message, another message of the file than the reader's)."""

from __future__ import annotations

import datetime as dt
import json
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from protobuf_orders import order, order_classes
from schema_registry import batch_read, logged_pins, read_stream, run_available_now
from test_stream_support import table_name

pytestmark = pytest.mark.integration
pytest_plugins = ["schema_registry"]


def serializer(sr: Any, cls: Any) -> Any:
    return ProtobufSerializer(cls, sr.client(), conf={"use.deprecated.format": False})


def produce(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0


def options(bootstrap: str, topic: str, sr: Any, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "valueFormat": "protobuf",
            "schemaRegistry.url": sr.url, **extra}


@pytest.fixture
def topic(kafka_broker: Any, unique_name: Any) -> str:
    name = unique_name("proto")
    kafka_broker.create_topic(name, 1)
    return name


def test_stream_round_trip_and_evolution_in_one_batch(spark, kafka_broker, schema_registry, topic, unique_name,
                                                      tmp_path):
    """v1 and v2 records (field 15 added) in one batch, read with v2: every type of the schema,
    v1 records with a null channel."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    ctx = SerializationContext(topic, MessageField.VALUE)
    (o1, _), (o2, _) = order_classes(1), order_classes(2)
    s1, s2 = serializer(sr, o1), serializer(sr, o2)
    produce(boot, topic, [s1(order(o1, i), ctx) for i in range(3)] + [s2(order(o2, 3, channel="app"), ctx)])
    df = read_stream(spark, kafka_broker, unique_name("g"), options(boot, topic, sr))
    assert df.schema["value"].metadata["groupkafka.version"] == 2
    assert df.schema["value"].dataType["took"].dataType.simpleString() == "interval day to second"
    name = table_name(unique_name)
    run_available_now(df.select("offset", "value.*"), str(tmp_path / "ck"), table=name)
    got = {r["offset"]: r.asDict(recursive=True) for r in spark.table(name).collect()}
    assert sorted(got) == [0, 1, 2, 3]
    for i in range(4):
        r = got[i]
        assert (r["id"], r["item"], r["price"], r["big"], r["tags"]) == (
            i if i else None, f"item-{i}", i + 0.25, -1 - i, ["a"] * (i % 3))  # id 0: proto3's unset default
        assert r["qty"] == (i % 7 or None) and r["state"] == ("PAID" if i % 2 else None)
        assert r["attrs"] == {"n": i} and r["ship"] == {"city": f"c{i}"}
        assert r["at"].replace(tzinfo=None) == dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i)
        assert r["took"] == dt.timedelta(seconds=i, microseconds=5)
        assert r["note"] == ({"value": f"n{i}"} if i % 2 == 0 else None)
        assert (r["card"], r["voucher"]) == ((f"card-{i}", None) if i % 2 == 0 else (None, i * 10))
        assert r["channel"] == ("app" if i == 3 else None)


def test_bad_records_in_both_modes(spark, kafka_broker, schema_registry, topic):
    """offset 0 good, 1 no magic byte, 2 an unknown schema id, 3 a truncated message, 4 a
    Refund (message index [1] of the same file), 5 a null value, 6 good."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    ctx = SerializationContext(topic, MessageField.VALUE)
    order_cls, refund_cls = order_classes(1)
    good = serializer(sr, order_cls)(order(order_cls, 1), ctx)
    refund = serializer(sr, refund_cls)(refund_cls(order_id=7), ctx)
    assert refund[:5] == good[:5] and refund[5] != good[5]  # one schema id, another message index
    produce(boot, topic, [good, b"plain", b"\x00" + struct.pack(">I", 987656) + good[5:], good[:-4], refund, None,
                          good])
    df = batch_read(spark, options(boot, topic, sr, mode="PERMISSIVE"))
    rows = {r["offset"]: r for r in df.select("offset", "value", "corruptValue", "valueError").collect()}
    assert sorted(rows) == list(range(7))
    assert rows[0]["value"]["item"] == "item-1" and rows[6]["value"]["item"] == "item-1"
    assert rows[5]["value"] is None and rows[5]["valueError"] is None
    for i, why in ((1, "not in the Confluent wire format"), (2, "unknown schema id 987656"),
                   (3, "undecodable as shop.Order"), (4, "written as message shop.Refund")):
        assert rows[i]["value"] is None and why in rows[i]["valueError"], rows[i]["valueError"]
        assert rows[i]["corruptValue"] is not None
    only = {"startingOffsets": json.dumps({topic: {"0": 4}}), "endingOffsets": json.dumps({topic: {"0": 5}})}
    with pytest.raises(Exception) as err:
        batch_read(spark, options(boot, topic, sr, **only)).collect()
    assert f"cannot decode the value of the record at {topic}-0 offset 4: written as message shop.Refund" in str(
        err.value)
    refunds = batch_read(spark, options(boot, topic, sr, valueMessageName="Refund", **only))
    assert [r["value"]["order_id"] for r in refunds.collect()] == [7]  # the other message, by name


def test_restart_decodes_with_the_checkpoints_reader_schema(spark, kafka_broker, schema_registry, topic,
                                                            unique_name, tmp_path):
    """The checkpoint's reader schema across restarts (docs/schema-registry.md): v2 adds the
    enum value REFUNDED (the same columns: an enum is a string), so the restarted query decodes
    v2's REFUNDED records with v1, which lacks the value: "2", the number as text, where the
    latest would say "REFUNDED"; v3 adds field 15 (other columns), so the restarted query stops
    before reading, naming version 1, and with valueSchemaVersion=1 reads v3 records as v1;
    valueSchemaVersion=2 given explicitly moves it on to v2 (the same columns)."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    group, ck, out = unique_name("g"), str(tmp_path / "ck"), str(tmp_path / "out")
    ctx = SerializationContext(topic, MessageField.VALUE)
    o1, o2, o3 = (order_classes(1)[0], order_classes(1, refunded=True)[0], order_classes(2, refunded=True)[0])

    def run(**extra: str) -> None:
        df = read_stream(spark, kafka_broker, group, options(boot, topic, sr, **extra))
        run_available_now(df.select("offset", "value.id", "value.state"), ck, path=out)

    def states() -> dict[int, str | None]:
        return {r["offset"]: r["state"] for r in spark.read.parquet(out).collect()}

    produce(boot, topic, [serializer(sr, o1)(order(o1, i), ctx) for i in range(2)])  # version 1
    run()
    produce(boot, topic, [serializer(sr, o2)(order(o2, i, state=2), ctx) for i in (2, 3)])  # version 2
    assert sr.client().get_latest_version(f"{topic}-value").version == 2
    run()
    assert states() == {0: None, 1: "PAID", 2: "2", 3: "2"}  # NEW (0) is proto3's unset default: null
    pins = logged_pins(ck)  # the batch after the restart names the first batch's reader schema
    assert len(pins) >= 2 and pins[max(pins)] == pins[min(pins)] and set(pins[0]) == {"value"}

    produce(boot, topic, [serializer(sr, o3)(order(o3, 4, state=2, channel="app"), ctx)])  # version 3
    with pytest.raises(Exception, match=r"checkpoint.s value reader schema is schema id \d+ \(subject "
                                        rf"'{topic}-value' version 1\)"):
        run()
    run(valueSchemaVersion="1")
    assert states() == {0: None, 1: "PAID", 2: "2", 3: "2", 4: "2"}
    assert "channel" not in spark.read.parquet(out).columns
    produce(boot, topic, [serializer(sr, o2)(order(o2, 5, state=2), ctx)])
    run(valueSchemaVersion="2")  # asked for: v2's columns are v1's, and the query moves on to v2
    assert states() == {0: None, 1: "PAID", 2: "2", 3: "2", 4: "2", 5: "REFUNDED"}
    pins = logged_pins(ck)
    assert pins[max(pins)] != pins[0]


def test_typed_key_with_a_message_name(spark, kafka_broker, schema_registry, topic):
    """keyFormat=protobuf: keys written as Refund (message index [1] of the file) under
    <topic>-key, read with keyMessageName=Refund; the key column is that message's struct."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    order_cls, refund_cls = order_classes(1)
    kser, vser = serializer(sr, refund_cls), serializer(sr, order_cls)
    p = Producer({"bootstrap.servers": boot})
    for i in range(3):
        p.produce(topic, key=kser(refund_cls(order_id=100 + i), SerializationContext(topic, MessageField.KEY)),
                  value=vser(order(order_cls, i), SerializationContext(topic, MessageField.VALUE)), partition=0)
    assert p.flush(30) == 0
    df = batch_read(spark, options(boot, topic, sr, keyFormat="protobuf", keyMessageName="Refund"))
    assert df.schema["key"].dataType.simpleString() == "struct<order_id:bigint>"
    assert df.schema["key"].metadata["groupkafka.subject"] == f"{topic}-key"
    assert sorted(tuple(r) for r in df.select("key.order_id", "value.item").collect()) == [
        (100, "item-0"), (101, "item-1"), (102, "item-2")]
    with pytest.raises(Exception, match=f"cannot decode the key of the record at {topic}-0 offset 0: written as "
                                        "message shop.Refund"):
        batch_read(spark, options(boot, topic, sr, keyFormat="protobuf")).collect()  # the file's first: Order
