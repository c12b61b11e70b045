"""Shared helpers of the streaming-reader integration tests (``test_stream_*.py``).

No tests here: the other ``test_stream_*`` modules import these helpers (pytest puts this
directory on ``sys.path``, as it does ``tests/`` for ``helpers``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from chispa import assert_df_equality
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from helpers import Record, bounded_process_all, committed_offsets, produce_keyed, wait_until

#: Every wait on a query is bounded by this (a hang is a failure, not a stuck CI run).
QUERY_TIMEOUT_S = 90

COLUMNS = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
    ]
)


def produce(bootstrap: str, topic: str, n: int, partitions: int, *, start: int = 0, **kw: Any) -> list[Record]:
    """``produce_keyed`` round-robin over ``partitions``, ending with one single-record batch
    per partition: the Tansu snapshot reports a partition's end as the last batch's base
    offset + 1, so a multi-record last batch would hide records from "latest"."""
    if n <= partitions:
        return produce_keyed(bootstrap, topic, n, partitions=partitions, start=start, **kw)
    first = produce_keyed(bootstrap, topic, n - partitions, partitions=partitions, start=start, **kw)
    last = produce_keyed(bootstrap, topic, partitions, partitions=partitions, start=start + n - partitions, **kw)
    return first + last


class BackgroundProducer:
    """Records arriving while partitions move: ``per_round`` records round-robin over
    ``partitions`` every ``every_s`` from a thread, numbered on from ``start``, until stopped or
    ``limit`` is reached. Every record written is appended to ``produced`` (the caller's list)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, produced: list[Record], *,
                 start: int, per_round: int, every_s: float, limit: int):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.produced, self.next, self.per_round, self.every_s, self.limit = produced, start, per_round, every_s, limit
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"produce-{topic}")

    def _run(self) -> None:
        while not self._stop.wait(self.every_s) and self.next < self.limit:
            more = produce(self.bootstrap, self.topic, self.per_round, self.partitions, start=self.next)
            with self.lock:
                self.produced.extend(more)
            self.next += self.per_round

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the round in flight (bounded), so ``produced`` is final."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        assert not self._thread.is_alive(), "the background producer did not stop within 30 s"


def table_name(unique_name: Any, prefix: str = "out") -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", unique_name(prefix))


def broker_options(broker: Any) -> dict[str, str]:
    """Reader options every test query on ``broker`` needs: its recommended session timeout,
    and on the mock the two workarounds for its SyncGroup quirks."""
    session = broker.recommended_session_timeout_ms
    opts = {"kafka.session.timeout.ms": str(session), "kafka.heartbeat.interval.ms": str(max(100, session // 6))}
    if broker.backend == "mock":
        # it rejects a follower SyncGroup arriving after the leader's, and sometimes never
        # answers a SyncGroup (time out and rejoin sooner)
        opts |= {"leaderSyncDelayMs": "1000", "kafka.request.timeout.ms": "5000"}
    return opts


def stream(spark: Any, broker: Any, topic: str, group: str, **options: str) -> Any:
    """``readStream.format("groupkafka")`` with :func:`broker_options`."""
    all_options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.group.id": group,
        "subscribe": topic,
        **broker_options(broker),
        **options,
    }
    return spark.readStream.format("groupkafka").options(**all_options).load()


def to_memory(df: Any, name: str, checkpoint: str, *, available_now: bool = False,
              interval: str = "200 milliseconds") -> Any:
    writer = (
        df.select("topic", "partition", "offset", "key", "value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
    return writer.start()


def rows(spark: Any, name: str) -> list[tuple[str, int, int, bytes, bytes]]:
    return [(r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value))
            for r in spark.table(name).collect()]


def assert_exactly(spark: Any, name: str, records: Iterable[Record]) -> None:
    """The memory table holds exactly ``records`` (each once), in any order."""
    want = spark.createDataFrame([(r.topic, r.partition, r.offset, r.key, r.value) for r in records], COLUMNS)
    assert_df_equality(spark.table(name), want, ignore_row_order=True, ignore_nullable=True)


def assert_all_read(got: Iterable[tuple], records: Iterable[Record]) -> None:
    """At-least-once: every record is among ``got``, nothing foreign, values intact."""
    seen = {(t, p, o): (k, v) for t, p, o, k, v in got}
    want = {(r.topic, r.partition, r.offset): (r.key, r.value) for r in records}
    missing = sorted(set(want) - set(seen))
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:5]}"
    assert {k: seen[k] for k in want} == want
    assert set(seen) <= set(want), f"foreign rows: {sorted(set(seen) - set(want))[:5]}"


def duplicates(got: Iterable[tuple]) -> dict[tuple, int]:
    c = Counter((t, p, o) for t, p, o, *_ in got)
    return {k: n for k, n in c.items() if n > 1}


def wait_committed(broker: Any, group: str, topic: str, want: dict[int, int], timeout: float = 30) -> dict:
    return wait_until(
        lambda: (got := committed_offsets(broker.bootstrap, group, topic, sorted(want))) == want and got,
        timeout=timeout, interval=0.2, message=f"group {group} to commit {want}",
    )


def ends(records: Iterable[Record]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in records:
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out


def offset_log(checkpoint: str) -> dict[int, Any]:
    """The source's offsets in ``checkpoint/offsets/N`` per batch id (the first source)."""
    out = {}
    d = os.path.join(checkpoint, "offsets")
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name.isdigit():
            with open(os.path.join(d, name)) as f:
                lines = f.read().splitlines()
            out[int(name)] = json.loads(lines[2])  # v1, metadata, then one line per source
    return out


def committed_batches(checkpoint: str) -> set[int]:
    d = os.path.join(checkpoint, "commits")
    return {int(n) for n in os.listdir(d) if n.isdigit()} if os.path.isdir(d) else set()


def stop(query: Any) -> None:
    try:
        query.stop()
    except Exception:  # noqa: BLE001 - already failed/stopped
        pass


def process_all(query: Any) -> None:
    """``processAllAvailable`` with a bounded wait (it has no timeout of its own)."""
    bounded_process_all(query, QUERY_TIMEOUT_S, f"query {query.name}")


def wait_rows(spark: Any, name: str, n: int, timeout: float = QUERY_TIMEOUT_S, query: Any = None) -> None:
    def enough() -> bool:
        if query is not None and query.exception() is not None:
            raise query.exception()
        return spark.table(name).count() >= n

    wait_until(enough, timeout=timeout, interval=0.3, message=f"{n} rows in {name}")


def settle(seconds: float) -> None:
    time.sleep(seconds)


def owned_partitions(query: Any) -> set[int] | None:
    """Partitions the query's last planned batch covered (our offsets list every owned partition)."""
    prog = query.lastProgress
    if not prog or not prog.get("sources"):
        return None
    end = prog["sources"][0].get("endOffset")
    if end is None:
        return None
    if isinstance(end, str):
        end = json.loads(end)
    return {int(p) for parts in end.get("ranges", {}).values() for p in parts}


def probe_ownership(spark: Any, broker: Any, topic: str, partitions: int, queries: list[Any],
                    produced: list[Record], timeout: float = 60) -> list[set[int]]:
    """Produce one record per partition at a time (appended to ``produced``) until the queries'
    plans split the partitions disjointly and completely. Returns the owned sets."""

    def split() -> list[set[int]] | None:
        produced.extend(produce(broker.bootstrap, topic, partitions, partitions, start=len(produced)))
        for q in queries:
            process_all(q)
        owned = [owned_partitions(q) or set() for q in queries]
        union = set().union(*owned)
        if union == set(range(partitions)) and sum(map(len, owned)) == partitions and all(owned):
            seen.append(owned)
            return owned if seen[-2:] == [owned, owned] else None  # the same split twice: stable
        seen.clear()
        return None

    seen: list[list[set[int]]] = []

    return wait_until(split, timeout=timeout, interval=0.5, message="a disjoint split between the queries")
