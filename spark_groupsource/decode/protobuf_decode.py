"""Executor side: Confluent wire-format Protobuf records -> a typed Arrow column.

As confluent-kafka's ``ProtobufDeserializer``: the header is the magic byte, the writer schema
id and the message-index array (zigzag varints naming the message within the writer's file;
read with confluent-kafka's own ``SchemaId``), then the message. The writer schema is fetched
by id (serialized descriptor, cached per worker) and the message indexes must name a message
in it; the payload is parsed as the *reader* message (the deserializer parses into the class
it is given): Protobuf's own evolution rules apply (fields by number; fields the reader lacks
are skipped, fields the writer lacks are unset). Stricter than the deserializer in one way: a
record whose writer message has another full name than the reader's is a bad record, not a
silent misreading of one message as another.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa

from spark_groupsource.decode.protobuf_types import (
    ProtobufTypeError,
    converter,
    message_at,
    message_of,
    pool_of,
)
from spark_groupsource.decode.registry import Referenced, Registry, ResolvedSchema
from spark_groupsource.decode.wire import BadRecord, ColumnDecoder

__all__ = ["ProtobufColumnDecoder"]


def _writer(schema: ResolvedSchema) -> Any:
    try:
        return pool_of(schema.schema_str, schema.references)
    except ProtobufTypeError as exc:
        return exc  # cached as what it is: every record naming this id is bad for the same reason


class ProtobufColumnDecoder(ColumnDecoder):
    def __init__(self, column: str, registry: Registry | None, reader_text: str, reader_id: int | None,
                 arrow_type: pa.DataType, permissive: bool, message: str | None = None,
                 references: tuple[Referenced, ...] = ()):
        from google.protobuf.message_factory import GetMessageClass

        super().__init__(column, registry, arrow_type, permissive)
        self.reader = message_of(reader_text, message, references)
        self.reader_id = reader_id
        self.seed(reader_id, "PROTOBUF", self.reader.file)
        self._cls = GetMessageClass(self.reader)
        self._convert = converter(self.reader)
        self._names: dict[tuple[int, tuple[int, ...]], str] = {}

    def _writer_message(self, schema_id: int, indexes: list[int]) -> str:
        key = (schema_id, tuple(indexes))
        name = self._names.get(key)
        if name is None:
            fd = self.writer(schema_id, _writer, "PROTOBUF")
            if isinstance(fd, ProtobufTypeError):
                raise BadRecord(f"writer schema id {schema_id}: {fd}")
            try:
                name = message_at(fd, indexes).full_name
            except ProtobufTypeError as exc:
                raise BadRecord(f"writer schema id {schema_id}: {exc}") from None
            self._names[key] = name
        return name

    def payload(self, schema_id: int, data: bytes) -> Any:
        from confluent_kafka.schema_registry.common.serde import SchemaId
        from google.protobuf.message import DecodeError as ProtoDecodeError

        sid = SchemaId("PROTOBUF")
        buf = io.BytesIO(data)
        try:
            sid.from_bytes(buf)
        except Exception as exc:  # noqa: BLE001 - EOFError, SerializationError for a bad index array
            raise BadRecord(f"no valid message-index array after the schema id {schema_id}: {exc}") from None
        written = self._writer_message(schema_id, sid.message_indexes or [0])
        if written != self.reader.full_name:
            raise BadRecord(f"written as message {written} (schema id {schema_id}), but the reader message is "
                            f"{self.reader.full_name}")
        msg = self._cls()
        try:
            msg.ParseFromString(buf.read())
        except ProtoDecodeError as exc:
            raise BadRecord(f"undecodable as {written} with writer schema id {schema_id}: {exc}") from None
        return self._convert(msg)
