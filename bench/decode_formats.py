"""The typed JSON Schema and Protobuf decodes alone, by stage (issue 55, item 2): no Spark, no
broker, no registry, one process. A diagnostic, not in ``make bench``.

Both decoders build their Arrow column from one Python value per record (``ColumnDecoder.decode``:
``json.loads`` then ``jsonschema`` validation then the reader schema's shape; protobuf's
``ParseFromString`` then a converter to a dict), where the Avro one writes Arrow straight from the
bytes (spark_groupsource/decode/_avro_arrow.c). This bench says what each stage costs, so that
the choice is argued with figures:

- ``groupkafka``: the executor's decoder (``JsonColumnDecoder`` / ``ProtobufColumnDecoder``
  ``.decode``), the registry's one answer per id from memory;
- JSON: ``loads`` (``json.loads`` of each payload, the floor of any route through Python
  values), ``loads+validate`` (and the reader schema's validator, what the deserializer does),
  ``pyarrow.json`` (payloads joined by newlines into ``pyarrow.json.read_json`` with the
  reader's Arrow schema: Arrow with no Python value per field, but no JSON Schema validation);
- Protobuf: ``parse`` (``FromString`` per record, the floor), ``parse+todict``
  (``MessageToDict``, what a UDF writes);
- ``udf``: what users write without us: the pandas UDF's body (parse each record, as above
  but without validation) and Spark's conversion of its frame back into an Arrow struct.

A bench-own 11-field ``Order`` in both formats (as bench/registry_decode.py's Avro one), padded
to ``--sizes`` bytes; ``--rounds`` rounds with the variants interleaved, median wall rate and
CPU per record (``time.process_time``), and CPU against ``groupkafka`` in the same round.

    .venv/bin/python bench/decode_formats.py [--formats json,protobuf] [--sizes 100,1000] [--n 20000]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import statistics
import struct
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.json as pajson  # noqa: E402

SCHEMA_ID = 9
TOPIC, PARTITION = "micro", 0
STATUS = ["NEW", "PAID", "SHIPPED", "DONE"]

ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "customer": {"type": "string"}, "item": {"type": "string"},
        "quantity": {"type": "integer"}, "price": {"type": "number"}, "discount": {"type": "number"},
        "paid": {"type": "boolean"}, "created": {"type": "integer"},
        "status": {"type": "string", "enum": STATUS}, "note": {"type": ["string", "null"]},
        "token": {"type": "string"},
    },
    "required": ["id", "customer", "item", "quantity", "price", "discount", "paid", "created", "status", "token"],
}
#: (name, FieldDescriptorProto type) of the Protobuf Order, numbered from 1
PROTO_FIELDS = [("id", 3), ("customer", 9), ("item", 9), ("quantity", 5), ("price", 1), ("discount", 2),
                ("paid", 8), ("created", 3), ("status", 9), ("note", 9), ("token", 12)]


def _order(i: int, size: int, rng: random.Random, binary_token: bool) -> dict:
    """One record, its strings padded so that the payload is about ``size`` bytes."""
    pad = max(0, size - (60 if binary_token else 200))
    rec = {
        "id": i, "customer": f"customer-{rng.randrange(10**6)}" + "c" * (pad // 2),
        "item": f"item-{rng.randrange(1000)}" + "i" * (pad - pad // 2), "quantity": rng.randrange(1, 100),
        "price": round(rng.uniform(1, 500), 2), "discount": rng.choice([0.0, 0.05, 0.1]),
        "paid": rng.random() < 0.5, "created": 1_700_000_000_000 + rng.randrange(10**9),
        "status": rng.choice(STATUS), "note": None if rng.random() < 0.5 else f"note {rng.randrange(100)}",
        "token": rng.randbytes(8),
    }
    if not binary_token:
        rec["token"] = rec["token"].hex()
    return rec


class _Schemas:
    """The registry's one answer for SCHEMA_ID, from memory."""

    url = "memory://decode-formats"

    def __init__(self, text: str):
        self.text = text

    def resolved_by_id(self, schema_id: int, kind: str = "AVRO", message: str | None = None) -> object:
        from spark_groupsource.decode.registry import ResolvedSchema

        return ResolvedSchema(self.schema_by_id(schema_id, kind), schema_id, kind=kind, message=message)

    def schema_by_id(self, schema_id: int, kind: str = "AVRO") -> str:
        return self.text


def _arrow_type(spark_type) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark_type, timezone="UTC")


def _column(payloads: list[bytes], header: bytes, n: int) -> pa.Array:
    return pa.array([header + payloads[i % len(payloads)] for i in range(n)], pa.binary())


def _decoded_by(dec) -> Callable[[pa.Array], pa.Array]:
    """The executor's ``ColumnDecoder.decode`` of a column whose records are all good."""

    def run(c: pa.Array) -> pa.Array:
        typed, raw, _ = dec.decode(c, TOPIC, PARTITION, pa.array(range(len(c)), pa.int64()))
        assert raw is None and typed.null_count == 0
        return typed

    return run


def _struct_from_frame(df: pd.DataFrame, typ: pa.DataType) -> pa.Array:
    """Spark's serializer turning a UDF's frame into an Arrow struct: one ``from_pandas`` a field."""
    fields = list(typ)
    arrays = []
    for f in fields:
        a = pa.Array.from_pandas(df[f.name], type=f.type)
        arrays.append(a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a)
    return pa.StructArray.from_arrays(arrays, fields=fields)


def json_case(n: int, size: int) -> tuple[pa.Array, dict[str, Callable[[pa.Array], object]]]:
    from spark_groupsource.decode.json_decode import JsonColumnDecoder
    from spark_groupsource.decode.json_types import to_spark_type, validator_of

    text = json.dumps(ORDER_JSON)
    typ = _arrow_type(to_spark_type(ORDER_JSON).data_type)
    rng = random.Random(size)
    col = _column([json.dumps(_order(i, size, rng, False)).encode() for i in range(min(n, 2000))],
                  b"\x00" + struct.pack(">I", SCHEMA_ID), n)
    dec = JsonColumnDecoder("value", _Schemas(text), text, SCHEMA_ID, typ, permissive=False)  # type: ignore[arg-type]
    validator = validator_of(ORDER_JSON)
    schema = pa.schema(list(typ))

    groupkafka = _decoded_by(dec)

    def loads(c: pa.Array) -> list:
        return [json.loads(v[5:]) for v in c.to_pylist()]

    def loads_validate(c: pa.Array) -> list:
        docs = loads(c)
        for d in docs:
            if not validator.is_valid(d):
                raise AssertionError(d)
        return docs

    def arrow_json(c: pa.Array) -> pa.Array:
        lines = b"\n".join(v[5:] for v in c.to_pylist())
        table = pajson.read_json(io.BytesIO(lines), parse_options=pajson.ParseOptions(explicit_schema=schema))
        return table.to_struct_array() if hasattr(table, "to_struct_array") else table

    def udf(c: pa.Array) -> pa.Array:
        values = c.to_pandas()
        df = pd.DataFrame([json.loads(v[5:]) for v in values], columns=[f.name for f in typ])
        return _struct_from_frame(df, typ)

    return col, {"groupkafka": groupkafka, "loads": loads, "loads+validate": loads_validate,
                 "pyarrow.json": arrow_json, "udf": udf}


def _proto_file():
    from google.protobuf import descriptor_pb2 as d

    f = d.FileDescriptorProto(name="order.proto", package="bench", syntax="proto3")
    m = f.message_type.add(name="Order")
    for number, (name, kind) in enumerate(PROTO_FIELDS, 1):
        fd = m.field.add(name=name, number=number, type=kind, label=1)
        if name == "note":  # proto3 optional: a null when unset
            fd.proto3_optional = True
            fd.oneof_index = 0
    if any(x.proto3_optional for x in m.field):
        m.oneof_decl.add(name="_note")
    return f


def protobuf_case(n: int, size: int) -> tuple[pa.Array, dict[str, Callable[[pa.Array], object]]]:
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message_factory import GetMessageClass

    from spark_groupsource.decode.protobuf_decode import ProtobufColumnDecoder
    from spark_groupsource.decode.protobuf_types import message_of, to_spark_type

    text = base64.standard_b64encode(_proto_file().SerializeToString()).decode()
    desc = message_of(text, None)
    typ = _arrow_type(to_spark_type(desc).data_type)
    cls = GetMessageClass(desc)
    rng = random.Random(size)
    payloads = []
    for i in range(min(n, 2000)):
        rec = _order(i, size, rng, True)
        payloads.append(cls(**{k: v for k, v in rec.items() if v is not None}).SerializeToString())
    col = _column(payloads, b"\x00" + struct.pack(">I", SCHEMA_ID) + b"\x00", n)  # message index [0]
    dec = ProtobufColumnDecoder("value", _Schemas(text), text, SCHEMA_ID, typ, permissive=False)  # type: ignore[arg-type]

    groupkafka = _decoded_by(dec)

    def parse(c: pa.Array) -> list:
        return [cls.FromString(v[6:]) for v in c.to_pylist()]

    def parse_todict(c: pa.Array) -> list:
        return [MessageToDict(m, preserving_proto_field_name=True) for m in parse(c)]

    def udf(c: pa.Array) -> pa.Array:
        values = c.to_pandas()
        rows = []
        for v in values:
            m = cls.FromString(v[6:])
            rows.append({f.name: (getattr(m, f.name) if f.name != "note" or m.HasField("note") else None)
                         for f in desc.fields})
        return _struct_from_frame(pd.DataFrame(rows, columns=[f.name for f in typ]), typ)

    return col, {"groupkafka": groupkafka, "parse": parse, "parse+todict": parse_todict, "udf": udf}


CASES = {"json": json_case, "protobuf": protobuf_case}


def _measure(fn: Callable, arg) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn(arg)
    return time.perf_counter() - w0, time.process_time() - c0


def bench(fmt: str, size: int, n: int, rounds: int) -> tuple[float, list[tuple[str, float, float, float]]]:
    col, every = CASES[fmt](n, size)
    names = list(every)
    every["groupkafka"](col[:100])  # warm: imports, the writer schema's one look-up
    samples: dict[str, list[tuple[float, float]]] = {v: [] for v in names}
    for rnd in range(rounds):
        for v in (names if rnd % 2 == 0 else names[::-1]):
            samples[v].append(_measure(every[v], col))
    base = samples["groupkafka"]
    out = []
    for v in names:
        wall = statistics.median(s[0] for s in samples[v])
        cpu = statistics.median(s[1] for s in samples[v])
        share = statistics.median(s[1] / b[1] for s, b in zip(samples[v], base, strict=True))
        out.append((v, n / wall, cpu / n * 1e6, share))
    mean = sum(len(v) for v in col[:2000].to_pylist()) / min(n, 2000)
    return mean, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", default="json,protobuf")
    ap.add_argument("--sizes", default="100,1000", help="approximate payload bytes, comma-separated")
    ap.add_argument("--n", type=int, default=20_000, help="records per round")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"decode by stage, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, N = {args.n:,}, load {load}")
    for fmt in [f.strip() for f in args.formats.split(",") if f.strip()]:
        for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
            mean, rows = bench(fmt, size, args.n, args.rounds)
            print(f"\n{fmt}, ~{size} B ({mean:.0f} B a record with the header)")
            print(f"  {'variant':<16}{'rec/s':>12}{'CPU us/rec':>12}{'CPU x groupkafka':>18}  (median of {args.rounds})")
            for v, rate, cpu, share in rows:
                print(f"  {v:<16}{rate:>12,.0f}{cpu:>12.2f}{share:>17.2f}x")
    print(f"\nload at the end {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
