"""Shared fixtures: a Spark session and Kafka-protocol brokers.

Brokers
  ``broker``        session-scoped, parametrized over the backends (by default ``kafka``: the
                    main Apache Kafka, the broker whose behaviour counts; where its jars are
                    missing, ``mock``: librdkafka's mock).
  ``kafka_broker``  the same Apache Kafka instance (node faults via ``kafka_broker.kafka``).
  Tests marked ``compat`` run on the second Apache Kafka version too (id ``kafka-compat``) and on
  3.9.1 (id ``kafka-3.9``): ``broker`` and ``kafka_broker`` get them as more parameters, and so
  does any fixture that asks for ``kafka_home_param`` (the secured node of test_security_kafka.py).
  Tests marked ``kafka39`` run on 3.9.1 too when ``GROUPKAFKA_KAFKA39_SET=all``.
  ``mock_broker``   the same mock instance (fault injection via ``mock_broker.mock``).
  ``tansu_broker``  a Tansu broker, for the few tests of what Tansu adds (not in the default matrix).
  Every broker object has ``.backend``, ``.bootstrap``, ``.create_topic(name, partitions)``,
  ``.recommended_session_timeout_ms`` and ``.mock`` (None except for the mock).
  Where the Kafka jars are missing (a clone without ``../shared/kafka`` and no
  ``GROUPKAFKA_KAFKA_HOME``), tests on ``kafka`` skip saying so and ``broker`` is the mock.

Environment
  ``GROUPKAFKA_TEST_BOOTSTRAP=host:port,...``  run broker tests against that external cluster only:
      ``broker`` yields one object with ``.backend == "external"``; ``mock_broker`` and
      ``tansu_broker`` skip.
  ``GROUPKAFKA_TEST_BACKENDS=kafka,tansu`` (comma list)  the embedded backends of ``broker``
      (default ``kafka``, or ``mock`` without Kafka's jars; ``kafka,mock`` or ``kafka,mock,tansu``
      run the whole matrix on those too; without ``kafka`` the compat set does not run either).
  ``GROUPKAFKA_KAFKA_HOME``  the main Kafka (default: ../shared/kafka-latest, Apache Kafka 4.3.1,
      else ../shared/kafka); set here for the whole session, so the dev brokers tests start
      themselves and their subprocesses run the same one.
  ``GROUPKAFKA_COMPAT_KAFKA_HOME``  the second Kafka of the compat set (default: ../shared/kafka,
      Apache Kafka 4.0.1; ``none`` turns the compat set off: ``make test`` does, ``make
      test-compat`` runs it).
  ``GROUPKAFKA_KAFKA39_HOME``  the third Kafka, id ``kafka-3.9`` (default: ../shared/kafka-3.9,
      Apache Kafka 3.9.1 with its default classic-only group coordinator; ``none`` turns it off).
      It runs the compat set (``GROUPKAFKA_KAFKA39_SET=compat``, the default), with ``all`` (``make
      test-compat``) also the tests marked ``kafka39``, with ``off`` nothing (docs/kafka-versions.md).
  ``GROUPKAFKA_TEST_SET``  ``ci`` (the default): the tests marked ``extended`` are deselected;
      ``extended``: only those (``make test-extended``); ``all``: both.
  The Java consumer of a test is its broker's own (``<home>/java-consumer.sh``) unless
  ``GROUPKAFKA_JAVA_CONSUMER`` names one.

Tests that use a broker or Spark fixture get the ``integration`` marker automatically.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conformance.jars import spark_kafka_jars
from hypothesis import settings

from javaclient import register_kafka_home
from spark_groupsource.devbroker import (
    BACKENDS,
    DevBroker,
    DevBrokerError,
    ExternalBroker,
    kafka_missing,
)
from spark_groupsource.devbroker._kafka import (
    KAFKA_HOME_ENV,
    SHARED_KAFKA,
    SHARED_KAFKA_39,
    SHARED_KAFKA_LATEST,
    find_kafka,
)

# tests/schema_registry.py is both a plugin (its fixture) and a module the registry tests import
# helpers from, before pytest loads it as a plugin: registered here so its asserts are rewritten
pytest.register_assert_rewrite("schema_registry")

# Property tests judge results, not time: on a loaded CI machine Hypothesis's default 200 ms
# deadline per example failed a correct test (test_ranges, 339 ms once, 39 ms on the retry)
settings.register_profile("groupkafka", deadline=None)
settings.load_profile("groupkafka")

EXTERNAL_ENV = "GROUPKAFKA_TEST_BOOTSTRAP"
BACKENDS_ENV = "GROUPKAFKA_TEST_BACKENDS"
COMPAT_HOME_ENV = "GROUPKAFKA_COMPAT_KAFKA_HOME"
#: The test-broker id of the second Kafka version (tests marked ``compat``).
COMPAT = "kafka-compat"
#: The test-broker id of Apache Kafka 3.9.1 (the compat set, and with KAFKA39_SET_ENV=all the tests
#: marked ``kafka39``).
KAFKA39 = "kafka-3.9"
KAFKA39_HOME_ENV = "GROUPKAFKA_KAFKA39_HOME"
#: Start-up bound of the 3.9.1 node (format + JVM + first Metadata): the dev broker's 120 s ran
#: out twice on 2026-12-07 at load average 40-50, two xdist workers starting theirs at once
#: (the JVMs up after ~95 s, then the first metadata publish)
KAFKA39_START_S = 300.0
KAFKA39_SET_ENV = "GROUPKAFKA_KAFKA39_SET"
#: Which installation is the suite's main Kafka and which runs the compat set (see
#: docs/kafka-versions.md for why): the main one when it is there, else the other.
MAIN_KAFKA_DEFAULT = SHARED_KAFKA_LATEST
COMPAT_KAFKA_DEFAULT = SHARED_KAFKA


def _choose_kafka_homes() -> tuple[str | None, str | None]:
    """(main, compat) Kafka homes from the environment and the defaults; sets
    GROUPKAFKA_KAFKA_HOME to the main one so that every dev broker of the session runs it."""
    main = os.environ.get(KAFKA_HOME_ENV, "").strip()
    if not main:
        main = next((h for h in (MAIN_KAFKA_DEFAULT, COMPAT_KAFKA_DEFAULT) if kafka_missing(h) is None), "")
        if main:
            os.environ[KAFKA_HOME_ENV] = main
    compat = os.environ.get(COMPAT_HOME_ENV, "").strip()
    if compat.lower() == "none":
        return main or None, None
    if not compat:
        compat = COMPAT_KAFKA_DEFAULT if main != COMPAT_KAFKA_DEFAULT else MAIN_KAFKA_DEFAULT
    return main or None, compat


MAIN_KAFKA_HOME, COMPAT_KAFKA_HOME = _choose_kafka_homes()
_K39 = os.environ.get(KAFKA39_HOME_ENV, "").strip() or SHARED_KAFKA_39
KAFKA39_HOME = None if _K39.lower() == "none" else _K39
#: "compat": 3.9.1 runs the compat set (every ``make test``); "all": also the tests marked
#: ``kafka39`` (``make test-compat``; docs/development.md says why they are not in CI); "off": none
KAFKA39_SET = os.environ.get(KAFKA39_SET_ENV, "").strip().lower() or "compat"
if KAFKA39_SET not in ("off", "compat", "all"):
    raise pytest.UsageError(f"{KAFKA39_SET_ENV}={KAFKA39_SET!r}: use off, compat or all")
TEST_SET_ENV = "GROUPKAFKA_TEST_SET"
#: "ci": leave out the tests marked ``extended``; "extended": only those; "all": both
TEST_SET = os.environ.get(TEST_SET_ENV, "").strip().lower() or "ci"
if TEST_SET not in ("ci", "extended", "all"):
    raise pytest.UsageError(f"{TEST_SET_ENV}={TEST_SET!r}: use ci, extended or all")
#: the fixtures whose parameter is a test-broker id
_BROKER_FIXTURES = ("broker", "kafka_broker", "kafka_home_param")
#: test-broker id -> (its Kafka home, the setting that turns it off) for the extra versions
_EXTRA_KAFKAS = {COMPAT: (COMPAT_KAFKA_HOME, COMPAT_HOME_ENV), KAFKA39: (KAFKA39_HOME, KAFKA39_HOME_ENV)}


def kafka_home_of(backend: str) -> str | None:
    """The Kafka installation behind a test-broker id (None: the dev broker's default)."""
    return _EXTRA_KAFKAS[backend][0] if backend in _EXTRA_KAFKAS else MAIN_KAFKA_HOME


def _skip_if_off(backend: str) -> None:
    if backend in _EXTRA_KAFKAS and _EXTRA_KAFKAS[backend][0] is None:
        pytest.skip(f"the {backend} test broker is off ({_EXTRA_KAFKAS[backend][1]}=none)")


def _kafka_label(home: str | None) -> str:
    try:
        dist = find_kafka(home)
    except DevBrokerError as exc:
        return f"absent ({exc})"
    return f"Apache Kafka {dist.version} at {dist.home}"

#: Using any of these (directly or through another fixture) makes a test an integration test.
INTEGRATION_FIXTURES = frozenset(
    {"spark", "broker", "kafka_broker", "kafka39_broker", "mock_broker", "tansu_broker", "new_topic"}
)
#: The matrix of ``broker`` unless GROUPKAFKA_TEST_BACKENDS says otherwise: Apache Kafka, the
#: broker whose behaviour counts; the mock only where Kafka's jars are missing (a plain clone),
#: so that such a clone still runs every broker test on something. Every broker test also on
#: the mock (``kafka,mock``) cost CI ~450 s of its ~4,300 (2026-12-06) and showed only the
#: mock's quirks; the mock stays for fault injection (``mock_broker``) and the chaos suite.
DEFAULT_BACKENDS = ("kafka",) if MAIN_KAFKA_HOME and kafka_missing(MAIN_KAFKA_HOME) is None else ("mock",)


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
    config.addinivalue_line(
        "markers", "compat(only={param: [values]}): also runs on the second Apache Kafka version "
        "(test id kafka-compat) and on 3.9.1 (kafka-3.9); with only=, just those cases of a parametrized test")
    config.addinivalue_line(
        "markers", "kafka39(only={param: [values]}, why=...): also on Apache Kafka 3.9.1 (test id kafka-3.9) "
        f"with {KAFKA39_SET_ENV}=all; only= narrows the cases (a compat test's too); kafka39(False, why=...): "
        "a compat test that does not apply to 3.9.1")
    config.addinivalue_line(
        "markers", "extended(why=..., only={param: [values]}): left out of ``make test`` (CI's time bound), "
        f"run by ``make test-extended`` ({TEST_SET_ENV}=extended); only= narrows it to those cases")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"kafka (main): {_kafka_label(MAIN_KAFKA_HOME)}",
            f"kafka-compat: {_kafka_label(COMPAT_KAFKA_HOME) if COMPAT_KAFKA_HOME else 'off'}",
            f"kafka-3.9: {_kafka_label(KAFKA39_HOME) + f' ({KAFKA39_SET_ENV}={KAFKA39_SET})' if KAFKA39_HOME else 'off'}",
            f"test set: {TEST_SET} ({TEST_SET_ENV}; tests marked extended run with extended or all)"]


def _on_kafka39(node: Any) -> bool:
    """Whether a test (some of its cases) runs on 3.9.1: the compat set unless ``kafka39(False)``,
    and with KAFKA39_SET=all the tests marked ``kafka39``."""
    k39 = node.get_closest_marker("kafka39")
    if KAFKA39_SET == "off" or (k39 is not None and k39.args and k39.args[0] is False):
        return False
    return node.get_closest_marker("compat") is not None or (k39 is not None and KAFKA39_SET == "all")


def _kafka_params(metafunc: pytest.Metafunc) -> list[str]:
    """["kafka"], plus the compat id for a test marked ``compat`` and kafka-3.9 where it runs (an
    extra Kafka turned off with ``none`` is no case at all, not a skip)."""
    if _external_bootstrap() or "kafka" not in _BROKER_PARAMS:
        return ["kafka"]
    node = metafunc.definition
    compat = node.get_closest_marker("compat") is not None and COMPAT_KAFKA_HOME is not None
    return ["kafka"] + ([COMPAT] if compat else []) + ([KAFKA39] if KAFKA39_HOME and _on_kafka39(node) else [])


def _matches(callspec: Any, marker: Any) -> bool:
    """A case is in ``marker(only={param: [values]})`` (a name the test lacks does not count)."""
    only = (marker.kwargs.get("only") or {}) if marker is not None else {}
    return all(callspec.params.get(name) in values for name, values in only.items() if name in callspec.params)


def _in_compat_set(item: pytest.Item) -> bool:
    """False for a kafka-compat or kafka-3.9 case that ``compat(only={param: [values]})`` or
    ``kafka39(only=...)`` leaves out (a parametrized test of which only some cases run there)."""
    callspec = getattr(item, "callspec", None)
    backends = {callspec.params.get(n) for n in _BROKER_FIXTURES} if callspec is not None else set()
    if COMPAT in backends:
        return _matches(callspec, item.get_closest_marker("compat"))
    if KAFKA39 in backends:
        k39 = item.get_closest_marker("kafka39")
        in_compat = item.get_closest_marker("compat") is not None and _matches(callspec, item.get_closest_marker("compat"))
        in_extra = k39 is not None and KAFKA39_SET == "all"
        return (in_compat or in_extra) and _matches(callspec, k39)
    return KAFKA39_SET != "off" or "kafka39_broker" not in getattr(item, "fixturenames", ())


def _is_extended(item: pytest.Item) -> bool:
    """A test of the extended set; with ``extended(only={param: [values]})`` only those cases (a
    test without any of the named parameters is not in it: a module's marker names its cases)."""
    marker = item.get_closest_marker("extended")
    if marker is None:
        return False
    only = marker.kwargs.get("only") or {}
    callspec = getattr(item, "callspec", None)
    if not only:
        return True
    return callspec is not None and any(n in callspec.params for n in only) and _matches(callspec, marker)


def _in_test_set(item: pytest.Item) -> bool:
    """Whether the item runs in this session: on the brokers it asks for, and in GROUPKAFKA_TEST_SET."""
    if not _in_compat_set(item):
        return False
    return TEST_SET == "all" or _is_extended(item) == (TEST_SET == "extended")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``broker``'s backends; the compat set's second Kafka on ``broker``, ``kafka_broker`` and
    ``kafka_home_param``."""
    names = metafunc.fixturenames
    kafkas = _kafka_params(metafunc)
    if "broker" in names:
        params = list(_BROKER_PARAMS) + [k for k in kafkas if k not in _BROKER_PARAMS]
        metafunc.parametrize("broker", params, ids=params, indirect=True, scope="session")
    elif len(kafkas) > 1:
        for name in ("kafka_broker", "kafka_home_param"):
            if name in names:
                metafunc.parametrize(name, kafkas, ids=kafkas, indirect=True, scope="session")
                break


#: The xdist group of every test that uses the in-process Spark session: ``make test`` runs two
#: pytest-xdist workers with ``--dist loadgroup``, and these all run on one of them, one at a time
#: (two local Spark sessions on 2 cores starve each other's Python workers, which must connect
#: back to the JVM within Spark's fixed 10 s).
SPARK_GROUP = "spark"
#: Modules whose Spark tests form a second group, so that the other xdist worker runs them beside
#: the main group: the differential suite against Spark's source and the Schema Registry tests
#: (about a quarter of the Spark tests' time, self-contained). Each worker has its own session.
SECOND_SPARK_GROUP = "spark-2"
SECOND_SPARK_MODULES = ("tests/integration/test_conformance_", "tests/integration/test_registry_",
                        # the Java client's ports: the first group alone held CI's critical path
                        # (the crowded group, once here, runs as a chaos scenario in its own processes)
                        "tests/integration/test_java_suite_ports.py",)


def _xdist_group(item: pytest.Item, names: set[str], spark_modules: set[str]) -> str:
    """Tests of one module stay on one worker (module-scoped fixtures such as the demo run are
    made once); tests using the Spark session share one group across modules. A module whose
    Spark tests share a module-scoped fixture (a secured Kafka node of its own) with its other
    tests is all in the Spark group: split over two workers, each started the node (~45 s)."""
    module = item.nodeid.split("::", 1)[0]
    if "spark" in names or (module in spark_modules and _module_scoped(item)):
        if item.nodeid.startswith(SECOND_SPARK_MODULES):
            return SECOND_SPARK_GROUP
        return SPARK_GROUP
    return module


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = [item for item in items if not _in_test_set(item)]
    if dropped:
        items[:] = [item for item in items if _in_test_set(item)]
        config.hook.pytest_deselected(items=dropped)
    spark_modules = {item.nodeid.split("::", 1)[0] for item in items if "spark" in getattr(item, "fixturenames", ())}
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item, names, spark_modules)))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown when xdist is off (-p no:xdist)
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

    builder = (
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
    )
    # Spark's own Kafka source (format("kafka")) beside groupkafka in this one session, for the
    # conformance suite (docs/conformance.md): a second session cannot coexist with this one
    jars, _missing = spark_kafka_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
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
        _skip_if_off(backend)
        if backend in ("kafka", *_EXTRA_KAFKAS) and backend not in self._brokers:
            missing = kafka_missing(kafka_home_of(backend))
            if missing:
                pytest.skip(f"no Apache Kafka for the {backend} test broker: {missing}")
        b = self._brokers.get(backend)
        if b is None:
            if backend == "external":
                b = ExternalBroker(_external_bootstrap() or "")
            elif backend in ("kafka", *_EXTRA_KAFKAS):
                b = DevBroker("kafka", kafka_home=kafka_home_of(backend),
                              startup_timeout=KAFKA39_START_S if backend == KAFKA39 else 120.0)
            else:
                b = DevBroker(backend)
            try:
                b.start()
            except DevBrokerError as exc:
                self._failed[backend] = f"cannot start the {backend} test broker: {exc}"
                pytest.fail(self._failed[backend], pytrace=False)
            if backend in ("kafka", *_EXTRA_KAFKAS):
                register_kafka_home(b.bootstrap, find_kafka(kafka_home_of(backend)).home)
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


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest, _broker_pool: _BrokerPool) -> Any:
    """A running broker: each embedded backend in turn, or the external cluster (parametrized
    in :func:`pytest_generate_tests`)."""
    return _broker_pool.get(request.param)


def _single(backend: str, pool: _BrokerPool) -> Any:
    if _external_bootstrap():
        pytest.skip(f"needs the embedded {backend} broker; {EXTERNAL_ENV} points tests elsewhere")
    if os.environ.get(BACKENDS_ENV, "").strip() and backend not in _BROKER_PARAMS:
        pytest.skip(f"{backend} backend deselected by {BACKENDS_ENV}")
    return pool.get(backend)


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, _broker_pool: _BrokerPool) -> Any:
    """The embedded Apache Kafka broker (one KRaft node; ``.kafka`` stops, kills, freezes nodes);
    on a ``compat`` test, the main and then the second version."""
    if _external_bootstrap():
        pytest.skip(f"needs the embedded kafka broker; {EXTERNAL_ENV} points tests elsewhere")
    return _broker_pool.get(getattr(request, "param", "kafka"))


@pytest.fixture(scope="session")
def kafka_home_param(request: pytest.FixtureRequest) -> str | None:
    """The Kafka installation of a test that starts its own node (None: the main one); on a
    ``compat`` test, the main and then the second version. Skips when that Kafka is absent."""
    backend = getattr(request, "param", "kafka")
    _skip_if_off(backend)
    home = kafka_home_of(backend)
    missing = kafka_missing(home)
    if missing:
        pytest.skip(f"no Apache Kafka for the {backend} test broker: {missing}")
    return home


@pytest.fixture(scope="session")
def kafka39_broker(_broker_pool: _BrokerPool) -> Any:
    """The embedded Apache Kafka 3.9.1 (default group settings: classic protocol only), for the
    tests of what 3.x does differently; skips where it is off or absent."""
    if _external_bootstrap():
        pytest.skip(f"needs the embedded {KAFKA39} broker; {EXTERNAL_ENV} points tests elsewhere")
    return _broker_pool.get(KAFKA39)


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


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port where nothing listens, for the test's duration: a socket holds it bound
    without listening, so a connection is refused. A port merely found free could be taken
    meanwhile (Spark's Python worker daemon listens on an ephemeral port too), or, being in the
    ephemeral range, become a client's own local port: the client then connects to itself
    (seen in CI: a TLS client read its own ClientHello and called it a PLAINTEXT port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]
