"""The ``groupkafka`` data source: name, schema and reader factories, nothing else.

Options are checked when the DataFrame is defined: Spark calls :meth:`schema` at ``load()``
(batch and streaming alike), and it validates every option there, so a bad option fails
with our :class:`~spark_groupsource.errors.OptionError` before the query starts. Checks
that depend on the mode (``endingOffsets`` is batch-only) run when the reader is made.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType

from spark_groupsource import config as opt
from spark_groupsource.errors import GroupKafkaError
from spark_groupsource.interpreter import check_interpreter


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
        check_interpreter()
        opt.validate_definition(self.options)
        from spark_groupsource.schema import spark_schema  # pyarrow: after check_interpreter

        include = opt.parse_bool_option(self.options, "includeheaders", default=False)
        from spark_groupsource.decode import schema_for  # typed key/value columns

        typed = schema_for(self.options)
        return typed if typed is not None else spark_schema(include)

    def streamReader(self, schema: StructType):
        check_interpreter()
        from spark_groupsource.stream import GroupKafkaStreamReader

        try:
            return GroupKafkaStreamReader(schema, self.options)
        except GroupKafkaError as exc:
            # PySpark's streaming runner calls reader.stop() in a `finally` after a failed
            # streamReader(); with no reader that ends the traceback in its own
            # UnboundLocalError. A reader that raises on first use keeps ours the last line.
            return _FailedStreamReader(exc)

    def reader(self, schema: StructType):
        check_interpreter()
        from spark_groupsource.batch import GroupKafkaBatchReader

        return GroupKafkaBatchReader(schema, self.options)


class _FailedStreamReader(DataSourceStreamReader):
    """Raises the error that prevented the real reader on every call Spark makes."""

    def __init__(self, error: GroupKafkaError):
        self.error = error

    def _fail(self):
        raise self.error.with_traceback(None)

    def getDefaultReadLimit(self):
        self._fail()

    def initialOffset(self):
        self._fail()

    def latestOffset(self, start=None, limit=None):
        self._fail()

    def partitions(self, start, end):
        self._fail()

    def read(self, partition):
        self._fail()

    def commit(self, end) -> None:
        self._fail()

    def stop(self) -> None:
        pass  # nothing was started
