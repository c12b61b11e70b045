"""Keep Spark's per-task garbage collection in a Python worker cheap.

A reused Python worker runs a full ``gc.collect()`` after every task (pyspark/daemon.py, before
it takes the next one). A full collection walks every object the garbage collector tracks, and
a worker that reads Kafka holds 60,000-100,000 of them before it reads anything (pyspark,
pyarrow, confluent-kafka and this package's modules): 30-50 ms of CPU per task, measured
(2026-11-26, this machine). At 8 partitions and 250,000 records per trigger that was more of a
worker's CPU than reading the records. ``gc.freeze()`` (Python's own remedy for long-lived
module state) moves the objects alive at the first read into a permanent generation that
collections skip; objects made later are collected as before.

What freezing costs: objects alive at that moment that later become cyclic garbage are never
freed (reference counting still frees the rest). The first read freezes once per process, after
one full collection, so that is a bounded, one-off amount. ``workerGcFreeze=false`` turns it off.
"""

from __future__ import annotations

import gc
import logging
import threading

__all__ = ["freeze_once"]

log = logging.getLogger("spark_groupsource.fetch")

_lock = threading.Lock()
_frozen = False


def freeze_once() -> bool:
    """Collect, then freeze what survives; once per process. True if this call froze."""
    global _frozen
    with _lock:
        if _frozen:
            return False
        _frozen = True
        gc.collect()
        gc.freeze()
    log.debug("froze %d objects of this Python worker out of its per-task collections",
              gc.get_freeze_count())
    return True
