"""Batch backfill of a Kafka topic range to Parquet, optionally committing to the group.

    spark-submit --properties-file conf/spark-defaults.conf jobs/backfill.py \\
        --config conf/groupkafka.properties --output /data/orders-backfill \\
        --start-timestamp 2024-05-01T00:00:00Z --end-timestamp 2024-05-02T00:00:00Z --commit

The range is resolved once, in this driver process, before Spark reads anything (bad
ranges fail here, exit code 2); the same numbers are handed to ``spark.read`` as explicit
offsets. ``--commit`` commits the end offsets to the group only after the Parquet write
succeeded; a plain backfill refuses to commit while the group has live members (exit 1).
``--coordinated`` joins the group and reads only the partitions it assigns, from the group's
committed offsets, so several backfills started together share the work.

Prints one summary line at the end: ``backfill: rows=... tasks=... partitions=... offsets=...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jobconf  # noqa: E402


def timestamp_ms(text: str) -> str:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it has an offset)."""
    text = text.strip()
    if text.isdigit():
        return text
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ms since the epoch or an ISO-8601 time such as 2024-05-01T00:00:00Z, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return str(int(when.timestamp() * 1000))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="backfill.py",
        description="Backfill a Kafka topic range (offsets or timestamps) to Parquet with the "
        "groupkafka source; optionally commit the end offsets to the consumer group afterwards.",
        epilog="Exit codes: 0 done, 1 failed (read, write, commit), 2 bad input.",
    )
    jobconf.add_common_flags(p)
    p.add_argument("--output", help="Parquet output path (or job.output in the options file)")
    p.add_argument("--mode", choices=["errorifexists", "overwrite", "append"], default=None,
                   help="Parquet save mode (default errorifexists, or job.mode)")
    r = p.add_argument_group("range (defaults: earliest to latest)")
    r.add_argument("--start", metavar="SPEC", help='startingOffsets: earliest, group or JSON {"t":{"0":23}}')
    r.add_argument("--end", metavar="SPEC", help='endingOffsets: latest or JSON {"t":{"0":99,"1":-1}}')
    r.add_argument("--start-timestamp", metavar="TIME", type=timestamp_ms, help="startingTimestamp (ms or ISO-8601)")
    r.add_argument("--end-timestamp", metavar="TIME", type=timestamp_ms, help="endingTimestamp (ms or ISO-8601)")
    r.add_argument("--min-partitions", metavar="N", help="minPartitions: split ranges into at least N tasks")
    r.add_argument("--max-records-per-partition", metavar="N", help="maxRecordsPerPartition")
    g = p.add_argument_group("group")
    g.add_argument("--coordinated", action="store_true",
                   help="join the group and back-fill only the partitions it assigns (groupCoordinated=true)")
    g.add_argument("--commit", action="store_true",
                   help="commit the end offsets to the group after the write succeeded")
    g.add_argument("--settle-seconds", type=float, default=None,
                   help="coordinated: how long the assignment must stay unchanged before planning")
    g.add_argument("--leader-sync-delay-ms", type=int, default=None, help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    jobconf.configure_logging(args.log_level)
    options, job = jobconf.gather_options(args, batch=True)
    flag_options = {
        "startingOffsets": args.start,
        "endingOffsets": args.end,
        "startingTimestamp": args.start_timestamp,
        "endingTimestamp": args.end_timestamp,
        "minPartitions": args.min_partitions,
        "maxRecordsPerPartition": args.max_records_per_partition,
        "groupCoordinated": "true" if args.coordinated else None,
    }
    options.update({k: v for k, v in flag_options.items() if v is not None})
    output = args.output or job.get("output")
    if not output:
        raise jobconf.BadInput("--output (or job.output in the options file) is required")
    mode = args.mode or job.get("mode", "errorifexists")
    if args.commit and not options.get("kafka.group.id"):
        raise jobconf.BadInput("--commit needs a group: --group or kafka.group.id in the options file")

    from spark_groupsource import config as opt
    from spark_groupsource.backfill import BackfillPlan
    from spark_groupsource.errors import CommitError, GroupKafkaError
    from spark_groupsource.planning.batch_plan import plan_tasks

    opt.parse_batch_options({k.lower(): v for k, v in options.items()})  # bad options: exit 2, no Spark
    spark = jobconf.spark_session("groupkafka-backfill")
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    with BackfillPlan.resolve(
        options, settle_s=args.settle_seconds, leader_sync_delay_ms=args.leader_sync_delay_ms
    ) as plan:
        # the application id finds the executors' logs (a standalone worker's work/<app id>/)
        print(f"backfill plan: {plan.describe()} app={spark.sparkContext.applicationId}", file=sys.stderr)
        tasks = len(plan_tasks(plan.ranges, plan.opts))
        observed = Observation("groupkafka_backfill")
        df = plan.read(spark).observe(observed, F.count(F.lit(1)).alias("rows"))
        df.write.mode(mode).parquet(output)
        rows = observed.get["rows"]
        committed = "no"
        if args.commit:
            try:
                result = plan.commit()
            except GroupKafkaError as exc:
                raise CommitError(f"the data was written to {output}, but the offsets were not committed: {exc}") from exc
            committed = "yes" if result.committed else "nothing-to-commit"
            print(f"backfill commit: {result}", file=sys.stderr)
        read = [r for r in plan.ranges if r.size]
        offsets = ",".join(str(r) for r in read) or "none"
        print(
            f"backfill: rows={rows} tasks={tasks} partitions={len(read)} offsets={offsets} "
            f"committed={committed} output={output}"
        )
    spark.stop()
    return jobconf.EXIT_OK


if __name__ == "__main__":
    jobconf.run(main)
