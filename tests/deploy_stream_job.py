"""The driver of test_deploy_cluster's streaming run, started with spark-submit on the cluster.

    deploy_stream_job.py OPTIONS_JSON OUTPUT CHECKPOINT STOP_FILE

Prints ``probe: {...}`` (where the driver and the executors import the connector from), then
streams ``format("groupkafka")`` into Parquet until STOP_FILE exists, and exits 0 (1 if the
query failed).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def where(_: object = None) -> dict[str, object]:
    """The interpreter and the connector's files in this process (driver or executor)."""
    import os

    import pyspark_groupkafka
    import spark_groupsource
    from spark_groupsource.executor import native

    return {"python": sys.executable, "pid": os.getpid(), "package": spark_groupsource.__file__,
            "shim": pyspark_groupkafka.__file__, "version": list(sys.version_info[:3]),
            "jvm": _jvm_main_class(os.getpid()), "native": native.unavailable_reason() or "available"}


def _jvm_main_class(pid: int) -> str:
    """The main class of the nearest java ancestor: CoarseGrainedExecutorBackend in an executor."""
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
        if args and args[0].endswith("java"):
            return next((a for a in args if a.startswith("org.apache.spark.")), "?")
    return "none"


def main() -> int:
    options, output, checkpoint, stop_file = json.loads(sys.argv[1]), *sys.argv[2:5]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("groupkafka-deploy-stream").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    executors = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    print("probe: " + json.dumps({"driver": where(), "executors": executors}), flush=True)
    # format("groupkafka") with no register call: pyspark_groupkafka is found in the venv.
    query = (spark.readStream.format("groupkafka").options(**options).load()
             .writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).start())
    print("deploy_stream_job: query started", flush=True)
    try:
        while not Path(stop_file).exists():
            if query.awaitTermination(0.5):
                print("query ended by itself", flush=True)
                return 1
    finally:
        query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"deploy_stream_job: exit {rc} after {time.monotonic() - t0:.1f}s", flush=True)
    sys.exit(rc)
