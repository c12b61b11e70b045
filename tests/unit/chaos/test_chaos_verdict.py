"""The chaos suite's judge: lost, deleted, duplicates against one micro-batch per handover."""

from __future__ import annotations

from collections import Counter

from chaos.sink import Batch
from chaos.verdict import separate_log_copies, tally

# 8 records, seq s at partition s % 2, offset s // 2
PRODUCED = {s: (s % 2, s // 2) for s in range(8)}


def _rows(*seqs):
    return tuple((s % 2, s // 2, s) for s in seqs)


def test_all_read_once():
    t = tally(PRODUCED, [Batch("a-1", 0, 1.0, _rows(*range(8)))], acquisitions={"a": Counter({0: 1, 1: 1})})
    assert (t.produced, t.read, t.lost, t.dup_total, t.dup_max, t.wrong) == (8, 8, 0, 0, 1, 0)
    assert not t.dup_breaches


def test_lost_and_deleted_are_told_apart():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 6, 7))]
    t = tally(PRODUCED, batches, acquisitions={}, deleted_before={0: 2})  # seq 2 (p0, o1) deleted
    assert t.deleted == 1
    assert t.lost == 3 and sorted(x[0] for x in t.lost_examples) == [3, 4, 5]


def test_expected_failure_counts_only_below_the_commits():
    t = tally(PRODUCED, [Batch("a-1", 0, 1.0, _rows(0, 1))], acquisitions={}, counted_below={0: 2, 1: None})
    assert t.lost == 1 and t.lost_examples[0][0] == 2


def test_one_batch_per_handover_is_within_the_promise():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 2)), Batch("a-1", 1, 2.0, _rows(4, 6)),
               Batch("b-1", 0, 3.0, _rows(4, 6))]  # b re-reads a's last uncommitted batch
    t = tally({s: PRODUCED[s] for s in (0, 2, 4, 6)}, batches, acquisitions={"a": Counter({0: 1}), "b": Counter({0: 1})})
    assert (t.dup_total, t.dup_max) == (2, 2) and not t.dup_breaches


def test_rereads_without_a_handover_break_the_promise():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 2)), Batch("a-1", 1, 2.0, _rows(0, 2))]
    t = tally({0: (0, 0), 2: (0, 1)}, batches, acquisitions={"a": Counter({0: 1})})
    assert t.dup_breaches and "partition 0" in t.dup_breaches[0]


def test_more_than_one_batch_per_handover_breaks_the_promise():
    batches = [Batch("a-1", 0, 1.0, _rows(0)), Batch("a-1", 1, 2.0, _rows(2)),
               Batch("b-1", 0, 3.0, _rows(0, 2))]  # b re-reads two of a's batches
    t = tally({0: (0, 0), 2: (0, 1)}, batches, acquisitions={"a": Counter({0: 1}), "b": Counter({0: 1})})
    assert t.dup_breaches


def test_redundant_replicas_are_not_duplicates():
    batches = [Batch("a-1", 0, 1.0, _rows(*range(8))), Batch("b-1", 0, 1.5, _rows(*range(8)))]
    acq = {"a": Counter({0: 1, 1: 1}), "b": Counter({0: 1, 1: 1})}
    assert tally(PRODUCED, batches, acquisitions=acq, per_member=True).dup_total == 0
    assert tally(PRODUCED, batches, acquisitions=acq).dup_total == 8


def test_a_read_at_the_wrong_place_is_counted():
    t = tally({0: (0, 0)}, [Batch("a-1", 0, 1.0, ((0, 5, 0),))], acquisitions={})
    assert t.wrong == 1


def test_handovers_are_counted_per_partition_for_the_duplicates_per_handover_figure():
    # p0: a, then b, then a again (2 handovers); p1: a only, acquired once (0)
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1)), Batch("b-1", 0, 2.0, _rows(2)), Batch("a-1", 1, 3.0, _rows(4, 3))]
    t = tally({s: PRODUCED[s] for s in range(5)}, batches,
              acquisitions={"a": Counter({0: 2, 1: 1}), "b": Counter({0: 1})})
    assert t.handovers == 2 and t.dup_total == 0
    # acquisitions beyond the owner changes count too (a member that got p1 back twice)
    t = tally({s: PRODUCED[s] for s in range(5)}, batches,
              acquisitions={"a": Counter({0: 2, 1: 3}), "b": Counter({0: 1})})
    assert t.handovers == 4


def test_an_unread_record_of_unknown_offset_is_lost_and_a_read_one_is_not_wrong():
    """Delivery reports without an offset (librdkafka, DUPLICATE_SEQUENCE_NUMBER) that the run
    could not confirm in the log: unread, the record is lost (nothing excuses it); read at some
    offset, it is not a wrong read."""
    produced = {**PRODUCED, 3: (1, None), 5: (1, None)}
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2, 3, 4, 6, 7))]
    t = tally(produced, batches, acquisitions={}, deleted_before={1: 9}, counted_below={0: 0, 1: 0})
    assert (t.lost, t.wrong, t.deleted) == (1, 0, 0)
    assert t.lost_examples == [(5, 1, -1)]


def test_a_record_written_twice_is_two_records_each_read_once():
    """Seen in a rolling restart of Kafka 4.0.1: seq 3 acknowledged at (1, 1) and also in the log
    at (1, 2) (the producer re-sent it), read once at each offset: nothing wrong, no duplicate."""
    produced = {0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1), 4: (0, 2), 5: (1, 3)}
    rows = ((0, 0, 0), (1, 0, 1), (0, 1, 2), (1, 1, 3), (1, 2, 3), (0, 2, 4), (1, 3, 5))
    batches = [Batch("a-1", 0, 1.0, rows)]
    judged = tally(produced, batches, acquisitions={"a": Counter({0: 1, 1: 1})})
    assert judged.wrong == 1 and judged.dup_breaches  # without the log's word: a wrong read, a re-read
    produced2, batches2 = separate_log_copies(produced, batches, {3: [(1, 1), (1, 2)]})
    assert produced2[-1] == (1, 2) and produced2[3] == (1, 1)
    t = tally(produced2, batches2, acquisitions={"a": Counter({0: 1, 1: 1})})
    assert (t.produced, t.read, t.lost, t.wrong, t.dup_total) == (7, 7, 0, 0, 0) and not t.dup_breaches


def test_each_copy_must_be_read_and_only_once():
    produced = {0: (0, 0), 1: (0, 2)}
    copies = {0: [(0, 0), (0, 1)]}
    # the copy at offset 1 skipped: lost
    p2, b2 = separate_log_copies(produced, [Batch("a-1", 0, 1.0, ((0, 0, 0), (0, 2, 1)))], copies)
    t = tally(p2, b2, acquisitions={"a": Counter({0: 1})})
    assert t.lost == 1 and t.lost_examples == [(-1, 0, 1)]
    # the copy at offset 1 read twice without a handover: a breach, as for any record
    rows = ((0, 0, 0), (0, 1, 0), (0, 2, 1))
    p3, b3 = separate_log_copies(produced, [Batch("a-1", 0, 1.0, rows), Batch("a-1", 1, 2.0, ((0, 1, 0),))], copies)
    t = tally(p3, b3, acquisitions={"a": Counter({0: 1})})
    assert (t.lost, t.wrong, t.dup_total) == (0, 0, 1) and t.dup_breaches
    # a read of the record at an offset the log does not hold it at stays wrong
    p4, b4 = separate_log_copies(produced, [Batch("a-1", 0, 1.0, rows + ((0, 5, 0),))], copies)
    assert tally(p4, b4, acquisitions={"a": Counter({0: 1})}).wrong == 1
