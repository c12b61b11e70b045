"""The typed Avro decode alone (issue 55, item 7): no Spark, no broker, no registry, one process.

Feeds the executor's decode path (``AvroColumnDecoder.decode``, what ``batch_transform`` runs
on every fetched batch) an Arrow binary column of N Confluent wire-format records (magic byte,
schema id, the Avro datum) of bench/registry_decode.py's 10-field ``Order``, and next to it what
the pandas UDF of bench/registry_decode.py costs in its Python worker for the same records:
Spark's Arrow column to pandas, the UDF body (header stripped, fastavro ``schemaless_reader``
per record, resolving an older writer schema to the latest, ``pd.DataFrame``), the result back to an Arrow struct as Spark's serializer builds
it (``pa.Array.from_pandas`` per field, ``StructArray.from_arrays``).

The writer schema is the reader schema (the registry's latest, as the bench's records are):
no resolution; ``--evolved`` decodes records written with an older schema (without the
nullable ``note``), so every record goes through schema resolution; ``--mixed`` alternates
records of the two writer ids (the latest, the older), as in a batch during a producer's
schema roll-out. The writer
schema's one registry look-up is answered from memory (:class:`_Schemas`): the registry is not what is measured.

Per variant and payload size: ``--rounds`` rounds, each decoding the N records once, the
variants interleaved in every round (the order flipping), median of the rounds:
records/s (wall) and CPU us per record (``time.process_time``), and the ratio against the
UDF in the same round (median of the per-round ratios): on a loaded machine the ratio is the
figure. ``--callgrind`` runs the variants in one process under ``valgrind --tool=callgrind``,
each at N and 2N records, and prints instructions per record ((I(2N) - I(N)) / N), which do
not depend on the load.

    .venv/bin/python bench/decode_micro.py [--sizes 100,1000] [--n 20000] [--rounds 7]
                                           [--variants groupkafka,udf,...] [--evolved | --mixed]
    .venv/bin/python bench/decode_micro.py --callgrind [--sizes 1000] [--n 2000]
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import fastavro  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
from registry_decode import ORDER, order, udf_frame  # noqa: E402

SCHEMA_ID = 7
OLD_ID = 6  # --evolved: the records' writer schema, ORDER before its nullable "note" was added
OLD = {**ORDER, "fields": [f for f in ORDER["fields"] if f["name"] != "note"]}
TOPIC, PARTITION = "micro", 0
WRITERS_SAID = {False: "writer = reader", True: "writer = an older schema (resolution)",
                "mixed": "two writer ids alternating (the reader's and an older one)"}


class _Schemas:
    """The registry's one answer per schema id, from memory (what ``WRITERS`` asks once per id)."""

    url = "memory://decode-micro"

    def resolved_by_id(self, schema_id: int, kind: str = "AVRO", message: str | None = None) -> object:
        from spark_groupsource.decode.registry import ResolvedSchema

        return ResolvedSchema(self.schema_by_id(schema_id, kind), schema_id, kind=kind, message=message)

    def schema_by_id(self, schema_id: int, kind: str = "AVRO") -> str:
        return json.dumps({SCHEMA_ID: ORDER, OLD_ID: OLD}[schema_id])


def records(n: int, size: int, evolved: bool | str) -> pa.Array:
    """``n`` wire-format records (a pool of 2,000 distinct ones, as registry_decode.py produces);
    ``evolved``: True, all of the older writer schema; "mixed", the two writer ids alternating."""
    writers = {True: [(OLD, OLD_ID)], False: [(ORDER, SCHEMA_ID)],
               "mixed": [(ORDER, SCHEMA_ID), (OLD, OLD_ID)]}[evolved]
    parsed = [(fastavro.parse_schema(w), sid) for w, sid in writers]
    rng = random.Random(size)
    pool = []
    for i in range(min(n, 2000)):
        schema, sid = parsed[i % len(parsed)]
        out = io.BytesIO()
        out.write(b"\x00" + struct.pack(">I", sid))
        rec = order(i, size, rng)
        fastavro.schemaless_writer(out, schema, rec)
        pool.append(out.getvalue())
    return pa.array([pool[i % len(pool)] for i in range(n)], pa.binary())


def arrow_type() -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    from spark_groupsource.decode.avro_types import to_spark_type

    return to_arrow_type(to_spark_type(ORDER).data_type, timezone="UTC")


def groupkafka_variant(typ: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    """The executor's decoder for the value column (registry-pinned reader: id SCHEMA_ID)."""
    from spark_groupsource.decode.avro_decode import AvroColumnDecoder

    dec = AvroColumnDecoder("value", _Schemas(), json.dumps(ORDER), SCHEMA_ID, typ, permissive=False)  # type: ignore[arg-type]

    def run(col: pa.Array) -> pa.Array:
        offsets = pa.array(range(len(col)), pa.int64())
        typed, raw, why = dec.decode(col, TOPIC, PARTITION, offsets)
        assert raw is None and why is None and typed.null_count == 0
        return typed

    return run


def udf_variant(typ: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    """bench/registry_decode.py's pandas UDF and Spark's conversions around it in the worker."""
    fields = list(typ)
    schemas: dict[int, object] = {}
    text = _Schemas()
    reader = fastavro.parse_schema(ORDER)

    def run(col: pa.Array) -> pa.Array:
        values = col.to_pandas()  # Spark's ArrowStreamPandasUDFSerializer: arrow_to_pandas
        # an older writer resolved to the latest (one struct type for every row), as groupkafka does
        df = udf_frame(values, schemas, lambda sid: json.loads(text.schema_by_id(sid)), reader, SCHEMA_ID)
        # ... and the returned frame into Arrow: _create_struct_array -> _create_array per field
        return pa.StructArray.from_arrays([_from_pandas(df[f.name], f.type) for f in fields], fields=fields)

    return run


def _from_pandas(series: pd.Series, typ: pa.DataType) -> pa.Array:
    out = pa.Array.from_pandas(series, type=typ)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out  # an all-null object column


def _writers() -> dict[int, object]:
    return {SCHEMA_ID: fastavro.parse_schema(ORDER), OLD_ID: fastavro.parse_schema(OLD)}


def fastavro_only_variant() -> Callable[[pa.Array], list]:
    """fastavro per record (with each record's writer schema, as the UDF) and nothing else: the
    floor of any route through fastavro's dicts."""
    schemas = _writers()
    reader = fastavro.schemaless_reader

    def run(col: pa.Array) -> list:
        return [reader(io.BytesIO(v[5:]), schemas[struct.unpack(">I", v[1:5])[0]]) for v in col.to_pylist()]

    return run


def _dicts(col: pa.Array) -> list:
    schemas = _writers()
    return [fastavro.schemaless_reader(io.BytesIO(v[5:]), schemas[struct.unpack(">I", v[1:5])[0]])
            for v in col.to_pylist()]


def arrow_variants(typ: pa.DataType) -> dict[str, Callable[[list], pa.Array]]:
    """Arrow from the same decoded dicts, four ways (the input decoded once, outside the clock)."""
    fields = list(typ)
    schema = pa.schema(fields)

    def columns(d: list) -> pa.Array:
        return pa.StructArray.from_arrays([pa.array([r.get(f.name) for r in d], type=f.type) for f in fields],
                                          fields=fields)

    def struct_call(d: list) -> pa.Array:
        return pa.array(d, type=typ)

    def from_pylist(d: list) -> pa.Array:
        return pa.RecordBatch.from_pylist(d, schema=schema).to_struct_array()

    def pandas(d: list) -> pa.Array:
        df = pd.DataFrame(d, columns=[f.name for f in fields])
        return pa.StructArray.from_arrays([_from_pandas(df[f.name], f.type) for f in fields], fields=fields)

    return {"arrow:columns": columns, "arrow:struct": struct_call, "arrow:from_pylist": from_pylist,
            "arrow:pandas": pandas}


def variants(typ: pa.DataType) -> dict[str, Callable]:
    out: dict[str, Callable] = {"groupkafka": groupkafka_variant(typ), "udf": udf_variant(typ),
                                "fastavro-only": fastavro_only_variant()}
    out.update(arrow_variants(typ))
    return out


def _measure(fn: Callable, arg) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn(arg)
    return time.perf_counter() - w0, time.process_time() - c0


def bench(size: int, args, chosen: list[str]) -> list[tuple[str, float, float, float, float]]:
    typ = arrow_type()
    col = records(args.n, size, args.evolved)
    every = variants(typ)
    dicts = _dicts(col) if any(v.startswith("arrow:") for v in chosen) else None
    # the two typed routes agree (same struct, field by field) before anything is timed
    a, b = every["groupkafka"](col), every["udf"](col)
    if not a.equals(b):
        raise AssertionError(f"groupkafka and the UDF disagree at ~{size} B: {a.type} / {b.type}")
    samples: dict[str, list[tuple[float, float]]] = {v: [] for v in chosen}
    for rnd in range(args.rounds):
        for v in (chosen if rnd % 2 == 0 else chosen[::-1]):
            samples[v].append(_measure(every[v], dicts if v.startswith("arrow:") else col))
    base = samples.get("udf")
    out = []
    for v in chosen:
        wall = statistics.median(s[0] for s in samples[v])
        cpu = statistics.median(s[1] for s in samples[v])
        r_rate = statistics.median(b[0] / s[0] for s, b in zip(samples[v], base, strict=True)) if base else float("nan")
        r_cpu = statistics.median(s[1] / b[1] for s, b in zip(samples[v], base, strict=True)) if base else float("nan")
        out.append((v, args.n / wall, cpu / args.n * 1e6, r_rate, r_cpu))
    return out


def callgrind(size: int, chosen: list[str], n: int, evolved: bool | str) -> dict[str, float]:
    """Instructions per record of each variant at ``size``: one process under callgrind runs
    each at n and at 2n records, ``os.getppid()`` between the phases makes callgrind dump a part
    (``--dump-before=getppid``); per record (I(2n) - I(n)) / n."""
    out = f"/tmp/decode-micro-callgrind.{os.getpid()}"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-before=getppid",
           sys.executable, __file__, "--marked", ",".join(chosen), "--sizes", str(size), "--n", str(n)]
    flag = {True: ["--evolved"], "mixed": ["--mixed"]}.get(evolved, [])
    subprocess.run(cmd + flag, check=True, capture_output=True)
    parts = []
    for path in sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
        with open(path) as f:
            parts.append(next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:"))))
        os.unlink(path)
    for path in glob.glob(out + "*"):
        os.unlink(path)
    # part 1: start-up to the first marker; then per variant: the n phase, the 2n phase
    phases = parts[1:1 + 2 * len(chosen)]
    if len(phases) != 2 * len(chosen):
        raise RuntimeError(f"callgrind gave {len(parts)} parts, want at least {1 + 2 * len(chosen)}")
    return {v: (phases[2 * i + 1] - phases[2 * i]) / n for i, v in enumerate(chosen)}


def marked(chosen: list[str], size: int, n: int, evolved: bool | str) -> None:
    """callgrind's child: each variant on n then 2n records, a marker before each phase."""
    typ = arrow_type()
    every = variants(typ)
    inputs = {}
    for count in (n, 2 * n):
        col = records(count, size, evolved)
        inputs[count] = (col, _dicts(col))
    for v in chosen:
        every[v](inputs[n][0][:10])  # a warm-up (imports, caches) outside the phases
    for v in chosen:
        for count in (n, 2 * n):
            col, dicts = inputs[count]
            os.getppid()
            every[v](dicts if v.startswith("arrow:") else col)
    os.getppid()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000", help="approximate Avro payload bytes, comma-separated")
    ap.add_argument("--n", type=int, default=20_000, help="records per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--variants", default="groupkafka,udf,fastavro-only",
                    help="of groupkafka, udf, fastavro-only, arrow:columns, arrow:struct, arrow:from_pylist, "
                         "arrow:pandas (the arrow: ones time only Arrow from already decoded dicts)")
    ap.add_argument("--evolved", action="store_true", help="records written with an older schema (resolution)")
    ap.add_argument("--mixed", action="store_true",
                    help="records of two writer ids alternating (the latest and an older schema)")
    ap.add_argument("--callgrind", action="store_true", help="instructions per record under valgrind instead")
    ap.add_argument("--marked", help=argparse.SUPPRESS)  # callgrind's child
    args = ap.parse_args(argv)
    if args.mixed:
        args.evolved = "mixed"
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.marked:
        marked(args.marked.split(","), sizes[0], args.n, args.evolved)
        return 0
    load = open("/proc/loadavg").read().split()[:3]
    print(f"decode micro-benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, N = {args.n:,}, "
          f"{WRITERS_SAID[args.evolved]}, load {' '.join(load)}")
    for size in sizes:
        mean = sum(len(v) for v in records(2000, size, args.evolved).to_pylist()) / 2000
        print(f"\n~{size} B ({mean:.0f} B a record with the header)")
        if args.callgrind:
            counts = callgrind(size, chosen, args.n, args.evolved)
            for v in chosen:
                print(f"  {v:<20}{counts[v]:>14,.0f} instructions/record{counts[v] / counts['udf']:>8.2f}x UDF"
                      if "udf" in counts else f"  {v:<20}{counts[v]:>14,.0f} instructions/record")
            continue
        print(f"  {'variant':<20}{'rec/s':>12}{'CPU us/rec':>12}{'rate x UDF':>12}{'CPU x UDF':>11}  "
              f"(median of {args.rounds})")
        for v, rate, cpu, rr, rc in bench(size, args, chosen):
            print(f"  {v:<20}{rate:>12,.0f}{cpu:>12.2f}{rr:>11.2f}x{rc:>10.2f}x")
    print(f"\nload at the end {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
