"""What a dev broker's start that fails says: its log is an unlinked file that is gone once the
broker object is stopped, so the lines that explain the failure go into the error itself."""

from __future__ import annotations

import os

from spark_groupsource.devbroker import DevBroker
from spark_groupsource.devbroker._server import anonymous_log


def _with_log(text: str) -> DevBroker:
    broker = DevBroker("kafka")
    broker._log_fd = anonymous_log("groupkafka-test-")
    os.write(broker._log_fd, text.encode())
    return broker


def test_a_start_the_host_never_answered_carries_the_end_of_its_log():
    lines = [f"devbroker 10:00:{i:02d} kafka: node 1 not ready after {15 * i}s: timed out" for i in range(20)]
    broker = _with_log("\n".join(lines) + "\n")
    try:
        message = broker._timeout_message(165)
    finally:
        broker._close_log()
    assert message.startswith("kafka broker did not answer within 165s; its log ends:\n  ")
    assert message.endswith(lines[-1]) and lines[-12] in message and lines[-13] not in message
    assert "/proc/" not in message


def test_an_empty_log_is_said_to_be_empty():
    broker = _with_log("")
    try:
        assert broker._timeout_message(5) == "kafka broker did not answer within 5s; its log is empty"
    finally:
        broker._close_log()


def test_the_hosts_own_reason_comes_with_its_timed_steps_only():
    broker = _with_log(
        "devbroker 10:00:00 kafka: formatting the storage of 3 node(s)\n"
        "some jvm noise\n"
        "devbroker 10:00:41 kafka: storage formatted in 41.0s\n"
        "devbroker: error: kafka node 2 not ready after 79s (timed out); see /tmp/x/server.log\n"
    )
    try:
        message = broker._startup_or_death_message()
    finally:
        broker._close_log()
    assert message == (
        "kafka node 2 not ready after 79s (timed out); see /tmp/x/server.log; its steps:\n"
        "  devbroker 10:00:00 kafka: formatting the storage of 3 node(s)\n"
        "  devbroker 10:00:41 kafka: storage formatted in 41.0s"
    )
