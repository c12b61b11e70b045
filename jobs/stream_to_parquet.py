"""Streaming pipeline: a consumer group's topics to Parquet, with a checkpoint.

    spark-submit --properties-file conf/spark-defaults.conf jobs/stream_to_parquet.py \\
        --config conf/groupkafka.properties --trigger "processingTime=30 seconds"

The driver joins the group named by ``kafka.group.id`` and each completed micro-batch is
committed to it (``commitOffsets``, default true). Settings come from the options file
(``job.output``, ``job.checkpoint``, ``job.trigger``) and flags, flags winning.

Triggers: ``availableNow`` (read what is there, then stop), ``once``, or
``processingTime=<interval>`` (e.g. ``processingTime=30 seconds``; runs until stopped, or
for ``--run-seconds``). Prints one summary line at the end:
``stream_to_parquet: rows=... batches=... partitions=... offsets=...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jobconf  # noqa: E402


def parse_trigger(text: str) -> dict[str, object]:
    """``availableNow`` | ``once`` | ``processingTime=<interval>`` -> DataStreamWriter.trigger kwargs."""
    t = text.strip()
    low = t.lower()
    if low in ("availablenow", "available-now"):
        return {"availableNow": True}
    if low == "once":
        return {"once": True}
    if low.startswith("processingtime="):
        interval = t.split("=", 1)[1].strip()
        if interval and interval[0].isdigit():
            return {"processingTime": interval}
    raise jobconf.BadInput(
        f"trigger: expected availableNow, once or processingTime=<interval> (e.g. 'processingTime=30 seconds'), got {text!r}"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stream_to_parquet.py",
        description="Stream Kafka topics through the groupkafka source (the driver joins the "
        "consumer group) into Parquet files, with a checkpoint.",
        epilog="Exit codes: 0 done, 1 the query failed, 2 bad input.",
    )
    jobconf.add_common_flags(p)
    p.add_argument("--output", help="Parquet output path (or job.output)")
    p.add_argument("--checkpoint", help="checkpoint location (or job.checkpoint)")
    p.add_argument("--trigger", help="availableNow, once or processingTime=<interval> (or job.trigger; default availableNow)")
    p.add_argument("--run-seconds", type=float, default=None,
                   help="stop the query after this long (default: run until the trigger ends it or the job is stopped)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    jobconf.configure_logging(args.log_level)
    options, job = jobconf.gather_options(args, batch=False)
    output = args.output or job.get("output")
    checkpoint = args.checkpoint or job.get("checkpoint")
    if not output or not checkpoint:
        raise jobconf.BadInput("--output and --checkpoint (or job.output / job.checkpoint) are required")
    trigger = parse_trigger(args.trigger or job.get("trigger", "availableNow"))

    from spark_groupsource import config as opt

    opt.parse_stream_options({k.lower(): v for k, v in options.items()})  # bad options: exit 2, no Spark
    spark = jobconf.spark_session("groupkafka-stream-to-parquet")
    df = spark.readStream.format("groupkafka").options(**options).load()
    query = (
        df.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
        .start()
    )
    progress: dict[int, dict] = {}
    deadline = None if args.run_seconds is None else time.monotonic() + args.run_seconds
    try:
        while query.isActive:
            query.awaitTermination(1)
            for p in query.recentProgress:
                progress[p["batchId"]] = p
            if deadline is not None and time.monotonic() > deadline:
                query.stop()
    finally:
        for p in query.recentProgress:
            progress[p["batchId"]] = p
    query.awaitTermination()  # re-raises the query's failure
    rows = sum(p["numInputRows"] for p in progress.values())
    batches = sum(1 for p in progress.values() if p["numInputRows"] > 0)
    end: dict = {}
    for b in sorted(progress):
        for src in progress[b].get("sources", []):
            if src.get("endOffset"):
                end = src["endOffset"]
    offsets = end if isinstance(end, dict) else json.loads(end) if end else {}
    positions = _positions(offsets)
    print(
        f"stream_to_parquet: rows={rows} batches={batches} partitions={len(positions)} "
        f"offsets={','.join(f'{k}@{v}' for k, v in positions.items()) or 'none'} output={output}"
    )
    spark.stop()
    return jobconf.EXIT_OK


def _positions(offsets: dict) -> dict[str, int]:
    """topic-partition -> next offset, from the stream reader's offset JSON (either the
    ``{"v":1,"ranges":{t:{p:[from,until]}}}`` form or a plain ``{t:{p:offset}}`` map)."""
    nested = offsets.get("ranges", offsets) if isinstance(offsets, dict) else {}
    out = {}
    for topic, parts in sorted(nested.items()):
        if not isinstance(parts, dict):
            continue
        for p, value in sorted(parts.items(), key=lambda kv: int(kv[0])):
            out[f"{topic}-{p}"] = value[-1] if isinstance(value, list) else value
    return out


if __name__ == "__main__":
    jobconf.run(main)
