"""The group client's repeated log lines collapsed into counted ones, and the coordinator's
loss said once (issue 53)."""

from __future__ import annotations

import logging

from spark_groupsource.group import client_log
from spark_groupsource.group.client_log import RepeatFilter
from spark_groupsource.group.touch import LOST_TOUCH_S, CoordinatorTouch


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _logger(name: str, f: logging.Filter, caplog) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.addFilter(f)
    caplog.set_level(logging.INFO, logger=name)
    return logger


def test_repeats_in_a_window_become_one_count_line(caplog):
    clock = Clock()
    f = RepeatFilter(window_s=10, clock=clock)
    logger = _logger("kafka.conn.test1", f, caplog)
    try:
        for i in range(270):  # resets for 20 s, as measured with kafka-python
            clock.t += 20 / 270
            logger.warning("%s: Connection reset by peer", f"<BrokerConnection node_id={i % 3}>")
        f.flush()
        clock.t += 11
        f.flush()
    finally:
        logger.removeFilter(f)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.conn.test1"]
    assert len(lines) <= 6, lines  # one first line and one count line per 10 s window
    counted = [ln for ln in lines if "repeated" in ln]
    assert counted and all("collapsed by groupkafka" in ln for ln in counted)
    total = len(lines) - len(counted) + sum(int(ln.split("repeated ")[1].split()[0]) for ln in counted)
    assert total == 270  # every record is either shown or counted
    assert f.suppressed_total == 270 - (len(lines) - len(counted))


def test_kinds_are_counted_apart_and_single_lines_pass(caplog):
    clock = Clock()
    f = RepeatFilter(window_s=10, clock=clock)
    logger = _logger("kafka.client.test2", f, caplog)
    try:
        logger.warning("Node %s connection failed", 1)
        logger.error("Coordinator %s dead", 2)
        logger.warning("Node %s connection failed", 3)
        clock.t += 30
        logger.warning("Node %s connection failed", 4)  # a new window: passes, with the count before
    finally:
        logger.removeFilter(f)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.client.test2"]
    assert lines[0] == "Node 1 connection failed"
    assert lines[1] == "Coordinator 2 dead"
    assert "Node 3 connection failed (repeated 1 times" in lines[2]
    assert lines[3] == "Node 4 connection failed"


def test_install_covers_kafka_pythons_loggers():
    import kafka.net.connection  # noqa: F401 - creates its logger

    f = client_log.install()
    assert f is client_log.install()
    assert f in logging.getLogger("kafka.net.connection").filters
    assert f in logging.getLogger("kafka").filters


def test_lost_touch_said_once_with_its_duration(caplog):
    clock = Clock()
    caplog.set_level(logging.WARNING, logger="spark_groupsource.membership")
    touch = CoordinatorTouch("g", session_timeout_s=6, clock=clock)
    touch.observe(False)  # still joining: not lost
    touch.observe(True, "broker 2 at 127.0.0.1:1")
    for _ in range(120):  # 12 s unreachable, observed every 100 ms
        clock.t += 0.1
        touch.observe(False)
    clock.t += 0.1
    touch.observe(True, "broker 2 at 127.0.0.1:1")
    touch.observe(True, "broker 2 at 127.0.0.1:1")
    lines = [r.getMessage() for r in caplog.records if r.name == "spark_groupsource.membership"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("group g: lost touch with its group coordinator (broker 2 at 127.0.0.1:1): "
                               f"unreachable for {LOST_TOUCH_S:.1f}s")
    assert "session (6s)" in lines[0]
    assert lines[1] == "group g: back in touch with its group coordinator (broker 2 at 127.0.0.1:1) after 12.0s"
    assert touch.episodes == 1 and touch.lost_for_s is None


def test_a_short_reconnect_is_no_news(caplog):
    clock = Clock()
    caplog.set_level(logging.WARNING, logger="spark_groupsource.membership")
    touch = CoordinatorTouch("g", clock=clock)
    touch.observe(True)
    clock.t += 1
    touch.observe(False)
    clock.t += LOST_TOUCH_S / 2
    touch.observe(True)
    assert not [r for r in caplog.records if r.name == "spark_groupsource.membership"]


def test_debug_lines_are_never_collapsed():
    """DEBUG is asked for to see every line (a test counts kafka-python's re-authentications)."""
    f = RepeatFilter(window_s=10.0, clock=lambda: 0.0)
    rec = logging.LogRecord("kafka.net.connection", logging.DEBUG, __file__, 1, "Beginning SASL re-authentication",
                            None, None)
    assert all(f.filter(rec) for _ in range(3)) and f.suppressed_total == 0
