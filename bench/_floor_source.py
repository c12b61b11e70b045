"""The Python data source floor: what Spark itself costs any Python streaming source.

``format("benchfloor")`` is a streaming Python data source with the schema of the Kafka
sources that reads nothing: its executors yield Arrow batches sliced from one batch built once
per Python worker (values of the workload's size), so no per-record Python work is done. Its
driver plans offsets in memory the way groupkafka does (``maxOffsetsPerTrigger`` per trigger,
one input partition per topic partition, ``Trigger.AvailableNow``). What its query costs is
Spark's share of any Python streaming source: the per-query runner process Spark starts
(``python_streaming_source_runner``), the Python workers, the Arrow hand-off to the JVM and the
JVM's conversion into rows. groupkafka cannot be faster than this, nor use less CPU. Like
groupkafka (workerGcFreeze), it freezes a worker's long-lived objects out of the full garbage
collection Spark's reused workers run after every task, at the first read's start and end
(spark_groupsource/executor/heap.py): a remedy open to any Python source, so the floor has it
too; so is what groupkafka does to its worker's socket to the JVM (workerTcpNoDelay,
spark_groupsource/executor/task_socket.py; option ``tcpNoDelay``, default true).

Offsets are one position per partition (``{"o": [...]}``), rows dealt round-robin, so that at
1,000 partitions the offsets Spark logs and hands to the runner are as large as a Kafka
source's. Options: ``partitions``, ``valueSize`` (bytes), ``maxOffsetsPerTrigger`` and either
``rows`` (a fixed total: throughput.py) or ``rate`` (rows appear at this many per second from
the reader's creation on, unbounded: small_batches.py).
"""

from __future__ import annotations

import time

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_groupsource.executor.heap import freeze_once, freeze_settled
from spark_groupsource.executor.task_socket import speed_up_task_socket
from spark_groupsource.schema import arrow_schema, spark_schema

_BLOCK = 10_000


def worker_cache(name: str):
    """A namespace that lasts as long as the Python worker. The bench sources travel by value,
    so each task unpickles them anew: a dict of their own would be empty in every task
    (building a template cost each task milliseconds no source pays); a module in
    ``sys.modules`` outlives the task."""
    import sys
    import types

    return sys.modules.setdefault(name, types.ModuleType(name))


def _templates() -> dict[int, pa.RecordBatch]:
    """The worker's templates, one per value size."""
    holder = worker_cache("_benchfloor_templates")
    if not hasattr(holder, "by_size"):
        holder.by_size = {}
    return holder.by_size


def _template(value_size: int) -> pa.RecordBatch:
    """One batch of ``_BLOCK`` rows with values of ``value_size`` bytes (built once per worker)."""
    templates = _templates()
    batch = templates.get(value_size)
    if batch is None:
        n = _BLOCK
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([b"k%d" % i for i in range(n)], pa.binary()),
                pa.array([b"v" * value_size] * n, pa.binary()),
                pa.array(["bench"] * n, pa.string()),
                pa.array([0] * n, pa.int32()),
                pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32()),
            ],
            schema=arrow_schema(False),
        )
        templates[value_size] = batch
    return batch


class _Range(InputPartition):
    def __init__(self, index: int, rows: int, value_size: int, tcp_no_delay: bool = True):
        super().__init__(index)
        self.rows, self.value_size, self.tcp_no_delay = rows, value_size, tcp_no_delay


class FloorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.partitions_n = int(options.get("partitions", "8"))
        self.value_size = int(options.get("valueSize", "100"))
        self.rate = float(options.get("rate", "0"))
        self.rows = int(options.get("rows", "0"))
        self.max_rows = int(options.get("maxOffsetsPerTrigger", "0")) or None
        self.tcp_no_delay = options.get("tcpNoDelay", "true") == "true"
        self.born = time.monotonic()
        self.cap: int | None = None

    def _available(self) -> int:
        if self.rate:
            return int((time.monotonic() - self.born) * self.rate)
        return self.rows

    def _offset(self, total: int) -> dict:
        base, extra = divmod(total, self.partitions_n)
        return {"o": [base + (1 if i < extra else 0) for i in range(self.partitions_n)]}

    def initialOffset(self):
        return self._offset(self._available() if self.rate else 0)  # a stream starts at its end

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = self._available()

    def latestOffset(self, start=None, limit=None):
        at = sum(start["o"]) if start else 0
        end = self._available() if self.cap is None else self.cap
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            end = min(end, at + limit.max_rows)
        return self._offset(max(at, end))

    def partitions(self, start, end):
        return [_Range(i, hi - lo, self.value_size, self.tcp_no_delay)
                for i, (lo, hi) in enumerate(zip(start["o"], end["o"], strict=True)) if hi > lo]

    def read(self, partition: _Range):
        freeze_once()  # as groupkafka does (workerGcFreeze): any Python source can
        if partition.tcp_no_delay:
            speed_up_task_socket()
        template = _template(partition.value_size)
        left = partition.rows
        while left > 0:
            n = min(left, _BLOCK)
            yield template.slice(0, n)
            left -= n
        freeze_settled()

    def commit(self, end) -> None:
        pass


class FloorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "benchfloor"

    def schema(self):
        return spark_schema(False)

    def streamReader(self, schema):
        return FloorStreamReader(self.options)


def register(spark) -> None:
    """Register ``benchfloor`` in ``spark`` (the class travels by value: the workers cannot
    import the bench directory)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorDataSource)
