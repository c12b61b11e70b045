"""Executor side: Confluent wire-format JSON Schema records -> a typed Arrow column.

As confluent-kafka's ``JSONDeserializer`` with a reader schema: the 5-byte header, the writer
schema looked up by id (a record naming an id the registry does not have, or a schema that is
not JSON Schema, is bad, as in the deserializer, which fetches it too), the payload parsed with
``json.loads``, then validated against the *reader* schema with ``jsonschema``'s validator for
the schema's draft (``validator_for``, no format checking: the deserializer's defaults; sped up
where it means the same by :mod:`.json_validate`). A
record that is not JSON or does not validate is bad, with the validator's best-matching error
and where in the document it is. JSON needs no resolution: a valid document is read by
property name; absent properties take the reader schema's ``default`` (:mod:`.json_types`).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from spark_groupsource.decode.json_types import shaper
from spark_groupsource.decode.json_validate import Validity
from spark_groupsource.decode.references import json_resources
from spark_groupsource.decode.registry import Referenced, Registry, ResolvedSchema
from spark_groupsource.decode.wire import BadRecord, ColumnDecoder

__all__ = ["JsonColumnDecoder"]


def _parse(schema: ResolvedSchema) -> Any:
    return json.loads(schema.schema_str)  # looked up as the deserializer does; the reader validates


class JsonColumnDecoder(ColumnDecoder):
    def __init__(self, column: str, registry: Registry | None, reader_text: str, reader_id: int | None,
                 arrow_type: pa.DataType, permissive: bool, references: tuple[Referenced, ...] = ()):
        super().__init__(column, registry, arrow_type, permissive)
        self.reader_json = json.loads(reader_text)
        self.reader_id = reader_id
        resources = json_resources(references)
        self.validity = Validity(self.reader_json, resources)
        self.shape = shaper(self.reader_json, resources)
        self.seed(reader_id, "JSON", self.reader_json)
        self._which = "the reader schema" if reader_id is None else f"the reader schema (id {reader_id})"

    def payload(self, schema_id: int, data: bytes) -> Any:
        self.writer(schema_id, _parse, "JSON")
        try:
            doc = json.loads(data[5:])
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise BadRecord(f"not JSON (writer schema id {schema_id}): {exc}") from None
        if not self.validity.is_valid(doc):
            message, where = self.validity.error(doc)
            raise BadRecord(f"does not validate against {self._which}, written with schema id {schema_id}: "
                            f"{message} (at {where})")
        return doc if self.shape is None else self.shape(doc)
