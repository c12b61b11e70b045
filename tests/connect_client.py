"""The remote side of test_spark_connect: a Spark Connect client session reading groupkafka.

    connect_client.py SC_URL OPTIONS_JSON

Runs in a process of its own: ``SparkSession.builder.remote`` sets SPARK_CONNECT_MODE_ENABLED
in the environment, which would turn the test process's classic sessions into Connect ones.
Never calls ``spark.dataSource.register``: the server finds format("groupkafka") itself.
Prints one JSON line ``result: {"batch": [...], "stream": [...], "progress": [...]}``.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

COLUMNS = ["topic", "partition", "offset", "key", "value"]


def collect(df) -> list[list]:
    return [[r.topic, r.partition, r.offset, r.key.decode(), r.value.decode()] for r in df.select(*COLUMNS).collect()]


def main() -> None:
    url, options = sys.argv[1], json.loads(sys.argv[2])
    spark = SparkSession.builder.remote(url).getOrCreate()
    assert type(spark).__module__ == "pyspark.sql.connect.session", type(spark)
    batch_options = {k: v for k, v in options.items() if k != "maxOffsetsPerTrigger"}  # stream-only
    batch = collect(spark.read.format("groupkafka").options(**batch_options).option("endingOffsets", "latest").load())

    query = (spark.readStream.format("groupkafka").options(**options).load()
             .writeStream.format("memory").queryName("groupkafka_connect")
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert not query.isActive, "the availableNow query did not finish in 240 s"
    stream = collect(spark.table("groupkafka_connect"))
    sources = [json.loads(p.json)["sources"][0] for p in query.recentProgress]
    progress = [s["endOffset"] for s in sources if s.get("numInputRows")]
    print("result: " + json.dumps({"batch": batch, "stream": stream, "progress": progress}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
