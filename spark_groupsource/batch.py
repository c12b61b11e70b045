"""Batch reads (``spark.read.format("groupkafka")``): Spark's batch reader, method for method.

:class:`GroupKafkaBatchReader` resolves the plan (:mod:`spark_groupsource.planning.batch_plan`)
in ``partitions()`` (which Spark runs in a Python worker on the driver, possibly more than once:
the result is cached), splits the ranges into tasks (``minPartitions``,
``maxRecordsPerPartition``) and reads each task on an executor.

The plan lives in the planning worker, not in the user's Python driver process, and a plain
``spark.read`` never commits. To commit a backfill (or to share one with other backfills
through the group) resolve the plan in the driver with
:class:`spark_groupsource.backfill.BackfillPlan`, which passes explicit JSON offsets to
``spark.read`` and commits after the write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_groupsource import config as opt
from spark_groupsource.errors import OptionError
from spark_groupsource.executor.fetch import read_ranges
from spark_groupsource.logs import configure_worker_logging
from spark_groupsource.planning.batch_plan import plan_tasks, resolve_ranges
from spark_groupsource.planning.offset_reader import reader_for
from spark_groupsource.ranges import OffsetRange, RangeInputPartition

__all__ = ["GroupKafkaBatchReader"]

log = logging.getLogger("spark_groupsource.batch")


class GroupKafkaBatchReader(DataSourceReader):
    """``spark.read.format("groupkafka")``: options as the stream reader where they apply,
    plus endingOffsets / endingTimestamp / endingOffsetsByTimestamp / groupCoordinated."""

    def __init__(self, schema, options: Mapping[str, str], readers: Mapping[str, Any] | None = None):
        self.opts = opt.parse_batch_options(options)
        self.schema = schema  # typed columns carry their reader schema ids (spark_groupsource.decode)
        if self.opts.commit_offsets:
            raise OptionError(
                "commitOffsets",
                "a batch read never commits by itself (it cannot know that the write succeeded); "
                "use spark_groupsource.backfill.BackfillPlan and call commit() after the write",
            )
        self._tasks: list[RangeInputPartition] | None = None
        from spark_groupsource.decode import plan_schemas

        # made on the driver, pickled to the executors: the reader schemas travel with the plan
        self.readers = plan_schemas(self.opts, schema, loaded=readers)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_tasks"] = None  # each task carries its own ranges
        return state

    def resolve(self) -> list[OffsetRange]:
        """Resolve the plan's ranges (driver side; talks to the brokers)."""
        if self.opts.group_coordinated:
            from spark_groupsource.backfill import BackfillPlan

            with BackfillPlan.from_options(self.opts) as plan:
                # Membership ends with planning here: nothing can be committed for this read.
                return list(plan.ranges)
        with reader_for(self.opts) as view:
            return resolve_ranges(self.opts, view)

    def partitions(self) -> list[InputPartition]:
        configure_worker_logging()
        if self._tasks is None:
            ranges = self.resolve()
            self._tasks = plan_tasks(ranges, self.opts)
            log.info(
                "batch plan: %d records in %d tasks: %s",
                sum(r.size for r in ranges), len(self._tasks),
                ", ".join(str(r) for r in ranges if r.size),
            )
        return list(self._tasks)

    def read(self, partition: InputPartition) -> Iterator:
        ranges = getattr(partition, "ranges", None)
        if not ranges:  # Spark hands an empty plan one InputPartition(None)
            return iter(())
        configure_worker_logging()
        from spark_groupsource.decode import batch_transform

        return read_ranges(self.opts, ranges, batch_transform(self.opts, self.schema, readers=self.readers))
