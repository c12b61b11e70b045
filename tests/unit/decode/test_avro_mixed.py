"""A batch with records of several writer schema ids (a producer's schema roll-out) is decoded
group by group (AvroColumnDecoder._by_writer) and gives the rows and errors of the
record-by-record loop (ColumnDecoder.decode), in the batch's order, nulls kept.

Real Avro bytes written by fastavro; the writer schemas come from an in-memory table of ids
(what the registry answers once per id): the registry is not what is tested here."""

from __future__ import annotations

import io
import json
import random
import struct

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from spark_groupsource.decode import avro_native
from spark_groupsource.decode.avro_decode import AvroColumnDecoder
from spark_groupsource.decode.avro_types import to_spark_type
from spark_groupsource.decode.wire import ColumnDecoder, DecodeError

READER = {"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "long"},
    {"name": "s", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "ch", "type": "string", "default": "web"},
]}
READER_ID = 2
#: an older writer: without "ch" (the C decoder resolves it: a simple default)
OLD = {**READER, "fields": READER["fields"][:3]}
OLD_ID = 1
#: a writer the C decoder declines (int promoted to the reader's long): fastavro's group
PROMOTED = {**READER, "fields": [{"name": "a", "type": "int"}] + READER["fields"][1:]}
PROMOTED_ID = 3
SCHEMAS = {READER_ID: READER, OLD_ID: OLD, PROMOTED_ID: PROMOTED}
TYPE = to_arrow_type(to_spark_type(READER).data_type, timezone="UTC")
TOPIC, PARTITION = "t", 4

class _Schemas:
    """The writer schemas by id, from memory (the worker's cache keys them by this url)."""

    url = "memory://test-avro-mixed"

    def resolved_by_id(self, schema_id: int, kind: str = "AVRO", message: str | None = None) -> object:
        from spark_groupsource.decode.registry import ResolvedSchema

        return ResolvedSchema(self.schema_by_id(schema_id, kind), schema_id, kind=kind, message=message)

    def schema_by_id(self, schema_id: int, kind: str = "AVRO") -> str:
        from spark_groupsource.decode.registry import SchemaNotFoundError

        if schema_id not in SCHEMAS:
            raise SchemaNotFoundError(f"schema id {schema_id} not found")
        return json.dumps(SCHEMAS[schema_id])


def decoder(permissive: bool = False) -> AvroColumnDecoder:
    return AvroColumnDecoder("value", _Schemas(), json.dumps(READER), READER_ID, TYPE,  # type: ignore[arg-type]
                             permissive=permissive)


def wire(schema_id: int, rec: dict) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[schema_id]), rec)
    return out.getvalue()


def rec(i: int, schema_id: int) -> dict:
    r = {"a": i if schema_id == PROMOTED_ID else i * 2**33, "s": f"s{i}", "note": None if i % 3 else f"n{i}"}
    return r if schema_id != READER_ID else {**r, "ch": "app"}


def batch(ids: list[int | None]) -> list[bytes | None]:
    return [None if sid is None else wire(sid, rec(i, sid)) for i, sid in enumerate(ids)]


def record_by_record(values: list, permissive: bool = False):
    data = pa.array(values, pa.binary())
    return ColumnDecoder.decode(decoder(permissive), data, TOPIC, PARTITION, offsets(len(values)))


def offsets(n: int) -> pa.Array:
    return pa.array(range(100, 100 + n), pa.int64())


@pytest.mark.parametrize("ids", [
    [READER_ID, OLD_ID] * 5,  # alternating
    [OLD_ID, None, READER_ID, READER_ID, None, OLD_ID, OLD_ID, READER_ID],  # runs, nulls among them
    [PROMOTED_ID, READER_ID, OLD_ID, None, PROMOTED_ID, OLD_ID, READER_ID],  # a group the C decoder declines
    [None, OLD_ID, None],  # one writer id with nulls: the single-group path
])
def test_mixed_batch_is_decoded_by_group_as_record_by_record(ids):
    values = batch(ids)
    dec = decoder()
    grouped = dec._by_writer(pa.array(values, pa.binary()))
    assert grouped is not None, "the batch fell back to the record-by-record loop"
    want, raw, why = record_by_record(values)
    assert raw is None and why is None
    assert grouped.equals(want), (grouped.to_pylist(), want.to_pylist())
    assert [v is None for v in grouped.to_pylist()] == [sid is None for sid in ids]
    if avro_native.unavailable_reason() is None and OLD_ID in ids:
        assert dec._resolved.get(OLD_ID) is not None  # the older writer's group went to the C decoder
    if PROMOTED_ID in ids:
        assert dec._resolved.get(PROMOTED_ID) is None  # declined: fastavro's comprehension


def test_random_interleavings_same_as_record_by_record():
    rng = random.Random(55)
    for _ in range(30):
        ids = [rng.choice([READER_ID, OLD_ID, PROMOTED_ID, None]) for _ in range(rng.randrange(2, 60))]
        if all(sid is None for sid in ids):
            continue
        values = batch(ids)
        data = pa.array(values, pa.binary())
        for column in (data, pa.concat_arrays([pa.array([b"x"], pa.binary()), data]).slice(1)):  # an offset too
            got = decoder().decode(column, TOPIC, PARTITION, offsets(len(ids)))
            assert got[1] is None and got[0].equals(record_by_record(values)[0])


BAD = {
    "no magic byte": b"plain text",
    "too short for a header": b"\x00\x00",
    "unknown schema id": b"\x00" + struct.pack(">I", 987654) + wire(OLD_ID, rec(0, OLD_ID))[5:],
    "truncated": wire(OLD_ID, rec(1, OLD_ID))[:7],
}


@pytest.mark.parametrize("what", sorted(BAD))
def test_a_bad_record_among_groups_is_named_as_record_by_record(what):
    values = batch([READER_ID, OLD_ID, None, READER_ID, OLD_ID])
    values.insert(3, BAD[what])  # at offset 103
    data = pa.array(values, pa.binary())
    assert decoder()._by_writer(data) is None  # a group failed: the loop decodes the batch
    with pytest.raises(DecodeError) as failed:
        decoder().decode(data, TOPIC, PARTITION, offsets(len(values)))
    assert (failed.value.topic, failed.value.partition, failed.value.offset) == (TOPIC, PARTITION, 103)
    with pytest.raises(DecodeError) as reference:
        record_by_record(values)
    assert str(failed.value) == str(reference.value)
    got = decoder(permissive=True).decode(data, TOPIC, PARTITION, offsets(len(values)))
    want = record_by_record(values, permissive=True)
    assert all(g.equals(w) for g, w in zip(got, want, strict=True))
    assert got[2].to_pylist()[3] is not None and got[2].null_count == len(values) - 1
