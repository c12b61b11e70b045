"""Schema references per format (decode/references.py, protobuf_types.pool_of): Avro's named types
from other subjects put in at their first use, as confluent-kafka's ``parse_schema_with_repo``
loads them; JSON Schema ``$ref`` to a referenced schema's URI; Protobuf imports in one pool."""

from __future__ import annotations

import base64
import io
import json

import fastavro
import pytest
from confluent_kafka.schema_registry.common.avro import parse_schema_with_repo

from spark_groupsource.decode.avro_types import to_spark_type
from spark_groupsource.decode.json_types import JsonTypeError
from spark_groupsource.decode.json_types import to_spark_type as json_type
from spark_groupsource.decode.json_validate import Validity
from spark_groupsource.decode.protobuf_types import ProtobufTypeError, message_of
from spark_groupsource.decode.references import avro_schema, json_resources
from spark_groupsource.decode.registry import Referenced

STATUS = {"type": "enum", "name": "Status", "namespace": "shop.common", "symbols": ["NEW", "DONE"]}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "shop",
            "fields": [{"name": "name", "type": "string"}, {"name": "status", "type": "shop.common.Status"},
                       {"name": "home", "type": {"type": "record", "name": "Address",
                                                 "fields": [{"name": "city", "type": "string"}]}}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": "shop.common.Status"},
                    {"name": "buyer", "type": "Customer"}, {"name": "ship", "type": ["null", "Address"]},
                    {"name": "others", "type": {"type": "array", "items": "shop.Customer"}}]}
REFS = (Referenced("shop.common.Status", "status", 1, json.dumps(STATUS)),
        Referenced("shop.Customer", "customer", 2, json.dumps(CUSTOMER)))


def test_avro_named_types_of_references_read_as_confluent_kafka_loads_them():
    """The status enum is used by the root before the customer that also uses it, the customer's
    nested Address by its short name in the root's namespace: every record decodes the same
    with the self-contained schema as with confluent-kafka's repository-loaded one."""
    mine = fastavro.parse_schema(avro_schema(ORDER, REFS))
    theirs = parse_schema_with_repo(json.dumps(ORDER), {"shop.common.Status": STATUS, "shop.Customer": CUSTOMER})
    rec = {"id": 7, "status": "DONE", "buyer": {"name": "a", "status": "NEW", "home": {"city": "x"}},
           "ship": {"city": "y"}, "others": [{"name": "b", "status": "DONE", "home": {"city": "z"}}]}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, theirs, rec)
    assert fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), mine, None) == rec
    t = to_spark_type(avro_schema(ORDER, REFS)).data_type
    assert t.simpleString() == ("struct<id:bigint,status:string,buyer:struct<name:string,status:string,"
                                "home:struct<city:string>>,ship:struct<city:string>,others:array<struct<name:"
                                "string,status:string,home:struct<city:string>>>>")


def test_avro_without_references_is_the_schema_itself_and_an_unknown_name_stays_unknown():
    assert avro_schema(ORDER, ()) is ORDER
    with pytest.raises(Exception, match="Customer"):  # only the status enum: the customer is not known
        fastavro.parse_schema(avro_schema(ORDER, REFS[:1]))


def test_json_ref_to_a_referenced_schema_by_its_name():
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    order = {"type": "object", "properties": {"id": {"type": "integer"}, "ship": {"$ref": "address.json"}}}
    resources = json_resources((Referenced("address.json", "address", 1, json.dumps(address)),))
    assert json_type(order, resources).data_type.simpleString() == "struct<id:bigint,ship:struct<city:string>>"
    v = Validity(order, resources)
    assert v.is_valid({"id": 1, "ship": {"city": "x"}})
    assert not v.is_valid({"id": 1, "ship": {}})
    assert "city" in v.error({"id": 1, "ship": {}})[0]
    with pytest.raises(JsonTypeError, match="address.json"):
        json_type(order)


def _file(name: str, package: str, deps: list[str], build) -> str:
    from google.protobuf import descriptor_pb2 as d

    f = d.FileDescriptorProto(name=name, package=package, syntax="proto3", dependency=deps)
    build(f, d.FieldDescriptorProto)
    return base64.standard_b64encode(f.SerializeToString()).decode()


def test_protobuf_imports_two_levels_deep_with_a_shared_enum_in_one_pool():
    def common(f, F):
        e = f.enum_type.add(name="Status")
        e.value.add(name="NEW", number=0)
        e.value.add(name="DONE", number=1)

    def customer(f, F):
        m = f.message_type.add(name="Customer")
        m.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        m.field.add(name="status", number=2, type=F.TYPE_ENUM, type_name=".shop.common.Status",
                    label=F.LABEL_OPTIONAL)

    def order(f, F):
        m = f.message_type.add(name="Order")
        m.field.add(name="buyer", number=1, type=F.TYPE_MESSAGE, type_name=".shop.Customer", label=F.LABEL_OPTIONAL)
        m.field.add(name="status", number=2, type=F.TYPE_ENUM, type_name=".shop.common.Status",
                    label=F.LABEL_OPTIONAL)

    # names as the registry gives them back: empty (confluent-kafka names each by its import path)
    refs = (Referenced("shop/common.proto", "shop/common.proto", 1, _file("", "shop.common", [], common)),
            Referenced("shop/customer.proto", "shop/customer.proto", 1,
                       _file("", "shop", ["shop/common.proto"], customer)))
    root = _file("", "shop", ["shop/customer.proto", "shop/common.proto"], order)
    from spark_groupsource.decode.protobuf_types import to_spark_type as proto_type

    desc = message_of(root, "shop.Order", refs)
    assert proto_type(desc).data_type.simpleString() == "struct<buyer:struct<name:string,status:string>,status:string>"
    with pytest.raises(ProtobufTypeError, match="shop/customer.proto"):
        message_of(root, None, refs[:1])
