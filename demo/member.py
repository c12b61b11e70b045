"""One demo member: a groupkafka streaming query in its own process (one SparkSession per
process; its driver-side reader is one member of the group).

    python -m demo.member --bootstrap HOST:PORT --topic T --group G --name A --out DIR

Writes, under ``DIR``:
  ``<name>.rows.jsonl``      one line per record the query's sink received
                             (``{"b": batch id, "p": partition, "o": offset, "seq": n, "t": wall s}``)
  ``<name>.progress.jsonl``  one line per completed micro-batch (Spark's progress: when, how many
                             rows, the ``[from, until)`` range of every partition it planned)
The connector's own INFO log (``group G: assigned [...]`` / ``revoked [...]``) goes to stderr,
which the orchestrator keeps as ``<name>.log``. SIGTERM stops the query (its runner leaves the
group), flushes what is left and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

#: Every wait is bounded: a member that runs longer than this stops itself.
MAX_RUN_S = 1800


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m demo.member", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--name", required=True, help="member label used in file names and the picture")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--trigger", default="1 second", help="processingTime interval (default 1 second)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="extra reader option (repeatable)")
    return p.parse_args(argv)


def progress_line(p: dict) -> dict:
    """The parts of one StreamingQueryProgress the demo needs."""
    src = (p.get("sources") or [{}])[0]
    end = src.get("endOffset")
    end = json.loads(end) if isinstance(end, str) else (end or {})
    ranges = {f"{t}-{part}": r for t, parts in (end.get("ranges") or {}).items() for part, r in parts.items()}
    ts = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    return {"batch": p["batchId"], "t": ts, "rows": p["numInputRows"],
            "ms": p.get("durationMs", {}).get("triggerExecution", 0), "ranges": ranges}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName(f"groupkafka-demo-{args.name}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    options = {"kafka.bootstrap.servers": args.bootstrap, "kafka.group.id": args.group,
               "subscribe": args.topic}
    for kv in args.option:
        key, _, value = kv.partition("=")
        options[key] = value
    df = spark.readStream.format("groupkafka").options(**options).load()

    args.out.mkdir(parents=True, exist_ok=True)
    rows_file = open(args.out / f"{args.name}.rows.jsonl", "a", buffering=1)  # noqa: SIM115
    progress_file = open(args.out / f"{args.name}.progress.jsonl", "a", buffering=1)  # noqa: SIM115

    def sink(batch_df, batch_id: int) -> None:
        now = time.time()
        for r in batch_df.select("partition", "offset", "value").collect():
            rows_file.write(json.dumps({"b": batch_id, "p": r.partition, "o": r.offset,
                                        "seq": int(bytes(r.value)), "t": now}) + "\n")
        rows_file.flush()

    query = (df.writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(args.out / f"{args.name}.checkpoint"))
             .trigger(processingTime=args.trigger).start())
    seen: set[int] = set()

    def record_progress() -> None:
        for p in query.recentProgress:
            if p["batchId"] not in seen and p["numInputRows"] > 0:
                seen.add(p["batchId"])
                progress_file.write(json.dumps(progress_line(p)) + "\n")

    deadline = time.monotonic() + MAX_RUN_S
    try:
        while not stop.is_set() and query.isActive and time.monotonic() < deadline:
            query.awaitTermination(0.5)
            record_progress()
    finally:
        if query.isActive:
            query.stop()  # the runner gets SIGTERM and leaves the group
        record_progress()
        failure = query.exception()
        rows_file.close()
        progress_file.close()
        spark.stop()
    if failure is not None:
        print(f"member {args.name}: query failed: {failure}", file=sys.stderr)
        return 1
    print(f"member {args.name}: stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
