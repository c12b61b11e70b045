"""A micro-batch that completed after its partitions left the member (it left the group for
kafka.max.poll.interval.ms, a drain gave up, a fence): when the partitions come back and nobody
committed them meanwhile, the batch's end is committed and reading continues there (no
livelock for a query alone whose every batch outlasts the interval); else the group decides."""

from __future__ import annotations

from log_double import LogDouble

from assignment.model import TopicPartition
from spark_groupsource.config import parse_stream_options
from spark_groupsource.group.memory_member import InMemoryMembership
from spark_groupsource.planning.late_batch import lost_ranges, resume_offset
from spark_groupsource.planning.offsets import StreamOffset
from spark_groupsource.planning.stream_driver import StreamDriver

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_resume_offset():
    assert resume_offset(5, 10, 5) == 10  # nobody committed since the batch began
    assert resume_offset(0, 10, None) == 10  # nobody ever committed (a first batch)
    assert resume_offset(5, 10, 7) is None  # another member committed part of it: from there
    assert resume_offset(5, 10, 10) is None  # at its end already
    assert resume_offset(5, 10, 12) is None  # read past it
    assert resume_offset(5, 10, 2) is None  # moved back (an operator's reset): the group decides
    assert resume_offset(5, 5, 5) is None  # an empty range


def test_lost_ranges_are_those_not_held_under_the_planned_acquisition():
    ranges = {T0: (0, 10), T1: (3, 3)}
    assert lost_ranges(ranges, {T0: 1, T1: 2}, {T0: 1, T1: 2}) == {}
    assert lost_ranges(ranges, {T0: 1, T1: 2}, {}) == {T0: (0, 10)}  # T1's range is empty
    assert lost_ranges(ranges, {T0: 1, T1: 2}, {T0: 3}) == {T0: (0, 10)}  # lost and acquired again


def _driver(ends):
    group = InMemoryMembership()
    log = LogDouble(ends, group)
    opts = parse_stream_options({"kafka.bootstrap.servers": "unused:9092", "kafka.group.id": "g",
                                 "subscribe": "t", "startingoffsets": "earliest"})
    d = StreamDriver(opts, membership=group, reader=log)
    d.fresh_query = True
    return d, group, log


def _ranges(end_json):
    return dict(StreamOffset.from_json(end_json).ranges) if end_json else {}


def test_alone_a_first_batch_that_outlasted_the_interval_is_committed_after_the_rejoin():
    d, group, log = _driver({T0: 10})
    group.assign({T0})
    batch = d.plan(None, None)
    assert _ranges(batch) == {T0: (0, 10)}
    group.drop_out()  # the member left the group for kafka.max.poll.interval.ms
    assert d.plan(batch, None) == batch  # the batch completes: its commit is skipped, nothing owned
    assert group.offsets == {T0: 0}  # only where it started (committed at the first plan)
    group.assign({T0})  # rejoined: the same partition back, nobody committed it meanwhile
    log.ends[T0] = 12
    assert _ranges(d.plan(batch, None)) == {T0: (10, 12)}  # not [0, 12): no livelock
    assert group.offsets == {T0: 10}


def test_the_batch_is_committed_when_the_group_still_holds_its_start():
    d, group, log = _driver({T0: 5, T1: 5})
    group.assign({T0, T1})
    first = d.plan(None, None)
    log.ends.update({T0: 9, T1: 9})
    second = d.plan(first, None)
    assert group.offsets == {T0: 5, T1: 5} and _ranges(second) == {T0: (5, 9), T1: (5, 9)}
    group.drop_out()
    d.plan(second, None)  # completed late
    group.offsets[T1] = 7  # meanwhile another member read T1 and committed up to 7
    group.assign({T0, T1})
    nxt = _ranges(d.plan(second, None))
    assert nxt == {T0: (9, 9), T1: (7, 9)}  # T0: nobody moved it; T1: from the other's commit
    assert group.offsets == {T0: 9, T1: 7}


def test_a_late_batch_of_a_partition_that_went_elsewhere_changes_nothing_later():
    d, group, log = _driver({T0: 10})
    group.assign({T0})
    batch = d.plan(None, None)
    group.drop_out()
    d.plan(batch, None)
    group.offsets[T0] = 14  # the other member read past it
    group.assign({T0})
    log.ends[T0] = 15
    assert _ranges(d.plan(batch, None)) == {T0: (14, 15)}
    assert d.late == {}
