"""What a Spark Python worker imports to run the stream reader's ``read``."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import pickle, sys
from spark_groupsource.stream import GroupKafkaStreamReader
from spark_groupsource.executor import fetch
reader = GroupKafkaStreamReader(None, {"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.group.id": "g",
                                       "subscribe": "t"})
pickle.loads(pickle.dumps(reader))  # what an executor does with it
driver_only = sorted(m for m in sys.modules if m.split(".")[0] == "kafka"
                     or m.startswith(("spark_groupsource.group", "spark_groupsource.planning.stream_driver")))
assert not driver_only, driver_only
print("ok")
"""


def test_executors_never_import_the_group_member_nor_kafka_python() -> None:
    # the driver's runner imports them when it first plans (StreamDriver); a worker holding
    # them paid for them at start and in Spark's per-task garbage collection
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
