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
_frozen = False
_settled = False


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


def freeze_settled() -> bool:
    """At the end of a complete read: collect, then freeze what survives (what the task
    imported); once per process. True if this call froze."""
    global _settled
    with _lock:
        if _settled:
            return False
        _settled = True
        gc.collect()
        gc.freeze()
    log.debug("froze %d objects of this Python worker after its first read", gc.get_freeze_count())
    return True
