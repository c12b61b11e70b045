"""Subject name strategies (issue 55): RecordNameStrategy and TopicRecordNameStrategy, as
confluent-kafka's serializers register under them, on a real registry (Karapace 3.16.0) and
Apache Kafka: several topics in one subscription, several record types in one topic."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from protobuf_orders import order as proto_order
from protobuf_orders import order_classes
from schema_registry import batch_read
from test_registry_avro import V1, V2, order

pytestmark = pytest.mark.integration
pytest_plugins = ["schema_registry"]


def test_topic_record_name_strategy_over_two_topics(spark, kafka_broker, schema_registry, unique_name):
    """Each topic's records under <topic>-shop.Order (the serializer's TopicRecordNameStrategy):
    one batch read of both topics; a third topic whose subject gives other columns is refused
    at load(), naming both subjects."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    topics = [unique_name("tra"), unique_name("trb"), unique_name("trc")]
    p = Producer({"bootstrap.servers": boot})
    for n, (t, schema) in enumerate(zip(topics, (V1, V1, V2), strict=True)):
        kafka_broker.create_topic(t, 1)
        ser = AvroSerializer(sr.client(), json.dumps(schema),
                             conf={"subject.name.strategy": topic_record_subject_name_strategy})
        for i in range(2):
            p.produce(t, value=ser(order(10 * n + i), SerializationContext(t, MessageField.VALUE)), partition=0)
    assert p.flush(30) == 0
    opts = {"kafka.bootstrap.servers": boot, "valueFormat": "avro", "schemaRegistry.url": sr.url,
            "valueSubjectNameStrategy": "TopicRecordNameStrategy", "valueRecordName": "shop.Order"}
    df = batch_read(spark, {**opts, "subscribe": ",".join(topics[:2])})
    assert df.schema["value"].metadata["groupkafka.subject"] == f"{min(topics[:2])}-shop.Order"
    assert sorted((r["topic"], r["id"]) for r in df.select("topic", "value.id").collect()) == sorted(
        [(topics[0], 0), (topics[0], 1), (topics[1], 10), (topics[1], 11)])
    with pytest.raises(Exception, match="reader schemas of the subscribed topics differ"):
        _ = batch_read(spark, {**opts, "subscribe": ",".join(topics)}).schema


def test_record_name_strategy_two_messages_in_one_topic(spark, kafka_broker, schema_registry, unique_name):
    """Orders and Refunds in one topic, each registered under its message's full name
    (RecordNameStrategy): valueRecordName picks the subject and the reader message; records of
    the other message are bad records (kept in PERMISSIVE mode)."""
    sr, boot = schema_registry, kafka_broker.bootstrap
    topic = unique_name("rn")
    kafka_broker.create_topic(topic, 1)
    order_cls, refund_cls = order_classes(1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"use.deprecated.format": False, "subject.name.strategy": record_subject_name_strategy}
    o, r = ProtobufSerializer(order_cls, sr.client(), conf), ProtobufSerializer(refund_cls, sr.client(), conf)
    p = Producer({"bootstrap.servers": boot})
    for v in (o(proto_order(order_cls, 1), ctx), r(refund_cls(order_id=1), ctx), o(proto_order(order_cls, 2), ctx)):
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0
    assert {"shop.Order", "shop.Refund"} <= set(sr.client().get_subjects())
    opts = {"kafka.bootstrap.servers": boot, "subscribe": topic, "valueFormat": "protobuf",
            "schemaRegistry.url": sr.url, "valueSubjectNameStrategy": "RecordNameStrategy",
            "valueRecordName": "shop.Refund", "mode": "PERMISSIVE"}
    rows = sorted(batch_read(spark, opts).select("offset", "value.order_id", "valueError").collect())
    assert [(x[0], x[1]) for x in rows] == [(0, None), (1, 1), (2, None)]
    assert "written as message shop.Order" in rows[0][2] and rows[1][2] is None
