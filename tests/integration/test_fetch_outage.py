"""A pooled native fetcher through a whole-cluster outage, on Kafka.

Seen in the chaos suite (cluster_down_long, 3 nodes killed): the query's librdkafka consumers
tried to connect 20-50 times a second each for as long as the cluster was down, where the Java
consumer tries about twice a second. The cause is librdkafka's consumer-group handler, which
a fetcher had only because assign() needs a group.id: while no broker is up it asks for a
coordinator every 50 ms, and each ask cancels the reconnect backoff. The native fetcher now
consumes its partitions without a group; this checks it backs off, then reads on when the
broker is back, with the same pooled fetcher.
"""

from __future__ import annotations

import contextlib

import pytest

from helpers import assert_backs_off_while_down, own_kafka_or_skip, produce_keyed
from spark_groupsource.config import fetcher_config, parse_stream_options
from spark_groupsource.devbroker import DevBroker
from spark_groupsource.executor import native
from spark_groupsource.executor.fetch import _POOL, fetch_range
from spark_groupsource.ranges import OffsetRange

pytestmark = pytest.mark.integration

@contextlib.contextmanager
def _pool_cleared():
    """The pooled fetcher logs at debug level: closed, pass or fail, while output is captured."""
    try:
        yield
    finally:
        _POOL.clear()


def _read(cfg: dict, topic: str, start: int, until: int) -> list[int]:
    batches = fetch_range(cfg, OffsetRange(topic, 0, start, until), include_headers=False,
                          fail_on_data_loss=True, max_records_per_batch=1000,
                          poll_timeout_ms=60_000, fetcher="native")
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_an_idle_native_fetcher_backs_off_while_the_broker_is_down_and_reads_on(capfd):
    own_kafka_or_skip("stops a Kafka node of its own")
    why = native.unavailable_reason()
    if why:
        pytest.skip(f"needs the native fetch path: {why}")
    _POOL.clear()
    with DevBroker("kafka", topics={"outage": 1}) as broker, _pool_cleared():
        opts = parse_stream_options({"kafka.bootstrap.servers": broker.bootstrap,
                                     "kafka.group.id": "outage-g", "subscribe": "outage"})
        # debug=broker: librdkafka logs each connection attempt ("Connecting to ...") on stderr
        cfg = {**fetcher_config(opts), "debug": "broker"}
        produce_keyed(broker.bootstrap, "outage", 10, partitions=1)
        assert _read(cfg, "outage", 0, 10) == list(range(10))
        assert _POOL.idle_count() == 1  # the fetcher waits in the pool, unassigned

        assert_backs_off_while_down(broker.kafka, capfd)
        produce_keyed(broker.bootstrap, "outage", 10, partitions=1)
        reused = _POOL.reused
        assert _read(cfg, "outage", 10, 20) == list(range(10, 20))
        assert _POOL.reused == reused + 1  # the same fetcher, back from the outage
