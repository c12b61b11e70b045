"""When the member has lost touch with its group coordinator, and for how long: said once in the
log when it happens and once when it is back (issue 53).

During a silent network drop a member's driver logged nothing for the whole cut, and with resets
only kafka-python's connection errors: neither said that the member could no longer heartbeat or
commit. :class:`CoordinatorTouch` is fed the member's view every loop turn (coordinator known
and connected, or not) and says, on the monotonic clock:

- "lost touch with its group coordinator" once the coordinator has been unreachable for
  ``LOST_TOUCH_S`` (a reconnect within it is no news), with the session timeout it risks;
- "back in touch with its group coordinator after N s" when it is reachable again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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
