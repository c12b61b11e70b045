"""How deep librdkafka prefetches for a task: deeper where every range is long.

A fetcher prefetches each assigned partition until its queue holds ``queued.max.messages.kbytes``
(PREFETCH_KBYTES, 4 MiB) or ``queued.min.messages`` records, and at a range's end drops what it
decoded past it. 4 MiB keeps that waste small for the ranges of a trigger of 250,000 records
(31,250 x 1 KB is 31 MB: 4 MiB past its end is 13% more decoding, 16 MiB would be 50%), but a
task reading a long range of 1 KB records at 300,000 records/s drains 4 MiB in about 13 ms, and
a deeper queue reads such ranges faster (likely: the task no longer waits for refills; not
traced). Measured inside Spark (2026-11-28, Kafka 4.0.1, ``local[2]``, 8 partitions,
``AvailableNow`` -> ``noop``, rounds alternating, a scratch A/B script), records/s in
``addBatch``, 16 MiB against 4 MiB: 3,000,000 x 1 KB in one trigger (ranges of 375,000), this
module against ``kafka.queued.max.messages.kbytes=4096``: faster in 7 of 8 pairs, best 714,116
against 638,570, CPU 3.70 against 3.87 CPU-s per million (medians); 300,000 x 10 KB (ranges of
37,500) faster in 4 of 4 pairs; ranges of 125,000 x 1 KB about 6% faster; ranges of 31,250 x 1 KB
no faster, at 11% more CPU.

So a task whose ranges all hold at least LONG_RANGE_BYTES (128 MiB: 16 MiB past the end is at
most an eighth more) gets a fetcher with LONG_RANGE_PREFETCH_KBYTES; the fetcher then keeps one
partition assigned at a time (fetch._Ahead: at most 16 MiB of prefetch in all, as the four
partitions of 4 MiB do), so memory per fetcher stays bounded. A range's bytes are its records
times the bytes per record this worker saw last for the topic (:class:`RecordSizes`); until it has
read the topic once it keeps 4 MiB. Records of 200 B or less are bounded by queued.min.messages
(20,000) first at either depth, so they read as before. A user's own
``kafka.queued.max.messages.kbytes`` is never changed.

Such a task of large records also fetches in larger pieces: ``max.partition.fetch.bytes``
LONG_RANGE_FETCH_BYTES (8 MiB; librdkafka's default 1 MiB) unless the user set it, since each
1 MiB Fetch request that refills a 16 MiB queue is a round of the broker's and librdkafka's fixed
work (the broker's CPU per record fell by 14-44%; commit e52d42e has the runs). Only where the queue's bytes bound it before its records
(``queued.min.messages`` times the bytes per record reach 16 MiB, records of about 840 B or
more): for smaller records the record bound stops the prefetch first, and a larger fetch only
decodes more past a range's end (measured slower at 100 B lz4). Such a fetcher holds at most its
16 MiB queue and one 8 MiB fetch in flight (one partition assigned at a time).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from spark_groupsource.config.client_configs import PREFETCH_KBYTES, PREFETCH_KBYTES_KEY
from spark_groupsource.ranges import OffsetRange

__all__ = ["LONG_RANGE_BYTES", "LONG_RANGE_FETCH_BYTES", "LONG_RANGE_PREFETCH_KBYTES", "RecordSizes",
           "prefetch_config"]

#: librdkafka's prefetch per partition (KiB) for a task of long ranges
LONG_RANGE_PREFETCH_KBYTES = 4 * PREFETCH_KBYTES
#: a range at least this long (estimated bytes) is long
LONG_RANGE_BYTES = 128 << 20
#: librdkafka's largest fetch of one partition for a task of long ranges
LONG_RANGE_FETCH_BYTES = 8 << 20
#: librdkafka's names of that setting (the second an alias): a user's value is kept
FETCH_BYTES_KEYS = ("max.partition.fetch.bytes", "fetch.message.max.bytes")


class RecordSizes:
    """Bytes per record (the Arrow batches' buffers over their rows) this Python worker saw last
    per topic."""

    def __init__(self) -> None:
        self._per_topic: dict[str, float] = {}
        self._lock = threading.Lock()

    def saw(self, topic: str, nbytes: int, records: int) -> None:
        if records > 0:
            with self._lock:
                self._per_topic[topic] = nbytes / records

    def get(self, topic: str) -> float | None:
        with self._lock:
            return self._per_topic.get(topic)


def prefetch_config(config: dict[str, Any], ranges: Sequence[OffsetRange], sizes: RecordSizes,
                    adapt: bool) -> dict[str, Any]:
    """``config`` with LONG_RANGE_PREFETCH_KBYTES when ``adapt`` (the user set no prefetch of
    their own) and every range is at least LONG_RANGE_BYTES by ``sizes``, and then with
    LONG_RANGE_FETCH_BYTES too where the records are large enough that the queue's bytes bound
    it before its records (``queued.min.messages``) and the user set no fetch size; else
    ``config``."""
    if not adapt or not ranges or int(config.get(PREFETCH_KBYTES_KEY, PREFETCH_KBYTES)) >= LONG_RANGE_PREFETCH_KBYTES:
        return config
    smallest = float("inf")
    for rng in ranges:
        per_record = sizes.get(rng.topic)
        if per_record is None or rng.size * per_record < LONG_RANGE_BYTES:
            return config
        smallest = min(smallest, per_record)
    deeper = {**config, PREFETCH_KBYTES_KEY: LONG_RANGE_PREFETCH_KBYTES}
    # larger fetches only where the bytes bound the queue before the records do: a fetch past
    # the record bound is decoded for nothing if the range ends
    records_bound = int(config.get("queued.min.messages", 100_000))
    if smallest * records_bound >= LONG_RANGE_PREFETCH_KBYTES * 1024 and not any(k in config for k in FETCH_BYTES_KEYS):
        # never above the user's bound of a whole Fetch response
        deeper[FETCH_BYTES_KEYS[0]] = min(LONG_RANGE_FETCH_BYTES, int(config.get("fetch.max.bytes", 1 << 62)))
    return deeper
