"""Typed Avro reads through a Schema Registry (issue 55): groupkafka's ``valueFormat=avro``
against what open-source Spark users do today, Spark's own ``format("kafka")`` followed by a
pandas UDF that strips the 5-byte Confluent header and decodes with fastavro, and (given a
spark-avro jar) Spark's own ``from_avro`` on the header-stripped value; groupkafka's binary read
(no decoding) as the floor. One Spark session, one Kafka broker, one Karapace (Karapace 3.16.0
from ../shared/karapace, as ``--schema-registry`` of the dev broker runs it).

Records: a 10-field ``Order`` of mixed types (long, string, int, double, float, boolean,
timestamp-millis, enum, a nullable string, bytes), written with confluent-kafka's own
``AvroSerializer`` (registered under ``<topic>-value``); ``--sizes`` pads the string fields so
that the Avro payload is about that many bytes. A pool of distinct records is serialized and
produced round-robin (the serializer costs about 20 us a record in Python; the readers decode
every record whatever the pool).

Why a pandas UDF with fastavro for Spark: open-source Spark's ``from_avro`` cannot read the
header or the registry (SPARK-26314), so a user who wants the writer's schema from the registry
decodes in Python; a vectorized UDF is the fastest Python route (a row UDF pickles one row at a
time). The UDF fetches the writer schema by id from the registry once per worker, as groupkafka
does, and returns the same struct of typed columns.

``from_avro`` (reader ``from_avro``): Spark's ``format("kafka")``, then
``from_avro(expr("substring(value, 6)"), <the writer's schema JSON>)`` and ``value.*``: the JVM
route of a user who strips the header and hard-codes the one schema (it breaks as soon as the
writer's schema evolves; here every record has the one writer schema, so it decodes them all).
PySpark ships no spark-avro jar: the reader runs only when one is given, ``--spark-avro-jar PATH``
or the environment's ``SPARK_AVRO_JAR`` (a jar of Spark's ``connector/avro`` built for this
PySpark), and is left out with the reason printed otherwise.

Method as bench/steady_state.py: every reader reads a topic of N records and one of 5N
(``Trigger.AvailableNow`` -> ``noop``, ``startingOffsets=earliest``, the same
``maxOffsetsPerTrigger``); the difference is what the extra 4N records cost, start-up cancelled
out. A warm-up round of every reader first (not counted), then ``--rounds`` rounds, the order of
the readers flipping every round, the best per reader and topic:

  records/s          4N / (wall(5N) - wall(N)); x UDF: over Spark's source + the UDF
  CPU-s per million  (CPU(5N) - CPU(N)) / 4N of the bench's process tree (_common.Meter):
                     Spark's JVM and its Python processes (JVM/M, Py/M apart)

Before the timed rounds the typed readers are checked against each other on the N topic: the
same sums and counts of every field (a reader that decodes wrongly fails the run).

    [SPARK_AVRO_JAR=spark-avro.jar] python bench/registry_decode.py [--sizes 100,1000] [--n 100000]
        [--rounds 2] [--partitions 4] [--cores 2] [--max-offsets-per-trigger 250000]
        [--readers avro,udf,from_avro,binary] [--spark-avro-jar PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import zipfile

import pandas as pd  # module level: the UDF's type hints are resolved from these globals

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Meter, load_average, side_by_side_readers, spark_session  # noqa: E402
from steady_state import Marginal, Sample, _settle, best_sample, marginal, ratio  # noqa: E402

from spark_groupsource.devbroker import DevBroker  # noqa: E402
from spark_groupsource.devbroker._karapace import Karapace, karapace_missing  # noqa: E402

AVRO = "groupkafka avro"
UDF = "Spark kafka + UDF"
FROM_AVRO = "Spark kafka + from_avro"
BINARY = "groupkafka binary"
READER_NAMES = {"avro": AVRO, "udf": UDF, "from_avro": FROM_AVRO, "binary": BINARY}
#: the readers that decode into typed columns (checked against each other before timing)
TYPED = (AVRO, UDF, FROM_AVRO)
#: the class of spark-avro that ``from_avro`` resolves to (Spark's sql-api names it by reflection)
FROM_AVRO_CLASS = "org/apache/spark/sql/avro/AvroDataToCatalyst.class"

ORDER = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "discount", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "DONE"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "token", "type": "bytes"},
    ],
}
#: what the UDF returns: the Spark type groupkafka derives from ORDER (docs/schema-registry.md)
ORDER_DDL = ("id bigint, customer string, item string, quantity int, price double, discount float, "
             "paid boolean, created timestamp, status string, note string, token binary")
#: per-field checks that both typed readers must agree on
CHECKS = ("sum(id)", "sum(length(customer))", "sum(length(item))", "sum(quantity)", "round(sum(price), 2)",
          "round(sum(discount), 1)", "sum(cast(paid as int))", "sum(unix_millis(created))",
          "count(distinct status)", "count(note)", "sum(length(token))")
POOL = 2000


def order(i: int, size: int, rng: random.Random) -> dict:
    """One record; the strings padded so that the Avro payload is about ``size`` bytes (the
    fields without padding take about 60)."""
    pad = max(0, size - 60)
    return {
        "id": i, "customer": f"customer-{rng.randrange(10**6)}" + "c" * (pad // 2),
        "item": f"item-{rng.randrange(1000)}" + "i" * (pad - pad // 2), "quantity": rng.randrange(1, 100),
        "price": round(rng.uniform(1, 500), 2), "discount": rng.choice([0.0, 0.05, 0.1]),
        "paid": rng.random() < 0.5, "created": 1_700_000_000_000 + rng.randrange(10**9),
        "status": rng.choice(["NEW", "PAID", "SHIPPED", "DONE"]),
        "note": None if rng.random() < 0.5 else f"note {rng.randrange(100)}", "token": rng.randbytes(8),
    }


def produce_avro(bootstrap: str, registry_url: str, topic: str, n: int, size: int) -> int:
    """``n`` records serialized by confluent-kafka's AvroSerializer (a pool of POOL distinct ones,
    round-robin over the partitions); returns the mean value size in bytes."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rng = random.Random(size)
    pool = [ser(order(i, size, rng), ctx) for i in range(POOL)]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    for i in range(n):
        while True:
            try:
                p.produce(topic, pool[i % POOL])
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    return sum(len(v) for v in pool) // POOL


def spark_avro_jar(path: str | None) -> tuple[str | None, str | None]:
    """The spark-avro jar for the ``from_avro`` reader, or None and why not: ``path`` (from
    ``--spark-avro-jar`` or ``SPARK_AVRO_JAR``) must be a jar holding ``from_avro``'s expression."""
    if not path:
        return None, ("no spark-avro jar given (--spark-avro-jar PATH or SPARK_AVRO_JAR; PySpark ships "
                      "none, and from_avro needs one)")
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        return None, f"the spark-avro jar {path} does not exist"
    try:
        with zipfile.ZipFile(path) as jar:
            names = set(jar.namelist())
    except (OSError, zipfile.BadZipFile) as e:
        return None, f"{path} is not a jar ({e})"
    if FROM_AVRO_CLASS not in names:
        return None, f"{path} has no {FROM_AVRO_CLASS}: not a spark-avro jar"
    return path, None


def udf_frame(values: pd.Series, schemas: dict, fetch, reader=None, latest: int | None = None) -> pd.DataFrame:
    """The UDF's body: the header stripped, the writer schema by id (``schemas``, filled by
    ``fetch(id)`` once per id), fastavro's schemaless_reader per record (an older writer than
    ``latest`` resolved to ``reader`` when given), a pandas DataFrame of the struct."""
    import io
    import struct

    import fastavro

    rows = []
    for v in values:
        if v is None or len(v) < 5 or v[0] != 0:
            raise ValueError("not a Confluent wire-format record")
        sid = struct.unpack(">I", v[1:5])[0]
        schema = schemas.get(sid)
        if schema is None:
            schema = schemas[sid] = fastavro.parse_schema(fetch(sid))
        rows.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), schema,
                                               None if reader is None or sid == latest else reader))
    return pd.DataFrame(rows, columns=[f["name"] for f in ORDER["fields"]])


def udf_decoder(registry_url: str):
    """The pandas UDF: :func:`udf_frame` with the writer schemas from the registry (once per
    worker)."""
    from pyspark.sql.functions import pandas_udf

    def fetch(sid: int):
        import urllib.request

        with urllib.request.urlopen(f"{registry_url}/schemas/ids/{sid}", timeout=30) as r:
            return json.loads(json.load(r)["schema"])

    @pandas_udf(ORDER_DDL)
    def decode(values: pd.Series) -> pd.DataFrame:
        return udf_frame(values, decode.__dict__.setdefault("schemas", {}), fetch)

    return decode


def typed_df(spark, reader: str, bootstrap: str, registry_url: str, topic: str, args, stream: bool = True):
    """The DataFrame of ``reader`` on ``topic``: the typed struct's fields as columns (the binary
    floor: the raw value)."""
    spark_source = reader in (UDF, FROM_AVRO)
    src = spark.readStream if stream else spark.read
    r = (src.format("kafka" if spark_source else "groupkafka")
         .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .option("startingOffsets", "earliest"))
    if stream and args.max_offsets_per_trigger > 0:
        r = r.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    if not spark_source:
        r = r.option("kafka.group.id", f"bench-sr-{time.time_ns()}").option("kafka.session.timeout.ms", "6000")
    if reader == AVRO:
        r = r.option("valueFormat", "avro").option("schemaRegistry.url", registry_url)
    df = r.load()
    if reader == UDF:
        return df.select(udf_decoder(registry_url)(df["value"]).alias("value")).select("value.*")
    if reader == FROM_AVRO:
        from pyspark.sql.avro.functions import from_avro
        from pyspark.sql.functions import expr

        # the 5-byte header stripped (SQL's substring counts from 1), the writer's schema hard-coded
        return df.select(from_avro(expr("substring(value, 6)"), json.dumps(ORDER)).alias("value")).select("value.*")
    if reader == AVRO:
        return df.select("value.*")
    return df.select("value")


def check_agree(spark, bootstrap: str, registry_url: str, topic: str, readers, args) -> None:
    """The typed readers give the same per-field sums and counts on ``topic`` (a batch read)."""
    typed = [r for r in readers if r in TYPED]
    got = {r: tuple(typed_df(spark, r, bootstrap, registry_url, topic, args, stream=False)
                    .selectExpr(*CHECKS).first()) for r in typed}
    if len(set(got.values())) > 1:
        raise AssertionError(f"the typed readers disagree on {topic}: {got}")
    print(f"  check: {' and '.join(typed)} agree on {len(CHECKS)} per-field sums/counts of {topic}")


def query(spark, reader: str, broker, registry_url: str, topic: str, n: int, args) -> Sample:
    df = typed_df(spark, reader, broker.bootstrap, registry_url, topic, args)
    _settle(spark)
    # the broker and the registry are not the readers' cost (the registry is our own child)
    with tempfile.TemporaryDirectory() as ck, Meter(args.not_measured) as m:
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    if rows != n:
        raise AssertionError(f"{reader} read {rows} of {n}")
    return Sample(n, m.wall, m.cpu, 0.0, m.by_kind["jvm"], m.by_kind["python"], m.machine)


def workload(spark, broker, registry_url: str, readers, size: int, args, warm: bool) -> dict[str, Marginal]:
    n = args.n if size <= 100 else max(20_000, args.n * 100 // size * 2)
    small, large = f"sr-{size}-n-{time.time_ns()}", f"sr-{size}-5n-{time.time_ns()}"
    t0 = time.perf_counter()
    broker.create_topic(small, args.partitions)
    broker.create_topic(large, args.partitions)
    mean_size = produce_avro(broker.bootstrap, registry_url, small, n, size)
    produce_avro(broker.bootstrap, registry_url, large, 5 * n, size)
    print(f"\n~{size} B: values of {mean_size} B on average (5-byte header included), N = {n:,} and 5N = {5 * n:,} "
          f"records (produced in {time.perf_counter() - t0:.1f}s); load {load_average()}")
    check_agree(spark, broker.bootstrap, registry_url, small, readers, args)
    if warm:
        for reader in readers:
            query(spark, reader, broker, registry_url, small, n, args)
    samples: dict[tuple[str, int], list[Sample]] = {}
    for rnd in range(args.rounds):
        for reader in (readers if rnd % 2 == 0 else readers[::-1]):
            for topic, count in ((small, n), (large, 5 * n)):
                samples.setdefault((reader, count), []).append(
                    query(spark, reader, broker, registry_url, topic, count, args))
    out = {}
    print(f"  {'reader':<25}{'wall N':>8}{'wall 5N':>9}{'rec/s':>12}{'CPU-s/M':>9}{'JVM/M':>7}{'Py/M':>7}"
          f"{'cores':>7}   rounds (wall N / 5N)")
    for reader in readers:
        s, b = best_sample(samples[(reader, n)]), best_sample(samples[(reader, 5 * n)])
        m = out[reader] = marginal(s, b)
        rounds = " ".join(f"{a.wall:.1f}/{c.wall:.1f}" for a, c in zip(samples[(reader, n)], samples[(reader, 5 * n)],
                                                                      strict=True))
        print(f"  {reader:<25}{s.wall:>8.2f}{b.wall:>9.2f}{m.rate:>12,.0f}{m.cpu_per_million:>9.2f}"
              f"{m.jvm_per_million:>7.2f}{m.python_per_million:>7.2f}{m.cores_busy:>7.2f}   {rounds}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000", help="approximate Avro payload bytes, comma-separated")
    ap.add_argument("--n", type=int, default=100_000, help="N at 100 B (the small read; the large is 5N); "
                    "1 KB records get a fifth of it (at least 20,000)")
    ap.add_argument("--rounds", type=int, default=2, help="counted rounds per reader (best of); >= 1")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--cores", type=int, default=2, help="the Spark session's local[N]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=250_000, help="the same for every reader; 0: none")
    ap.add_argument("--readers", default="avro,udf,from_avro,binary", help=f"of {', '.join(READER_NAMES)}")
    ap.add_argument("--spark-avro-jar", default=os.environ.get("SPARK_AVRO_JAR"),
                    help="a spark-avro jar for the from_avro reader (default: $SPARK_AVRO_JAR); without one "
                    "that reader is left out")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if (why := karapace_missing()) is not None:
        print(f"SKIPPED: no Schema Registry to run: {why}")
        return 0
    chosen = side_by_side_readers("kafka")
    if chosen is None:
        return 0
    available, jars = chosen
    readers = [READER_NAMES[r.strip()] for r in args.readers.split(",") if r.strip()]
    if UDF in readers and not jars:
        readers.remove(UDF)
    avro_jar = None
    if FROM_AVRO in readers:
        avro_jar, why = spark_avro_jar(args.spark_avro_jar)
        if why is None and not jars:
            why = "it reads with Spark's own Kafka source, whose jars are missing"
        if why is not None:
            print(f"the from_avro reader is left out: {why}")
            readers.remove(FROM_AVRO)
    spark_jars = [*jars, avro_jar] if FROM_AVRO in readers else jars if UDF in readers else []
    spark = spark_session(args.cores, spark_jars, {"spark.python.authenticate.socketTimeout": "120s"})
    limit = f"{args.max_offsets_per_trigger:,}" if args.max_offsets_per_trigger > 0 else "none"
    print(f"registry decode, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: kafka broker + Karapace, "
          f"{args.partitions} partitions, local[{args.cores}], AvailableNow -> noop, maxOffsetsPerTrigger={limit}, "
          f"warm-up then best of {args.rounds}, order alternating; load {load_average()}")
    results = []
    with DevBroker("kafka", topics={}) as broker, tempfile.TemporaryDirectory() as wd:
        registry = Karapace(broker.bootstrap, wd)
        registry.start()
        args.not_measured = [p for p in (broker.pid, registry.proc.pid if registry.proc else None) if p]
        try:
            for i, size in enumerate(int(s) for s in args.sizes.split(",") if s.strip()):
                results.append((size, workload(spark, broker, registry.url, readers, size, args, warm=i == 0)))
        finally:
            registry.stop()
            spark.stop()
    if avro_jar:
        print(f"from_avro's spark-avro jar: {avro_jar}")
    print(f"\nsummary (marginal, best of {args.rounds}; load at the end {load_average()})")
    print(f"  {'payload':<9}{'reader':<25}{'rec/s':>12}{'x UDF':>8}{'CPU-s/M':>9}{'x UDF':>8}{'JVM/M':>7}{'Py/M':>7}")
    for size, by in results:
        theirs = by.get(UDF)
        for reader, m in by.items():
            rel_rate = f"{ratio(m.rate, theirs.rate):.2f}x" if theirs else "-"
            rel_cpu = f"{ratio(m.cpu_per_million, theirs.cpu_per_million):.2f}x" if theirs else "-"
            print(f"  {f'~{size} B':<9}{reader:<25}{m.rate:>12,.0f}{rel_rate:>8}{m.cpu_per_million:>9.2f}{rel_cpu:>8}"
                  f"{m.jvm_per_million:>7.2f}{m.python_per_million:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
