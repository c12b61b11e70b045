"""Coordinator lookups paced as Java's client paces them (spark_groupsource.group.kafka_client)."""

from __future__ import annotations

import pytest

from spark_groupsource.group.kafka_client import LookupPacer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _pacer(clock: _Clock, rand: float = 0.5) -> LookupPacer:
    return LookupPacer(0.1, 1.0, clock=clock, rand=lambda: rand)


def test_back_to_back_lookups_wait_longer_each_time_up_to_the_max():
    clock = _Clock()
    p = _pacer(clock)
    delays = []
    for _ in range(7):
        d = p.next_delay()
        delays.append(round(d, 3))
        clock.now += d + 0.001  # the lookup's round trip
        p.done()
    assert delays == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_the_first_lookup_after_a_quiet_spell_goes_at_once():
    clock = _Clock()
    p = _pacer(clock)
    for _ in range(4):
        clock.now += p.next_delay()
        p.done()
    clock.now += 2.5  # a coordinator was found and used for a while
    assert p.next_delay() == 0.0
    p.done()
    assert p.next_delay() == pytest.approx(0.1)


@pytest.mark.parametrize("rand, factor", [(0.0, 0.8), (1.0, 1.2)])
def test_jitter_is_twenty_percent(rand, factor):
    clock = _Clock()
    p = _pacer(clock, rand)
    p.next_delay()
    p.done()
    assert p.next_delay() == pytest.approx(0.1 * factor)
