"""A real Schema Registry for the tests: Karapace 3.16.0 from ../shared/karapace beside the
``kafka_broker`` (issue 55).

The runner is the dev broker's (:mod:`spark_groupsource.devbroker._karapace`, which the
command's ``--schema-registry`` uses too): installed once into a cache folder
(``GROUPKAFKA_KARAPACE_VENV``, default ``~/.cache/groupkafka/karapace-3.16.0``; about 15 s the
first time, from PyPI wheels) with the share's ``install.sh``, started with its ``start.sh`` on a
free port; ``GROUPKAFKA_KARAPACE`` points at another copy of the share. The tests skip with the
reason when the share is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
