"""Which ``__consumer_offsets`` partition Kafka places a group on (the dev broker's
``group_coordinator`` reads the coordinator from it): abs(String.hashCode(group)) % partitions,
Java's hashCode over UTF-16 code units, Kafka's Utils.abs taking MIN_VALUE to 0. The expected
hashes are Java's own ``"...".hashCode()``."""

from __future__ import annotations

import pytest

from spark_groupsource.devbroker._kafka import _java_hash, group_partition


@pytest.mark.parametrize(("text", "java"), [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("Aa", 2112),
    ("BB", 2112),  # Java's best-known collision
    ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE
    ("\U0001F600", 55357 * 31 + 56832),  # one code point, two UTF-16 code units (surrogates)
])
def test_java_string_hash(text: str, java: int) -> None:
    assert _java_hash(text) == java


def test_group_partition() -> None:
    assert group_partition("hello", 50) == 99162322 % 50
    assert group_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0, not negative
    negative = next(g for g in (f"orders-etl-{i}" for i in range(1000)) if _java_hash(g) < 0)
    assert group_partition(negative, 50) == abs(_java_hash(negative)) % 50
    assert all(0 <= group_partition(f"g{i}", 7) < 7 for i in range(200))
