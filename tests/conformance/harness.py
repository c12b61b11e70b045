"""Run one scenario on both readers, Spark's own Kafka source and groupkafka, and compare.

Both readers run in the one shared Spark session (tests/conftest.py gives it Spark's source's
jars), on the same broker and, for streams, on the same topics at the same time: each
scenario's topic changes (new partitions, deleted topics, deleted records, transactions) happen
once and both queries see them. What each delivered is kept as :class:`Rec` rows (topic,
partition, offset, key, value, timestamp, timestamp type, headers when asked for) and compared
as multisets: a record read twice counts twice. A batch id delivered again (a batch replayed
after a restart) must bring the same rows as its first delivery (a sink that overwrites by batch
id, as Spark's idempotent sinks do, relies on it); a replay that differs fails the case.

A case "both fail" only where each reader raised an error that names the cause
(:func:`assert_both_fail`, a pattern per reader). A wait that runs out (a hang) raises
:class:`WaitTimedOut`, which :func:`failure_of` lets through: a hang fails the case, it is never
the failure a case expects.

``kafka`` is Spark's source, ``groupkafka`` ours. Options: the ``defaults`` mode passes only what
a user must write (bootstrap servers, subscribe/subscribePattern, the options the case is
about; for groupkafka a fresh ``kafka.group.id``), the ``spark-options`` mode adds the options
the ported Spark test sets. See docs/conformance.md.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.jars import spark_kafka_jars
from helpers import WaitTimedOut, bounded_process_all

#: Spark's own Kafka source and ours, in the order each scenario runs them.
READERS = ("kafka", "groupkafka")
#: The two option sets of a case (see the module docstring).
MODES = ("defaults", "spark-options")
#: A module's mark: its spark-options cases run in ``make test-extended``, CI runs the defaults
#: (what users run) of every case
SPARK_OPTIONS_EXTENDED = pytest.mark.extended(only={"mode": ["spark-options"]}, why="CI runs each case with default options")
#: Every wait on a query is bounded by this.
QUERY_TIMEOUT_S = 90
#: After Spark's source has caught up, how long groupkafka has to read the same records
#: (GROUPKAFKA_CONFORMANCE_CATCH_UP_S overrides it: how late, not whether, a record comes).
CATCH_UP_S = float(os.environ.get("GROUPKAFKA_CONFORMANCE_CATCH_UP_S", "30"))
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")


_JARS, _MISSING = spark_kafka_jars()
#: ``pytestmark`` of every conformance module: skips at once, before a Spark session starts,
#: where Spark's source's jars are missing (or GROUPKAFKA_SPARK_KAFKA_JARS=none).
SKIP_WITHOUT_SPARK_SOURCE = pytest.mark.skipif(_MISSING is not None, reason=f"conformance suite: {_MISSING}")


def require_spark_source(spark: Any) -> None:
    """Skip (with the reason) where the session has no ``format("kafka")``."""
    jars, missing = spark_kafka_jars()
    if missing:
        pytest.skip(f"conformance suite: {missing}")
    configured = spark.sparkContext.getConf().get("spark.jars", "") or ""
    if not any(j in configured for j in jars):
        pytest.skip("conformance suite: the shared Spark session was started without Spark's Kafka "
                    "source jars (spark.jars)")


def options_for(mode: str, required: Mapping[str, str], spark_test: Mapping[str, str]) -> dict[str, str]:
    """``required`` in the ``defaults`` mode, ``required`` plus the Spark test's own options in
    the ``spark-options`` mode."""
    assert mode in MODES, mode
    return dict(required) if mode == "defaults" else {**required, **spark_test}


# ----------------------------------------------------------------------------------------------
# records
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rec:
    """One delivered record, as both readers' rows carry it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: Any  # datetime as PySpark returns it (both readers alike)
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] | None = None

    @property
    def where(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def short(self) -> str:
        h = "" if self.headers is None else f" headers={list(self.headers)}"
        return (f"{self.topic}-{self.partition}@{self.offset} key={self.key!r} value={self.value!r} "
                f"ts={self.timestamp} type={self.timestamp_type}{h}")


def _b(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


def to_rec(row: Any, headers: bool = False) -> Rec:
    hdrs = None
    if headers:
        raw = row["headers"]
        hdrs = None if raw is None else tuple((h["key"], _b(h["value"])) for h in raw)
    return Rec(row["topic"], row["partition"], row["offset"], _b(row["key"]), _b(row["value"]),
               row["timestamp"], row["timestampType"], hdrs)


def columns(headers: bool) -> list[str]:
    return [*COLUMNS, *(["headers"] if headers else [])]


def collect(df: Any, headers: bool = False) -> list[Rec]:
    return [to_rec(r, headers) for r in df.select(*columns(headers)).collect()]


def values(recs: Iterable[Rec]) -> list[str | None]:
    """The values as text, sorted (None first): what a Spark test's CheckAnswer compares."""
    out = [None if r.value is None else r.value.decode() for r in recs]
    return sorted(out, key=lambda v: (v is not None, v or ""))


def diff(got: Mapping[str, list[Rec]]) -> str:
    """A readable account of where the readers' records differ ('' when they agree)."""
    (a, ra), (b, rb) = list(got.items())[:2]
    ca, cb = Counter(ra), Counter(rb)
    only_a, only_b = ca - cb, cb - ca
    if not only_a and not only_b:
        return ""
    lines = [f"{a}: {len(ra)} records, {b}: {len(rb)} records"]
    for name, only, other in ((a, only_a, cb), (b, only_b, ca)):
        if not only:
            continue
        items = sorted(only.elements(), key=lambda r: r.where)
        lines.append(f"only in {name} ({len(items)}; per topic-partition "
                     f"{dict(Counter(f'{r.topic}-{r.partition}' for r in items))}):")
        other_where = {r.where for r in other}
        for r in items[:12]:
            note = "  (read more often than by the other)" if r.where in other_where else ""
            lines.append(f"    {r.short()}{note}")
        if len(items) > 12:
            lines.append(f"    ... {len(items) - 12} more")
    return "\n".join(lines)


def assert_same(got: Mapping[str, list[Rec]], what: str = "") -> None:
    """Both readers delivered the same records (as multisets)."""
    d = diff(got)
    assert not d, f"the readers differ{' (' + what + ')' if what else ''}:\n{d}"


# ----------------------------------------------------------------------------------------------
# streams
# ----------------------------------------------------------------------------------------------
class ReaderRun:
    """One reader's streaming query (restartable from its checkpoint), delivering through
    foreachBatch into :attr:`batches`."""

    def __init__(self, spark: Any, reader: str, options: Mapping[str, str], checkpoint: str, *, headers: bool):
        self.spark, self.reader, self.options = spark, reader, dict(options)
        self.checkpoint, self.headers = checkpoint, headers
        self.batches: dict[int, list[Rec]] = {}
        #: batch ids delivered again with other rows than at first, with the difference
        self.replay_diffs: list[str] = []
        self.lock = threading.Lock()
        self.query: Any = None
        self.starts = 0

    def start(self, trigger: Mapping[str, Any] | None = None) -> Any:
        df = self.spark.readStream.format(self.reader).options(**self.options).load()
        cols = columns(self.headers)

        def sink(batch: Any, batch_id: int) -> None:
            self.deliver(batch_id, [to_rec(r, self.headers) for r in batch.select(*cols).collect()])

        writer = (df.writeStream.foreachBatch(sink).option("checkpointLocation", self.checkpoint)
                  .trigger(**(trigger or {"processingTime": "100 milliseconds"})))
        self.starts += 1
        self.query = writer.start()
        return self.query

    def deliver(self, batch_id: int, rows: list[Rec]) -> None:
        """Keep a batch's rows; a batch id seen before must bring the same rows again (as a
        multiset), else the difference is kept for :meth:`StreamPair.assert_same` to fail on."""
        with self.lock:
            first = self.batches.get(batch_id)
            if first is None:
                self.batches[batch_id] = rows
                return
            d = diff({"first delivery": first, "replay": rows})
            if d:
                self.replay_diffs.append(f"{self.reader}: batch {batch_id} replayed with other rows:\n{d}")

    def records(self) -> list[Rec]:
        with self.lock:
            return [r for _, batch in sorted(self.batches.items()) for r in batch]

    def batch_sizes(self) -> list[int]:
        with self.lock:
            return [len(b) for _, b in sorted(self.batches.items())]

    def failure(self) -> str | None:
        q = self.query
        if q is None:
            return None
        exc = q.exception()
        return None if exc is None else str(exc)

    def process_all(self, timeout: float = QUERY_TIMEOUT_S) -> None:
        """``processAllAvailable``, bounded (it has no timeout of its own); a failed query
        raises its error, one still busy after ``timeout`` :class:`WaitTimedOut`."""
        bounded_process_all(self.query, timeout, f"{self.reader}: the query")

    def await_end(self, timeout: float = QUERY_TIMEOUT_S) -> None:
        """Wait for a query with an AvailableNow/once trigger to end (:class:`WaitTimedOut`
        when it has not after ``timeout``; a failed query raises its error)."""
        if not self.query.awaitTermination(timeout):
            raise WaitTimedOut(f"{self.reader}: the query did not end within {timeout}s")

    def stop(self) -> None:
        if self.query is not None:
            try:
                self.query.stop()
            except Exception:  # noqa: BLE001 - failed or stopped already
                pass


class StreamPair:
    """The same streaming scenario on both readers at once (see the module docstring).

    ``options`` go to both readers; ``kafka_options`` only to Spark's source, ``gk_options``
    only to groupkafka, which also gets a fresh ``kafka.group.id``."""

    def __init__(self, spark: Any, bootstrap: str, tmp_path: Any, options: Mapping[str, str], *,
                 headers: bool = False, kafka_options: Mapping[str, str] | None = None,
                 gk_options: Mapping[str, str] | None = None, readers: Iterable[str] = READERS):
        require_spark_source(spark)
        self.group = f"conformance-{uuid.uuid4().hex[:12]}"
        base = {"kafka.bootstrap.servers": bootstrap, **options}
        per_reader = {
            "kafka": {**base, **(kafka_options or {})},
            "groupkafka": {**base, "kafka.group.id": self.group, **(gk_options or {})},
        }
        self.runs = {r: ReaderRun(spark, r, per_reader[r], str(tmp_path / f"ck-{r}"), headers=headers)
                     for r in readers}

    def __getitem__(self, reader: str) -> ReaderRun:
        return self.runs[reader]

    def __enter__(self) -> StreamPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, trigger: Mapping[str, Any] | None = None) -> StreamPair:
        for run in self.runs.values():
            run.start(trigger)
        return self

    def stop(self) -> None:
        for run in self.runs.values():
            run.stop()

    def restart(self, trigger: Mapping[str, Any] | None = None) -> StreamPair:
        self.stop()
        return self.start(trigger)

    def process_all(self) -> None:
        for run in self.runs.values():
            run.process_all()

    def await_end(self) -> None:
        for run in self.runs.values():
            run.await_end()

    def catch_up(self, timeout: float = CATCH_UP_S) -> None:
        """Spark's source processes all available, then groupkafka gets up to ``timeout`` to
        have read every record Spark's source read (it discovers new partitions through the
        group's rebalance, on its own schedule), then processes all available too. A difference
        is for :meth:`assert_same` to show; this only waits."""
        self.runs["kafka"].process_all()
        gk = self.runs["groupkafka"]
        want = {r.where for r in self.runs["kafka"].records()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and gk.failure() is None and gk.query.isActive:
            if want <= {r.where for r in gk.records()}:
                break
            time.sleep(0.2)
        if gk.query.isActive:
            gk.process_all()

    def records(self) -> dict[str, list[Rec]]:
        return {r: run.records() for r, run in self.runs.items()}

    def failures(self) -> dict[str, str | None]:
        return {r: run.failure() for r, run in self.runs.items()}

    def failures_of(self, step: str = "process_all", timeout: float = QUERY_TIMEOUT_S) -> dict[str, str | None]:
        """Each reader's error from ``step`` (``process_all`` or ``await_end``), or its query's
        error; a reader still waiting after ``timeout`` raises :class:`WaitTimedOut`."""
        return {r: failure_of(lambda run=run: getattr(run, step)(timeout)) or run.failure()
                for r, run in self.runs.items()}

    def replay_diffs(self) -> list[str]:
        return [d for run in self.runs.values() for d in run.replay_diffs]

    def assert_same(self, what: str = "", *, expect_values: Iterable[str | None] | None = None) -> dict[str, list[Rec]]:
        """Neither query failed and both delivered the same records; with ``expect_values``,
        Spark's source delivered those values (the ported test's CheckAnswer), so that a
        scenario both readers get wrong alike cannot pass."""
        failed = {r: f for r, f in self.failures().items() if f}
        assert not failed, f"queries failed ({what}): {failed}"
        replays = self.replay_diffs()
        assert not replays, f"a replayed batch differs from its first delivery ({what}):\n" + "\n".join(replays)
        got = self.records()
        if expect_values is not None:
            want = sorted(expect_values, key=lambda v: (v is not None, v or ""))
            assert values(got["kafka"]) == want, (
                f"Spark's source did not deliver what its own test expects ({what}): "
                f"{values(got['kafka'])} != {want}")
        assert_same(got, what)
        return got


# ----------------------------------------------------------------------------------------------
# batch reads
# ----------------------------------------------------------------------------------------------
def batch_frames(spark: Any, bootstrap: str, options: Mapping[str, str], *,
                 kafka_options: Mapping[str, str] | None = None,
                 gk_options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``spark.read`` DataFrames of both readers (not yet collected)."""
    require_spark_source(spark)
    base = {"kafka.bootstrap.servers": bootstrap, **options}
    return {
        "kafka": spark.read.format("kafka").options(**base, **(kafka_options or {})).load(),
        "groupkafka": spark.read.format("groupkafka").options(**base, **(gk_options or {})).load(),
    }


def read_both(spark: Any, bootstrap: str, options: Mapping[str, str], *, headers: bool = False,
              **kw: Any) -> dict[str, list[Rec]]:
    return {r: collect(df, headers) for r, df in batch_frames(spark, bootstrap, options, **kw).items()}


def failure_of(action: Callable[[], Any]) -> str | None:
    """``action``'s exception as text, or None when it succeeded. An AssertionError (a
    :class:`WaitTimedOut` above all: a hang) is raised on: it is the test's failure, never the
    reader's error a case expects."""
    try:
        action()
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader's error is the point
        return f"{type(exc).__name__}: {exc}"
    return None


def assert_both_fail(fails: Mapping[str, str | None], causes: Mapping[str, str], what: str = "") -> None:
    """Every reader in ``causes`` failed, each with an error matching its pattern (a regular
    expression, searched case-insensitively): "both fail" means both failed for the reason the
    case is about, not that one of them failed for another (a refused connection, a typo in
    the test)."""
    label = f" ({what})" if what else ""
    missing = [r for r in causes if not fails.get(r)]
    assert not missing, f"both readers must fail{label}; did not: {missing}; errors: {dict(fails)}"
    wrong = {r: fails[r] for r, pattern in causes.items() if not re.search(pattern, fails[r] or "", re.I | re.S)}
    assert not wrong, (f"a reader failed for another reason than the case's{label}: "
                       + "; ".join(f"{r} (wanted /{causes[r]}/): {(wrong[r] or '')[:800]}" for r in wrong))
