"""valueFormat=json (JSON Schema in the Confluent wire format) through a real Schema Registry
(Karapace 3.16.0) on Apache Kafka (issue 55): records written by confluent-kafka's own
JSONSerializer, evolution (a property added with a default, both versions in one batch), the
bad-record cases (no magic byte, unknown schema id, not JSON, not valid against the reader
schema) in both modes, typed keys."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from schema_registry import batch_read, logged_pins, read_stream, run_available_now
from test_stream_support import table_name

pytestmark = pytest.mark.integration
pytest_plugins = ["schema_registry"]

# additionalProperties false: adding a property is then a compatible change (Karapace's README)
V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object", "additionalProperties": False, "required": ["id", "item"],
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
        "ship": {"$ref": "#/definitions/Address"},
    },
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}
V2 = {**V1, "properties": {**V1["properties"], "channel": {"type": "string", "default": "web"}}}


def order(i: int) -> dict:
    return {"id": i, "item": f"item-{i}", "price": i + 0.5, "tags": ["a"] * (i % 3),
            "note": None if i % 2 else f"n{i}", "ship": {"city": f"c{i}"}}


def produce_json(sr: Any, bootstrap: str, topic: str, schema: dict, values: list[Any], *,
                 keys: list[Any] | None = None, key_schema: dict | None = None) -> None:
    """Written by confluent-kafka's JSONSerializer (it registers under <topic>-value/-key)."""
    ser = JSONSerializer(json.dumps(schema), sr.client())
    kser = JSONSerializer(json.dumps(key_schema), sr.client()) if key_schema else None
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        key = kser(keys[i], SerializationContext(topic, MessageField.KEY)) if kser and keys else None
        p.produce(topic, key=key, value=ser(v, SerializationContext(topic, MessageField.VALUE)), partition=0)
    assert p.flush(30) == 0


def options(bootstrap: str, topic: str, sr: Any, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "valueFormat": "json",
            "schemaRegistry.url": sr.url, **extra}


@pytest.fixture
def topic(kafka_broker: Any, unique_name: Any) -> str:
    name = unique_name("json")
    kafka_broker.create_topic(name, 1)
    return name


def test_stream_round_trip_and_evolution_in_one_batch(spark, kafka_broker, schema_registry, topic, unique_name,
                                                      tmp_path):
    """v1 and v2 records in one batch: the columns are v2's; v1 records get channel's default."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_json(sr, boot, topic, V1, [order(i) for i in range(4)])
    produce_json(sr, boot, topic, V2, [{**order(i), "channel": "app"} for i in range(4, 6)])
    df = read_stream(spark, kafka_broker, unique_name("g"), options(boot, topic, sr))
    t = df.schema["value"].dataType
    # in the order of the registry's text of the schema (Karapace 3.16 gives its keys sorted)
    assert sorted(t.fieldNames()) == sorted(V2["properties"])
    assert not t["id"].nullable and t["note"].nullable and df.schema["value"].metadata["groupkafka.version"] == 2
    name = table_name(unique_name)
    run_available_now(df.select("offset", "value.*"), str(tmp_path / "ck"), table=name)
    got = {r["offset"]: r.asDict(recursive=True) for r in spark.table(name).collect()}
    assert sorted(got) == list(range(6))
    for i in range(6):
        want = {**order(i), "channel": "web" if i < 4 else "app"}
        assert {k: got[i][k] for k in want} == want


@pytest.fixture
def bad_topic(kafka_broker: Any, schema_registry: Any, unique_name: Any) -> str:
    """offset 0 good, 1 no magic byte, 2 an unknown schema id, 3 not JSON, 4 JSON that does
    not validate (item is a number), 5 a null value, 6 good."""
    topic = unique_name("jbad")
    kafka_broker.create_topic(topic, 1)
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_json(sr, boot, topic, V1, [order(0)])
    good = JSONSerializer(json.dumps(V1), sr.client())(order(9), SerializationContext(topic, MessageField.VALUE))
    p = Producer({"bootstrap.servers": boot})
    for value in (b'{"id": 1}', b"\x00" + struct.pack(">I", 987655) + good[5:], good[:5] + b"{nope",
                  good[:5] + json.dumps({"id": 4, "item": 4}).encode(), None):
        p.produce(topic, value=value, partition=0)
    assert p.flush(30) == 0
    produce_json(sr, boot, topic, V1, [order(6)])
    return topic


@pytest.mark.parametrize("offset, why", [
    (1, "not in the Confluent wire format"),
    (2, "unknown schema id 987655"),
    (3, "not JSON (writer schema id"),
    (4, "does not validate against the reader schema (id"),
])
def test_failfast_names_the_record_and_why(spark, kafka_broker, schema_registry, bad_topic, offset, why):
    opts = options(kafka_broker.bootstrap, bad_topic, schema_registry,
                   startingOffsets=json.dumps({bad_topic: {"0": offset}}),
                   endingOffsets=json.dumps({bad_topic: {"0": offset + 1}}))
    with pytest.raises(Exception) as err:
        batch_read(spark, opts).collect()
    assert f"cannot decode the value of the record at {bad_topic}-0 offset {offset}: {why}" in str(err.value)


def test_permissive_keeps_bad_rows_with_bytes_and_reason(spark, kafka_broker, schema_registry, bad_topic):
    df = batch_read(spark, options(kafka_broker.bootstrap, bad_topic, schema_registry, mode="PERMISSIVE"))
    assert df.columns[-2:] == ["corruptValue", "valueError"]
    rows = {r["offset"]: r for r in df.select("offset", "value", "corruptValue", "valueError").collect()}
    assert sorted(rows) == list(range(7))
    assert rows[0]["value"]["id"] == 0 and rows[6]["value"]["item"] == "item-6"
    assert rows[0]["valueError"] is None and rows[5]["value"] is None and rows[5]["valueError"] is None
    assert bytes(rows[1]["corruptValue"]) == b'{"id": 1}'
    for i, why in ((1, "not in the Confluent wire format"), (2, "unknown schema id 987655"), (3, "not JSON"),
                   (4, "4 is not of type 'string' (at $.item)")):
        assert rows[i]["value"] is None and why in rows[i]["valueError"], rows[i]["valueError"]


def test_batch_read_with_typed_key(spark, kafka_broker, schema_registry, topic):
    """keyFormat=json with a scalar key schema: the key column is a bigint."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_json(sr, boot, topic, V1, [order(i) for i in range(3)], keys=[10, 11, 12], key_schema={"type": "integer"})
    df = batch_read(spark, options(boot, topic, sr, keyFormat="json"))
    assert df.schema["key"].dataType.simpleString() == "bigint"
    assert sorted(tuple(r) for r in df.select("key", "value.id", "value.ship.city").collect()) == [
        (10, 0, "c0"), (11, 1, "c1"), (12, 2, "c2")]


def test_restart_decodes_with_the_checkpoints_reader_schema(spark, kafka_broker, schema_registry, topic,
                                                            unique_name, tmp_path):
    """The checkpoint's reader schema across restarts (docs/schema-registry.md): v2 changes only
    channel's default (the same columns), so the restarted query decodes v2 records with v1 and
    they get v1's default, not the latest's; v3 adds a property (other columns), so the
    restarted query stops before reading, naming version 1, and with valueSchemaVersion=1 it
    validates against v1 (the record with the added property is a bad record, kept)."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    group, ck, out = unique_name("g"), str(tmp_path / "ck"), str(tmp_path / "out")
    j2 = {**V2, "properties": {**V2["properties"], "channel": {"type": "string", "default": "mobile"}}}
    j3 = {**j2, "properties": {**j2["properties"], "coupon": {"type": "string"}}}

    def run(**extra: str) -> None:
        df = read_stream(spark, kafka_broker, group, options(boot, topic, sr, **extra))
        run_available_now(df.select("offset", "value.*"), ck, path=out)

    produce_json(sr, boot, topic, V2, [order(0), {**order(1), "channel": "app"}])  # version 1
    run()
    produce_json(sr, boot, topic, j2, [order(2), order(3)])  # version 2, channel left to the default
    assert sr.client().get_latest_version(f"{topic}-value").version == 2
    run()
    got = {r["offset"]: r["channel"] for r in spark.read.parquet(out).collect()}
    assert got == {0: "web", 1: "app", 2: "web", 3: "web"}  # v1's default: v2's would be "mobile"
    pins = logged_pins(ck)  # the batch after the restart names the first batch's reader schema
    assert len(pins) >= 2 and pins[max(pins)] == pins[min(pins)] and set(pins[0]) == {"value"}

    produce_json(sr, boot, topic, j3, [order(4), {**order(5), "coupon": "x"}])  # version 3: other columns
    with pytest.raises(Exception, match=r"checkpoint.s value reader schema is schema id \d+ \(subject "
                                        rf"'{topic}-value' version 1\)"):
        run()
    df = read_stream(spark, kafka_broker, group, options(boot, topic, sr, valueSchemaVersion="1",
                                                         mode="PERMISSIVE"))
    # other columns: another folder; its sink log starts at this batch id, so its files are read
    out2 = str(tmp_path / "out2")
    run_available_now(df.select("offset", "value", "valueError"), ck, path=out2)
    rows = {r["offset"]: r for r in spark.read.parquet(f"{out2}/part-*.parquet").collect()}
    assert sorted(rows) == [4, 5]
    assert rows[4]["value"]["channel"] == "web" and "coupon" not in rows[4]["value"].asDict()
    assert rows[5]["value"] is None and "Additional properties are not allowed" in rows[5]["valueError"]
