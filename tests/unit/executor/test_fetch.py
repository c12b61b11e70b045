"""The executors' fetch module, its pure parts: where Arrow batches end under
maxBytesPerArrowBatch, and the fetcher pool (reuse, limits, expiry, never reusing a failed
task's fetcher; real confluent-kafka consumers that never assign or poll, so no broker)."""


from __future__ import annotations

import random
import time

import pytest

from spark_groupsource.executor.fetch import ConsumerPool, byte_cuts


def batches(sizes: list[int], bound: int) -> tuple[list[list[int]], list[int]]:
    """The full batches the cuts make, and what stays pending."""
    out, begin = [], 0
    for end in byte_cuts(sizes, bound):
        out.append(sizes[begin:end])
        begin = end
    return out, sizes[begin:]


@pytest.mark.parametrize(("sizes", "bound", "full", "pending"), [
    ([], 10, [], []),
    ([3, 3, 3], 10, [], [3, 3, 3]),  # below the bound: nothing ends yet
    ([3, 3, 4], 10, [[3, 3, 4]], []),  # the record that reaches the bound ends the batch
    ([3, 3, 5, 1], 10, [[3, 3, 5]], [1]),
    ([25], 10, [[25]], []),  # one record past the bound is a batch of its own
    ([2, 25, 2], 10, [[2, 25]], [2]),
    ([10, 10, 10, 1], 10, [[10], [10], [10]], [1]),
    ([0, 0, 10, 0], 10, [[0, 0, 10]], [0]),  # empty values (tombstones) count nothing
])
def test_cuts(sizes, bound, full, pending):
    assert batches(sizes, bound) == (full, pending)


def test_every_batch_is_under_the_bound_before_its_last_record():
    rng = random.Random(7)
    for _ in range(300):
        bound = rng.randint(1, 5000)
        sizes = [rng.choice((0, 1, 50, 700, 4000, 9000)) for _ in range(rng.randint(0, 60))]
        full, pending = batches(sizes, bound)
        assert [s for b in full for s in b] + pending == sizes
        for b in full:
            assert sum(b) >= bound > sum(b[:-1])
        assert sum(pending) < bound



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


def test_idle_consumers_of_other_configurations_expire_too():
    """A worker outlives its queries: what a finished query (another group) left in the pool
    is closed once idle too long, when any task takes or returns a fetcher."""
    pool = ConsumerPool(idle_timeout_s=0.2)
    try:
        finished = {**CONFIG, "group.id": "a-finished-query"}
        old = pool.acquire(finished)
        pool.release(finished, old, healthy=True)
        assert pool.idle_count() == 1
        time.sleep(0.3)
        current = pool.acquire(CONFIG)
        assert pool.idle_count() == 0
        pool.release(CONFIG, current, healthy=True)
        assert pool.idle_count() == 1
        assert pool.acquire(finished) is not old
    finally:
        pool.clear()
