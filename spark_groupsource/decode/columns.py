"""The row schema with typed ``key`` / ``value`` columns, and where the reader schema is pinned.

The Spark type of a typed column comes from its reader schema (:mod:`.avro_types`). The
resolved reader schema's id rides along in that column's field metadata
(``groupkafka.schemaId``, ``groupkafka.subject``, ``groupkafka.version``): Spark hands the
schema ``DataSource.schema()`` returned at ``load()`` to every reader it makes (the stream's
driver-side runner, the planner whose reader goes to the executors), so all of them decode with
the schema the DataFrame's columns were derived from, without asking the registry for "latest"
again.

With ``mode=PERMISSIVE`` each typed column ``c`` gets two columns at the end:
``corruptC`` (binary: the raw bytes of a record that could not be decoded, else null) and
``cError`` (string: why, else null).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.types import BinaryType, DataType, StringType, StructField, StructType

from spark_groupsource.decode.options import DecodeOptions
from spark_groupsource.decode.registry import ReaderSchema, RegistryError, ResolvedSchema
from spark_groupsource.ranges import RangeInputPartition
from spark_groupsource.schema import spark_schema

__all__ = ["typed_schema", "pinned", "Pin", "error_columns", "META_ID", "spark_type_of"]

META_ID = "groupkafka.schemaId"
META_SUBJECT = "groupkafka.subject"
META_VERSION = "groupkafka.version"


@dataclass(frozen=True)
class Pin:
    """Which registered reader schema a typed column was derived from."""

    schema_id: int
    subject: str | None = None
    version: int | None = None


def error_columns(column: str) -> tuple[str, str]:
    """The PERMISSIVE mode's columns for ``column``: raw bytes, reason."""
    return f"corrupt{column.capitalize()}", f"{column}Error"


def spark_type_of(reader: ReaderSchema) -> DataType:
    """The Spark type of a reader schema, by its format's rules (:mod:`.avro_types`,
    :mod:`.json_types`, :mod:`.protobuf_types`); a schema with none is a :class:`RegistryError`
    naming it and why."""
    import json

    try:
        if reader.kind == "JSON":
            from jsonschema.exceptions import SchemaError

            from spark_groupsource.decode.json_types import to_spark_type as json_type
            from spark_groupsource.decode.json_types import validator_of
            from spark_groupsource.decode.references import json_resources

            parsed = json.loads(reader.schema_str)
            resources = json_resources(reader.references)
            try:
                validator_of(parsed, resources)
            except SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
            return json_type(parsed, resources).data_type
        if reader.kind == "PROTOBUF":
            from spark_groupsource.decode.protobuf_types import message_of
            from spark_groupsource.decode.protobuf_types import to_spark_type as proto_type

            return proto_type(message_of(reader.schema_str, reader.message, reader.references)).data_type
        from spark_groupsource.decode.avro_types import to_spark_type
        from spark_groupsource.decode.references import avro_schema

        return to_spark_type(avro_schema(json.loads(reader.schema_str), reader.references)).data_type
    except ValueError as exc:  # AvroTypeError, JsonTypeError, ProtobufTypeError
        if reader.schema_id is None:
            raise
        raise RegistryError(f"{reader.describe()} has no Spark type: {exc}") from None


def typed_schema(include_headers: bool, options: DecodeOptions, readers: dict[str, ReaderSchema]) -> StructType:
    """Spark's Kafka schema with each typed column replaced by its reader schema's type."""
    fields = []
    for f in spark_schema(include_headers).fields:
        reader = readers.get(f.name)
        if reader is None:
            fields.append(f)
            continue
        meta = {}
        if reader.schema_id is not None:
            meta = {META_ID: reader.schema_id, META_SUBJECT: reader.subject, META_VERSION: reader.version}
        fields.append(StructField(f.name, spark_type_of(reader), True, meta))
    if options.permissive:
        for side in (options.key, options.value):
            if side.typed:
                raw, why = error_columns(side.column)
                fields.append(StructField(raw, BinaryType(), True))
                fields.append(StructField(why, StringType(), True))
    return StructType(fields)


def pinned(schema: StructType, column: str) -> Pin | None:
    """The reader schema ``column`` of ``schema`` was derived from (None: inline, or absent)."""
    if column not in schema.fieldNames():
        return None
    meta = schema[column].metadata or {}
    if META_ID not in meta:
        return None
    return Pin(int(meta[META_ID]), meta.get(META_SUBJECT), meta.get(META_VERSION))



@dataclass(frozen=True)
class PinnedPartition(RangeInputPartition):
    """A stream task, the reader schema ids of its batch (column -> id) and those schemas with
    their references (resolved on the driver: a worker needs the registry only for writer
    schemas it has not seen)."""

    schema_pins: tuple[tuple[str, int], ...] = field(default=())
    schemas: tuple[tuple[str, ResolvedSchema], ...] = field(default=())
