"""Since when no broker of a cluster has answered the executors of this host.

An executor task that reads nothing while no broker answers for its partition fails after
``brokerOutageTimeoutMs``. Spark retries a task up to 4 times and runs the batch's other tasks
too, each of which would wait the bound again; and a Python worker exits when its task raises,
so a memory kept in the process dies with the very task it should speed up (measured with the
whole 3-node Kafka cluster killed: each of 6 tasks waited 15-21 s per attempt on one core and
the query outlived its 15 s bound by minutes). This memory is a small file per cluster in the
temporary directory, shared by every Python worker of the host: once the cluster has been
silent past the bound, the next task's first check is short and fails at once.

The record is kept on the monotonic clock (CLOCK_MONOTONIC, one clock for every process of the
host since its boot), never on file times or ``time.time()``: a wall clock stepped back by
minutes (NTP, a VM resumed) made a fresh record look stale or a stale one fresh, and a step
forward made a short silence look past the bound. Its callers (the outage
bookkeeping of spark_groupsource/executor/fetch.py) keep their own times on that clock too: a
wall clock converted back and forth around a watermark query moved the bound by any step made
during it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time

#: A record not refreshed for this long is stale: nobody has asked the cluster since.
STALE_S = 60.0


class ClusterSilence:
    """The host-wide record for one cluster (its bootstrap servers)."""

    def __init__(self, cluster: str, directory: str | None = None):
        base = directory or os.path.join(tempfile.gettempdir(), f"groupkafka-silence-{os.getuid()}")
        self._path = os.path.join(base, hashlib.sha1(cluster.encode()).hexdigest()[:16])

    def since_monotonic(self) -> float | None:
        """Monotonic time since when nothing of the cluster answered, or None (it did answer
        since, or nobody has asked it for ``STALE_S``)."""
        try:
            with open(self._path) as f:
                begun, written = (float(x) for x in f.read().split())
        except (OSError, ValueError):  # none, or another format: no record
            return None
        now = time.monotonic()
        if not written <= now or now - written > STALE_S:  # stale, or written before this boot
            return None
        return begun

    def silent_monotonic(self, since: float) -> float:
        """Record that nothing answered since ``since`` (monotonic; the earlier record wins
        while fresh); return the time the silence began."""
        known = self.since_monotonic()
        begun = since if known is None else min(known, since)
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
            tmp = f"{self._path}.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(f"{begun!r} {time.monotonic()!r}")
            os.replace(tmp, self._path)
        return begun

    def answered(self) -> None:
        """Something of the cluster answered: the silence is over."""
        with contextlib.suppress(OSError):
            os.remove(self._path)
