"""Timestamp lookups on Apache Kafka: the driver asks ListOffsets by timestamp through its admin
client (no consumer, so no librdkafka group handler), and Kafka's answer stands without the
record-by-record search that the test brokers need."""

from __future__ import annotations

import logging

from assignment.model import TopicPartition
from helpers import assert_backs_off_while_down, own_kafka_or_skip, produce_keyed
from spark_groupsource.config import fetcher_config, parse_stream_options
from spark_groupsource.devbroker import DevBroker
from spark_groupsource.planning.offset_reader import OffsetReader

BASE_TS = 1_700_000_000_000


def test_kafka_answers_timestamp_lookups_through_the_admin_client(kafka_broker, unique_name, caplog) -> None:
    topic = unique_name("ts")
    kafka_broker.create_topic(topic, 2)
    # record i at BASE_TS + i on partition i % 2
    records = produce_keyed(kafka_broker.bootstrap, topic, 20, partitions=2, base_timestamp_ms=BASE_TS)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    def first_at(tp: TopicPartition, ts: int) -> int | None:
        hits = [r.offset for r in records if r.partition == tp.partition and r.timestamp >= ts]
        return min(hits) if hits else None

    stamps = {p0: BASE_TS + 7, p1: BASE_TS + 1000}
    with caplog.at_level(logging.WARNING, logger="spark_groupsource.offsets"), \
            OffsetReader({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 0}) as reader:
        for asked in (stamps, {p0: BASE_TS - 5, p1: BASE_TS + 3}, {p0: BASE_TS + 18, p1: BASE_TS + 19}):
            got = reader.for_timestamps(asked)
            assert got == {tp: first_at(tp, ts) for tp, ts in asked.items()}
        assert reader.for_timestamps(stamps)[p1] is None  # past the end: None, not an error
    # Kafka's own answer stood every time: no fallback to searching the records
    assert not [r for r in caplog.records if "does not implement ListOffsets" in r.getMessage()]


def test_a_reader_that_looked_up_timestamps_backs_off_while_the_broker_is_down(capfd) -> None:
    """The driver's reader lives as long as the query: after a timestamp lookup it must not
    hold a client that reconnects many times a second through an outage."""
    own_kafka_or_skip("stops a Kafka node of its own")
    with DevBroker("kafka", topics={"stamps": 1}) as broker:
        opts = parse_stream_options({"kafka.bootstrap.servers": broker.bootstrap,
                                     "kafka.group.id": "stamps-g", "subscribe": "stamps"})
        # the driver's own config (fetcher_config: a group.id included); debug=broker logs
        # each connection attempt ("Connecting to ...") on stderr
        cfg = {**fetcher_config(opts), "debug": "broker"}
        produce_keyed(broker.bootstrap, "stamps", 10, partitions=1, base_timestamp_ms=BASE_TS)
        tp = TopicPartition("stamps", 0)
        with OffsetReader(cfg) as reader:
            assert reader.for_timestamps({tp: BASE_TS + 4}) == {tp: 4}
            assert_backs_off_while_down(broker.kafka, capfd)  # the reader before c0fae56: 204
            assert reader.for_timestamps({tp: BASE_TS + 7}) == {tp: 7}
