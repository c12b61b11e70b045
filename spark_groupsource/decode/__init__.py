"""Typed records from a Schema Registry: Avro, JSON Schema and Protobuf in the Confluent wire format.

- :mod:`.options`      the options (valueFormat, schemaRegistry.*, valueSubject, ...), validated
- :mod:`.avro_types`   Avro schema -> Spark type (spark-avro's SchemaConverters), pure
- :mod:`.registry`     the registry client: reader schemas, writer schemas by id, bounded retries
- :mod:`.columns`      the row schema with typed columns; the reader schema id in its metadata
- :mod:`.json_types`   JSON Schema -> Spark type, pure
- :mod:`.protobuf_types` Protobuf descriptor -> Spark type and message -> Arrow value, pure
- :mod:`.wire`         executors: the wire-format header, bad records, the per-batch loop
- :mod:`.avro_decode`  executors: Avro payloads (fastavro, schema resolution)
- :mod:`.avro_native`  executors: a flat Avro record straight into Arrow buffers (_avro_arrow.c)
- :mod:`.json_decode`  executors: JSON payloads (validated with jsonschema)
- :mod:`.protobuf_decode` executors: Protobuf payloads (message indexes, dynamic messages)
- :mod:`.references`   schema references (types from other subjects), per format
- :mod:`.pin`          the reader schema ids kept in the stream offsets (restart = same schema)

The Spark-facing modules call :func:`resolve_schema` (``DataSource.schema()``, at ``load()``),
:func:`plan_schemas` (the driver: the reader schemas that travel with the plan) and
:func:`batch_transform` (each task, on the executors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from spark_groupsource.config.options import CommonOptions
from spark_groupsource.decode.options import DecodeOptions, SideOptions, parse_decode_options

if TYPE_CHECKING:  # stream.py imports this package on the driver's runner: pyarrow stays off it
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from spark_groupsource.decode.registry import ReaderSchema, Registry

__all__ = ["decode_options", "resolve_schema", "plan_schemas", "batch_transform", "DecodeOptions"]


def decode_options(opts: CommonOptions) -> DecodeOptions:
    return parse_decode_options(opts)


def resolve_schema(opts: CommonOptions) -> StructType | None:
    """The row schema with typed columns (asks the registry for the reader schemas), or None
    when every column stays binary."""
    return resolve(opts)[0]


def resolve(opts: CommonOptions) -> tuple[StructType | None, dict[str, ReaderSchema]]:
    """:func:`resolve_schema`, and the registered reader schemas it derived the columns from
    (column -> schema with its references): what the readers take to the executors."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return None, {}
    from spark_groupsource.decode.columns import typed_schema
    from spark_groupsource.decode.registry import registry_for

    registry = registry_for(dec) if dec.registry_url else None
    readers = {}
    for side in (dec.key, dec.value):
        if side.typed:
            if side.inline_schema is None:
                readers[side.column] = reader = registry.reader_schema(side)  # type: ignore[union-attr]
                if side.also:
                    _same_columns(registry, side, reader)  # type: ignore[arg-type]
            else:
                from spark_groupsource.decode.registry import KINDS, ReaderSchema

                readers[side.column] = ReaderSchema(side.inline_schema, kind=KINDS[side.format])
    registered = {c: r for c, r in readers.items() if r.schema_id is not None}
    return typed_schema(opts.include_headers, dec, readers), registered


def plan_schemas(opts: CommonOptions, schema: StructType | None, pins: Mapping[str, int] | None = None,
                 loaded: Mapping[str, ReaderSchema] | None = None) -> dict[str, ReaderSchema]:
    """The reader schemas with their references that a query's tasks decode with (column ->
    schema), on the driver, so that they travel to the executors with the plan: a worker then
    asks the registry only for writer schemas it has not seen. ``loaded``: those resolved at
    ``load()`` (they came with the pickled data source); a pinned id they do not cover (a
    checkpoint's, at a restart) is asked of the registry, once per process and id. ``pins`` as
    in :func:`batch_transform`; columns without a registered reader are left out."""
    dec = parse_decode_options(opts)
    if not dec.typed or schema is None:
        return {}
    from spark_groupsource.decode.columns import pinned
    from spark_groupsource.decode.registry import KINDS, registry_for

    out = {}
    for side in (dec.key, dec.value):
        if not side.typed or side.inline_schema is not None:
            continue
        pin = (pins or {}).get(side.column)
        if pin is None:
            found = pinned(schema, side.column)
            pin = found.schema_id if found is not None else None
        carried = (loaded or {}).get(side.column)
        if carried is not None and carried.schema_id == pin:
            out[side.column] = carried
        elif pin is not None:
            out[side.column] = registry_for(dec).resolved_by_id(pin, KINDS[side.format], side.message)
    return out


def batch_transform(opts: CommonOptions, schema: StructType | None, pins: Mapping[str, int] | None = None,
                    readers: Mapping[str, ReaderSchema] | None = None
                    ) -> Callable[[pa.RecordBatch], pa.RecordBatch] | None:
    """What each fetched batch goes through on the executor (None: binary columns).

    ``schema`` is the Spark schema the DataFrame was defined with (its typed columns carry the
    reader schema ids); ``pins`` overrides them per column (a stream batch's offsets);
    ``readers`` are the reader schemas that came with the plan (:func:`plan_schemas`): one whose
    id is the column's is used as it is, without the registry."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return None
    from spark_groupsource.decode.columns import pinned
    from spark_groupsource.decode.registry import KINDS, ReaderSchema, registry_for

    if schema is None:
        schema = resolve_schema(opts)
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC")
    registry = registry_for(dec) if dec.registry_url else None
    decoders = {}
    for side in (dec.key, dec.value):
        if not side.typed:
            continue
        if side.inline_schema is not None:
            reader = ReaderSchema(side.inline_schema, kind=KINDS[side.format])
        else:
            pin = (pins or {}).get(side.column)
            if pin is None:
                found = pinned(schema, side.column)
                pin = found.schema_id if found is not None else None
            carried = (readers or {}).get(side.column)
            if carried is not None and (pin is None or carried.schema_id == pin):
                reader = carried
            elif pin is None:  # a schema without metadata (e.g. given with .schema()): ask again
                reader = registry.reader_schema(side)  # type: ignore[union-attr]
            else:
                reader = registry.resolved_by_id(pin, KINDS[side.format], side.message)  # type: ignore[union-attr]
        extra: dict[str, Any] = {"references": reader.references} if reader.references else {}
        if side.format == "protobuf":
            extra["message"] = side.message
        decoders[side.column] = _decoder_class(side.format)(
            side.column, registry, reader.schema_str, reader.schema_id, arrow.field(side.column).type,
            dec.permissive, **extra)

    def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
        if batch.num_rows == 0:
            return pa.RecordBatch.from_pylist([], schema=arrow)
        topic = batch.column(2)[0].as_py()
        partition = batch.column(3)[0].as_py()
        offsets = batch.column(4)
        columns = list(batch.columns)
        added: list[pa.Array] = []
        for name, decoder in decoders.items():
            i = 0 if name == "key" else 1
            typed, raw, why = decoder.decode(columns[i], topic, partition, offsets)
            columns[i] = typed
            if dec.permissive:
                n = batch.num_rows
                added.append(raw if raw is not None else pa.nulls(n, pa.binary()))
                added.append(why if why is not None else pa.nulls(n, pa.string()))
        return pa.RecordBatch.from_arrays(columns + added, schema=arrow)

    return transform


def _same_columns(registry: Registry, side: SideOptions, reader: ReaderSchema) -> None:
    """Several topics' subjects (TopicNameStrategy / TopicRecordNameStrategy): one column type
    for every row, so each subject's reader schema must give the first one's columns; the
    first one's is the reader schema, every topic's records are resolved to it."""
    from dataclasses import replace

    from spark_groupsource.decode.columns import spark_type_of
    from spark_groupsource.decode.registry import RegistryError

    want = spark_type_of(reader)
    for subject in side.also:
        other = registry.reader_schema(replace(side, subject=subject, also=()))
        if spark_type_of(other) != want:
            raise RegistryError(
                f"the {side.column} reader schemas of the subscribed topics differ: {reader.describe()} and "
                f"{other.describe()} give other columns, and one {side.column} column type serves every row. "
                f"Read the topics in separate queries, or give one reader schema with {side.column}Subject")


def _decoder_class(fmt: str) -> type:
    if fmt == "protobuf":
        from spark_groupsource.decode.protobuf_decode import ProtobufColumnDecoder

        return ProtobufColumnDecoder
    if fmt == "json":
        from spark_groupsource.decode.json_decode import JsonColumnDecoder

        return JsonColumnDecoder
    from spark_groupsource.decode.avro_decode import AvroColumnDecoder

    return AvroColumnDecoder


def schema_for(options: Mapping[str, str]) -> tuple[StructType | None, dict[str, ReaderSchema]]:
    """:func:`resolve` from Spark's raw options (``DataSource.schema()``: stream or batch)."""
    from spark_groupsource.config.parsing import parse_batch_options, parse_stream_options
    from spark_groupsource.errors import OptionError

    try:
        opts: CommonOptions = parse_stream_options(options)
    except OptionError:
        opts = parse_batch_options(options)
    return resolve(opts)


def effective_pins(opts: CommonOptions, schema: StructType, checkpoint: Mapping[str, int]) -> dict[str, int]:
    """The reader schema ids a stream decodes with: the loaded ones, or the checkpoint's
    (:func:`spark_groupsource.decode.pin.choose`). Driver side, once per query run."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return {}
    from spark_groupsource.decode.columns import pinned, spark_type_of
    from spark_groupsource.decode.pin import choose
    from spark_groupsource.decode.registry import KINDS, registry_for

    out: dict[str, int] = {}
    for side in (dec.key, dec.value):
        if not side.typed or side.inline_schema is not None:
            continue
        loaded = pinned(schema, side.column)
        if loaded is None:
            continue
        old = checkpoint.get(side.column)
        same, described = False, f"schema id {old}"
        if old is not None and old != loaded.schema_id:
            kind = KINDS[side.format]
            same = spark_type_of(registry_for(dec).resolved_by_id(old, kind, side.message)) == schema[side.column].dataType
            described = registry_for(dec).versions_of(old, loaded.subject)
        out[side.column] = choose(
            side.column, loaded.schema_id, old, explicit_version=side.version is not None, same_columns=same,
            describe_loaded=f"schema id {loaded.schema_id} (subject {loaded.subject!r} version {loaded.version})",
            describe_checkpoint=described)
    return out
