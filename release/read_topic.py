"""A user's first read, run inside a fresh install (release/user_install.py starts it there).

Apache Kafka through the installed package's own dev broker, a topic of 4 partitions and
``--records`` records; then a batch read (``spark.read.format("groupkafka")``) and a short
stream (``readStream``, ``availableNow``, committing to its group), each checked record for
record; the group's commits at the log end; the package's version against its metadata; where
Spark's Python workers import the package from (the install, never a checkout); whether the
native paths are there. One JSON line on stdout at the end; exit 1 when a check fails.

Only the standard library and the installed packages: it must run where nothing of the
checkout is importable (its folder is not the repository root, and the caller runs it from an
empty working folder).

    python read_topic.py --kafka-home ../shared/kafka-latest [--records 3000] [--fetcher auto]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import sys
import tempfile
import time

TOPIC = "release"


def _versions() -> dict[str, str]:
    names = ("spark-groupsource", "pyspark", "pandas", "pyarrow", "numpy", "confluent-kafka", "kafka-python",
             "fastavro", "jsonschema", "fastjsonschema", "cryptography")
    return {n: md.version(n) for n in names}


def _produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 4)
    p.flush(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka-home", required=True)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--fetcher", default="auto")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import spark_groupsource
    from spark_groupsource.decode import avro_native
    from spark_groupsource.devbroker import DevBroker
    from spark_groupsource.executor import native

    out: dict = {"python": sys.executable, "versions": _versions(), "package": spark_groupsource.__file__,
                 "version": spark_groupsource.__version__,
                 "native_fetch": native.unavailable_reason() or "available",
                 "native_avro": avro_native.unavailable_reason() or "available"}
    failures = []
    if spark_groupsource.__version__ != md.version("spark-groupsource"):
        failures.append(f"__version__ {spark_groupsource.__version__} != metadata {md.version('spark-groupsource')}")
    n = args.records
    work = tempfile.mkdtemp(prefix="groupkafka-release-")
    started = time.monotonic()
    with DevBroker("kafka", topics={TOPIC: 4}, kafka_home=args.kafka_home) as broker:
        _produce(broker.bootstrap, n)
        spark = (SparkSession.builder.master("local[2]").appName("release-check")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
                 # the wait for the Python processes Spark starts to connect back (15 s by
                 # default), which a loaded machine exceeded here as in the tests (conftest.py)
                 .config("spark.python.authenticate.socketTimeout", "120s")
                 .getOrCreate())
        try:
            where = set(spark.sparkContext.parallelize(range(2), 2)
                        .map(lambda _: __import__("spark_groupsource").__file__).collect())
            out["workers_import"] = sorted(where)
            if where != {spark_groupsource.__file__}:
                failures.append(f"Spark's Python workers import {where}, not {spark_groupsource.__file__}")
            common = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TOPIC, "fetcher": args.fetcher}
            rows = (spark.read.format("groupkafka").options(**common).load()
                    .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition", "offset")
                    .collect())
            want = {(f"k{i}", f"v{i}") for i in range(n)}
            got = [(r.k, r.v) for r in rows]
            out["batch_rows"] = len(got)
            if len(got) != n or set(got) != want:
                failures.append(f"batch read {len(got)} rows ({len(set(got) & want)} of the {n} records)")
            query = (spark.readStream.format("groupkafka").options(**common)
                     .option("kafka.group.id", "release-check").option("kafka.auto.offset.reset", "earliest")
                     .load()
                     .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v")
                     .writeStream.format("parquet").option("path", f"{work}/out")
                     .option("checkpointLocation", f"{work}/ck").trigger(availableNow=True).start())
            query.awaitTermination(300)
            if query.isActive:
                query.stop()
                failures.append("the stream did not finish within 300 s")
            if query.exception() is not None:
                failures.append(f"the stream failed: {query.exception()}")
            streamed = [(r.k, r.v) for r in spark.read.parquet(f"{work}/out").collect()]
            out["stream_rows"] = len(streamed)
            if len(streamed) != n or set(streamed) != want:
                failures.append(f"stream wrote {len(streamed)} rows ({len(set(streamed) & want)} of the {n})")
        finally:
            spark.stop()
        committed = _committed(broker.bootstrap, "release-check")
        out["committed"] = committed
        if sum(committed.values()) != n:
            failures.append(f"the group committed {committed}, not the log ends ({n} records in all)")
    out["seconds"] = round(time.monotonic() - started, 1)
    out["failures"] = failures
    print(json.dumps(out), flush=True)
    return 1 if failures else 0


def _committed(bootstrap: str, group: str) -> dict[str, int]:
    """Through the groups command's reader (a consumer that never joins), not librdkafka's admin
    client, which can crash on NOT_COORDINATOR (confluentinc/librdkafka#5318)."""
    from confluent_kafka import TopicPartition

    from spark_groupsource.groups import committed_offsets

    found = committed_offsets(group, [TopicPartition(TOPIC, p) for p in range(4)], 30, {"bootstrap.servers": bootstrap})
    return {str(p): off for (_, p), off in found.items()}


if __name__ == "__main__":
    sys.exit(main())
