"""groupkafka: a PySpark data source for Kafka whose driver is a full consumer-group member."""

from spark_groupsource._version import __version__

__all__ = ["__version__"]
