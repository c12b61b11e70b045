"""Logging inside Spark's Python workers, where the job's own logging set-up does not reach.

The stream's driver-side runner and the executors' workers are processes Spark starts;
``$GROUPKAFKA_LOG_LEVEL`` (inherited from the environment spark-submit runs in) turns the
connector's rebalance and commit logs on there; ``$GROUPKAFKA_CLIENT_LOG_LEVEL`` adds the
driver's group client's own (kafka-python: connections, coordinator lookups, join rounds).
"""

from __future__ import annotations

import logging
import os

LOG_LEVEL_ENV = "GROUPKAFKA_LOG_LEVEL"
CLIENT_LOG_LEVEL_ENV = "GROUPKAFKA_CLIENT_LOG_LEVEL"
#: kafka-python's DEBUG log prints every request, SASL authentication bytes included
_CLIENT_LEVELS = ("INFO", "WARNING", "ERROR", "CRITICAL")


def configure_worker_logging() -> None:
    """Send ``spark_groupsource.*`` logs to stderr at ``$GROUPKAFKA_LOG_LEVEL`` (nothing when
    it is unset or a handler exists already)."""
    level = os.environ.get(LOG_LEVEL_ENV, "").strip().upper()
    root = logging.getLogger("spark_groupsource")
    if not level or root.handlers or level not in logging.getLevelNamesMapping():
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    client_level = os.environ.get(CLIENT_LOG_LEVEL_ENV, "").strip().upper()
    if client_level == "DEBUG":
        root.warning("%s=DEBUG would log the group client's requests, credentials included: INFO instead",
                     CLIENT_LOG_LEVEL_ENV)
        client_level = "INFO"
    if client_level in _CLIENT_LEVELS:
        client = logging.getLogger("kafka")
        client.addHandler(handler)
        client.setLevel(client_level)
