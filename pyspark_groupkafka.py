"""Auto-registration shim: PySpark registers ``DefaultSource`` of any ``pyspark_*`` module.

With this module installed, ``spark.readStream.format("groupkafka")`` works with
no ``spark.dataSource.register`` call.
"""

from spark_groupsource.source import GroupKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
