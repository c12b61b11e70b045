"""The history checker (chaos/history.py) on crafted histories: one per rule, each a history the
verdict before it (chaos/verdict.py at 0a70716: tally and order_breaks) passed, which the checker
fails. Partition 0 throughout; the record at offset o is seq o."""

from __future__ import annotations

import json
import logging
from collections import Counter

from assignment.model import TopicPartition
from chaos import __main__ as cli
from chaos.history import (
    Commit,
    GroupSample,
    History,
    Ownership,
    Plan,
    acquisitions,
    judge,
    parse_member_log,
)
from chaos.run import Row
from chaos.sink import Batch, read_batches, write_batch
from chaos.traffic import unacknowledged
from chaos.verdict import completeness, tally
from spark_groupsource.group import history as product_history

PRODUCED = {s: (0, s) for s in range(10)}
SPARK = {"a-1", "b-1"}


def _end(lo: int, hi: int) -> str:
    return json.dumps({"v": 1, "ranges": {"t": {"0": [lo, hi]}}}, separators=(",", ":"))


def _plan(owner: str, gen: int, t: float, lo: int, hi: int) -> Plan:
    return Plan(owner, "m" + owner, gen, t, {0: (lo, hi)}, _end(lo, hi))


def _read(owner: str, batch: int, t: float, lo: int, hi: int) -> Batch:
    return Batch(owner, batch, t, tuple((0, o, o) for o in range(lo, hi)), t + 0.1, t + 0.2, _end(lo, hi))


def _acq(owner: str, t: float, gen: int, event: str = "acquired") -> Ownership:
    return Ownership(owner, event, (0,), t, "m" + owner, gen)


def _judge(h: History):
    return judge(h, PRODUCED, spark_owners=SPARK)


# -- a: one reader at a time -----------------------------------------------------------------------
def test_a_two_members_planning_one_partition_in_one_generation_fail():
    # a-1 and b-1 both hold partition 0 in generation 3; a-1 reads [0, 5), b-1 [5, 10): nothing
    # lost or read twice, each read in order (the old verdict: no breach, 1 handover)
    h = History(ownership=[_acq("a-1", 0.0, 3), _acq("b-1", 0.1, 3)],
                plans=[_plan("a-1", 3, 1.0, 0, 5), _plan("b-1", 3, 2.0, 5, 10)],
                reads=[_read("a-1", 0, 1.0, 0, 5), _read("b-1", 0, 2.0, 5, 10)])
    j = _judge(h)
    (only,) = j.breaches
    assert only.startswith("two owners: generation 3: partition 0 planned by a-1 (member ma-1")
    # the coordinator describing one partition in two members' assignments fails too
    h = History(ownership=[_acq("a-1", 0.0, 3)], plans=[_plan("a-1", 3, 1.0, 0, 10)],
                reads=[_read("a-1", 0, 1.0, 0, 10)], samples=[GroupSample(1.5, "Stable", {"ma": (0, 1), "mb": (0,)})])
    assert "partitions [0] in two members" in _judge(h).double_plans[0]
    # the redundant assignor's replicas own a partition each by design: not judged there
    h.exclusive = False
    assert _judge(h).double_plans == []


def test_a_two_members_taking_turns_on_one_partition_fail():
    # the A, B, A, B of two members each acquiring the partition once, in different generations:
    # the old verdict saw lost 0, 10 duplicates, 3 handovers, no breach, no order break
    h = _abab()
    (only,) = _judge(h).double_plans
    assert only.startswith("partition 0: b-1 read it at 2.0, inside a-1's ownership (its reads 1.0-3.0")


def _abab() -> History:
    return History(ownership=[_acq("a-1", 0.0, 1), _acq("b-1", 0.1, 2)],
                   plans=[_plan("a-1", 1, 1.0, 0, 5), _plan("b-1", 2, 2.0, 0, 5),
                          _plan("a-1", 1, 3.0, 5, 10), _plan("b-1", 2, 4.0, 5, 10)],
                   reads=[_read("a-1", 0, 1.0, 0, 5), _read("b-1", 0, 2.0, 0, 5),
                          _read("a-1", 1, 3.0, 5, 10), _read("b-1", 1, 4.0, 5, 10)])


# -- b: no commit accepted after a fence -------------------------------------------------------
def test_b_a_commit_accepted_after_its_member_was_fenced_fails():
    base = dict(ownership=[_acq("a-1", 0.0, 2)], plans=[_plan("a-1", 2, 1.0, 0, 10)],
                reads=[_read("a-1", 0, 1.0, 0, 10)])
    fenced_then_accepted = [Commit("a-1", "ma-1", 2, 2.0, (), fenced=(0,)), Commit("a-1", "ma-1", 2, 3.0, ((0, 10),))]
    (only,) = _judge(History(**base, commits=fenced_then_accepted)).breaches
    assert only.startswith("fenced commit: a-1 (member ma-1, generation 2): commit of [(0, 10)] sent 1.0s after")
    # a fence the coordinator took back (an injected error): the member acquired under the same
    # generation again before the commit
    h = History(**base, commits=fenced_then_accepted)
    h.ownership = [*h.ownership, _acq("a-1", 2.5, 2)]
    assert _judge(h).fenced_commits == []
    # classic: a commit of generation 2 sent after generation 3 formed (b-1 acquired under it)
    h = History(**base, commits=[Commit("a-1", "ma-1", 2, 5.0, ((0, 10),))])
    h.ownership = [*h.ownership, Ownership("b-1", "acquired", (), 4.0, "mb-1", 3)]
    (only,) = _judge(h).fenced_commits
    assert "sent 1.0s after generation 3 formed, accepted" in only
    # KIP-848 epochs are each member's own: no group-wide rule on them
    h.classic = False
    assert _judge(h).fenced_commits == []
    # the same commit accepted before the fence is fine
    accepted_then_fenced = [Commit("a-1", "ma-1", 2, 1.5, ((0, 10),)), Commit("a-1", "ma-1", 2, 2.0, (), fenced=(0,))]
    assert _judge(History(**base, commits=accepted_then_fenced)).breaches == []


# -- c: no read after the revocation ended --------------------------------------------------------
def test_c_a_batch_planned_after_the_revocation_ended_fails():
    # a-1 reads [0, 5), gives the partition up at 5.0 (b-1 takes it, reads nothing of it), then
    # plans [5, 10) at 6.0: in order, nothing lost or twice (the old verdict: no breach)
    h = History(ownership=[_acq("a-1", 0.0, 1), _acq("a-1", 5.0, 1, "revoked"), _acq("b-1", 5.2, 2)],
                plans=[_plan("a-1", 1, 1.0, 0, 5), _plan("a-1", 1, 6.0, 5, 10)],
                reads=[_read("a-1", 0, 1.0, 0, 5), _read("a-1", 1, 6.0, 5, 10)])
    (only,) = _judge(h).breaches
    assert only == ("read while not owned: a-1 planned partition 0 (batch 1, member ma-1, generation 1) at 6.0, "
                    "1.0s after giving it up")
    # a batch planned before the revocation may end after it: the one batch the barrier allows
    h.plans[1] = _plan("a-1", 1, 4.9, 5, 10)
    assert _judge(h).breaches == []


# -- d: handovers from the group's generations ----------------------------------------------------
def test_d_handovers_count_the_groups_acquisitions_not_the_readers_turns():
    h = _abab()
    j = _judge(h)
    assert j.handovers == 1  # a-1 and b-1 acquired it once each; the readers' output shows 3 turns
    t = tally(PRODUCED, h.reads, acquisitions=acquisitions(h.ownership))
    assert (t.lost, t.dup_total, t.handovers) == (0, 10, 1)
    (breach,) = t.dup_breaches
    assert breach == "partition 0: 10 re-reads (a record up to 2x) of 2 batches with 1 handovers"


# -- e: order within one ownership ----------------------------------------------------------------
def test_e_a_reread_within_one_ownership_fails():
    # a-1 lost the partition and got it back before reading; then it reads [0, 5), [3, 8) and
    # [8, 10) in that one ownership. The old verdict allowed one step back per acquisition
    # after the first, whenever it happened: no order break, and 2 re-reads of 1 batch for
    # 1 handover
    h = History(ownership=[_acq("a-1", 0.0, 1), _acq("a-1", 0.2, 1, "revoked"), _acq("a-1", 0.5, 2)],
                plans=[_plan("a-1", 2, 1.0, 0, 5), _plan("a-1", 2, 2.0, 3, 8), _plan("a-1", 2, 3.0, 8, 10)],
                reads=[_read("a-1", 0, 1.0, 0, 5), _read("a-1", 1, 2.0, 3, 8), _read("a-1", 2, 3.0, 8, 10)])
    (only,) = _judge(h).breaches
    assert only == ("order within one ownership: a-1 partition 0 (ownership 2): reorder, read offset 3 (batch 1) "
                    "after 4 (batch 0) with no new acquisition of the partition")


def test_a_spark_batch_with_no_plan_cannot_be_judged():
    h = History(ownership=[_acq("a-1", 0.0, 1)], reads=[_read("a-1", 0, 1.0, 0, 10)])
    (only,) = _judge(h).breaches
    assert only.startswith("no plan: a-1 batch 0 read partitions [0]")
    # a replay: planned by the incarnation before, read by this one
    h = History(ownership=[_acq("a-1", 0.0, 1), _acq("a-2", 5.0, 2)], plans=[_plan("a-1", 1, 1.0, 0, 10)],
                reads=[_read("a-2", 0, 6.0, 0, 10)])
    j = judge(h, PRODUCED, spark_owners={"a-1", "a-2"})
    assert (j.breaches, j.replayed) == ([], 1)


def test_a_first_batch_that_only_records_the_partitions_needs_no_plan_and_one_with_rows_does():
    # the planner's first answer before the member owns anything (Kafka 3.9.1, 3 nodes, 2026-12-07:
    # member_frozen, coordinator_crash, partitions_added): Spark runs it, reading nothing
    first = json.dumps(json.dumps({"v": 1, "ranges": {}, "known": {"t": 4}}, separators=(",", ":")))
    empty = Batch("a-1", 0, 0.5, (), started=0.5, ended=0.6, end=first)
    assert judge(History(ownership=[_acq("a-1", 1.0, 1)], reads=[empty]), PRODUCED, spark_owners=SPARK).breaches == []
    # the same end offset with rows read is still a batch with no plan
    with_rows = Batch("a-1", 0, 0.5, ((0, 0, 0),), started=0.5, ended=0.6, end=first)
    (only,) = judge(History(ownership=[_acq("a-1", 1.0, 1)], reads=[with_rows]), PRODUCED, spark_owners=SPARK).breaches
    assert only.startswith("no plan: a-1 batch 0 read partitions [0]")
    # and no rows with ranges in its end offset: a plan the history misses
    ranged = Batch("a-1", 0, 0.5, (), started=0.5, ended=0.6, end=json.dumps(_end(0, 0)))
    assert len(judge(History(ownership=[_acq("a-1", 1.0, 1)], reads=[ranged]), PRODUCED,
                     spark_owners=SPARK).breaches) == 1


# -- f, g: the run's samples and its end -----------------------------------------------------------
def test_f_g_a_run_without_offset_samples_or_that_never_reached_the_end_fails():
    assert completeness(True, 0, 7) == ["the committed-offset sampler took no successful sample (7 failed asks)"]
    assert completeness(False, 12, 0) == ["the group's commits did not reach the log end"]
    assert completeness(None, 12, 3) == []  # a run expected to fail: its end is not judged


# -- h: an empty or incomplete suite ---------------------------------------------------------------
def test_h_an_empty_or_skipped_suite_does_not_pass(capsys):
    assert cli.main(["--only", " , "]) == 1
    assert "an empty suite proves nothing" in capsys.readouterr().err
    ok = Row("driver_kill9", ok=True)
    assert cli.exit_code([], {}) == 1
    assert cli.exit_code([ok], {"cooperative_churn": "no Java consumer CLI"}) == 1
    assert cli.exit_code([ok], {}) == 0


# -- i: records never acknowledged, or acknowledged and missing ------------------------------------
def test_i_unacknowledged_records_are_accounted_and_acknowledged_missing_ones_lost():
    delivered = {0: (0, 0), 1: (0, 1), 2: (0, None)}  # 2: acknowledged, offset unknown, not in the log
    found, gone = unacknowledged(5, delivered, {3: "Local: Message timed out"}, {0: [(0, 0)], 1: [(0, 1)], 3: [(0, 2)]})
    assert found == {3: (0, 2)}  # written after all: a reader must read it
    assert gone == {4: "no delivery report"}  # never written: said, not lost
    produced = {**delivered, **found}
    t = tally(produced, [_read("a-1", 0, 1.0, 0, 2)], acquisitions={"a": Counter({0: 1})})
    assert (t.lost, sorted(t.lost_examples)) == (2, [(2, 0, -1), (3, 0, 2)])


# -- the product's history lines, as the checker reads them ---------------------------------------
def test_the_products_history_lines_parse(caplog):
    tp = TopicPartition("t", 0)
    with caplog.at_level(logging.INFO, logger="spark_groupsource.history"):
        product_history.record("acquired", 1.5, member="m1", gen=4, protocol="classic",
                               partitions=product_history.tps([tp, TopicPartition("other", 0)]))
        product_history.record("plan", 2.0, member="m1", gen=4, protocol="range", end=_end(0, 7))
        product_history.record("commit", 2.5, member="m1", gen=4, protocol="classic", accepted=[["t", 0, 7]],
                               fenced=[], failed=[])
    text = "\n".join(f"2026-12-07 03:00:00,000 INFO {r.name}: {r.getMessage()}" for r in caplog.records)
    own, plans, commits = parse_member_log("a-1", text + "\nnoise\n" + text[:40], "t")
    assert own == [Ownership("a-1", "acquired", (0,), 1.5, "m1", 4)]
    assert plans == [Plan("a-1", "m1", 4, 2.0, {0: (0, 7)}, _end(0, 7))]
    assert commits == [Commit("a-1", "m1", 4, 2.5, ((0, 7),), ())]


def test_a_sink_batch_names_its_plan_by_the_end_offset_spark_logged(tmp_path):
    # Spark's offsets log holds a Python source's offset as a JSON string of its JSON
    write_batch(str(tmp_path), "a-1", 0, [(0, 0, 0)], t=1.0, started=1.1, ended=1.2, end=json.dumps(_end(0, 1)))
    (b,) = read_batches(str(tmp_path))
    assert (b.end, b.started, b.ended) == (_end(0, 1), 1.1, 1.2)
    h = History(ownership=[_acq("a-1", 0.0, 1)], plans=[_plan("a-1", 1, 0.5, 0, 1)], reads=[b])
    assert _judge(h).breaches == []
