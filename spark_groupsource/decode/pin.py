"""The reader schema ids a stream decodes with, kept in its offsets (the checkpoint).

Spark logs every micro-batch's end offset in the checkpoint before the batch runs, and a
restarted query starts from the last one: the offset is the one place a Python source can keep
something across restarts. A typed stream appends ``"schemas":{"value":ID}`` (and ``"key"``) to
the offset JSON the planner made, so each batch names the reader schema it is decoded with,
and a replayed batch decodes exactly as it did.

On restart, ``load()`` derives the columns from the reader schema it resolves then (for the
default ``latest``: the subject's latest version now). :func:`choose` compares it with the
checkpoint's:

- the same id: nothing to decide;
- another id and an explicit ``valueSchemaVersion``: the user asked for it, the new one is used
  and written to the next offsets (with the same columns too: else a version that only adds an
  enum value or changes a default could never be moved to without a new checkpoint);
- another id (``latest``) whose Spark type is the same: the checkpoint's id is kept (the same
  columns, the same defaults and resolution as before the restart);
- another id (``latest``) with other columns: the query fails before it reads anything, naming
  both and the fix (``valueSchemaVersion=<the checkpoint's version>`` keeps the old columns; an
  explicit new version moves the query on).

A batch replayed at a restart decodes with the ids in its own offsets, whatever is chosen here.

An id pins the whole closure: a registered schema's references name fixed versions of other
subjects, and the same text with other reference versions is another id. A referenced subject
that gains a version changes no pinned query; the columns compared above are derived across
the references (:func:`.columns.spark_type_of`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from spark_groupsource.errors import GroupKafkaError

__all__ = ["split", "join", "choose", "SchemaPinError"]

_SUFFIX = re.compile(r',"schemas":\{[^{}]*\}\}$')


class SchemaPinError(GroupKafkaError):
    """The checkpoint's reader schema and the one the query was loaded with give other columns."""


def split(offset: str | Mapping[str, Any] | None) -> tuple[str | Mapping[str, Any] | None, dict[str, int]]:
    """The planner's offset without our ``schemas`` field, and the field (empty when absent)."""
    if offset is None:
        return None, {}
    if isinstance(offset, str):
        m = _SUFFIX.search(offset)
        if m is None:
            return offset, {}
        pins = json.loads(m.group(0)[len(',"schemas":'):-1])
        return offset[: m.start()] + "}", {str(k): int(v) for k, v in pins.items()}
    data = dict(offset)
    pins = data.pop("schemas", None) or {}
    return data, {str(k): int(v) for k, v in pins.items()}


def join(offset: str, pins: Mapping[str, int]) -> str:
    """``offset`` (the planner's JSON object) with ``"schemas"`` appended, in a fixed order."""
    if not pins:
        return offset
    body = json.dumps({k: int(pins[k]) for k in sorted(pins)}, separators=(",", ":"))
    if not offset.endswith("}"):
        raise ValueError(f"not a JSON object: {offset!r}")
    return f'{offset[:-1]},"schemas":{body}}}'


def choose(column: str, loaded: int, checkpoint: int | None, *, explicit_version: bool,
           same_columns: bool, describe_loaded: str, describe_checkpoint: str) -> int:
    """Which reader schema id a restarted stream decodes ``column`` with (see the module)."""
    if checkpoint is None or checkpoint == loaded or explicit_version:
        return loaded
    if same_columns:
        return checkpoint
    raise SchemaPinError(
        f"the checkpoint's {column} reader schema is {describe_checkpoint}, but this query was loaded with "
        f"{describe_loaded}, the subject's latest version now, whose columns differ. The query stops "
        f"before reading so that its {column} columns do not change across the restart: set "
        f"{column}SchemaVersion to the checkpoint's version to go on with its columns, or to the new "
        "version to move the query to the new columns (or start from a new checkpoint)")


def pinned_tasks(tasks: list, pins: Mapping[str, int], schemas: Mapping[str, Any] | None = None) -> list:
    """``tasks`` (RangeInputPartitions) carrying the batch's reader schema ids to the executors,
    and those schemas with their references (``schemas``: column -> ResolvedSchema)."""
    if not pins:
        return tasks
    from spark_groupsource.decode.columns import PinnedPartition

    frozen = tuple(sorted((str(k), int(v)) for k, v in pins.items()))
    carried = tuple(sorted((schemas or {}).items()))
    return [PinnedPartition(index=t.index, ranges=t.ranges, schema_pins=frozen, schemas=carried) for t in tasks]
