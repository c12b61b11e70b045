"""The demo's record keeping (demo/timeline.py): parsing the connector's ownership log,
ownership intervals, lag per member, lost and duplicated records."""

from __future__ import annotations

from datetime import datetime

from demo import timeline as tl

LOG = """\
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
2026-11-22 23:31:02,064 INFO spark_groupsource.membership: leader assigned group with cooperative-sticky to 1 members
2026-11-22 23:31:02,070 INFO spark_groupsource.membership: group g1: assigned ['d-0', 'd-1', 'd-2', 'd-3']
2026-11-22 23:31:02,110 INFO spark_groupsource.stream: group g1: d-0 starts at offset 0 (committed: None)
2026-11-22 23:31:03,000 INFO spark_groupsource.membership: group other: assigned ['d-0']
2026-11-22 23:31:04,000 INFO spark_groupsource.membership: group g1: assigned ['dd-1', 'd-x']
2026-11-22 23:31:11,308 INFO spark_groupsource.membership: group g1: committed d-0@100, d-1@100
2026-11-22 23:31:14,076 INFO spark_groupsource.membership: group g1: revoked ['d-2', 'd-3']
2026-11-22 23:31:15,000 WARNING spark_groupsource.membership: group g1: lost 1 partitions (fenced): ['d-1']
2026-11-22 23:31:20,103 INFO spark_groupsource.membership: group g1: left the group
"""


def _t(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_parse_connector_log_keeps_this_groups_topic_events_in_order():
    events = tl.parse_connector_log(LOG.splitlines(), "A", "g1", "d")
    assert [(e.kind, sorted(e.partitions)) for e in events] == [
        ("assigned", [0, 1, 2, 3]), ("revoked", [2, 3]), ("lost", [1]), ("left", []),
    ]
    assert events[0].t == _t("2026-11-22 23:31:02,070")
    assert all(e.member == "A" for e in events)
    assert tl.owned_now(events[:1]) == {0, 1, 2, 3}
    assert tl.owned_now(events[:3]) == {0}
    assert tl.owned_now(events) == set()


def test_intervals_close_at_revocation_exit_or_end():
    ev = [
        tl.OwnershipEvent(10, "A", "assigned", frozenset({0, 1})),
        tl.OwnershipEvent(20, "A", "revoked", frozenset({1})),
        tl.OwnershipEvent(21, "B", "assigned", frozenset({1})),
        tl.OwnershipEvent(30, "A", "assigned", frozenset({1})),  # B exited at 29 without a log line
        tl.OwnershipEvent(40, "C", "assigned", frozenset({2})),
        tl.OwnershipEvent(45, "C", "left"),
    ]
    ivals = tl.intervals(ev, end=50, exits={"B": 29})
    assert [(i.member, i.partition, i.start, i.end) for i in ivals] == [
        ("A", 0, 10, 50), ("A", 1, 10, 20), ("B", 1, 21, 29), ("A", 1, 30, 50), ("C", 2, 40, 45),
    ]
    assert tl.owner_at(ivals, 1, 25) == "B"
    assert tl.owner_at(ivals, 1, 20.5) is None
    assert tl.overlaps(ivals) == []
    clash = tl.intervals([*ev, tl.OwnershipEvent(22, "C", "assigned", frozenset({1}))], end=50, exits={"B": 29})
    assert {(a.member, b.member) for a, b in tl.overlaps(clash)} == {("A", "C"), ("B", "C")}


def test_lag_is_summed_per_owner_and_unowned_partitions_are_separate():
    ivals = [tl.Interval("A", 0, 0, 100), tl.Interval("B", 1, 0, 5)]
    samples = [tl.Sample(1, {0: 10, 1: None, 2: 3}, {0: 15, 1: 7, 2: 3}),
               tl.Sample(6, {0: 15, 1: 7, 2: 3}, {0: 20, 1: 9, 2: 4})]
    lag = tl.lag_by_member(samples, ivals, ["A", "B"])
    assert lag == {"A": [(1, 5), (6, 5)], "B": [(1, 7), (6, 0)], "unowned": [(1, 0), (6, 3)]}


def test_read_stats_counts_lost_and_charges_duplicates_to_the_later_reader():
    reads = {"A": [(1.0, 0), (1.0, 1), (5.0, 2)], "B": [(3.0, 2), (3.0, 3)], "consumer": [(4.0, 3)]}
    s = tl.read_stats(range(6), reads)
    assert s.produced == 6 and s.read_by == {"A": 3, "B": 2, "consumer": 1}
    assert s.lost == (4, 5)
    assert s.duplicates == 2 and s.duplicates_by == {"A": 1, "consumer": 1}
    assert tl.read_stats(range(2), {"A": [(1.0, 0), (1.0, 1)]}).lost == ()


def test_planned_outside_ownership_flags_a_partition_the_query_did_not_own():
    ivals = [tl.Interval("A", 0, 10, 20), tl.Interval("A", 1, 10, 30)]
    progress = {"A": [{"batch": 1, "t": 15, "ms": 500, "ranges": {"d-0": [0, 5], "d-1": [0, 5]}},
                      {"batch": 2, "t": 25, "ms": 500, "ranges": {"d-0": [5, 5], "d-1": [5, 9]}},
                      {"batch": 3, "t": 20.5, "ms": 100, "ranges": {"d-0": [5, 6]}}]}
    assert tl.planned_outside_ownership(progress, ivals, "d") == [{"member": "A", "batch": 2, "partition": 0}]


def test_changes_merge_events_within_a_second():
    ev = [tl.OwnershipEvent(t, "A", "assigned", frozenset({0})) for t in (1.0, 1.5, 1.9, 5.0, 9.0, 9.2)]
    assert tl.changes(ev) == [1.0, 5.0, 9.0]
