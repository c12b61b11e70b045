"""Where a run's CPU goes: every process's user+system time, sampled from /proc every few seconds
and summed by role (Kafka brokers, Spark JVMs, Spark's Python runners and workers, Java consumers,
pytest, ...), written as JSON until SIGTERM. Processes alive at the start count only from then on;
one that lives less than an interval is missed. Linux only.

    python conf/cpu_sampler.py build/cpu.json &  .ci/run;  kill %1
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import time

HZ = os.sysconf("SC_CLK_TCK")

#: (role, substrings of the command line, any of which makes it that role), first match wins
ROLES = (
    ("kafka-broker", ("kafka.Kafka", "kafka.tools.StorageTool")),
    ("spark-jvm", ("org.apache.spark.deploy.SparkSubmit", "org.apache.spark.deploy.master", "org.apache.spark.deploy.worker",
                   "org.apache.spark.executor", "org.apache.spark.sql.connect")),
    ("java-consumer", ("kafkatest.JsonConsumer", "java-consumer", "ConsoleConsumer", "VerifiableConsumer")),
    ("java-other", ("/java ", "java ")),
    ("spark-python-runner", ("python_streaming_source_runner", "pyspark.sql.worker", "plan_data_source_read")),
    ("spark-python-worker", ("pyspark.daemon", "pyspark.worker")),
    ("pytest", ("pytest", "execnet", "xdist")),
    ("chaos", ("-m chaos", "-m soak")),
    ("python-other", ("python",)),
)


def role_of(cmdline: list[str]) -> str:
    text = " ".join(cmdline)
    for role, marks in ROLES:
        if any(m in text for m in marks):
            return role
    return os.path.basename(cmdline[0])[:24] if cmdline else "kernel"


def _cpu(pid: str) -> tuple[str, float] | None:
    """(start time, CPU seconds) of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19], (int(fields[11]) + int(fields[12])) / HZ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="JSON file, rewritten at every sample")
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    seen: dict[tuple[str, str], list] = {}  # (pid, start) -> [CPU seconds counted, role]
    totals: collections.Counter = collections.Counter()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    began, first = time.monotonic(), True
    while not stop:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            got = _cpu(pid)
            if got is None:
                continue
            key = (pid, got[0])
            if key not in seen:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
                except OSError:
                    continue
                # alive before the sampler: only what it uses from now on counts
                seen[key] = [got[1] if first else 0.0, role_of(cmd)]
            counted, role = seen[key]
            totals[role] += got[1] - counted
            seen[key][0] = got[1]
        first = False
        with open(args.out, "w") as f:
            json.dump({"elapsed_s": round(time.monotonic() - began, 1),
                       "cpu_s": {k: round(v, 1) for k, v in totals.most_common()}}, f, indent=1)
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
