"""The ``groupkafka`` data source: name, schema and reader factories, nothing else.

Options are parsed (and rejected) here, when the query is defined, so a bad
option fails before the query starts and before any data moves.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from spark_groupsource import options as opt
from spark_groupsource.schema import spark_schema


class GroupKafkaDataSource(DataSource):
    """Kafka through a consumer group whose member is the Spark driver.

    Example::

        (spark.readStream.format("groupkafka")
            .option("kafka.bootstrap.servers", "host:9092")
            .option("kafka.group.id", "orders-etl")
            .option("subscribe", "orders")
            .option("assignor", "cooperative-sticky")
            .load())

    Schema: Spark's Kafka source schema (key, value, topic, partition, offset,
    timestamp, timestampType, and headers with ``includeHeaders=true``).
    """

    @classmethod
    def name(cls) -> str:
        return "groupkafka"

    def schema(self) -> StructType:
        include = opt.parse_bool_option(self.options, "includeheaders", default=False)
        return spark_schema(include)

    def streamReader(self, schema: StructType):
        from spark_groupsource.stream import GroupKafkaStreamReader

        return GroupKafkaStreamReader(schema, self.options)

    def reader(self, schema: StructType):
        from spark_groupsource.batch import GroupKafkaBatchReader

        return GroupKafkaBatchReader(schema, self.options)
