"""The direct-fetch bound of bench/steady_state.py (bench/_direct_source.py): it must read from
Kafka exactly what librdkafka reads, or its figures bound nothing; and what it cannot parse
(compressed batches) must fail, never be skipped."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _common import produce  # noqa: E402
from _direct_source import compile_parser, read_range  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = compile_parser(str(tmp_path_factory.mktemp("direct-parser")))
    if path is None:
        pytest.skip("no C compiler (cc) to build bench/_direct_fetch.c")
    return path


def _librdkafka_reads(bootstrap: str, topic: str, partition: int, lo: int, hi: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "direct-reference", "enable.auto.commit": False,
                  "log_level": 0})
    try:
        c.assign([TopicPartition(topic, partition, lo)])
        out: list[tuple] = []
        while len(out) < hi - lo:
            m = c.poll(10)
            assert m is not None and not m.error(), m and m.error()
            if m.offset() < hi:
                kind, ms = m.timestamp()
                out.append((m.key(), m.value(), m.offset(), ms * 1000, kind - 1))
        return out
    finally:
        c.close()


def test_reads_a_range_exactly_as_librdkafka_does(kafka_broker, unique_name, parser) -> None:
    topic = unique_name("direct")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker.bootstrap, topic, 6_000, 2, 300)  # batches of many records
    lo, hi = 117, 2_911  # both ends inside record batches
    batches = list(read_range(parser, kafka_broker.bootstrap, topic, 1, lo, hi))
    got = [(k, v, o, ts, t) for b in batches for k, v, o, ts, t in zip(
        b.column("key").to_pylist(), b.column("value").to_pylist(), b.column("offset").to_pylist(),
        [x.value for x in b.column("timestamp")], b.column("timestampType").to_pylist(), strict=True)]
    assert [g[2] for g in got] == list(range(lo, hi))
    assert got == _librdkafka_reads(kafka_broker.bootstrap, topic, 1, lo, hi)
    assert {b.column("partition")[0].as_py() for b in batches} == {1}
    assert {b.column("topic")[0].as_py() for b in batches} == {topic}


def test_a_compressed_topic_fails_the_read(kafka_broker, unique_name, parser) -> None:
    topic = unique_name("direct-lz4")
    kafka_broker.create_topic(topic, 1)
    produce(kafka_broker.bootstrap, topic, 1_000, 1, 300, compression="lz4")
    with pytest.raises(RuntimeError, match="a compressed or control batch"):
        list(read_range(parser, kafka_broker.bootstrap, topic, 0, 0, 1_000))


def test_a_response_larger_than_a_batch_is_handed_over_in_several(kafka_broker, unique_name, parser) -> None:
    topic = unique_name("direct-tiny")
    kafka_broker.create_topic(topic, 1)
    produce(kafka_broker.bootstrap, topic, 300_000, 1, 1)  # one 8 MiB answer: more rows than a batch holds
    batches = list(read_range(parser, kafka_broker.bootstrap, topic, 0, 0, 300_000))
    assert len(batches) > 1
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(300_000))
