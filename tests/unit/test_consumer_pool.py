"""The executors' fetcher pool: reuse, limits, expiry, and never reusing a failed task's fetcher.

Real confluent-kafka consumers; none of these tests needs a broker (a consumer that never
assigns or polls does no I/O)."""

from __future__ import annotations

import time

from spark_groupsource.fetch import ConsumerPool

CONFIG = {"bootstrap.servers": "127.0.0.1:9", "group.id": "pool-tests", "log_level": 0}


def test_released_consumer_is_reused_for_the_same_config_only():
    pool = ConsumerPool()
    try:
        c = pool.acquire(CONFIG)
        pool.release(CONFIG, c, healthy=True)
        assert pool.acquire(CONFIG) is c
        other = pool.acquire({**CONFIG, "group.id": "another"})
        assert other is not c
        assert (pool.created, pool.reused) == (2, 1)
    finally:
        pool.clear()


def test_a_failed_task_never_returns_its_consumer():
    pool = ConsumerPool()
    try:
        c = pool.acquire(CONFIG)
        pool.release(CONFIG, c, healthy=False)
        assert pool.acquire(CONFIG) is not c
    finally:
        pool.clear()


def test_idle_consumers_are_capped_and_expire():
    pool = ConsumerPool(max_idle_per_config=1)
    try:
        a, b = pool.acquire(CONFIG), pool.acquire(CONFIG)
        pool.release(CONFIG, a, healthy=True)
        pool.release(CONFIG, b, healthy=True)  # over the cap: the older one (a) is closed
        assert pool.acquire(CONFIG) is b
        assert pool.acquire(CONFIG) is not a
        expiring = ConsumerPool(idle_timeout_s=0.001)
        c = expiring.acquire(CONFIG)
        expiring.release(CONFIG, c, healthy=True)
        time.sleep(0.01)
        assert expiring.acquire(CONFIG) is not c
        expiring.clear()
    finally:
        pool.clear()
