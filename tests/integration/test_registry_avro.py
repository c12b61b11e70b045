"""Typed Avro records through a real Schema Registry (Karapace 3.16.0) on Apache Kafka
(issue 55): records written by confluent-kafka's own AvroSerializer, schema evolution, the
checkpointed reader schema, batch reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from schema_registry import batch_read, logged_pins, read_stream, run_available_now
from test_stream_support import table_name

pytest_plugins = ["schema_registry"]  # the session fixture schema_registry: Karapace beside kafka_broker

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}]}


def order(i: int) -> dict:
    import datetime as dt
    from decimal import Decimal

    return {"id": i, "item": f"item-{i}", "qty": i % 7, "price": Decimal(f"{i}.25"),
            "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
            "tags": ["a"] * (i % 3), "note": None if i % 2 else f"n{i}", "state": "PAID" if i % 2 else "NEW"}


def produce_avro(sr: Any, bootstrap: str, topic: str, schema: dict, records: list[dict], *, partition: int = 0) -> None:
    """Records in the wire format, written by confluent-kafka's AvroSerializer (it registers
    ``schema`` under ``<topic>-value``)."""
    ser = AvroSerializer(sr.client(), json.dumps(schema), conf={"auto.register.schemas": True})
    p = Producer({"bootstrap.servers": bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for r in records:
        p.produce(topic, key=str(r["id"]).encode(), value=ser(r, ctx), partition=partition)
    assert p.flush(30) == 0


def register(sr: Any, subject: str, schema: dict) -> int:
    return sr.client().register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def typed_options(bootstrap: str, topic: str, sr: Any, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "valueFormat": "avro",
            "schemaRegistry.url": sr.url, **extra}


@pytest.fixture
def topic(kafka_broker: Any, unique_name: Any) -> str:
    name = unique_name("avro")
    kafka_broker.create_topic(name, 1)
    return name


def test_stream_round_trip_and_evolution_in_one_batch(spark, kafka_broker, schema_registry, topic, unique_name,
                                                      tmp_path):
    """v1 and v2 records (a field added with a default) in one batch: the columns are the
    latest version's, v1 records get the default."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_avro(sr, boot, topic, V1, [order(i) for i in range(5)])
    produce_avro(sr, boot, topic, V2, [{**order(i), "channel": "app"} for i in range(5, 8)])
    df = read_stream(spark, kafka_broker, unique_name("g"), typed_options(boot, topic, sr))
    value_type = df.schema["value"].dataType
    assert [f.name for f in value_type.fields] == [f["name"] for f in V2["fields"]]
    assert df.schema["value"].metadata["groupkafka.version"] == 2
    name = table_name(unique_name)
    run_available_now(df.select("offset", "value.*"), str(tmp_path / "ck"), table=name)
    got = {r["offset"]: r.asDict() for r in spark.table(name).collect()}
    assert sorted(got) == list(range(8))
    for i in range(8):
        want = {**order(i), "channel": "web" if i < 5 else "app"}
        row = got[i]
        assert row["id"] == i and row["item"] == want["item"] and row["qty"] == want["qty"]
        assert row["price"] == want["price"] and row["tags"] == want["tags"] and row["note"] == want["note"]
        assert row["state"] == want["state"] and row["channel"] == want["channel"]
        assert row["at"].replace(tzinfo=None) == want["at"].replace(tzinfo=None)  # session time zone UTC


def test_batch_read_with_a_pinned_version(spark, kafka_broker, schema_registry, topic):
    """spark.read takes the same options; valueSchemaVersion=1 reads v2 records as v1 (the
    added field dropped by Avro resolution)."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_avro(sr, boot, topic, V1, [order(i) for i in range(3)])
    produce_avro(sr, boot, topic, V2, [{**order(i), "channel": "app"} for i in range(3, 6)])
    df = batch_read(spark, typed_options(boot, topic, sr, valueSchemaVersion="1"))
    assert "channel" not in df.schema["value"].dataType.fieldNames()
    rows = sorted(df.select("offset", "value.id", "value.item").collect())
    assert [(r[0], r[1], r[2]) for r in rows] == [(i, i, f"item-{i}") for i in range(6)]


def test_restart_keeps_the_checkpoints_reader_schema(spark, kafka_broker, schema_registry, topic, unique_name,
                                                     tmp_path):
    """A version registered while the query is stopped does not change its columns: the
    restarted query (valueSchemaVersion latest) stops before reading, naming the versions; with
    the checkpoint's version given it goes on with the old columns."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    group, ck = unique_name("g"), str(tmp_path / "ck")
    produce_avro(sr, boot, topic, V1, [order(i) for i in range(3)])
    out = str(tmp_path / "out")
    run_available_now(read_stream(spark, kafka_broker, group, typed_options(boot, topic, sr)).select("offset", "value"),
                      ck, path=out)
    assert spark.read.parquet(out).count() == 3
    produce_avro(sr, boot, topic, V2, [{**order(i), "channel": "app"} for i in range(3, 5)])  # v2 registered
    assert set(logged_pins(ck)[0]) == {"value"}  # the reader schema id in the batch's offsets
    df = read_stream(spark, kafka_broker, group, typed_options(boot, topic, sr))
    with pytest.raises(Exception, match=r"checkpoint.s value reader schema is schema id \d+ \(subject .*-value. version 1\)"):
        run_available_now(df.select("offset", "value"), ck, path=out)
    df = read_stream(spark, kafka_broker, group, typed_options(boot, topic, sr, valueSchemaVersion="1"))
    run_available_now(df.select("offset", "value"), ck, path=out)
    rows = spark.read.parquet(out).collect()
    assert sorted(r["offset"] for r in rows) == [0, 1, 2, 3, 4]
    assert all("channel" not in r["value"].asDict() for r in rows)


FLAT_V1 = {"type": "record", "name": "Flat", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None},
]}
FLAT_V2 = {**FLAT_V1, "fields": FLAT_V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}]}


def test_interleaved_writer_versions_in_one_batch(spark, kafka_broker, schema_registry, topic, unique_name,
                                                  tmp_path):
    """v1 and v2 records of a flat schema (the C decoder's kind) interleaved in one batch, as
    during a producer's roll-out, with a tombstone among them: each row is its own record's,
    in offset order (the batch is decoded one writer id at a time, then put back in order)."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(sr.client(), json.dumps(FLAT_V1), conf={"auto.register.schemas": True})
    v2 = AvroSerializer(sr.client(), json.dumps(FLAT_V2), conf={"auto.register.schemas": True})
    p = Producer({"bootstrap.servers": boot})
    want: dict[int, dict | None] = {}
    for i in range(12):
        rec: dict | None = {"id": i, "item": f"item-{i}", "note": None if i % 3 else f"n{i}"}
        if i == 7:
            rec, value = None, None
        elif i % 2:
            rec = {**rec, "channel": f"app{i}"}
            value = v2(rec, ctx)
        else:
            value = v1(rec, ctx)
            rec = {**rec, "channel": "web"}
        p.produce(topic, value=value, partition=0)
        want[i] = rec
    assert p.flush(30) == 0
    df = read_stream(spark, kafka_broker, unique_name("g"), typed_options(boot, topic, sr))
    name = table_name(unique_name)
    run_available_now(df.select("offset", "value"), str(tmp_path / "ck"), table=name)
    got = {r["offset"]: (None if r["value"] is None else r["value"].asDict()) for r in spark.table(name).collect()}
    assert got == want


KEY_V1 = {"type": "record", "name": "K", "namespace": "shop", "fields": [{"name": "k", "type": "long"}]}
KEY_V2 = {**KEY_V1, "fields": KEY_V1["fields"] + [{"name": "region", "type": "string", "default": "eu"}]}
KEY_V3 = {**KEY_V1, "fields": KEY_V1["fields"] + [{"name": "region", "type": "string", "default": "us"}]}
KEY_V4 = {**KEY_V3, "fields": KEY_V3["fields"] + [{"name": "zone", "type": "int", "default": 0}]}


def test_restart_keeps_the_checkpoints_key_reader_schema(spark, kafka_broker, schema_registry, topic, unique_name,
                                                         tmp_path):
    """keyFormat=avro across restarts, as for the value: a key version that changes only a
    default (the same columns) registered while stopped leaves the restarted query on the
    checkpoint's key schema (its default on the new keys, not the latest's); one with other
    columns stops the query, naming the key's version, until keySchemaVersion says which."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    group, ck, out = unique_name("g"), str(tmp_path / "ck"), str(tmp_path / "out")
    kctx, vctx = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
    kser = AvroSerializer(sr.client(), json.dumps(KEY_V1), conf={"auto.register.schemas": True})  # key version 1
    vser = AvroSerializer(sr.client(), json.dumps(V1), conf={"auto.register.schemas": True})

    def produce(ids: range) -> None:
        p = Producer({"bootstrap.servers": boot})
        for i in ids:
            p.produce(topic, key=kser({"k": i * 10}, kctx), value=vser(order(i), vctx), partition=0)
        assert p.flush(30) == 0

    def run(**extra: str) -> None:
        df = read_stream(spark, kafka_broker, group, typed_options(boot, topic, sr, keyFormat="avro", **extra))
        run_available_now(df.select("offset", "key", "value.id"), ck, path=out)

    produce(range(2))
    register(sr, f"{topic}-key", KEY_V2)  # version 2, the latest at the first start: region "eu"
    run()
    produce(range(2, 4))
    register(sr, f"{topic}-key", KEY_V3)  # version 3: only region's default changed
    assert sr.client().get_latest_version(f"{topic}-key").version == 3
    run()
    rows = {r["offset"]: r for r in spark.read.parquet(out).collect()}
    assert {o: (r["key"]["k"], r["key"]["region"], r["id"]) for o, r in rows.items()} == {
        i: (i * 10, "eu", i) for i in range(4)}  # version 2's default: version 3's would be "us"
    pins = logged_pins(ck)
    assert len(pins) >= 2 and set(pins[0]) == {"key", "value"} and pins[max(pins)] == pins[min(pins)]

    register(sr, f"{topic}-key", KEY_V4)  # version 4: other columns
    produce(range(4, 5))
    with pytest.raises(Exception, match=rf"checkpoint.s key reader schema is schema id \d+ \(subject "
                                        rf"'{topic}-key' version 2\)"):
        run()
    run(keySchemaVersion="2")
    rows = {r["offset"]: r for r in spark.read.parquet(out).collect()}
    assert sorted(rows) == [0, 1, 2, 3, 4] and rows[4]["key"].asDict() == {"k": 40, "region": "eu"}
