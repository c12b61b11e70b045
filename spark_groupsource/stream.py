"""``readStream.format("groupkafka")``: Spark's stream reader, method for method.

Spark builds one reader instance in its long-lived driver-side Python runner
(``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` all run there)
and pickles another to the executors (``read``). Everything with a thread or a
socket lives in :class:`~spark_groupsource.planning.stream_driver.StreamDriver`,
created on the first driver call and never pickled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark_groupsource import config as opt
from spark_groupsource.decode import pin
from spark_groupsource.planning.admission import default_read_limit, limits_for
from spark_groupsource.planning.batch_plan import plan_tasks
from spark_groupsource.planning.offsets import StreamOffset
from spark_groupsource.ranges import OffsetRange, RangeInputPartition

if TYPE_CHECKING:  # the driver's machinery (group member, kafka-python) stays off executors
    from spark_groupsource.planning.stream_driver import StreamDriver

_EMPTY_JSON = StreamOffset({}).to_json()

try:  # Spark >= 4.2: admission control for Python streaming readers (limits: planning/admission.py)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyproject requires >= 4.2.1
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]


class GroupKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("groupkafka")``: see the README for options and guarantees."""

    def __init__(self, schema, options: Mapping[str, str], readers: Mapping | None = None):
        self.opts = opt.parse_stream_options(options)
        self.schema = schema  # typed columns carry their reader schema ids (spark_groupsource.decode)
        self.readers = dict(readers or {})  # those schemas with their references, resolved at load()
        self._pins: dict[str, int] | None = None  # reader schema ids this run decodes with (decode.pin)
        self._initial: str | None = None
        self._driver_state: StreamDriver | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_driver_state"] = None  # threads and sockets stay on the driver
        return state

    def _driver(self) -> StreamDriver:
        if self._driver_state is None:
            # imported here: executors unpickle this reader too, and need none of it
            from spark_groupsource.planning.stream_driver import StreamDriver

            self._driver_state = StreamDriver(self.opts)
        return self._driver_state

    # -- admission control (Spark >= 4.2) ----------------------------------------------------
    def getDefaultReadLimit(self):
        return default_read_limit(self.opts.max_offsets_per_trigger, self.opts.min_offsets_per_trigger)

    def initialOffset(self) -> str:
        # Spark calls this twice on a fresh start; cache so the answer cannot move.
        if self._initial is None:
            d = self._driver()
            d.fresh_query = True
            self._initial = _EMPTY_JSON
        return self._initial

    def _schema_pins(self, checkpoint: dict[str, int]) -> dict[str, int]:
        if self._pins is None:
            from spark_groupsource.decode import effective_pins

            self._pins = effective_pins(self.opts, self.schema, checkpoint)
        return self._pins

    def latestOffset(self, start=None, limit=None) -> str:
        start, checkpoint = pin.split(start)
        pins = self._schema_pins(checkpoint)
        return pin.join(self._latest_offset(start, limit), pins)

    def _latest_offset(self, start, limit) -> str:
        start_json = _as_json(start)
        limits = limits_for(limit, self.opts.min_offsets_per_trigger)
        d = self._driver()
        if d.caps is not None:
            end = d.plan_available_now(start_json, limits.max_rows)
        else:
            end = d.plan_stream(start_json, limits.max_rows, limits.min_rows)
        return d.answer(end if end is not None else (start_json or _EMPTY_JSON))

    def reportLatestOffset(self):
        d = self._driver_state
        if d is None or not d.latest_seen:
            return None
        nested: dict[str, dict[str, int]] = {}
        for tp in sorted(d.latest_seen):
            nested.setdefault(tp.topic, {})[str(tp.partition)] = d.latest_seen[tp]
        return json.dumps(nested, separators=(",", ":"))

    def prepareForTriggerAvailableNow(self) -> None:
        self._driver().snapshot_available_now()

    def partitions(self, start, end) -> list[InputPartition]:
        """The ranges this process planned for the batch; for a batch logged by an earlier run
        (the replay at restart) only what the group has not read since (``replay_ranges``)."""
        end, pins = pin.split(end)
        end_json = _as_json(end)
        d = self._driver()
        planned = d.planned.get(end_json)
        by_tp = planned[1] if planned is not None else d.replay_ranges(end_json)
        ranges = [OffsetRange(tp.topic, tp.partition, s, u) for tp, (s, u) in sorted(by_tp.items()) if u > s]
        effective = self._schema_pins(pins)  # at a restart the replayed batch's are the checkpoint's
        pins = pins or effective
        schemas = None
        if pins:  # the reader schemas travel with the tasks (the registry is asked once per id here)
            from spark_groupsource.decode import plan_schemas

            schemas = plan_schemas(self.opts, self.schema, pins, self.readers)
        return pin.pinned_tasks(plan_tasks(ranges, self.opts), pins, schemas)

    def commit(self, end) -> None:
        d = self._driver_state
        if d is not None:
            with d.lock:
                key = _as_json(pin.split(end)[0])
                if key in d.planned:
                    d.complete(key)

    def read(self, partition: RangeInputPartition) -> Iterator:
        # imported here: executors only (pyarrow.compute stays off the driver's runner)
        from spark_groupsource.decode import batch_transform
        from spark_groupsource.executor.fetch import read_ranges

        yield from read_ranges(
            self.opts, partition.ranges,
            batch_transform(self.opts, self.schema, dict(getattr(partition, "schema_pins", ())),
                            dict(getattr(partition, "schemas", ()))),
        )

    def stop(self) -> None:
        if self._driver_state is not None:
            self._driver_state.close()


def _as_json(offset) -> str | None:
    if offset is None:
        return None
    if isinstance(offset, str):
        return offset
    return StreamOffset.from_json(offset).to_json()
