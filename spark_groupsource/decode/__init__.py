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
- :mod:`.pin`          the reader schema ids kept in the stream offsets (restart = same schema)

The Spark-facing modules call :func:`resolve_schema` (``DataSource.schema()``, at ``load()``)
and :func:`batch_transform` (each task, on the executors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from spark_groupsource.config.options import CommonOptions
from spark_groupsource.decode.options import DecodeOptions, SideOptions, parse_decode_options

if TYPE_CHECKING:  # stream.py imports this package on the driver's runner: pyarrow stays off it
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from spark_groupsource.decode.registry import ReaderSchema, Registry

__all__ = ["decode_options", "resolve_schema", "batch_transform", "DecodeOptions"]


def decode_options(opts: CommonOptions) -> DecodeOptions:
    return parse_decode_options(opts)


def resolve_schema(opts: CommonOptions) -> StructType | None:
    """The row schema with typed columns (asks the registry for the reader schemas), or None
    when every column stays binary."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return None
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
    return typed_schema(opts.include_headers, dec, readers)


def batch_transform(opts: CommonOptions, schema: StructType | None,
                    pins: Mapping[str, int] | None = None) -> Callable[[pa.RecordBatch], pa.RecordBatch] | None:
    """What each fetched batch goes through on the executor (None: binary columns).

    ``schema`` is the Spark schema the DataFrame was defined with (its typed columns carry the
    reader schema ids); ``pins`` overrides them per column (a stream batch's offsets)."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return None
    from spark_groupsource.decode.columns import pinned
    from spark_groupsource.decode.registry import KINDS, registry_for

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
            text, reader_id = side.inline_schema, None
        else:
            pin = (pins or {}).get(side.column)
            if pin is None:
                found = pinned(schema, side.column)
                pin = found.schema_id if found is not None else None
            if pin is None:  # a schema without metadata (e.g. given with .schema()): ask again
                reader = registry.reader_schema(side)  # type: ignore[union-attr]
                text, reader_id = reader.schema_str, reader.schema_id
            else:
                text, reader_id = registry.schema_by_id(pin, KINDS[side.format]), pin  # type: ignore[union-attr]
        extra = {"message": side.message} if side.format == "protobuf" else {}
        decoders[side.column] = _decoder_class(side.format)(
            side.column, registry, text, reader_id, arrow.field(side.column).type, dec.permissive, **extra)

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


def schema_for(options: Mapping[str, str]) -> StructType | None:
    """:func:`resolve_schema` from Spark's raw options (``DataSource.schema()``: stream or batch)."""
    from spark_groupsource.config.parsing import parse_batch_options, parse_stream_options
    from spark_groupsource.errors import OptionError

    try:
        opts: CommonOptions = parse_stream_options(options)
    except OptionError:
        opts = parse_batch_options(options)
    return resolve_schema(opts)


def effective_pins(opts: CommonOptions, schema: StructType, checkpoint: Mapping[str, int]) -> dict[str, int]:
    """The reader schema ids a stream decodes with: the loaded ones, or the checkpoint's
    (:func:`spark_groupsource.decode.pin.choose`). Driver side, once per query run."""
    dec = parse_decode_options(opts)
    if not dec.typed:
        return {}
    from spark_groupsource.decode.columns import pinned, spark_type_of
    from spark_groupsource.decode.pin import choose
    from spark_groupsource.decode.registry import KINDS, ReaderSchema, registry_for

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
            text = registry_for(dec).schema_by_id(old, kind)
            same = spark_type_of(ReaderSchema(text, old, kind=kind, message=side.message)) == schema[side.column].dataType
            described = registry_for(dec).versions_of(old, loaded.subject)
        out[side.column] = choose(
            side.column, loaded.schema_id, old, explicit_version=side.version is not None, same_columns=same,
            describe_loaded=f"schema id {loaded.schema_id} (subject {loaded.subject!r} version {loaded.version})",
            describe_checkpoint=described)
    return out
