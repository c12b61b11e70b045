"""Logging set-up inside Spark's Python processes (spark_groupsource.logs)."""

from __future__ import annotations

import logging

import pytest

from spark_groupsource.logs import CLIENT_LOG_LEVEL_ENV, LOG_LEVEL_ENV, configure_worker_logging


@pytest.fixture
def fresh_loggers():
    names = ("spark_groupsource", "kafka")
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level) for n in names}
    for n in names:
        logging.getLogger(n).handlers.clear()
    yield {n: logging.getLogger(n) for n in names}
    for n, (handlers, level) in saved.items():
        logging.getLogger(n).handlers[:] = handlers
        logging.getLogger(n).setLevel(level)


def test_nothing_unless_asked(fresh_loggers, monkeypatch):
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    monkeypatch.setenv(CLIENT_LOG_LEVEL_ENV, "INFO")
    configure_worker_logging()
    assert not fresh_loggers["spark_groupsource"].handlers and not fresh_loggers["kafka"].handlers


def test_the_group_client_log_only_when_asked(fresh_loggers, monkeypatch):
    monkeypatch.setenv(LOG_LEVEL_ENV, "info")
    monkeypatch.delenv(CLIENT_LOG_LEVEL_ENV, raising=False)
    configure_worker_logging()
    assert fresh_loggers["spark_groupsource"].level == logging.INFO
    assert not fresh_loggers["kafka"].handlers


def test_the_group_client_log_at_its_level(fresh_loggers, monkeypatch):
    monkeypatch.setenv(LOG_LEVEL_ENV, "INFO")
    monkeypatch.setenv(CLIENT_LOG_LEVEL_ENV, "warning")
    configure_worker_logging()
    kafka = fresh_loggers["kafka"]
    assert kafka.level == logging.WARNING and kafka.handlers == fresh_loggers["spark_groupsource"].handlers


def test_client_debug_is_refused_because_it_logs_credentials(fresh_loggers, monkeypatch, caplog):
    monkeypatch.setenv(LOG_LEVEL_ENV, "INFO")
    monkeypatch.setenv(CLIENT_LOG_LEVEL_ENV, "DEBUG")
    with caplog.at_level(logging.INFO, logger="spark_groupsource"):
        configure_worker_logging()
    assert fresh_loggers["kafka"].level == logging.INFO
    assert any(CLIENT_LOG_LEVEL_ENV in r.getMessage() and "credentials" in r.getMessage() for r in caplog.records)
