"""Keep Spark's per-task garbage collection in a Python worker cheap.

A reused Python worker runs a full ``gc.collect()`` after every task (pyspark/daemon.py, before
it takes the next one). A full collection walks every object the garbage collector tracks, and
a worker that reads Kafka holds 60,000-100,000 of them before it reads anything (pyspark,
pyarrow, confluent-kafka and this package's modules): 30-50 ms of CPU per task, measured
(2026-11-26, this machine). At 8 partitions and 250,000 records per trigger that was more of a
worker's CPU than reading the records. ``gc.freeze()`` (Python's own remedy for long-lived
module state) moves the objects alive at the first read into a permanent generation that
collections skip; objects made later are collected as before.

The first read also imports what the worker had not: PySpark's output path brings pandas,
numpy.ma, pyarrow.compute and more (33,000 tracked objects, 2026-11-27), after the freeze at
the read's start. Left unfrozen they cost every later task's collection 20-29 ms of CPU (a
third of a worker's CPU at 100 B records, 8 tasks per trigger, perf), though nothing in them is
ever garbage. So the end of a worker's first complete read (:func:`freeze_settled`) collects
and freezes once more.

What freezing costs: objects alive at those moments that later become cyclic garbage are never
freed (reference counting still frees the rest). Each freeze happens once per process, after a
full collection, so that is a bounded, one-off amount. ``workerGcFreeze=false`` turns it off.
"""

from __future__ import annotations

import gc
import logging
import threading

__all__ = ["freeze_once", "freeze_settled"]

log = logging.getLogger("spark_groupsource.fetch")

_lock = threading.Lock()
_done: set[str] = set()


def _freeze(moment: str) -> bool:
    """Collect, then freeze what survives; once per process and ``moment``."""
    with _lock:
        if moment in _done:
            return False
        _done.add(moment)
        gc.collect()
        gc.freeze()
    log.debug("froze %d objects of this Python worker (%s)", gc.get_freeze_count(), moment)
    return True


def freeze_once() -> bool:
    """At the start of a read: collect, then freeze what survives; once per process. True if
    this call froze."""
    return _freeze("first read")


def freeze_settled() -> bool:
    """At the end of a complete read: collect, then freeze what survives (what the task
    imported); once per process. True if this call froze."""
    return _freeze("after the first read")
