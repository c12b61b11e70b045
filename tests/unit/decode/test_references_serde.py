"""Avro and JSON Schema references end to end through confluent-kafka's own serializers and
deserializers and its in-memory registry (``MockSchemaRegistryClient``): Karapace 3.16.0, the
registry of the integration tests, refuses references in these two formats (HTTP 422, error
44302). The registry module's resolution (by subject and version, recursively, a cycle refused, a
missing reference named) runs as it does against a real registry; records are decoded by the
executors' column decoders and compared with the deserializers' values row for row."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.pandas.types import to_arrow_type

from spark_groupsource.decode.avro_decode import AvroColumnDecoder
from spark_groupsource.decode.columns import spark_type_of
from spark_groupsource.decode.json_decode import JsonColumnDecoder
from spark_groupsource.decode.options import DecodeOptions, SideOptions
from spark_groupsource.decode.registry import Registry, RegistryError, SchemaNotFoundError
from spark_groupsource.decode.wire import DecodeError

TOPIC = "orders"
CTX = SerializationContext(TOPIC, MessageField.VALUE)
STATUS = {"type": "enum", "name": "Status", "namespace": "shop.common", "symbols": ["NEW", "DONE"]}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "shop",
            "fields": [{"name": "name", "type": "string"}, {"name": "status", "type": "shop.common.Status"}]}
CUSTOMER2 = {**CUSTOMER, "fields": CUSTOMER["fields"] + [{"name": "tier", "type": "string", "default": "std"}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": "shop.common.Status"},
                    {"name": "buyer", "type": "Customer"}, {"name": "others", "type": {"type": "array", "items": "Customer"}}]}
ORDER_REFS = [SchemaReference("shop.Customer", "customer", 1), SchemaReference("shop.common.Status", "status", 1)]


def registry(url: str, fmt: str) -> tuple[Any, Registry, SideOptions]:
    client = MockSchemaRegistryClient({"url": "mock://" + url})
    side = SideOptions("value", fmt, subject=f"{TOPIC}-value")
    opts = DecodeOptions(key=SideOptions("key", "binary"), value=side, registry_url=f"http://{url}.invalid")
    return client, Registry(opts, client=client), side


def decoder(cls: type, reg: Registry, side: SideOptions, permissive: bool = False) -> Any:
    reader = reg.reader_schema(side)
    arrow = to_arrow_type(spark_type_of(reader), timezone="UTC")
    return cls("value", reg, reader.schema_str, reader.schema_id, arrow, permissive, references=reader.references)


def decode(dec: Any, values: list[bytes]) -> tuple[list[Any], Any]:
    typed, _, why = dec.decode(pa.array(values, pa.binary()), TOPIC, 0, pa.array(range(len(values)), pa.int64()))
    return typed.to_pylist(), (why.to_pylist() if why is not None else None)


def avro_setup(url: str) -> tuple[Any, Registry, SideOptions]:
    client, reg, side = registry(url, "avro")
    client.register_schema("status", Schema(json.dumps(STATUS), "AVRO"))
    client.register_schema("customer", Schema(json.dumps(CUSTOMER), "AVRO", [SchemaReference("shop.common.Status", "status", 1)]))
    return client, reg, side


def order(i: int) -> dict[str, Any]:
    return {"id": i, "status": "DONE" if i % 2 else "NEW", "buyer": {"name": f"b{i}", "status": "NEW"},
            "others": [{"name": f"o{k}", "status": "DONE"} for k in range(i % 3)]}


def test_avro_record_type_from_another_subject_row_for_row():
    client, reg, side = avro_setup("avro-rows")
    ser = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO", ORDER_REFS), conf={"auto.register.schemas": True})
    values = [ser(order(i), CTX) for i in range(6)]
    dec = decoder(AvroColumnDecoder, reg, side)
    assert [(r.subject, r.version) for r in reg.reader_schema(side).references] == [("status", 1), ("customer", 1)]
    de = AvroDeserializer(client)
    assert decode(dec, values)[0] == [de(v, CTX) for v in values]


def test_avro_referenced_schema_evolves_and_old_reader_resolves_new_writer():
    """customer version 2 adds a field with a default; order registered again with that reference
    (another schema id): the reader pinned to order version 1 reads both writers' records with
    the old columns, as AvroDeserializer given the old reader schema does."""
    client, reg, side = avro_setup("avro-evolve")
    old = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO", ORDER_REFS), conf={"auto.register.schemas": True})
    v1 = [old(order(i), CTX) for i in range(3)]
    dec = decoder(AvroColumnDecoder, reg, side)  # order version 1, customer version 1
    client.register_schema("customer", Schema(json.dumps(CUSTOMER2), "AVRO", [SchemaReference("shop.common.Status", "status", 1)]))
    refs2 = [SchemaReference("shop.Customer", "customer", 2), ORDER_REFS[1]]
    new = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO", refs2), conf={"auto.register.schemas": True})
    v2 = [new({**order(i), "buyer": {"name": "n", "status": "DONE", "tier": "gold"}}, CTX) for i in range(3, 5)]
    assert v2[0][1:5] != v1[0][1:5]
    reader_v1 = Schema(json.dumps(ORDER), "AVRO", ORDER_REFS)
    de = AvroDeserializer(client, schema_str=reader_v1)
    got = decode(dec, v1 + v2)[0]
    assert got == [de(v, CTX) for v in v1 + v2]
    assert "tier" not in got[-1]["buyer"]


def test_avro_missing_reference_named_at_load_and_per_record():
    client, reg, side = avro_setup("avro-missing")
    ser = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO", ORDER_REFS), conf={"auto.register.schemas": True})
    good = ser(order(1), CTX)
    dec_failfast = decoder(AvroColumnDecoder, reg, side)
    dec_permissive = decoder(AvroColumnDecoder, reg, side, permissive=True)
    # a writer registered later (customer version 2) whose reference is then deleted
    client.register_schema("customer", Schema(json.dumps(CUSTOMER2), "AVRO", [SchemaReference("shop.common.Status", "status", 1)]))
    refs2 = [SchemaReference("shop.Customer", "customer", 2), ORDER_REFS[1]]
    bad = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO", refs2),
                         conf={"auto.register.schemas": True})({**order(2), "buyer": {"name": "n", "status": "NEW", "tier": "t"}}, CTX)
    client.delete_version("customer", 2)
    why = r"schema id \d+ refers to 'shop.Customer' as subject 'customer' version 2, which the Schema Registry"
    with pytest.raises(DecodeError, match=why):
        decode(dec_failfast, [good, bad])
    rows, reasons = decode(dec_permissive, [good, bad])
    assert rows[0] is not None and rows[1] is None and reasons[0] is None
    assert "refers to 'shop.Customer' as subject 'customer' version 2" in reasons[1]
    client.delete_version("customer", 1)  # the reader's own reference: a new query fails at load()
    _, fresh, _ = registry("avro-missing-2", "avro")
    fresh.client = fresh._text = client
    with pytest.raises(SchemaNotFoundError, match=r"subject 'orders-value' version 1 \(schema id \d+\) refers to "
                                                  r"'shop.Customer' as subject 'customer' version 1, which the Schema "
                                                  r"Registry at http://avro-missing-2.invalid does not have"):
        fresh.reader_schema(replace(side, version=1))


def test_a_cycle_of_references_is_refused_naming_the_subjects():
    client, reg, side = registry("cycle", "avro")
    a = {"type": "record", "name": "A", "fields": [{"name": "b", "type": ["null", "B"]}]}
    b = {"type": "record", "name": "B", "fields": [{"name": "a", "type": ["null", "A"]}]}
    client.register_schema("a", Schema(json.dumps(a), "AVRO", [SchemaReference("B", "b", 1)]))  # b not there yet
    client.register_schema("b", Schema(json.dumps(b), "AVRO", [SchemaReference("A", "a", 1)]))
    client.register_schema(f"{TOPIC}-value", Schema(json.dumps(a), "AVRO", [SchemaReference("B", "b", 1)]))
    with pytest.raises(RegistryError, match=r"form a cycle: 'orders-value' version 1 -> 'b' version 1 -> "
                                            r"'a' version 1 -> 'b' version 1"):
        reg.reader_schema(side)


ADDRESS = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
           "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]}
JORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"id": {"type": "integer"}, "ship": {"$ref": "address.json"},
                         "bill": {"$ref": "address.json"}}, "required": ["id", "ship"]}


def test_json_ref_to_another_subject_row_for_row_and_validated():
    client, reg, side = registry("json-rows", "json")
    client.register_schema("address", Schema(json.dumps(ADDRESS), "JSON"))
    schema = Schema(json.dumps(JORDER), "JSON", [SchemaReference("address.json", "address", 1)])
    ser = JSONSerializer(schema, client, conf={"auto.register.schemas": True})
    docs = [{"id": i, "ship": {"city": f"c{i}", "zip": str(i)}, **({"bill": {"city": "b"}} if i % 2 else {})}
            for i in range(4)]
    values = [ser(d, CTX) for d in docs]
    dec = decoder(JsonColumnDecoder, reg, side, permissive=True)
    de = JSONDeserializer(None, schema_registry_client=client)
    want = [de(v, CTX) for v in values]
    rows, reasons = decode(dec, values)
    assert reasons is None
    assert rows == [{"id": w["id"], "ship": {"city": w["ship"]["city"], "zip": w["ship"].get("zip")},
                     "bill": ({"city": w["bill"]["city"], "zip": None} if "bill" in w else None)} for w in want]
    header = values[0][:5]
    rows, reasons = decode(dec, [header + json.dumps({"id": 9, "ship": {"zip": "1"}}).encode()])  # no city
    assert rows == [None] and "'city' is a required property" in reasons[0]
