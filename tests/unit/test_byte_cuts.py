"""Where the executors end Arrow batches under maxBytesPerArrowBatch (pure: record sizes in,
batch ends out)."""

from __future__ import annotations

import random

import pytest

from spark_groupsource.fetch import byte_cuts


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
