"""When the member has lost touch with its group coordinator, and for how long: said once in the
log when it happens and once when it is back.

During a silent network drop a member's driver logged nothing for the whole cut, and with resets
only kafka-python's connection errors: neither said that the member could no longer heartbeat or
commit. :class:`CoordinatorTouch` is fed the member's view every loop turn (coordinator known
and connected, or not) and says, on the monotonic clock:

- "lost touch with its group coordinator" once the coordinator has been unreachable for
  ``LOST_TOUCH_S`` (a reconnect within it is no news), with the session timeout it risks;
- "back in touch with its group coordinator after N s" when it is reachable again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("spark_groupsource.membership")

#: unreachable this long before it is said (kafka-python reconnects within a second or two)
LOST_TOUCH_S = 2.0


class CoordinatorTouch:
    def __init__(self, group: str, session_timeout_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.group = group
        self.session_timeout_s = session_timeout_s
        self._clock = clock
        self._had = False  # a coordinator was reached once (before that: joining, not lost)
        self._missing_since: float | None = None
        self._said_lost = False
        self.episodes = 0
        self._where = ""

    def observe(self, reached: bool, where: str = "") -> None:
        """``where``: the coordinator as the client knows it now ("" while it knows none: the
        last one named is used)."""
        now = self._clock()
        self._where = where or self._where
        where = self._where
        if reached:
            if self._said_lost and self._missing_since is not None:
                log.warning("group %s: back in touch with its group coordinator%s after %.1fs",
                            self.group, f" ({where})" if where else "", now - self._missing_since)
            self._had, self._missing_since, self._said_lost = True, None, False
            return
        if not self._had:
            return
        if self._missing_since is None:
            self._missing_since = now
        if not self._said_lost and now - self._missing_since >= LOST_TOUCH_S:
            self._said_lost = True
            self.episodes += 1
            session = (f"; its session ({self.session_timeout_s:.0f}s) expires unless it is back in time, and the "
                       "coordinator then gives its partitions to other members" if self.session_timeout_s else "")
            log.warning("group %s: lost touch with its group coordinator%s: unreachable for %.1fs, no "
                        "heartbeat or commit gets through%s", self.group, f" ({where})" if where else "",
                        now - self._missing_since, session)

    @property
    def lost_for_s(self) -> float | None:
        """Seconds the coordinator has been unreachable (None: reachable)."""
        return None if self._missing_since is None else self._clock() - self._missing_since


#: a request outstanding this long on the coordinator's connection with nothing received (a
#: silent network: the connection stays UP until librdkafka's socket timeout, 60 s)
SILENT_S = 1.0


def silence_s(lost_for_s: float | None, waited_s: float | None) -> float:
    """The coordinator's silence as the member reports it: what its statistics saw, or longer, a
    request the member's thread has waited on unanswered for ``SILENT_S`` or more. While that
    thread waits in a synchronous call it serves no statistics event: a commit sent to a frozen
    coordinator hid the whole freeze, the queued events then read all at once after it."""
    lost = lost_for_s or 0.0
    if waited_s is not None and waited_s >= SILENT_S:
        return max(lost, waited_s)
    return lost


_JSON = json.JSONDecoder()


def _value_at(raw: str, at: int, key: str) -> Any:
    """The JSON value after the key ``"key":`` found at ``at``."""
    start = at + len(key) + 3
    while raw[start : start + 1].isspace():
        start += 1
    return _JSON.raw_decode(raw, start)[0]


def _node_key(raw: str, nodename: str) -> str | None:
    """The statistics key ``host:port/<node id>`` of the broker at ``nodename`` (not its
    ``host:port/bootstrap`` entry), None when there is none."""
    at = raw.find(f'"{nodename}/')
    while at >= 0:
        key = raw[at + 1 : raw.index('"', at + 1)]
        if key.rsplit("/", 1)[1].isdigit():
            return key
        at = raw.find(f'"{nodename}/', at + 1)
    return None


def parse_stats(raw: str) -> dict[str, Any]:
    """What :class:`LibrdkafkaCoordinator` reads of librdkafka's statistics JSON, decoded alone:
    ``cgrp``, the logical ``GroupCoordinator`` broker and, of the broker it names, only its node
    id (from its key). The whole text holds an object per partition of every topic the client
    knows, and each broker's partitions: 7.6 MB at 10,000 partitions, 234 ms of json.loads every
    second (bench/kip848_stats.py, docs/benchmarks.md). librdkafka writes ``brokers`` before
    ``topics`` and ``cgrp`` after them, so the first ``"GroupCoordinator":`` and the last
    ``"cgrp":`` are its own even when a topic has one of those names; any other layout is parsed
    whole."""
    try:
        brokers: dict[str, Any] = {}
        at = raw.find('"GroupCoordinator":')
        coord = _value_at(raw, at, "GroupCoordinator") if at >= 0 else None
        if isinstance(coord, dict) and coord.get("source") == "logical":
            brokers["GroupCoordinator"] = coord
            name = coord.get("nodename")
            key = _node_key(raw, name) if name else None
            if key:
                brokers[key] = {"nodeid": int(key.rsplit("/", 1)[1]), "nodename": name, "source": "learned"}
        at = raw.rfind('"cgrp":')
        cgrp = _value_at(raw, at, "cgrp") if at >= 0 else None
        if cgrp is not None and not isinstance(cgrp, dict):
            raise ValueError("cgrp")
    except (ValueError, IndexError):
        return json.loads(raw)
    return {"brokers": brokers, **({"cgrp": cgrp} if cgrp is not None else {})}


class LibrdkafkaCoordinator:
    """The group coordinator as librdkafka's statistics (``statistics.interval.ms``) show it to
    the KIP-848 member, one look per statistics event: :meth:`observe` gives (reached, "broker N
    at host:port"; "" while it knows none, as before it first found one: :class:`CoordinatorTouch`
    says nothing until it was reached once).

    librdkafka talks to the coordinator on a connection of its own, its logical
    "GroupCoordinator" broker. Unreached: that connection is not UP, the group's state is not
    "up", a request on it has waited ``SILENT_S`` with nothing received, or a request timed out
    since the last look with no answer (a drop that resets nothing: the connection stays UP and,
    the timed-out request dropped, nothing is outstanding for a moment). Once unreached, it is
    reached again only when an answer arrived (its ``rx`` count moved): measured on Kafka 4.3.1
    behind a silent proxy, a look between a timeout and the next heartbeat read as "back"."""

    def __init__(self) -> None:
        self._rx = 0
        self._timeouts = 0
        self._unanswered = False

    def observe(self, stats: Mapping[str, Any]) -> tuple[bool, str]:
        brokers = stats.get("brokers") or {}
        coord = brokers.get("GroupCoordinator")
        if not isinstance(coord, Mapping) or not coord.get("nodename"):
            self._unanswered = True
            return False, ""
        where = str(coord["nodename"])
        # the learned entry: the bootstrap one of the same address has node id -1
        node = next((b.get("nodeid") for b in brokers.values()
                     if isinstance(b, Mapping) and b.get("source") != "logical" and b.get("nodename") == where
                     and isinstance(b.get("nodeid"), int) and b["nodeid"] >= 0), None)
        label = f"broker {node} at {where}" if node is not None else where
        rx, timeouts = int(coord.get("rx") or 0), int(coord.get("req_timeouts") or 0)
        answered, timed_out = rx > self._rx, timeouts > self._timeouts
        self._rx, self._timeouts = rx, timeouts
        up = coord.get("state") == "UP" and (stats.get("cgrp") or {}).get("state") == "up"
        rxidle_us = coord.get("rxidle", -1)
        waiting = int(coord.get("waitresp_cnt") or 0) > 0 and rxidle_us is not None and rxidle_us >= SILENT_S * 1e6
        if not up or waiting or (timed_out and not answered):
            self._unanswered = True
            return False, label
        if self._unanswered and not answered:
            return False, label
        self._unanswered = False
        return True, label
