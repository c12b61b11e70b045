"""The order rule of the history checker (chaos.history.order_within_ownership): within one
ownership of a partition, offsets only rise and no offset holding a record is skipped outside a
reported loss."""

from __future__ import annotations

from chaos.history import Owned, Ownership, order_within_ownership
from chaos.sink import Batch
from chaos.verdict import tally

# one partition, seq s at offset s
PRODUCED = {s: (0, s) for s in range(10)}


def _rows(*offsets, inc_base=0):
    return tuple((0, o, o + inc_base) for o in offsets)


def breaks(produced, batches, ownership=(), **kw):
    """Each batch judged at its time ``t`` against ``ownership``."""
    return order_within_ownership([(b, b.t) for b in batches], Owned(ownership), produced, **kw)


def test_a_clean_read_has_no_break():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2)), Batch("a-1", 1, 2.0, _rows(3, 4, 5, 6)),
               Batch("a-1", 2, 3.0, _rows(7, 8, 9))]
    assert breaks(PRODUCED, batches, [Ownership("a-1", "acquired", (0,), 0.5)]) == []


def test_a_gap_is_a_break():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2)), Batch("a-1", 1, 2.0, _rows(5, 6))]
    (only,) = breaks(PRODUCED, batches)
    assert "a-1 partition 0 (ownership 0): gap" in only and "[3, 5)" in only and "2 records" in only


def test_a_gap_inside_one_batch_is_a_break():
    assert breaks(PRODUCED, [Batch("a-1", 0, 1.0, _rows(0, 1, 3))])


def test_a_reorder_is_a_break():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2, 3)), Batch("a-1", 1, 2.0, _rows(2, 3, 4))]
    (only,) = breaks(PRODUCED, batches, [Ownership("a-1", "acquired", (0,), 0.5)])
    assert "reorder" in only and "offset 2" in only
    # the same offset twice in a row is not a rise either
    assert breaks(PRODUCED, [Batch("a-1", 0, 1.0, _rows(0, 1, 1, 2))])


def test_a_reread_in_a_new_ownership_is_fine():
    # a reads 0-5, b takes over from the group's offset 3 (a's last batch uncommitted), then a gets
    # the partition back where b committed (8)
    own = [Ownership("a-1", "acquired", (0,), 0.5), Ownership("a-1", "revoked", (0,), 2.5),
           Ownership("b-1", "acquired", (0,), 2.6), Ownership("b-1", "revoked", (0,), 3.4),
           Ownership("a-1", "acquired", (0,), 3.5)]
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2)), Batch("a-1", 1, 2.0, _rows(3, 4, 5)),
               Batch("b-1", 0, 3.0, _rows(3, 4, 5, 6, 7)), Batch("a-1", 2, 4.0, _rows(8, 9))]
    assert breaks(PRODUCED, batches, own) == []
    # and the same member re-reading after it lost the partition and got it back itself
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1, 2)), Batch("a-1", 1, 2.0, _rows(3, 4, 5)),
               Batch("a-1", 2, 4.0, _rows(3, 4, 5, 6))]
    assert breaks(PRODUCED, batches, own) == []
    assert breaks(PRODUCED, batches, own[:1])  # no re-acquisition: a break


def test_a_gap_explained_by_deletion_is_fine():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1)), Batch("a-1", 1, 2.0, _rows(6, 7))]
    # retention moved the log start to 6
    assert breaks(PRODUCED, batches, deleted_before={0: 6}) == []
    # a logged failOnDataLoss=false skip of [2, 6)
    assert breaks(PRODUCED, batches, skipped=[(0, 2, 6)]) == []
    # a skip that covers only part of the gap leaves the rest a break
    (only,) = breaks(PRODUCED, batches, skipped=[(0, 2, 4)])
    assert "[4, 6)" in only
    # offsets where no record is (e.g. transaction markers) are no gap
    assert breaks({s: (0, s) for s in (0, 1, 6, 7)}, batches) == []


def test_a_new_incarnation_of_the_topic_starts_over():
    # incarnation 0: seqs 0-9 at offsets 0-9; incarnation 1 (topic deleted, created again): seqs 100-104 at 0-4
    produced = {**PRODUCED, **{100 + o: (0, o) for o in range(5)}}
    incarnation = {s: (1 if s >= 100 else 0) for s in produced}
    read_all = [Batch("a-1", 0, 1.0, _rows(0, 1, 2, 3)), Batch("a-1", 1, 2.0, _rows(0, 1, 2, 3, 4, inc_base=100))]
    assert breaks(produced, read_all, incarnation_of=incarnation) == []
    # the new incarnation's first records skipped: a gap
    skipped_start = [Batch("a-1", 0, 1.0, _rows(0, 1, 2, 3)), Batch("a-1", 1, 2.0, _rows(3, 4, inc_base=100))]
    (only,) = breaks(produced, skipped_start, incarnation_of=incarnation)
    assert "gap" in only and "[0, 3)" in only
    # without the incarnations the same read looks like a reorder
    assert breaks(produced, read_all)
    # the unread records of the deleted incarnation are gone with the topic, not lost
    t = tally(produced, read_all, acquisitions={}, incarnation_of=incarnation, gone_incarnations={0})
    assert (t.lost, t.gone) == (0, 6)
    t = tally(produced, skipped_start, acquisitions={}, incarnation_of=incarnation, gone_incarnations={0})
    assert (t.lost, t.gone) == (3, 6)


def test_redundant_replicas_are_judged_one_by_one():
    batches = [Batch("a-1", 0, 1.0, _rows(0, 1)), Batch("b-1", 0, 1.1, _rows(0, 1)),
               Batch("a-1", 1, 2.0, _rows(2, 3)), Batch("b-1", 1, 2.1, _rows(3))]
    (only,) = breaks(PRODUCED, batches)
    assert only.startswith("b-1 partition 0 (ownership 0): gap")
