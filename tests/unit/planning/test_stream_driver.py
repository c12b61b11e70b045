"""The stream planner and its commit hook, unit-tested through the membership seam.

``InMemoryMembership`` plays the group (the test is its coordinator) and ``_Log`` plays the
partitions' offsets, so the planner's decisions (when to plan, from which position, what to
commit under which acquisition, what a fence or a revocation does) are checked without a
broker. The same decisions run against real brokers in tests/integration.
"""

from __future__ import annotations

import threading
import time

import pytest
from log_double import LogDouble as _Log

from assignment.model import TopicPartition
from spark_groupsource.config import parse_stream_options
from spark_groupsource.errors import DataLossError, MembershipError
from spark_groupsource.group.memory_member import InMemoryMembership
from spark_groupsource.group.seam import OwnershipBook
from spark_groupsource.planning import stream_driver
from spark_groupsource.planning.offset_reader import Partial
from spark_groupsource.planning.offsets import StreamOffset
from spark_groupsource.planning.stream_driver import StreamDriver

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _driver(group: InMemoryMembership, log: _Log, **options: str) -> StreamDriver:
    raw = {"kafka.bootstrap.servers": "unused:9092", "kafka.group.id": "g", "subscribe": "t",
           "startingoffsets": "earliest", **options}
    opts = parse_stream_options({k: v for k, v in raw.items() if v is not None})  # None: left out
    log.group = group
    d = StreamDriver(opts, membership=group, reader=log)
    d.fresh_query = True  # as initialOffset() says on a new query: startingOffsets applies
    return d


def _ranges(end_json: str | None) -> dict[TopicPartition, tuple[int, int]]:
    return dict(StreamOffset.from_json(end_json).ranges) if end_json else {}


def test_eager_plans_nothing_while_rebalancing_then_commits_each_batch():
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.begin_rebalance()
    d = _driver(group, log)
    assert d.plan(None, None) is None  # nothing owned yet, rebalance under way
    group.assign({T0, T1})
    first = d.plan(None, None)
    assert _ranges(first) == {T0: (0, 5), T1: (0, 3)}
    log.ends[T0] = 8
    second = d.plan(first, None)  # the first batch completed: it is committed now
    assert group.offsets == {T0: 5, T1: 3}
    assert _ranges(second) == {T0: (5, 8), T1: (3, 3)}


def test_revocation_waits_for_the_running_batch_and_its_commit():
    group, log = InMemoryMembership(), _Log({T0: 4, T1: 4})
    group.assign({T0, T1})
    d = _driver(group, log)
    batch = d.plan(None, None)
    group.revoke({T1})  # the coordinator asks for T1 while the batch reads it
    assert T1 in group.snapshot().owned, "given up while a batch was reading it"
    assert d.plan(batch, None) == batch  # eager: the batch commits, nothing new is planned
    assert group.offsets == {T0: 4, T1: 4}  # committed before the hand-over
    assert T1 not in group.snapshot().owned
    group.assign(set())  # the rebalance ends with T0 kept
    log.ends[T0] = 6
    assert _ranges(d.plan(batch, None)) == {T0: (4, 6)}


def test_a_partition_that_comes_back_resumes_from_the_group_not_from_a_stale_position():
    group, log = InMemoryMembership(), _Log({T0: 10})
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    serial = group.snapshot().owned[T0]
    group.lose({T0})  # session expired: gone at once, the batch's commit must not land
    d.complete(batch)
    assert group.offsets == {T0: 0}  # where it started (no group offset then), not the batch
    group.offsets[T0] = 7  # meanwhile another member read and committed up to 7
    group.assign({T0})
    assert group.snapshot().owned[T0] != serial
    log.ends[T0] = 12
    assert _ranges(d.plan(batch, None)) == {T0: (7, 12)}


def _restarted(group: InMemoryMembership, log: _Log, **options: str) -> StreamDriver:
    """A driver of a query restarted from its checkpoint (initialOffset is not called)."""
    d = _driver(group, log, **options)
    d.fresh_query = False
    return d


def test_a_replayed_batch_leaves_out_what_another_member_read_meanwhile():
    """Restarted from its checkpoint, the query replays the batch its earlier run logged but did
    not complete; another member owned the partitions in between and read part of them (T0 to
    7), or all (T1): the replay reads only the rest, and the next batch goes on from its end
    (measured on Kafka before: a stopped and restarted query re-read 99 records)."""
    group, log = InMemoryMembership(), _Log({T0: 12, T1: 12})
    logged = StreamOffset({T0: (5, 9), T1: (3, 6)}).to_json()
    group.offsets.update({T0: 7, T1: 6})
    group.assign({T0, T1})
    d = _restarted(group, log)
    assert d.replay_ranges(logged) == {T0: (7, 9)}
    nxt = d.plan(logged, None)  # Spark: latestOffset(start=the replayed batch's end)
    assert _ranges(nxt) == {T0: (9, 12), T1: (6, 12)}
    assert group.offsets == {T0: 9, T1: 6}


def test_a_replayed_batch_is_identical_when_the_group_did_not_move_and_skips_others_partitions():
    group, log = InMemoryMembership(), _Log({T0: 12, T1: 12})
    logged = StreamOffset({T0: (5, 9), T1: (3, 6)}).to_json()
    group.offsets.update({T0: 5, T1: 3})
    group.assign({T0})  # T1 belongs to another member now, which reads it from 3
    d = _restarted(group, log)
    assert d.replay_ranges(logged) == {T0: (5, 9)}
    assert _ranges(d.plan(logged, None)) == {T0: (9, 12)}
    group.offsets[T1] = 4  # the other member read on, then T1 comes here
    group.assign({T0, T1})
    nxt = d.plan(StreamOffset({T0: (9, 12)}).to_json(), None)
    assert _ranges(nxt)[T1] == (4, 12)


def test_a_replay_waits_out_an_eager_rebalance_before_leaving_partitions_out():
    """Restarted while its earlier run leaves the group: the join was answered, then the
    departure began an eager rebalance that revoked everything. An empty assignment then says
    nothing about who owns what: the replay is decided once the rebalance has ended."""
    group, log = InMemoryMembership(), _Log({T0: 12, T1: 12})
    logged = StreamOffset({T0: (5, 9), T1: (3, 6)}).to_json()
    group.offsets.update({T0: 5, T1: 3})
    group.assign({T0, T1})
    d = _restarted(group, log)
    group.revoke({T0, T1})
    assert not group.snapshot().owned and group.snapshot().rebalancing
    threading.Timer(0.3, group.assign, args=({T0, T1},)).start()
    assert d.replay_ranges(logged) == {T0: (5, 9), T1: (3, 6)}


def test_a_replay_stays_whole_while_a_rebalance_outlasts_the_session_timeout():
    group, log = InMemoryMembership(), _Log({T0: 12})
    logged = StreamOffset({T0: (5, 9)}).to_json()
    group.offsets[T0] = 5
    group.assign({T0})
    d = _restarted(group, log, **{"kafka.session.timeout.ms": "300"})
    group.revoke({T0})
    assert d.replay_ranges(logged) == {T0: (5, 9)}  # unknown owner: read whole, at worst twice


def test_a_replay_stays_whole_while_this_member_owns_nothing():
    """A stable generation that gave this member nothing (its leader's metadata lacked the
    topic, or more members than partitions) does not say who reads the batch: kept whole, at
    worst read twice, never skipped."""
    group, log = InMemoryMembership(), _Log({T0: 12, T1: 12})
    logged = StreamOffset({T0: (5, 9), T1: (3, 6)}).to_json()
    group.offsets.update({T0: 5, T1: 3})
    group.assign(set())
    d = _restarted(group, log)
    assert d.replay_ranges(logged) == {T0: (5, 9), T1: (3, 6)}


def test_a_replay_stays_whole_without_commits():
    group, log = InMemoryMembership(), _Log({T0: 12})
    logged = StreamOffset({T0: (5, 9)}).to_json()
    group.offsets[T0] = 7
    group.assign({T0})
    d = _restarted(group, log, commitoffsets="false")
    assert d.replay_ranges(logged) == {T0: (5, 9)}


def test_fenced_commit_forgets_the_position():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    group.fence_next_commit()
    nxt = d.plan(batch, None)
    assert nxt == batch and group.counters.fenced_commits == 1 and group.offsets == {T0: 0}
    assert T0 not in d.positions
    group.offsets[T0] = 2  # the group's offset when the partition comes back
    group.assign({T0})
    assert _ranges(d.plan(batch, None)) == {T0: (2, 5)}


def test_refused_commit_is_kept_and_sent_once_stable():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    group.begin_rebalance()  # the coordinator refuses commits during the join
    assert d.plan(batch, None) == batch  # eager: nothing new while rebalancing
    assert group.pending() == {T0: 5} and group.offsets == {T0: 0}
    group.assign({T0})  # kept under the same acquisition
    log.ends[T0] = 9
    third = d.plan(batch, None)  # the kept offset goes out first, then the next batch
    assert group.offsets == {T0: 5} and not group.pending()
    assert _ranges(third) == {T0: (5, 9)}


def test_no_new_batch_while_the_last_commit_waits_for_an_unreachable_coordinator():
    """A commit refused outside a rebalance (the coordinator away) is kept; the next batch
    waits until it lands: a member that turns out to be out of the group re-reads one batch,
    not every batch planned while the coordinator was away."""
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log)
    first = d.plan(None, None)
    group.refuse_next_commits(2, "COORDINATOR_NOT_AVAILABLE")  # the batch's commit and the first resend
    log.ends[T0] = 9
    assert d.plan(first, None) == first and group.pending() == {T0: 5}
    assert d.waiting_on and "not accepted the last micro-batch" in d.waiting_on
    second = d.plan(first, None)  # the resend lands: planning goes on
    assert group.offsets == {T0: 5} and not group.pending()
    assert _ranges(second) == {T0: (5, 9)}


def test_cooperative_keeps_planning_what_is_not_revoked():
    group, log = InMemoryMembership(cooperative=True), _Log({T0: 3, T1: 3})
    group.assign({T0, T1})
    d = _driver(group, log)
    batch = d.plan(None, None)
    d.complete(batch)  # the batch is done and committed
    group.revoke({T1})
    log.ends[T0], log.ends[T1] = 6, 6
    assert _ranges(d.plan(batch, None)) == {T0: (3, 6)}


class _RebalanceWhileReading(_Log):
    """The log whose watermark query is answered only after a whole rebalance went by: the
    partitions revoked (no batch in flight holds them) and, for ``back``, acquired again."""

    def __init__(self, ends, revoke, back=frozenset()):
        super().__init__(ends)
        self.revoke, self.back, self.armed = revoke, back, False

    def try_watermarks(self, parts, retries=None, asked=None, low_needed=None):
        if self.armed:
            self.armed = False
            self.group.revoke(self.revoke)
            self.group.assign(self.back)
        return super().try_watermarks(parts, retries, low_needed=low_needed)


@pytest.mark.parametrize("back", [frozenset(), frozenset({T0, T1})], ids=["given-away", "reacquired"])
def test_no_batch_over_partitions_revoked_while_the_plan_read_offsets(back):
    """Cooperative: a revocation begins and ends while the planner reads offsets (nothing in
    flight holds it). The batch must not be planned over partitions that are no longer ours,
    or are ours under a new acquisition (their positions are stale): measured on Kafka, an
    eager member's batch read the partitions it had just handed to a joiner, from the same
    committed offset the joiner started at."""
    group = InMemoryMembership(cooperative=True)
    log = _RebalanceWhileReading({T0: 10, T1: 10}, revoke={T0, T1}, back=back)
    group.assign({T0, T1})
    d = _driver(group, log)
    first = d.plan(None, None)
    assert _ranges(first) == {T0: (0, 10), T1: (0, 10)}
    log.ends = {T0: 20, T1: 20}
    log.armed = True
    assert d.plan(first, None) == first, "a batch was planned over partitions revoked meanwhile"
    assert group.offsets == {T0: 10, T1: 10}
    group.assign(back)
    nxt = d.plan(first, None)
    if back:  # ours again: from the group's offset
        assert _ranges(nxt) == {T0: (10, 20), T1: (10, 20)}
    else:
        assert nxt == first


def test_book_serials_change_only_on_reacquisition():
    book = OwnershipBook()
    book.acquire({T0, T1})
    before = book.owned()
    book.acquire({T0})
    assert book.owned() == before
    book.begin_revoke({T1})
    assert not book.batch_planned({T1}) and book.batch_planned({T0})
    book.finish_revoke({T1})
    book.acquire({T1})
    assert book.owned()[T1] != before[T1] and book.owned()[T0] == before[T0]
    mine, skipped, _ = book.to_commit({T0: 1, T1: 2}, {T0: before[T0], T1: before[T1]},
                                      frozenset(book.owned()), book.owned())
    assert mine == {T0: 1} and skipped == {T1}


def test_broker_assigned_group_is_reported_once_and_counted(caplog):
    """A JoinGroup answer without a leader (a KIP-848 group hosting us as a classic member):
    logged once at WARNING with what decides instead, counted on every such join. Neither dev
    broker converts groups, so the detection itself (kafka_client) is not exercised here."""
    from assignment.registry import create_assignors
    from spark_groupsource.group.classic_member import GroupMembership, MembershipConfig

    m = GroupMembership(MembershipConfig(group_id="g", assignors=tuple(create_assignors("redundant"))))
    with caplog.at_level("WARNING", logger="spark_groupsource.membership"):
        m._on_broker_assigns(7, "redundant")
        m._on_broker_assigns(8, "redundant")
    warnings = [r for r in caplog.records if "server-side assignor decides" in r.getMessage()]
    assert len(warnings) == 1 and "redundant" in warnings[0].getMessage()
    assert m.counters.broker_assigned_joins == 2 and m.broker_assigns


def test_a_replica_that_becomes_the_primary_continues_from_what_it_read():
    """``redundant``: a replica reads a partition whose offsets only the primary commits; when
    the primary leaves and the next generation gives the replica the partition to commit, it
    goes on from its own position, not from the old primary's last commit (chaos
    redundant_restart: 735 re-reads of 7 batches over 4 handovers)."""
    group, log = InMemoryMembership(), _Log({T0: 10})
    group.committable = set()  # a replica: it reads T0, the primary commits it
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    assert _ranges(batch) == {T0: (0, 10)}
    group.offsets[T0] = 4  # the primary's last commit
    group.revoke({T0})  # eager rebalance: the primary has gone
    assert d.plan(batch, None) == batch  # the batch completes; nothing new while rebalancing
    group.committable = None
    group.assign({T0})  # the next generation: this member is the primary
    log.ends[T0] = 12
    assert _ranges(d.plan(batch, None)) == {T0: (10, 12)}


def test_a_partition_back_after_a_generation_elsewhere_resumes_from_the_group():
    group, log = InMemoryMembership(), _Log({T0: 10})
    group.committable = set()
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    group.revoke({T0})
    d.plan(batch, None)
    group.assign(set())  # a generation in which another member owned T0
    group.offsets[T0] = 6
    group.committable = None
    group.assign({T0})
    log.ends[T0] = 12
    assert _ranges(d.plan(batch, None)) == {T0: (6, 12)}


def test_available_now_waits_out_a_rebalance_instead_of_ending_empty():
    """Spark ends an AvailableNow run at the first plan without a batch: no assignment yet or a
    rebalance under way must be waited out (bounded), never read as caught up."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.begin_rebalance()
    d = _driver(group, log)
    d.snapshot_available_now()
    assert d.caps == {T0: 5, T1: 3}  # nothing owned at the snapshot: the subscription's ends
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        if len(naps) == 3:
            group.assign({T0, T1})

    first = d.plan_available_now(None, None, sleep=sleep)
    assert len(naps) == 3 and _ranges(first) == {T0: (0, 5), T1: (0, 3)}
    log.ends[T0] = 9  # written after the run began: not read
    assert d.plan_available_now(first, None, sleep=sleep) == first and d.waiting_on is None
    assert group.offsets == {T0: 5, T1: 3} and len(naps) == 3


def test_available_now_caps_a_partition_that_sits_the_first_batch_out_at_its_end_then():
    """A partition whose committed offset goes unanswered at the first plan sits that batch out
    (seen on a loaded CI machine). Records written while the first batch runs were not there
    when the run began: its end as read at the first plan caps it, not the end read later."""
    group, log = InMemoryMembership(), _Log({T0: 4, T1: 4})
    group.assign({T0, T1})
    d = _driver(group, log)
    d.caps = {}  # the snapshot found nothing (e.g. its watermark request timed out)
    answer = log.try_committed
    log.try_committed = lambda g, parts, retries=None: Partial(
        {tp: v for tp, v in answer(g, parts).found.items() if tp != T1}, {T1: "timed out"}, 1)
    first = d.plan_available_now(None, None, sleep=lambda s: None)
    assert _ranges(first) == {T0: (0, 4)}
    log.try_committed = answer
    log.ends = {T0: 9, T1: 9}  # written during the first batch
    second = d.plan_available_now(first, None, sleep=lambda s: None)
    assert _ranges(second) == {T0: (4, 4), T1: (0, 4)}
    assert d.plan_available_now(second, None, sleep=lambda s: None) == second


def test_available_now_caps_partitions_assigned_after_the_start_at_their_start_ends():
    """The first generation gave this member nothing (a leader whose metadata lacked the new
    topic; seen in a clean-clone CI run on the mock); records are written, then the partitions
    come: the run reads what was there when it began, as Spark's source does, not the rest."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.assign(set())
    d = _driver(group, log)
    d.snapshot_available_now()
    log.ends = {T0: 9, T1: 8}  # written after the run began
    group.assign({T0, T1})
    first = d.plan_available_now(None, None, sleep=lambda s: None)
    assert _ranges(first) == {T0: (0, 5), T1: (0, 3)}
    assert d.plan_available_now(first, None, sleep=lambda s: None) == first


def test_available_now_fails_when_the_pause_outlasts_the_bound():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log, groupJoinTimeoutMs="300")
    d.snapshot_available_now()
    group.begin_rebalance()  # and it never ends
    with pytest.raises(MembershipError, match="AvailableNow could not plan.*groupJoinTimeoutMs=300.*rebalancing"):
        d.plan_available_now(None, None, sleep=lambda s: time.sleep(0.05))


def test_stream_trigger_waits_out_a_rebalance_so_process_all_available_holds():
    """processAllAvailable() returns at the first trigger without a batch (CI read zero rows
    under load): a trigger of a running stream waits out a rebalance, no assignment yet, or
    offsets briefly unreadable, and plans the batch once the pause passed."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.begin_rebalance()
    d = _driver(group, log)
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        if len(naps) == 2:
            group.assign({T0, T1})

    first = d.plan_stream(None, None, None, sleep=sleep)
    assert len(naps) == 2 and _ranges(first) == {T0: (0, 5), T1: (0, 3)}
    # caught up: no pause, no wait, no batch
    assert d.plan_stream(first, None, None, sleep=sleep) == first and d.waiting_on is None
    assert len(naps) == 2


def test_stream_trigger_waits_while_the_member_is_out_of_the_group():
    """A member that joined and then fell out of the group (session expired under load, a join
    that failed) owns nothing and holds no generation until it rejoins, and is not REBALANCING
    meanwhile, so an eager member may plan: that is a pause, not "caught up". Spark runs batch 0
    of a new query even when its first trigger plans nothing, so the query's first batch was
    empty, and processAllAvailable() or AvailableNow could end having read nothing. A stable
    member whose assignment is empty is caught up at once."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.assign({T0, T1})
    d = _driver(group, log)
    group.drop_out()
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        if len(naps) == 2:
            group.assign({T0, T1})

    first = d.plan_stream(None, None, None, sleep=sleep)
    assert len(naps) == 2 and _ranges(first) == {T0: (0, 5), T1: (0, 3)}

    idle = InMemoryMembership()
    idle.assign(set())  # more members than partitions: nothing for this one
    d = _driver(idle, _Log({T0: 5}))
    assert d.plan_stream(None, None, None, sleep=sleep) is None and d.waiting_on is None
    assert len(naps) == 2


def test_stream_trigger_reports_no_batch_when_the_pause_outlasts_its_bound(monkeypatch):
    """A long rebalance shows as empty triggers (a running stream does not fail on it)."""
    import spark_groupsource.planning.stream_driver as stream_mod

    monkeypatch.setattr(stream_mod, "PAUSE_WAIT_S", 0.3)
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log)
    group.begin_rebalance()  # and it never ends
    t0 = time.monotonic()
    assert d.plan_stream(None, None, None, sleep=lambda s: time.sleep(0.05)) is None
    assert d.waiting_on == "the group is rebalancing" and 0.3 <= time.monotonic() - t0 < 5


def test_kept_position_counts_generations_of_assignments_not_of_join_answers():
    """A batch that completes after the next generation's JoinGroup was answered (its commit
    refused: the group is rebalancing) was still read under the previous generation's
    assignment. Given the partition back in that next generation, the member continues from the
    batch's end (chaos redundant_restart: a first batch of 1,405 records read twice when the
    completion was filed under the new generation)."""
    group, log = InMemoryMembership(), _Log({T0: 10})
    group.assign({T0})
    d = _driver(group, log)
    batch = d.plan(None, None)
    group.join_answered()  # generation 1 answered, the assignment of generation 0 still held
    group.refuse_next_commits(1)
    group.revoke({T0})
    assert d.plan(batch, None) == batch  # completes (commit refused); nothing new while rebalancing
    assert group.pending() == {T0: 10}
    group.give_up_revocation()  # the kept commit never landed: the group has no offset for T0
    group.assign({T0})  # generation 1's assignment, T0 under a new serial
    log.ends[T0] = 12
    assert _ranges(d.plan(batch, None)) == {T0: (10, 12)}


def test_log_starts_are_asked_only_where_a_plan_reads_or_resumes():
    """At 1,000 partitions and a few records per trigger, the log start of every partition
    cost about 8 ms of driver CPU per trigger; only partitions acquired since the last plan
    (a reset may start there) and partitions with records beyond their position (the data-loss
    check) need it: a partition at its end cannot have lost records below its position."""
    tps = [TopicPartition("t", i) for i in range(6)]
    group = InMemoryMembership()
    group.assign(set(tps))
    log = _Log({tp: 10 for tp in tps})
    d = _driver(group, log)
    end = d.plan(None, None)
    assert log.starts_asked[-1] == set(tps)  # all newly acquired
    log.ends[tps[2]] = 12
    end = d.plan(end, None)
    assert log.starts_asked[-1] == {tps[2]}  # only the one with new records
    assert _ranges(end)[tps[2]] == (10, 12)
    # a partition acquired again (new serial) is asked again, although at its end
    group.revoke({tps[5]})
    group.assign({tps[5]})
    end = d.plan(end, None)
    assert log.starts_asked[-1] == {tps[5]}
    # records below the position deleted where new records arrived: still the data-loss check
    log.ends[tps[4]], log.starts[tps[4]] = 15, 13
    with pytest.raises(DataLossError):
        d.plan(end, None)
    assert log.starts_asked[-1] == {tps[4]}


# -- partitions added after the query first planned (issue 52) ---------------------------------
T2, T3 = TopicPartition("t", 2), TopicPartition("t", 3)


def test_a_partition_added_while_the_query_runs_starts_at_its_earliest_offset_with_default_options():
    """As Spark's source: the topic grows 2 -> 4 partitions while the stream runs; the group has
    no offset for the new ones, and ``kafka.auto.offset.reset`` (``latest`` by default) would
    skip what was written into them before the group assigned them. They start at their log
    start; the partitions that existed at the first plan keep starting at ``latest``."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.assign({T0, T1})
    d = _driver(group, log, startingoffsets="group")  # the defaults: group offsets, reset latest
    first = d.plan(None, None)
    assert first is None  # nothing new since the start: at the end of T0 and T1
    assert d.known == {"t": 2}
    log.ends.update({T0: 6, T2: 4, T3: 2})  # 2 records reached the new partitions before the rebalance
    group.assign({T0, T1, T2, T3})
    batch = d.plan(first, None)
    assert _ranges(batch) == {T0: (5, 6), T1: (3, 3), T2: (0, 4), T3: (0, 2)}
    assert StreamOffset.from_json(batch).known == {"t": 2}  # carried in every batch's offsets
    assert d.reset_skips.partitions == 0


def test_a_partition_of_the_first_plan_without_an_offset_follows_the_reset_policy_counted(caplog):
    """Another member owned T1 when the query first planned and committed nothing: it existed
    then, so ``kafka.auto.offset.reset=latest`` governs it, as for a Java consumer; what that
    leaves out is logged as a warning and counted."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3}, starts={T1: 1})
    group.assign({T0})
    d = _driver(group, log, startingoffsets="group")
    d.plan(None, None)
    group.assign({T0, T1})
    log.ends[T0] = 7
    with caplog.at_level("WARNING", logger="spark_groupsource.stream"):
        batch = d.plan(None, None)
    assert _ranges(batch) == {T0: (5, 7), T1: (3, 3)}
    assert (d.reset_skips.partitions, d.reset_skips.offsets_skipped) == (1, 2)
    assert "t-1 has no committed offset" in caplog.text and "[1, 3)" in caplog.text
    assert "kafka.auto.offset.reset=earliest" in caplog.text


def test_partitions_added_while_the_query_was_stopped_start_at_their_earliest_after_the_restart():
    """The checkpoint's offsets say the topic had 2 partitions when the query first planned;
    after a restart the 2 added meanwhile (no group offset) start at their log start."""
    group, log = InMemoryMembership(), _Log({T0: 9, T1: 9, T2: 3, T3: 1})
    logged = StreamOffset({T0: (5, 9), T1: (3, 9)}, known={"t": 2}).to_json()
    group.offsets.update({T0: 9, T1: 9})
    group.assign({T0, T1, T2, T3})
    d = _restarted(group, log)
    nxt = d.plan(logged, None)
    assert _ranges(nxt) == {T0: (9, 9), T1: (9, 9), T2: (0, 3), T3: (0, 1)}
    assert StreamOffset.from_json(nxt).known == {"t": 2}


def test_a_query_stopped_before_its_first_batch_read_anything_knows_its_partitions_after_the_restart():
    """startingOffsets=latest, nothing to read at the first plan: Spark logs batch 0 all the
    same, and its end carries ``known``; the 2 partitions added while the query was stopped
    start at their log start after the restart (KafkaSourceStressSuite's finding). Later
    answers are the plan's own (no batch: the start, so Spark adds none)."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.assign({T0, T1})
    d = _driver(group, log, startingoffsets="latest")
    start = StreamOffset({}).to_json()  # initialOffset
    first = d.answer(d.plan(start, None))
    assert first == '{"v":1,"ranges":{},"known":{"t":2}}'
    assert d.answer(d.plan(first, None)) == first  # nothing new: no batch
    assert group.offsets == {T0: 5, T1: 3}  # where they start, committed at the first plan
    log.ends.update({T2: 1, T3: 1})  # added and written to while the query was stopped
    group.assign({T0, T1, T2, T3})
    d = _restarted(group, log, startingoffsets="latest")
    nxt = d.answer(d.plan(first, None))
    assert _ranges(nxt) == {T0: (5, 5), T1: (3, 3), T2: (0, 1), T3: (0, 1)}
    assert StreamOffset.from_json(nxt).known == {"t": 2}
    # batch 0's end as it was logged before it carried known: T2 and T3 count as existing
    # then, and kafka.auto.offset.reset=latest skips their records
    before = InMemoryMembership()
    before.offsets.update({T0: 5, T1: 3})
    before.assign({T0, T1, T2, T3})
    d = _restarted(before, log, startingoffsets="latest")
    assert d.plan(start, None) == start and d.reset_skips.offsets_skipped == 2


def test_a_checkpoint_without_known_counts_the_partitions_of_now_as_existing():
    """Offsets written before they carried ``known``: the partitions there now count as
    existing (the reset policy governs them); those added later start at their log start."""
    group, log = InMemoryMembership(), _Log({T0: 9, T1: 9})
    logged = StreamOffset({T0: (5, 9)}).to_json()
    group.offsets.update({T0: 9})
    group.assign({T0, T1})
    d = _restarted(group, log)
    assert d.plan(logged, None) == logged  # nothing new: T1 starts at its end, as the reset says
    assert d.known == {"t": 2}
    assert d.positions[T1][0] == 9 and d.reset_skips.offsets_skipped == 9
    log.ends.update({T0: 10, TopicPartition("t", 2): 2})
    group.assign({T0, T1, TopicPartition("t", 2)})
    assert _ranges(d.plan(logged, None)) == {T0: (9, 10), T1: (9, 9), TopicPartition("t", 2): (0, 2)}


def test_a_topic_that_begins_to_match_the_pattern_starts_at_its_earliest_offset():
    U0 = TopicPartition("u", 0)
    group, log = InMemoryMembership(), _Log({T0: 5, TopicPartition("__consumer_offsets", 0): 1})
    group.assign({T0})
    d = _driver(group, log, startingoffsets="group", subscribepattern="[tu]", subscribe=None)
    assert d.plan(None, None) is None
    assert d.known == {"t": 1}
    log.ends[U0] = 3  # topic u created and written to; the group assigns it
    group.assign({T0, U0})
    assert _ranges(d.plan(None, None)) == {T0: (5, 5), U0: (0, 3)}


def test_a_subscribed_topic_created_after_the_start_is_read_from_its_earliest_offset():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.assign({T0})
    d = _driver(group, log, startingoffsets="group", subscribe="t,v")
    d.plan(None, None)
    assert d.known == {"t": 1, "v": 0}
    V0 = TopicPartition("v", 0)
    log.ends[V0] = 2
    group.assign({T0, V0})
    assert _ranges(d.plan(None, None))[V0] == (0, 2)


def test_where_a_partition_without_a_group_offset_starts_is_committed_at_once():
    """As a Java consumer's auto-commit commits a reset position: handed over before a batch of
    ours read it, the next owner goes on from there, not from a reset of its own (``latest``
    would skip what was written in between). Nothing is re-sent with the first batch."""
    group, log = InMemoryMembership(), _Log({T0: 5, T1: 3})
    group.assign({T0, T1})
    d = _driver(group, log, startingoffsets="group")
    assert d.plan(None, None) is None
    assert group.offsets == {T0: 5, T1: 3}
    log.ends[T0] = 7
    batch = d.plan(None, None)
    sent = []
    commit = group.commit
    group.commit = lambda offsets, serials=None: sent.append(dict(offsets)) or commit(offsets, serials)
    d.plan(batch, None)
    assert sent == [{T0: 7}]  # T1's start is already the group's


def test_startingoffsets_latest_applies_only_to_partitions_that_existed_at_the_start():
    """``startingOffsets=latest`` means from now on: a partition added before this member's
    first assignment arrived (still under the starting options) reads from its earliest."""
    group, log = InMemoryMembership(), _Log({T0: 5})
    d = _driver(group, log, startingoffsets="latest")
    assert d.plan(None, None) is None  # not assigned yet: known is taken all the same
    log.ends[T1] = 2
    group.assign({T0, T1})
    assert _ranges(d.plan(None, None)) == {T0: (5, 5), T1: (0, 2)}


def test_a_position_beyond_the_log_end_is_read_again_from_the_log_start(caplog):
    """Chaos finding 15: the topic deleted and re-created under the query (its member never saw
    it gone) ends at 3 where the query stood at 9. With failOnDataLoss=false it is read from its
    log start: every record of a re-created topic is new (going on from the end skipped them);
    failOnDataLoss=true fails, naming the partition."""
    group, log = InMemoryMembership(), _Log({T0: 9})
    group.assign({T0})
    d = _driver(group, log, failondataloss="false")
    first = d.plan(None, None)
    assert _ranges(first) == {T0: (0, 9)}
    log.ends[T0] = 3  # re-created: 3 new records
    with caplog.at_level("WARNING", logger="spark_groupsource.stream"):
        nxt = d.plan(first, None)
    assert _ranges(nxt) == {T0: (0, 3)}
    assert d.data_loss.rewound == 1 and d.data_loss.offsets_skipped == 0
    assert "t-0 at 9, log [0, 3)" in caplog.text
    strict_group, strict_log = InMemoryMembership(), _Log({T0: 9})
    strict_group.assign({T0})
    strict = _driver(strict_group, strict_log)
    batch = strict.plan(None, None)
    strict_log.ends[T0] = 3
    with pytest.raises(DataLossError, match="t-0.*beyond the end offset 3"):
        strict.plan(batch, None)


def test_a_join_waiting_for_a_rebalance_outlasts_group_join_timeout_up_to_the_rebalance_timeout(caplog):
    # chaos clock_jumps, 2026-12-02: another member's revoke barrier held the rebalance 184 s and
    # the joining query failed at groupJoinTimeoutMs (120 s) with the brokers answering
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.begin_rebalance()
    d = _driver(group, log, groupJoinTimeoutMs="1000", **{"kafka.max.poll.interval.ms": "20000"})
    d.started_at -= 2.0  # past groupJoinTimeoutMs, within 20 s + 5 s
    with caplog.at_level("WARNING", logger="spark_groupsource.stream"):
        assert d.plan(None, None) is None
        assert d.plan(None, None) is None
    said = [r for r in caplog.records if "waits for its other members" in r.getMessage()]
    assert len(said) == 1 and "up to 25 s" in said[0].getMessage()
    d.started_at -= 24.0  # past the rebalance timeout: the join itself is stuck
    with pytest.raises(MembershipError, match="got no assignment within groupJoinTimeoutMs=1000"):
        d.plan(None, None)


def test_a_join_with_no_broker_answering_fails_at_group_join_timeout():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.begin_rebalance()
    log.reachable = lambda: "no broker answered"
    d = _driver(group, log, groupJoinTimeoutMs="1000", **{"kafka.max.poll.interval.ms": "20000"})
    d.started_at -= 2.0
    with pytest.raises(MembershipError, match="no broker answered"):
        d.plan(None, None)


def test_the_join_wait_asks_answering_brokers_again_only_every_few_seconds_and_fails_on_a_fresh_probe():
    group, log = InMemoryMembership(), _Log({T0: 5})
    group.begin_rebalance()
    probes: list[str | None] = []
    answer: list[str | None] = [None]
    log.reachable = lambda: probes.append(answer[0]) or answer[0]
    d = _driver(group, log, groupJoinTimeoutMs="1000", **{"kafka.max.poll.interval.ms": "20000"})
    d.started_at -= 2.0
    for _ in range(5):
        assert d.plan(None, None) is None
    assert probes == [None]  # five triggers, one metadata request
    d._answered_at -= stream_driver.REACH_RECHECK_S  # the answer grew old: asked again
    answer[0] = "no broker answered"
    with pytest.raises(MembershipError, match="no broker answered"):
        d.plan(None, None)
    assert probes == [None, "no broker answered"]
