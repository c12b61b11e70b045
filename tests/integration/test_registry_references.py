"""Schema references on a real Schema Registry (Karapace 3.16.0) and Apache Kafka: Protobuf
files that import each other two levels deep and share an enum, registered and written by
confluent-kafka's own ProtobufSerializer (each import under its own subject), every row
compared with the message the producer wrote, as a deserializer with the producer's class
parses it; a referenced schema's evolution against the checkpoint's pin; the reader schema
travelling with the plan, so that fresh Python workers read while the registry is unreachable.

What Karapace 3.16.0 cannot do, and so is not tested here: references in Avro and JSON Schema
(it refuses them: HTTP 422, error 44302; tests/unit/decode/test_references_serde.py has them
against confluent-kafka's in-memory registry), and confluent-kafka's ProtobufDeserializer on
these records (it asks ``/schemas/ids/{id}?format=serialized``, which Karapace answers with HTTP
500 for a schema with references)."""

from __future__ import annotations

import datetime as dt
import json
import math
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from faultproxy import FaultProxy
from protobuf_orders import shop_order, shop_order_class
from schema_registry import batch_read, logged_pins, read_stream, run_available_now
from test_registry_protobuf import options as protobuf_options
from test_registry_protobuf import produce
from test_stream_support import table_name

pytestmark = pytest.mark.integration
pytest_plugins = ["schema_registry"]

CONF = {"use.deprecated.format": False}
#: the registry re-renders the .proto with a oneof's fields last (the producer declared card and
#: voucher right after id): the columns follow the registry's descriptor
COLUMNS = ["id", "buyer", "status", "others", "total", "ratio", "card", "voucher"]


def options(bootstrap: str, topic: str, url: str, **extra: str) -> dict[str, str]:
    return {**protobuf_options(bootstrap, topic, SimpleNamespace(url=url)), **extra}


def write_orders(sr: Any, bootstrap: str, topic: str, n: int, **build: bool) -> tuple[Any, list[Any]]:
    """``n`` orders of :func:`shop_order_class` written with ProtobufSerializer: (class, messages)."""
    cls = shop_order_class(topic, **build)
    ser = ProtobufSerializer(cls, sr.client(), conf=CONF)
    written = [shop_order(cls, i) for i in range(n)]
    produce(bootstrap, topic, [ser(m, SerializationContext(topic, MessageField.VALUE)) for m in written])
    return cls, written


def _enum(m: Any, field: str) -> str | None:
    v = getattr(m, field)
    return None if v == 0 else m.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number[v].name


def _customer(c: Any, email: bool = False) -> dict[str, Any]:
    out = {"name": c.name or None, "status": _enum(c, "status"),
           "since": c.since.ToDatetime() if c.HasField("since") else None}
    if email:
        out["email"] = c.email or None
    return out


def expected(m: Any, email: bool = False) -> dict[str, Any]:
    """The row of a message, by the documented rules (docs/schema-registry.md):
    an unset field (proto3: at its default) is null, except a float of -0.0 (not the default's
    bits); an enum is its value's name; a oneof's fields one value, the others null."""
    which = m.WhichOneof("pay")
    return {
        "id": m.id or None,
        "buyer": _customer(m.buyer, email) if m.HasField("buyer") else None,
        "status": _enum(m, "status"),
        "others": [_customer(c, email) for c in m.others],
        "total": {"currency": m.total.currency or None, "units": m.total.units or None} if m.HasField("total") else None,
        "ratio": m.ratio if (m.ratio != 0 or math.copysign(1.0, m.ratio) < 0) else None,
        "card": m.card if which == "card" else None,
        "voucher": m.voucher if which == "voucher" else None,
    }


def _naive(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its timestamps as naive UTC (what ``Timestamp.ToDatetime`` gives)."""
    def fix(c: Any) -> Any:
        if c is not None and c.get("since") is not None:
            c = dict(c, since=c["since"].astimezone(dt.UTC).replace(tzinfo=None) if c["since"].tzinfo else c["since"])
        return c

    return dict(row, buyer=fix(row["buyer"]), others=[fix(c) for c in row["others"]])


@pytest.fixture
def topic(kafka_broker: Any, unique_name: Any) -> str:
    name = unique_name("refs")
    kafka_broker.create_topic(name, 1)
    return name


def test_two_levels_of_imports_and_a_shared_enum_row_for_row(spark, kafka_broker, schema_registry, topic,
                                                              unique_name, tmp_path):
    """order.proto imports customer.proto, which imports common.proto (its enum used by both):
    each file its own subject; a batch read and a stream give every row as the deserializer."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    _, written = write_orders(sr, boot, topic, 9)
    latest = sr.client().get_latest_version(f"{topic}-value")
    assert sorted(r.subject for r in latest.schema.references) == [f"{topic}/common.proto", f"{topic}/customer.proto"]
    assert [r.subject for r in sr.client().get_latest_version(f"{topic}/customer.proto").schema.references] == [
        f"{topic}/common.proto"]  # the second level
    want = {i: expected(m) for i, m in enumerate(written)}
    assert want[1]["ratio"] == 0.0 and math.copysign(1.0, want[1]["ratio"]) < 0  # -0.0 is not null

    df = batch_read(spark, options(boot, topic, sr.url))
    assert df.schema["value"].dataType.fieldNames() == COLUMNS
    got = {r["offset"]: _naive(r["value"].asDict(recursive=True)) for r in df.select("offset", "value").collect()}
    assert got == want
    assert math.copysign(1.0, got[1]["ratio"]) < 0

    name = table_name(unique_name)
    stream = read_stream(spark, kafka_broker, unique_name("g"), options(boot, topic, sr.url))
    run_available_now(stream.select("offset", "value"), str(tmp_path / "ck"), table=name)
    got = {r["offset"]: _naive(r["value"].asDict(recursive=True)) for r in spark.table(name).collect()}
    assert got == want


def test_a_referenced_schema_evolves_the_checkpoint_keeps_the_columns(spark, kafka_broker, schema_registry, topic,
                                                                      unique_name, tmp_path):
    """customer.proto gains a field (version 2) and the producer's next build registers order.proto
    again with that reference: the same .proto text, another schema id and other columns. The
    restarted stream (latest) stops before reading, naming the checkpoint's version; with
    valueSchemaVersion=1 it reads the new records with the old columns, as the deserializer with
    the old class does."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    group, ck, out = unique_name("g"), str(tmp_path / "ck"), str(tmp_path / "out")
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = shop_order_class(topic), shop_order_class(topic, email=True)
    first = [shop_order(v1, i) for i in range(3)]
    produce(boot, topic, [ProtobufSerializer(v1, sr.client(), conf=CONF)(m, ctx) for m in first])

    def run(**extra: str) -> None:
        df = read_stream(spark, kafka_broker, group, options(boot, topic, sr.url, **extra))
        run_available_now(df.select("offset", "value"), ck, path=out)

    run()
    ser2 = ProtobufSerializer(v2, sr.client(), conf=CONF)
    later = []
    for i in range(3, 6):
        m = shop_order(v2, i)
        m.buyer.email = f"b{i}@x"
        later.append(m)
    produce(boot, topic, [ser2(m, ctx) for m in later])
    client = sr.client()
    assert client.get_versions(f"{topic}/customer.proto") == [1, 2] and client.get_versions(f"{topic}-value") == [1, 2]
    assert [r.version for r in client.get_version(f"{topic}-value", 2).schema.references
            if r.subject.endswith("customer.proto")] == [2]
    with pytest.raises(Exception, match=rf"checkpoint.s value reader schema is schema id \d+ \(subject "
                                        rf"'{topic}-value' version 1\)"):
        run()
    run(valueSchemaVersion="1")
    rows = spark.read.parquet(out)
    assert "email" not in rows.schema["value"].dataType["buyer"].dataType.fieldNames()
    got = {r["offset"]: _naive(r["value"].asDict(recursive=True)) for r in rows.collect()}
    old = [v1.FromString(m.SerializeToString()) for m in first + later]  # the old build parses the new records
    assert got == {i: expected(m) for i, m in enumerate(old)}
    pins = logged_pins(ck)
    assert len({p["value"] for p in pins.values()}) == 1


def test_fresh_workers_read_while_the_registry_is_unreachable(spark, kafka_broker, schema_registry, topic,
                                                             unique_name, tmp_path):
    """The registry is reached through a proxy at a URL no Python worker has used: load() resolves
    the reader schema and its references, then the proxy refuses every connection. A batch read
    and a stream (a new query: its driver-side runner and every task's worker are processes
    that never saw the schemas) read every record written with the reader schema; a record
    with a writer schema no worker has seen fails the read, naming the registry."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    ctx = SerializationContext(topic, MessageField.VALUE)
    _, written = write_orders(sr, boot, topic, 4)
    want = {i: expected(m) for i, m in enumerate(written)}
    proxy = FaultProxy().start(urlparse(sr.url).port)
    url = f"http://127.0.0.1:{proxy.port}"
    try:
        opts = options(boot, topic, url, schemaRegistryOutageTimeoutMs="3000")
        df, later = batch_read(spark, opts), batch_read(spark, opts)  # a batch read's offsets: at its first action
        stream = read_stream(spark, kafka_broker, unique_name("g"), opts)
        proxy.reset()
        got = {r["offset"]: _naive(r["value"].asDict(recursive=True)) for r in df.select("offset", "value").collect()}
        assert got == want
        name = table_name(unique_name)
        run_available_now(stream.select("offset", "value"), str(tmp_path / "ck"), table=name)
        assert {r["offset"]: _naive(r["value"].asDict(recursive=True)) for r in spark.table(name).collect()} == want

        v2 = shop_order_class(topic, email=True)  # registered directly, not through the proxy
        produce(boot, topic, [ProtobufSerializer(v2, sr.client(), conf=CONF)(shop_order(v2, 9), ctx)])
        with pytest.raises(Exception, match=rf"the Schema Registry at {url} did not answer for schema id \d+"):
            later.collect()
    finally:
        proxy.close()


#: a referenced Avro enum and JSON Schema object, and a schema of each format that uses it
AVRO_STATUS = {"type": "enum", "name": "Status", "namespace": "shop.common", "symbols": ["NEW", "DONE"]}
AVRO_ORDER = {"type": "record", "name": "Order", "namespace": "shop",
              "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": "shop.common.Status"}]}
JSON_ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}}
JSON_ORDER = {"type": "object", "properties": {"id": {"type": "integer"}, "ship": {"$ref": "address.json"}}}


def test_karapace_refuses_avro_and_json_schema_references(schema_registry, unique_name):
    """Why Avro and JSON Schema references are tested against confluent-kafka's in-memory
    registry (tests/unit/decode/test_references_serde.py), not here: Karapace 3.16.0 refuses any
    non-empty ``references`` for a schemaType other than PROTOBUF (HTTP 422, error 44302) before
    it reads the schema, on the serializers' own requests, with fully qualified names and each
    reference named as the ``$ref`` or type that uses it; a self-contained schema with a
    reference is refused the same way. When the project's registry accepts them this fails:
    then move those tests onto it."""
    client, base = schema_registry.client(), unique_name("refused")
    ctx = SerializationContext(f"{base}-orders", MessageField.VALUE)
    client.register_schema(f"{base}-status", Schema(json.dumps(AVRO_STATUS), "AVRO"))  # the registry is up
    client.register_schema(f"{base}-address", Schema(json.dumps(JSON_ADDRESS), "JSON"))
    avro_ref = [SchemaReference("shop.common.Status", f"{base}-status", 1)]
    json_ref = [SchemaReference("address.json", f"{base}-address", 1)]
    attempts = {
        "AVRO": lambda: AvroSerializer(client, Schema(json.dumps(AVRO_ORDER), "AVRO", avro_ref),
                                       conf={"auto.register.schemas": True})({"id": 1, "status": "NEW"}, ctx),
        "JSON": lambda: JSONSerializer(Schema(json.dumps(JSON_ORDER), "JSON", json_ref), client,
                                       conf={"auto.register.schemas": True})({"id": 1, "ship": {"city": "c"}}, ctx),
        "AVRO, self-contained": lambda: client.register_schema(
            f"{base}-plain", Schema(json.dumps(AVRO_STATUS), "AVRO", avro_ref)),
    }
    for what, attempt in attempts.items():
        with pytest.raises(SchemaRegistryError) as refused:
            attempt()
        assert (refused.value.http_status_code, refused.value.error_code) == (422, 44302), what
        kind = what.split(",")[0]
        assert f"Schema references are not supported for '{kind}' schema type" in refused.value.error_message
    assert not {f"{base}-orders-value", f"{base}-plain"} & set(client.get_subjects())  # none registered
