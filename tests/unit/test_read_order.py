"""The order rule of the broker bounce ports (tests/read_order.py), each break on a crafted
history it must catch, and the histories it must pass: a new ownership may start anywhere."""

from __future__ import annotations

from read_order import java_order_breaks, planned_order_breaks


def cb(kind: str, *parts: int, topic: str = "t") -> dict:
    return {"event": kind, "partitions": [f"{topic}-{p}" for p in parts]}


def polled(**ranges: tuple[int, int]) -> dict:
    """A poll: ``p0=(first, last)`` for partition 0 of topic t."""
    return {"event": "records", "offset_ranges": {f"t-{k[1:]}": list(v) for k, v in ranges.items()}}


def java(*events: dict) -> list[str]:
    return java_order_breaks("j", events, "t")


# -- the Java consumer -------------------------------------------------------------------------
def test_polls_going_on_in_each_ownership_pass():
    assert java(cb("assigned", 0, 1), polled(p0=(0, 4)), polled(p0=(5, 9), p1=(0, 2)), polled(p1=(3, 3))) == []


def test_a_poll_reading_back_within_one_ownership_is_caught():
    assert java(cb("assigned", 0), polled(p0=(0, 4)), polled(p0=(3, 6))) == [
        "j partition 0: read from 3 after 4 in one ownership"]


def test_a_poll_skipping_offsets_within_one_ownership_is_caught():
    assert java(cb("assigned", 0), polled(p0=(0, 4)), polled(p0=(6, 8))) == [
        "j partition 0: read from 6 after 4 in one ownership"]


def test_a_new_ownership_starts_where_the_group_says():
    # eager: all revoked, all assigned again; the re-read is the exactly-once tally's to judge
    assert java(cb("assigned", 0), polled(p0=(0, 4)), cb("revoked", 0), cb("assigned", 0), polled(p0=(2, 5))) == []
    assert java(cb("assigned", 0), polled(p0=(0, 4)), cb("lost", 0), cb("assigned", 0), polled(p0=(9, 9))) == []


def test_an_incremental_assignment_keeps_the_partitions_held():
    history = [cb("assigned", 0), polled(p0=(0, 4)), cb("assigned", 1)]
    assert java(*history, polled(p0=(5, 6), p1=(0, 0))) == []
    assert java(*history, polled(p0=(3, 6))) == ["j partition 0: read from 3 after 4 in one ownership"]


def test_a_poll_of_a_partition_not_owned_is_caught():
    assert java(cb("assigned", 0), cb("revoked", 0), polled(p0=(0, 1))) == [
        "j read partition 0 [0, 1] while not owning it"]
    assert java(polled(p0=(0, 1))) == ["j read partition 0 [0, 1] while not owning it"]


def test_a_poll_whose_count_disagrees_with_its_range_is_caught():
    # 0..4 holds 5 records: 4 read is a gap inside the poll, 6 a record read twice or out of order
    gap = {"event": "records", "offset_ranges": {"t-0": [0, 4]}, "per_partition": {"t-0": 4}}
    assert java(cb("assigned", 0), gap) == ["j partition 0: one poll read 4 records from 0 to 4"]
    back = {"event": "records", "offset_ranges": {"t-0": [3, 1]}, "per_partition": {"t-0": 3}}
    assert java(cb("assigned", 0), back) == ["j partition 0: one poll read 3 records from 3 to 1"]
    whole = {"event": "records", "offset_ranges": {"t-0": [0, 4]}, "per_partition": {"t-0": 5}}
    assert java(cb("assigned", 0), whole) == []


def test_other_topics_are_not_judged():
    assert java(cb("assigned", 0, topic="other"), {"event": "records", "offset_ranges": {"other-0": [7, 9]}}) == []


# -- a query's batches and their plans -----------------------------------------------------------
def rows(p: int, *offsets: int) -> list[tuple[int, int]]:
    return [(p, o) for o in offsets]


def test_batches_reading_their_plans_in_a_row_pass():
    assert planned_order_breaks([(0, rows(0, 0, 1, 2), {0: (0, 3), 1: (0, 0)}),
                                 (1, rows(0, 3, 4) + rows(1, 0, 1), {0: (3, 5), 1: (0, 2)})]) == []


def test_a_batch_reading_out_of_offset_order_is_caught():
    assert planned_order_breaks([(0, rows(0, 1, 0, 2), {0: (0, 3)})]) == [
        "batch 0 partition 0: planned [0, 3), read 3 records [1, 0, 2]..[1, 0, 2]"]


def test_a_batch_reading_less_or_more_than_planned_is_caught():
    assert len(planned_order_breaks([(0, rows(0, 0, 1), {0: (0, 3)})])) == 1
    assert len(planned_order_breaks([(0, rows(0, 0, 1, 2, 2), {0: (0, 3)})])) == 1
    assert planned_order_breaks([(0, rows(1, 0), {0: (0, 0)})]) == ["batch 0 read partition 1, which it did not plan"]


def test_a_plan_not_going_on_from_the_batch_before_is_caught():
    first = (0, rows(0, 0, 1, 2), {0: (0, 3)})
    assert planned_order_breaks([first, (1, rows(0, 4), {0: (4, 5)})]) == [
        "batch 1 partition 0: planned from 4, the batch before ended at 3, in one ownership"]
    assert planned_order_breaks([first, (1, rows(0, 2, 3), {0: (2, 4)})]) == [
        "batch 1 partition 0: planned from 2, the batch before ended at 3, in one ownership"]


def test_a_partition_planned_again_after_a_gap_starts_a_new_ownership():
    assert planned_order_breaks([(0, rows(0, 0, 1, 2), {0: (0, 3)}), (1, [], {1: (0, 0)}),
                                 (2, rows(0, 1), {0: (1, 2)})]) == []


def test_a_batch_twice_or_without_a_plan_is_caught():
    assert planned_order_breaks([(0, [], {0: (0, 0)}), (0, [], {0: (0, 0)})]) == ["batch 0 ran twice"]
    assert planned_order_breaks([(0, rows(0, 0), None)]) == ["batch 0: no plan logged"]
