"""One group member of the chaos suite: a Spark query in its own process, writing a durable sink.

    python -m chaos.member --name a --incarnation 1 --bootstrap HOST:PORT --topic t --group g \\
        --out DIR --checkpoint DIR [--option key=value ...] [--max-seconds 900]

Each micro-batch becomes one file ``DIR/<name>-<incarnation>-<batch>-<uuid>.jsonl`` (written to a
temporary name, then renamed, so a ``kill -9`` never leaves half a batch): a header line
``{"owner", "batch", "t"}`` then one ``[partition, offset, seq]`` line per record. A replayed
batch gets a new file, so re-reads show up as duplicates. On SIGTERM the query stops cleanly
(the connector leaves the group); before the query has started, the process exits at once (143).
It does the same when the harness that started it is gone.
When the query fails, its error goes to ``DIR/<name>-<incarnation>.error`` and the process exits 3.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time

from chaos.procs import descendants, follow_parent
from chaos.sink import write_batch

EXIT_QUERY_FAILED = 3


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="chaos.member")
    p.add_argument("--name", required=True)
    p.add_argument("--incarnation", type=int, default=1)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--option", action="append", default=[], help="reader option key=value")
    p.add_argument("--trigger", default="500 milliseconds")
    p.add_argument("--max-seconds", type=float, default=900.0, help="stop after this long in any case")
    p.add_argument("--progress", help="append each micro-batch's query progress (batch id, trigger duration, rows) "
                   "to this JSON-lines file (the soak's trigger p99)")
    return p.parse_args(argv)


def logged_end(checkpoint: str, batch_id: int) -> str | None:
    """The source's end offset Spark logged for ``batch_id`` (the last line of the checkpoint's
    offsets/<batch_id>: one source), or None when it cannot be read."""
    try:
        with open(os.path.join(checkpoint, "offsets", str(batch_id))) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1] if len(lines) >= 3 else None


def _sink(out: str, name: str, owner: str, checkpoint: str):
    pause = os.path.join(out, f"pause-{name}")

    def write(df, batch_id: int) -> None:
        deadline = time.monotonic() + 180
        while os.path.exists(pause) and time.monotonic() < deadline:  # the suite makes us lag
            time.sleep(0.2)
        started = time.monotonic()
        rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) AS v").collect()
        write_batch(out, owner, batch_id, ((r.partition, r.offset, int(r.v)) for r in rows),
                    started=started, ended=time.monotonic(), end=logged_end(checkpoint, batch_id))

    return write


def _write_progress(query, path: str, written: int) -> int:
    """Append the progress of every batch after ``written`` (the last one, or the recent ones when
    more than one completed since the last call); returns the last batch id written."""
    last = query.lastProgress
    if last is None or last.batchId <= written:
        return written
    recent = [last] if last.batchId == written + 1 else list(query.recentProgress)
    with open(path, "a") as f:
        for p in recent:
            if p.batchId > written:
                f.write(json.dumps({"batchId": p.batchId, "timestamp": p.timestamp, "numInputRows": p.numInputRows,
                                    "triggerMs": p.durationMs.get("triggerExecution")}) + "\n")
                written = p.batchId
    return written


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    os.makedirs(args.out, exist_ok=True)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    owner = f"{args.name}-{args.incarnation}"
    stopping: list[int] = []
    started: list[bool] = []

    def on_sigterm(signum: int, frame: object) -> None:
        """Once the query runs, stop it cleanly (it leaves the group); before, exit at once with
        the JVM and what it started (nothing joined yet, nothing to leave): Spark's start-up takes
        a minute on a loaded machine, and a JVM still starting does not yet watch for our exit."""
        if not started:
            for pid in descendants(os.getpid()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise SystemExit(128 + signum)
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    follow_parent()  # the harness killed -9: stop as on its SIGTERM

    from pyspark.sql import SparkSession

    # local[1, 4]: one core, and a failed task is retried as on a cluster (plain local[1] fails
    # the query on the first task failure, e.g. a killed Python worker)
    spark = (
        SparkSession.builder.master("local[1,4]")
        .appName(f"chaos-{owner}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "768m")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-Xss16m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    options = dict(o.split("=", 1) for o in args.option)
    df = (
        spark.readStream.format("groupkafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("kafka.group.id", args.group)
        .option("subscribe", args.topic)
        .options(**options)
        .load()
    )
    query = (
        df.writeStream.foreachBatch(_sink(args.out, args.name, owner, args.checkpoint))
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=args.trigger)
        .start()
    )
    started.append(True)
    print(f"chaos.member {owner}: started", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.max_seconds
    code = 0
    try:
        written = -1  # the last batch id whose progress is in args.progress
        while not stopping and time.monotonic() < deadline:
            try:
                if query.awaitTermination(0.5):
                    break
            except Exception:  # noqa: BLE001 - the query failed: reported below
                break
            if args.progress:
                written = _write_progress(query, args.progress, written)
        if query.exception() is not None:
            with open(os.path.join(args.out, f"{owner}.error"), "w") as f:
                f.write(str(query.exception()))
            code = EXIT_QUERY_FAILED
    finally:
        try:
            query.stop()
        finally:
            spark.stop()
    print(f"chaos.member {owner}: stopped (exit {code})", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
