"""A node's stop and start wait the caller's bound, end to end through the dev broker's control
channel: the client once sent only its own read timeout, so every start waited the server's
default 90 s (chaos's start_nodes(timeout=180) after a whole-cluster outage among them)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_groupsource.devbroker._client import KafkaControl
from spark_groupsource.devbroker._server import _KAFKA_OPS


class _Recorder:
    """Both ends' far side: what the control channel would carry, and what the cluster is asked."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple, dict]] = []

    def call(self, op: str, timeout: float = 60.0, **args: Any) -> None:
        self.seen.append((op, (), args))
        _KAFKA_OPS[op](self, **args)  # the server's dispatch of the same request

    def __getattr__(self, name: str):
        return lambda *a, **k: self.seen.append((name, a, k))


@pytest.mark.parametrize("method, args, op, want", [
    ("start_node", (2,), "start_node", (2, True, 240.0)),
    ("stop_node", (1,), "stop_node", (1, 240.0)),
    ("start_nodes", ([0, 1, 2],), "start_nodes", ([0, 1, 2], 240.0)),
])
def test_the_callers_timeout_reaches_the_cluster(method, args, op, want):
    rec = _Recorder()
    getattr(KafkaControl(rec), method)(*args, timeout=240)
    assert rec.seen[-1] == (op, want, {})
