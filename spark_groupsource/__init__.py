"""groupkafka: a PySpark data source for Kafka whose driver is a full consumer-group member."""

__version__ = "0.1.0"
