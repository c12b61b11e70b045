"""Shared fixtures: a Spark session and Kafka-protocol brokers.

Brokers
  ``broker``        session-scoped, parametrized over the default backends (ids ``kafka``: Apache
                    Kafka 4.0.1, the broker whose behaviour counts; ``mock``: librdkafka's mock).
  ``kafka_broker``  the same Apache Kafka instance (node faults via ``kafka_broker.kafka``).
  ``mock_broker``   the same mock instance (fault injection via ``mock_broker.mock``).
  ``tansu_broker``  a Tansu broker, for the few tests of what Tansu adds (not in the default matrix).
  Every broker object has ``.backend``, ``.bootstrap``, ``.create_topic(name, partitions)``,
  ``.recommended_session_timeout_ms`` and ``.mock`` (None except for the mock).
  Where the Kafka jars are missing (a clone without ``../shared/kafka`` and no
  ``GROUPKAFKA_KAFKA_HOME``), tests on ``kafka`` skip saying so.

Environment
  ``GROUPKAFKA_TEST_BOOTSTRAP=host:port,...``  run broker tests against that external cluster only:
      ``broker`` yields one object with ``.backend == "external"``; ``mock_broker`` and
      ``tansu_broker`` skip.
  ``GROUPKAFKA_TEST_BACKENDS=kafka,tansu`` (comma list)  the embedded backends of ``broker``
      (default ``kafka,mock``; adding ``tansu`` runs the whole matrix on it too).

Tests that use a broker or Spark fixture get the ``integration`` marker automatically.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_groupsource.devbroker import (
    BACKENDS,
    DevBroker,
    DevBrokerError,
    ExternalBroker,
    kafka_missing,
)

EXTERNAL_ENV = "GROUPKAFKA_TEST_BOOTSTRAP"
BACKENDS_ENV = "GROUPKAFKA_TEST_BACKENDS"

#: Using any of these (directly or through another fixture) makes a test an integration test.
INTEGRATION_FIXTURES = frozenset(
    {"spark", "broker", "kafka_broker", "mock_broker", "tansu_broker", "new_topic"}
)
#: The matrix of ``broker`` unless GROUPKAFKA_TEST_BACKENDS says otherwise.
DEFAULT_BACKENDS = ("kafka", "mock")


def _external_bootstrap() -> str | None:
    value = os.environ.get(EXTERNAL_ENV, "").strip()
    return value or None


def _embedded_backends() -> list[str]:
    raw = os.environ.get(BACKENDS_ENV, "").strip()
    if not raw:
        return list(DEFAULT_BACKENDS)
    chosen = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown:
        raise pytest.UsageError(f"{BACKENDS_ENV}: unknown backend(s) {unknown}; use {BACKENDS}")
    return chosen


_BROKER_PARAMS = ["external"] if _external_bootstrap() else _embedded_backends()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a broker and/or a Spark session")
    config.addinivalue_line("markers", "xdist_group(name): tests that run on one xdist worker")


#: The xdist group of every test that uses the in-process Spark session: ``make test`` runs two
#: pytest-xdist workers with ``--dist loadgroup``, and these all run on one of them, one at a time
#: (two local Spark sessions on 2 cores starve each other's Python workers, which must connect
#: back to the JVM within Spark's fixed 10 s).
SPARK_GROUP = "spark"


def _xdist_group(item: pytest.Item, names: set[str]) -> str:
    """Tests of one module stay on one worker (module-scoped fixtures such as the demo run are
    made once); tests using the Spark session share one group across modules."""
    if "spark" in names:
        return SPARK_GROUP
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item, names)))


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Fail, not degrade, when xdist's loadgroup cannot group: pytest 9.2 ignores the group
    suffix pytest-xdist 3.8 writes into a test's node id (pytest-xdist #1386), and the Spark
    tests then run on both workers at once, starving each other's Python workers."""
    if node.config.getvalue("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        pytest.exit(
            "pytest-xdist's --dist loadgroup did not group the tests (node ids carry no @group): "
            "this pytest/pytest-xdist pair is broken (pytest-xdist #1386); use pytest < 9.2, as "
            "constraints.txt pins it",
            returncode=4,
        )


# ----------------------------------------------------------------------------------------------
# Spark
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("groupkafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # how long Spark waits for the Python processes it starts (a streaming query's runner)
        # to connect back: 15 s by default, which a loaded 2-core CI machine can exceed
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()


# ----------------------------------------------------------------------------------------------
# Brokers
# ----------------------------------------------------------------------------------------------
class _BrokerPool:
    """One broker per backend for the whole session, started on first use."""

    def __init__(self) -> None:
        self._brokers: dict[str, Any] = {}
        self._failed: dict[str, str] = {}  # fail fast after one failed start per backend

    def get(self, backend: str) -> Any:
        if backend in self._failed:
            pytest.fail(self._failed[backend], pytrace=False)
        if backend == "kafka" and backend not in self._brokers:
            missing = kafka_missing()
            if missing:
                pytest.skip(f"no Apache Kafka for the kafka backend: {missing}")
        b = self._brokers.get(backend)
        if b is None:
            if backend == "external":
                b = ExternalBroker(_external_bootstrap() or "")
            else:
                b = DevBroker(backend)
            try:
                b.start()
            except DevBrokerError as exc:
                self._failed[backend] = f"cannot start the {backend} test broker: {exc}"
                pytest.fail(self._failed[backend], pytrace=False)
            self._brokers[backend] = b
        return b

    def revive(self) -> None:
        """Restart any embedded broker whose process died (e.g. a mock abort in a test)."""
        for backend, b in self._brokers.items():
            if b.ensure_running():
                warnings.warn(
                    f"the {backend} test broker had died (exit code lost); restarted it at "
                    f"{b.bootstrap}. Topics created by earlier tests are gone.",
                    stacklevel=1,
                )

    def close(self) -> None:
        brokers, self._brokers = self._brokers, {}
        for b in brokers.values():
            b.stop()


_POOL: _BrokerPool | None = None


@pytest.fixture(scope="session")
def _broker_pool() -> Iterator[_BrokerPool]:
    global _POOL
    pool = _BrokerPool()
    _POOL = pool
    try:
        yield pool
    finally:
        _POOL = None
        pool.close()


@pytest.fixture(autouse=True)
def _revive_dead_brokers() -> None:
    if _POOL is not None:
        _POOL.revive()


@pytest.fixture(scope="session", params=_BROKER_PARAMS, ids=_BROKER_PARAMS)
def broker(request: pytest.FixtureRequest, _broker_pool: _BrokerPool) -> Any:
    """A running broker: each embedded backend in turn, or the external cluster."""
    return _broker_pool.get(request.param)


def _single(backend: str, pool: _BrokerPool) -> Any:
    if _external_bootstrap():
        pytest.skip(f"needs the embedded {backend} broker; {EXTERNAL_ENV} points tests elsewhere")
    if backend not in _BROKER_PARAMS:
        pytest.skip(f"{backend} backend deselected by {BACKENDS_ENV}")
    return pool.get(backend)


@pytest.fixture(scope="session")
def kafka_broker(_broker_pool: _BrokerPool) -> Any:
    """The embedded Apache Kafka broker (one KRaft node; ``.kafka`` stops, kills, freezes nodes)."""
    if _external_bootstrap():
        pytest.skip(f"needs the embedded kafka broker; {EXTERNAL_ENV} points tests elsewhere")
    return _broker_pool.get("kafka")


@pytest.fixture(scope="session")
def mock_broker(_broker_pool: _BrokerPool) -> Any:
    """The embedded librdkafka mock broker (``.mock`` injects faults)."""
    return _single("mock", _broker_pool)


@pytest.fixture(scope="session")
def tansu_broker(_broker_pool: _BrokerPool) -> Any:
    """The embedded Tansu broker (started for the tests that ask for it, whatever the matrix)."""
    if _external_bootstrap():
        pytest.skip(f"needs the embedded tansu broker; {EXTERNAL_ENV} points tests elsewhere")
    return _broker_pool.get("tansu")


# ----------------------------------------------------------------------------------------------
# Names
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of names unique per call and test: ``unique_name("topic")`` ->
    ``"topic-test_x-mock-1a2b3c4d"`` (legal as a Kafka topic or group id)."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")[:80]
    counter = itertools.count()

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{base}-{next(counter)}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def new_topic(broker: Any, unique_name: Callable[..., str]) -> Callable[..., str]:
    """Factory creating a fresh topic on ``broker``: ``new_topic(8)`` -> its name."""

    def make(partitions: int = 8, prefix: str = "topic") -> str:
        name = unique_name(prefix)
        broker.create_topic(name, partitions)
        return name

    return make
