"""The native fetch path's choice and its errors, without a broker (librdkafka itself is real:
configurations are refused by it, not by a stand-in). Reading is tested against brokers in
tests/integration/test_fetch_ranges.py, on both paths."""

from __future__ import annotations

import pytest

from spark_groupsource.errors import OptionError
from spark_groupsource.executor import native
from spark_groupsource.executor.fetch import (
    NATIVE,
    NATIVE_HEADERS,
    PYTHON,
    ConsumerPool,
    fetcher_kind,
)
from spark_groupsource.executor.native import NativeConsumer

CONFIG = {"bootstrap.servers": "127.0.0.1:9", "group.id": "native-tests", "log_level": 0,
          "enable.partition.eof": True}


def test_make_setup_built_the_native_path() -> None:
    # `make setup` builds the extension; a checkout where it did not must not silently read
    # every record the slow way in the tests that follow
    assert native.unavailable_reason() is None


def test_auto_takes_the_native_path_with_or_without_headers() -> None:
    assert fetcher_kind(CONFIG, "auto", False) == NATIVE
    assert fetcher_kind(CONFIG, "auto", True) == NATIVE_HEADERS
    assert fetcher_kind(CONFIG, "native", False) == NATIVE


def test_python_is_always_the_pure_python_path() -> None:
    assert fetcher_kind(CONFIG, "python", True) == PYTHON


def test_callbacks_in_the_configuration_need_confluent_kafka() -> None:
    with_callback = {**CONFIG, "error_cb": print}
    assert fetcher_kind(with_callback, "auto", False) == PYTHON
    with pytest.raises(OptionError, match="fetcher.*callbacks only confluent-kafka runs.*auto"):
        fetcher_kind(with_callback, "native", False)


def test_native_asked_for_where_it_cannot_run_names_the_option_and_the_way_out(monkeypatch) -> None:
    monkeypatch.setattr(native, "_ext", None)
    monkeypatch.setattr(native, "_IMPORT_ERROR", "the extension is not built (no module)")
    with pytest.raises(OptionError) as info:
        fetcher_kind(CONFIG, "native", False)
    assert info.value.option == "fetcher" and "not built" in str(info.value) and "auto" in str(info.value)
    assert fetcher_kind(CONFIG, "auto", False) == PYTHON


def test_a_property_librdkafka_refuses_is_named_without_its_value() -> None:
    secret = "s3cret-value"
    with pytest.raises(ValueError) as info:
        NativeConsumer({**CONFIG, "no.such.property": secret}, include_headers=False)
    assert "no.such.property" in str(info.value) and secret not in str(info.value)


def test_a_refused_value_of_a_secret_property_is_not_quoted() -> None:
    # librdkafka quotes the value it refuses ('Invalid value "..." for configuration property')
    secret = "not-a-protocol-but-a-secret"
    with pytest.raises(ValueError) as info:
        NativeConsumer({**CONFIG, "sasl.password": secret, "security.protocol": secret}, include_headers=False)
    assert "security.protocol" in str(info.value) and secret not in str(info.value)
    with pytest.raises(ValueError, match='"abc"'):  # not a secret: librdkafka's words stay whole
        NativeConsumer({**CONFIG, "security.protocol": "abc"}, include_headers=False)


def test_booleans_and_numbers_reach_librdkafka_as_its_strings() -> None:
    c = NativeConsumer({**CONFIG, "enable.auto.commit": False, "fetch.wait.max.ms": 10}, include_headers=False)
    c.close()
    c.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        c.assign("t", 0, 0)


def test_the_pool_keeps_the_paths_apart() -> None:
    pool = ConsumerPool()
    try:
        a = pool.acquire(CONFIG, NATIVE)
        assert isinstance(a, NativeConsumer)
        pool.release(CONFIG, a, healthy=True, kind=NATIVE)
        headers, plain = pool.acquire(CONFIG, NATIVE_HEADERS), pool.acquire(CONFIG, PYTHON)
        assert headers is not a and not isinstance(plain, NativeConsumer)
        pool.release(CONFIG, headers, healthy=True, kind=NATIVE_HEADERS)
        pool.release(CONFIG, plain, healthy=True, kind=PYTHON)
        assert pool.acquire(CONFIG, NATIVE) is a
        pool.release(CONFIG, a, healthy=False, kind=NATIVE)
    finally:
        pool.clear()


def test_an_install_without_the_extension_warns_once_with_what_it_costs(monkeypatch, caplog) -> None:
    # what a user whose pip had no C compiler meets: a warning (seen without any logging set-up),
    # once per Python worker, not once per task; release/user_install.py meets it for real
    from spark_groupsource.executor import fetch

    monkeypatch.setattr(native, "_ext", None)
    monkeypatch.setattr(native, "_IMPORT_ERROR", "the extension is not built (no module)")
    monkeypatch.setattr(fetch, "_said_path", False)
    with caplog.at_level("INFO", logger="spark_groupsource.fetch"):
        for _ in range(3):
            assert fetcher_kind(CONFIG, "auto", False) == PYTHON
    said = [r for r in caplog.records if r.name == "spark_groupsource.fetch"]
    assert [r.levelname for r in said] == ["WARNING"]
    text = said[0].getMessage()
    assert "not built" in text and "3 times the native path's CPU per record" in text
    assert "docs/benchmarks.md" in text


def test_callbacks_in_the_configuration_are_said_as_information_not_warned(monkeypatch, caplog) -> None:
    from spark_groupsource.executor import fetch

    monkeypatch.setattr(fetch, "_said_path", False)
    with caplog.at_level("INFO", logger="spark_groupsource.fetch"):
        fetcher_kind({**CONFIG, "error_cb": print}, "auto", False)
    assert [r.levelname for r in caplog.records if r.name == "spark_groupsource.fetch"] == ["INFO"]
