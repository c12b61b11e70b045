"""The Python data source floor: what Spark itself costs any Python streaming source.

``format("benchfloor")`` is a streaming Python data source with the schema of the Kafka
sources that reads nothing: its executors yield Arrow batches sliced from one batch built once
per Python worker (values of the workload's size), so no per-record Python work is done. Its
driver plans offsets in memory the way groupkafka does (``maxOffsetsPerTrigger`` per trigger,
one input partition per topic partition, ``Trigger.AvailableNow``). What its query costs is
Spark's share of any Python streaming source: the per-query runner process Spark starts
(``python_streaming_source_runner``), the Python workers, the Arrow hand-off to the JVM and the
JVM's conversion into rows. groupkafka cannot be faster than this, nor use less CPU.

Options: ``rows`` (total), ``partitions``, ``valueSize`` (bytes), ``maxOffsetsPerTrigger``.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_groupsource.schema import arrow_schema, spark_schema

_BLOCK = 10_000
_TEMPLATES: dict[int, pa.RecordBatch] = {}


def _template(value_size: int) -> pa.RecordBatch:
    """One batch of ``_BLOCK`` rows with values of ``value_size`` bytes (built once per worker)."""
    batch = _TEMPLATES.get(value_size)
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
        _TEMPLATES[value_size] = batch
    return batch


class _Range(InputPartition):
    def __init__(self, index: int, rows: int, value_size: int):
        super().__init__(index)
        self.rows, self.value_size = rows, value_size


class FloorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.rows = int(options["rows"])
        self.partitions_n = int(options.get("partitions", "8"))
        self.value_size = int(options.get("valueSize", "100"))
        self.max_rows = int(options.get("maxOffsetsPerTrigger", str(self.rows)))
        self.cap = self.rows

    def initialOffset(self):
        return {"n": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = self.rows

    def latestOffset(self, start=None, limit=None):
        at = (start or {"n": 0})["n"]
        if isinstance(limit, ReadAllAvailable):
            return {"n": self.cap}
        step = self.max_rows if limit is None else limit.max_rows
        return {"n": min(self.cap, at + step)}

    def partitions(self, start, end):
        rows = end["n"] - start["n"]
        base, extra = divmod(rows, self.partitions_n)
        sizes = [base + (1 if i < extra else 0) for i in range(self.partitions_n)]
        return [_Range(i, s, self.value_size) for i, s in enumerate(sizes) if s]

    def read(self, partition: _Range):
        template = _template(partition.value_size)
        left = partition.rows
        while left > 0:
            n = min(left, _BLOCK)
            yield template.slice(0, n)
            left -= n

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
