"""A real Schema Registry for the tests: Karapace 3.16.0 from ../shared/karapace beside the
``kafka_broker`` (issue 55).

The runner is the dev broker's (:mod:`spark_groupsource.devbroker._karapace`, which the
command's ``--schema-registry`` uses too): installed once into a cache folder
(``GROUPKAFKA_KARAPACE_VENV``, default ``~/.cache/groupkafka/karapace-3.16.0``; about 15 s the
first time, from PyPI wheels) with the share's ``install.sh``, started with its ``start.sh`` on a
free port; ``GROUPKAFKA_KARAPACE`` points at another copy of the share. The tests skip with the
reason when the share is absent.

Beside the fixture, the helpers every registry test module reads with: a typed stream, a
batch read, and one AvailableNow run into a memory table or a parquet folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_stream_support import QUERY_TIMEOUT_S, broker_options, offset_log, stop

from spark_groupsource.devbroker._karapace import Karapace as _Karapace
from spark_groupsource.devbroker._karapace import karapace_missing


class Karapace(_Karapace):
    """One Karapace process; ``stop()`` and ``start()`` again on the same port."""

    def client(self) -> Any:
        """A fresh confluent-kafka client (its get_latest_version is cached per client)."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url})


@pytest.fixture(scope="session")
def schema_registry(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Karapace]:
    """Karapace beside the session's Kafka broker (skips without ../shared/karapace)."""
    missing = karapace_missing()
    if missing:
        pytest.skip(missing)
    sr = Karapace(kafka_broker.bootstrap, tmp_path_factory.mktemp("karapace"))
    sr.start()
    try:
        yield sr
    finally:
        sr.stop()


def read_stream(spark: Any, broker: Any, group: str, options: dict[str, str]) -> Any:
    """A stream of the group from the earliest offsets with ``options`` (they may override it)."""
    r = spark.readStream.format("groupkafka").option("kafka.group.id", group)
    for k, v in {**broker_options(broker), "startingOffsets": "earliest", **options}.items():
        r = r.option(k, v)
    return r.load()


def batch_read(spark: Any, options: dict[str, str]) -> Any:
    reader = spark.read.format("groupkafka")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df: Any, checkpoint: str, *, table: str | None = None, path: str | None = None) -> None:
    """One AvailableNow run of ``df`` into the memory table ``table`` or parquet under ``path``
    (files survive a restart, a memory table does not); the query's own error raised."""
    if (table is None) == (path is None):
        raise ValueError("give one of table= and path=")
    w = df.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True)
    w = w.format("memory").queryName(table) if table is not None else w.format("parquet").option("path", path)
    q = w.start()
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not finish"
        if q.exception() is not None:
            raise AssertionError(str(q.exception()))
    finally:
        stop(q)


def logged_pins(checkpoint: str) -> dict[int, dict[str, int]]:
    """The reader schema ids (``"schemas"``) in each batch's offsets of the checkpoint."""
    out = {}
    for batch, logged in offset_log(checkpoint).items():
        source = json.loads(logged) if isinstance(logged, str) else logged  # Spark quotes a Python source's
        out[batch] = source.get("schemas", {})
    return out
