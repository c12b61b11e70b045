"""The typed-records options (issue 55): validated at load(), errors naming the option, secrets
never shown."""

from __future__ import annotations

import pytest

from spark_groupsource.config import parse_batch_options, parse_stream_options, validate_definition
from spark_groupsource.decode.options import parse_decode_options
from spark_groupsource.errors import OptionError

BASE = {"kafka.bootstrap.servers": "h:9092", "kafka.group.id": "g", "subscribe": "orders"}


def dec(**extra):
    return parse_decode_options(parse_stream_options({**BASE, **{k.lower(): v for k, v in extra.items()}}))


def fails(option, match, **extra):
    with pytest.raises(OptionError) as err:
        dec(**extra)
    assert err.value.option == option, str(err.value)
    assert match in str(err.value)
    return str(err.value)


def test_binary_by_default():
    d = dec()
    assert not d.typed and d.value.format == "binary"


def test_avro_defaults_to_topic_name_strategy_latest():
    d = dec(valueFormat="avro", **{"schemaRegistry.url": "http://sr:8081"})
    assert d.value.subject == "orders-value" and d.value.version is None and not d.permissive
    assert d.outage_timeout_ms == 120_000
    d = dec(keyFormat="AVRO", keySchemaVersion="3", mode="permissive", **{"schemaRegistry.url": "http://sr:8081"})
    assert d.key.subject == "orders-key" and d.key.version == 3 and d.permissive and not d.value.typed


def test_errors_name_the_option():
    fails("valueFormat", "expected one of binary, avro, json, protobuf", valueFormat="xml")
    fails("valueSchema", "inline Protobuf reader schema is not supported", valueFormat="protobuf", valueSchema="x", **{"schemaRegistry.url": "http://sr:8081"})
    fails("schemaRegistry.url", "is required", valueFormat="avro")
    fails("schemaRegistry.url", "expected http(s)://", valueFormat="avro", **{"schemaRegistry.url": "sr:8081"})
    url = {"schemaRegistry.url": "http://sr:8081"}
    fails("valueSchemaVersion", "latest or a version number", valueFormat="avro", valueSchemaVersion="0", **url)
    fails("mode", "FAILFAST or PERMISSIVE", valueFormat="avro", mode="DROPMALFORMED", **url)
    fails("valueSchema", "is not JSON", valueFormat="avro", valueSchema="{nope", **url)
    fails("valueSchema", "not a valid Avro schema", valueFormat="avro", valueSchema='{"type":"record"}', **url)
    fails("valueSchema", "not a valid JSON Schema", valueFormat="json", valueSchema='{"type":"nope"}', **url)
    fails("valueSchema", "has no Spark type", valueFormat="json", valueSchema='{"type":["string","integer"]}', **url)
    assert dec(valueFormat="json", valueSchema='{"type":"object"}', **url).value.inline_schema
    fails("valueSchema", "excludes valueSubject", valueFormat="avro", valueSchema='"string"', valueSubject="s", **url)
    fails("valueSubjectNameStrategy", "expected one of TopicNameStrategy, RecordNameStrategy", valueFormat="avro",
          valueSubjectNameStrategy="NameStrategy", **url)
    fails("valueRecordName", "is required with valueSubjectNameStrategy=RecordNameStrategy", valueFormat="avro",
          valueSubjectNameStrategy="RecordNameStrategy", **url)
    fails("valueRecordName", "which is not set", valueFormat="avro", valueRecordName="shop.Order", **url)
    fails("valueSubjectNameStrategy", "does not apply when valueSubject", valueFormat="avro", valueSubject="s",
          valueSubjectNameStrategy="TopicNameStrategy", **url)
    fails("valueMessageName", "does not apply to valueFormat=avro", valueFormat="avro", valueMessageName="M", **url)
    fails("valueSubject", "only applies with a typed valueFormat", valueSubject="x")
    fails("mode", "only applies with a typed valueFormat or keyFormat", mode="PERMISSIVE")
    fails("schemaRegistry.ssl.certificate.location", "is required", valueFormat="avro",
          **{**url, "schemaRegistry.ssl.key.location": "/k.pem"})
    fails("schemaRegistry.bogus", "not a Schema Registry client property", valueFormat="avro",
          **{**url, "schemaRegistry.bogus": "1"})
    fails("schemaRegistryOutageTimeoutMs", "positive integer", valueFormat="avro",
          schemaRegistryOutageTimeoutMs="-1", **url)


def test_a_pattern_needs_a_subject_or_an_inline_schema():
    raw = {"kafka.bootstrap.servers": "h:9092", "kafka.group.id": "g", "subscribepattern": "o.*",
           "valueformat": "avro", "schemaregistry.url": "http://sr:8081"}
    with pytest.raises(OptionError, match="unless the topics are listed with subscribe") as err:
        parse_decode_options(parse_stream_options(raw))
    assert err.value.option == "valueSubject"
    assert parse_decode_options(parse_stream_options({**raw, "valuesubject": "orders-value"})).value.subject \
        == "orders-value"
    assert parse_decode_options(parse_stream_options({**raw, "valueschema": '"string"'})).value.inline_schema


def test_user_info_is_a_secret():
    raw = {**BASE, "valueformat": "avro", "schemaregistry.url": "http://sr:8081",
           "schemaregistry.basic.auth.user.info": "alice:s3cret", "schemaregistry.ssl.key.password": "kp",
           "schemaregistry.ssl.certificate.location": "/c.pem"}
    opts = parse_stream_options(raw)
    d = parse_decode_options(opts)
    assert "s3cret" not in repr(opts) and "s3cret" not in repr(d) and "kp" not in repr(d.registry_conf)
    assert d.client_conf()["basic.auth.user.info"] == "alice:s3cret"
    msg = fails("schemaRegistry.basic.auth.user.info", "user:password", valueFormat="avro",
                **{"schemaRegistry.url": "http://sr:8081", "schemaRegistry.basic.auth.user.info": "nocolon"})
    assert "nocolon" not in msg


def test_names_pass_the_common_checks_in_both_modes():
    raw = {"kafka.bootstrap.servers": "h:9092", "subscribe": "orders", "valueformat": "avro",
           "schemaregistry.url": "http://sr:8081", "valueschemaversion": "2"}
    validate_definition(raw)
    assert parse_decode_options(parse_batch_options(raw)).value.version == 2
    with pytest.raises(OptionError, match="did you mean valueFormat"):
        validate_definition({**raw, "valueformatt": "avro"})


def test_subject_name_strategies():
    url = {"schemaRegistry.url": "http://sr:8081"}
    d = dec(valueFormat="avro", valueSubjectNameStrategy="RecordNameStrategy", valueRecordName="shop.Order", **url)
    assert d.value.subject == "shop.Order" and d.value.also == ()
    d = dec(valueFormat="protobuf", keyFormat="json", keySubjectNameStrategy="io.confluent.kafka.serializers.subject."
            "TopicRecordNameStrategy", keyRecordName="shop.Key", valueSubjectNameStrategy="topicrecordnamestrategy",
            valueRecordName="shop.Order", **url)
    assert d.key.subject == "orders-shop.Key" and d.value.subject == "orders-shop.Order"
    assert d.value.message == "shop.Order" and d.key.message is None  # protobuf: the message named
    raw = {**{k.lower(): v for k, v in BASE.items()}, "subscribe": "b,a", "valueformat": "avro",
           "schemaregistry.url": "http://sr:8081"}
    v = parse_decode_options(parse_stream_options(raw)).value
    assert (v.subject, v.also) == ("a-value", ("b-value",))  # every topic's subject, checked at load()
    v = parse_decode_options(parse_stream_options({**raw, "valuesubjectnamestrategy": "TopicRecordNameStrategy",
                                                   "valuerecordname": "shop.Order"})).value
    assert (v.subject, v.also) == ("a-shop.Order", ("b-shop.Order",))
