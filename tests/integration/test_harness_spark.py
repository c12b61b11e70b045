"""The session Spark fixture works."""

from __future__ import annotations

import sys


def test_spark_fixture_smoke(spark):
    assert spark.range(3).count() == 3
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.sparkContext.master == "local[2]"
    # Python workers run the test interpreter (pyarrow etc. available there)
    rows = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
    assert rows == [sys.executable]
