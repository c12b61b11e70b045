"""What only Spark's Python workers import: fetching offset ranges into Arrow batches.

- :mod:`.fetch`    confluent-kafka consumers (pooled per worker) reading ranges, Arrow batches
- :mod:`.silence`  since when no broker of a cluster has answered this host's executors
"""
