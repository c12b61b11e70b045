"""Where Spark's own Kafka source's jars are (``format("kafka")``), for the shared ``spark``
fixture (tests/conftest.py) and the conformance tests' skip reason.

The same search as ``bench/_common.py``'s ``spark_kafka_jars``: ``lib/spark-kafka/*.jar`` plus
``lib/clients/kafka-clients-*.jar`` of ``$GROUPKAFKA_KAFKA_HOME``, else of ``../shared/kafka``
(Spark's source does not depend on the broker's release; ../shared/kafka-latest ships no copy).
``GROUPKAFKA_SPARK_KAFKA_JARS=none`` leaves them out; set to a Kafka home, it is searched first
(a work tree not beside ../shared, its broker from another home).
"""

from __future__ import annotations

import glob
import os

from spark_groupsource.devbroker._kafka import KAFKA_HOME_ENV, SHARED_KAFKA

#: ``none`` keeps Spark's source out of the shared session (the conformance suite then skips);
#: a directory is a Kafka home to search first.
OFF_ENV = "GROUPKAFKA_SPARK_KAFKA_JARS"


def spark_kafka_jars() -> tuple[list[str], str | None]:
    """(the jars, None), or ([], why they are missing)."""
    if os.environ.get(OFF_ENV, "").strip().lower() == "none":
        return [], f"{OFF_ENV}=none keeps Spark's own Kafka source out of the test session"
    first = os.environ.get(OFF_ENV, "").strip()
    homes = [h for h in (first if os.path.isdir(first) else "", os.environ.get(KAFKA_HOME_ENV, "").strip(),
                         SHARED_KAFKA) if h]
    for home in dict.fromkeys(homes):
        source = sorted(glob.glob(os.path.join(home, "lib", "spark-kafka", "*.jar")))
        clients = sorted(glob.glob(os.path.join(home, "lib", "clients", "kafka-clients-*.jar")))
        if source and clients:
            return source + clients, None
    return [], (f"Spark's own Kafka source jars not found under {' or '.join(dict.fromkeys(homes))} "
                "(want lib/spark-kafka/*.jar and lib/clients/kafka-clients-*.jar; see ../shared/kafka/README.md)")
