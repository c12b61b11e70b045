"""What only Spark's Python workers import: fetching offset ranges into Arrow batches.

- :mod:`.fetch`    confluent-kafka consumers (pooled per worker) reading ranges, Arrow batches
- :mod:`.native`   the native fetch path (librdkafka straight into Arrow buffers, _rdkafka_arrow.c)
- :mod:`.heap`     keeps Spark's per-task garbage collection in a worker cheap
- :mod:`.silence`  since when no broker of a cluster has answered this host's executors
"""
