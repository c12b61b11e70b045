"""Bad records never vanish (issue 55): each undecodable case fails the read by default with
topic, partition, offset and why, or is kept with mode=PERMISSIVE; a Schema Registry that is
down is retried within schemaRegistryOutageTimeoutMs, then named in the error."""

from __future__ import annotations

import json
import struct
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from schema_registry import batch_read, read_stream, run_available_now
from test_registry_avro import (
    V1,
    order,
    produce_avro,
    register,
    typed_options,
)

pytest_plugins = ["schema_registry"]


def only(topic: str, offset: int) -> dict[str, str]:
    return {"startingOffsets": json.dumps({topic: {"0": offset}}),
            "endingOffsets": json.dumps({topic: {"0": offset + 1}})}


@pytest.fixture
def bad_topic(kafka_broker: Any, schema_registry: Any, unique_name: Any) -> str:
    """offset 0 good, 1 no magic byte, 2 an unknown schema id, 3 a truncated payload, 4 a null
    value, 5 good."""
    topic = unique_name("bad")
    kafka_broker.create_topic(topic, 1)
    sr, boot = schema_registry, kafka_broker.bootstrap
    produce_avro(sr, boot, topic, V1, [order(0)])
    ser = AvroSerializer(sr.client(), json.dumps(V1))
    good = ser(order(9), SerializationContext(topic, MessageField.VALUE))
    p = Producer({"bootstrap.servers": boot})
    p.produce(topic, value=b"plain text", partition=0)
    p.produce(topic, value=b"\x00" + struct.pack(">I", 987654) + good[5:], partition=0)
    p.produce(topic, value=good[:8], partition=0)
    p.produce(topic, value=None, partition=0)
    assert p.flush(30) == 0
    produce_avro(sr, boot, topic, V1, [order(5)])
    return topic


@pytest.mark.parametrize("offset, why", [
    (1, "not in the Confluent wire format"),
    (2, "unknown schema id 987654"),
    (3, "undecodable with writer schema id"),
])
def test_failfast_names_the_record_and_why(spark, kafka_broker, schema_registry, bad_topic, offset, why):
    opts = typed_options(kafka_broker.bootstrap, bad_topic, schema_registry, **only(bad_topic, offset))
    with pytest.raises(Exception) as err:
        batch_read(spark, opts).collect()
    text = str(err.value)
    assert f"cannot decode the value of the record at {bad_topic}-0 offset {offset}: {why}" in text
    assert "mode=PERMISSIVE" in text


def test_permissive_keeps_bad_rows_with_bytes_and_reason(spark, kafka_broker, schema_registry, bad_topic):
    df = batch_read(spark, typed_options(kafka_broker.bootstrap, bad_topic, schema_registry, mode="PERMISSIVE"))
    assert df.columns[-2:] == ["corruptValue", "valueError"]
    rows = {r["offset"]: r for r in df.select("offset", "value", "corruptValue", "valueError").collect()}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    assert rows[0]["value"]["id"] == 0 and rows[5]["value"]["id"] == 5
    assert rows[0]["corruptValue"] is None and rows[0]["valueError"] is None
    assert bytes(rows[1]["corruptValue"]) == b"plain text"
    assert "not in the Confluent wire format" in rows[1]["valueError"]
    assert "unknown schema id 987654" in rows[2]["valueError"]
    assert "undecodable" in rows[3]["valueError"] and len(rows[3]["corruptValue"]) == 8
    for i in (1, 2, 3):
        assert rows[i]["value"] is None
    assert rows[4]["value"] is None and rows[4]["valueError"] is None  # a tombstone is no error


def _unseen_writer(sr: Any, boot: str, topic: str, records: list[dict]) -> None:
    """``records`` written with a schema of this test alone (no worker has its id), and a second
    version registered after them: the reader (latest) is not their writer, so decoding them
    needs the registry (the reader schema itself travels with the query)."""
    v1 = {**V1, "fields": V1["fields"] + [{"name": "marker", "type": "string", "default": topic}]}
    produce_avro(sr, boot, topic, v1, records)
    register(sr, f"{topic}-value", {**v1, "fields": v1["fields"] + [{"name": "extra", "type": "int", "default": 0}]})


def test_registry_down_fails_naming_the_url(spark, kafka_broker, schema_registry, unique_name):
    topic = unique_name("down")
    kafka_broker.create_topic(topic, 1)
    _unseen_writer(schema_registry, kafka_broker.bootstrap, topic, [order(i) for i in range(3)])
    df = batch_read(spark, typed_options(kafka_broker.bootstrap, topic, schema_registry,
                                         schemaRegistryOutageTimeoutMs="2000"))
    schema_registry.stop()
    try:
        started = time.monotonic()
        with pytest.raises(Exception) as err:
            df.collect()
        assert time.monotonic() - started < 60
        assert f"the Schema Registry at {schema_registry.url} did not answer" in str(err.value)
        assert "schemaRegistryOutageTimeoutMs=2000" in str(err.value)
    finally:
        schema_registry.start()


def test_registry_down_then_back_the_stream_goes_on(spark, kafka_broker, schema_registry, unique_name, tmp_path):
    """The registry stops after load() and comes back 6 s later: the executors' first lookups
    (a writer schema id no worker has seen) wait for it and the query reads every record."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    topic = unique_name("back")
    kafka_broker.create_topic(topic, 1)
    _unseen_writer(sr, boot, topic, [{**order(i), "marker": "m"} for i in range(4)])
    df = read_stream(spark, kafka_broker, unique_name("g"),
                     typed_options(boot, topic, sr, schemaRegistryOutageTimeoutMs="90000"))
    sr.stop()
    threading.Timer(6.0, sr.start).start()
    out = str(tmp_path / "out")
    try:
        run_available_now(df.select("offset", "value.id", "value.marker", "value.extra"), str(tmp_path / "ck"), path=out)
    finally:
        for _ in range(300):  # the timer's start() has finished
            if sr.proc is not None:
                break
            time.sleep(0.1)
    rows = sorted(tuple(r) for r in spark.read.parquet(out).collect())
    assert rows == [(i, i, "m", 0) for i in range(4)]


def test_unknown_subject_fails_at_load(spark, kafka_broker, schema_registry, unique_name):
    topic = unique_name("nosubject")
    with pytest.raises(Exception, match="has no latest version of subject"):
        _ = batch_read(spark, typed_options(kafka_broker.bootstrap, topic, schema_registry)).schema


def test_key_and_value_typed(spark, kafka_broker, schema_registry, unique_name):
    """keyFormat=avro: the key's reader schema from <topic>-key."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    topic = unique_name("keyed")
    kafka_broker.create_topic(topic, 1)
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "long"}]}
    kser = AvroSerializer(sr.client(), json.dumps(key_schema))
    vser = AvroSerializer(sr.client(), json.dumps(V1))
    p = Producer({"bootstrap.servers": boot})
    for i in range(3):
        p.produce(topic, key=kser({"k": i * 10}, SerializationContext(topic, MessageField.KEY)),
                  value=vser(order(i), SerializationContext(topic, MessageField.VALUE)), partition=0)
    assert p.flush(30) == 0
    register(sr, f"{topic}-key", key_schema)
    df = batch_read(spark, typed_options(boot, topic, sr, keyFormat="avro"))
    assert sorted(tuple(r) for r in df.select("key.k", "value.id").collect()) == [(0, 0), (10, 1), (20, 2)]
