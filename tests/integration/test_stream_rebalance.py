"""The planner through a rebalance, driven the way Spark's runner drives it.

These tests call the reader's driver-side methods (``initialOffset``, ``latestOffset``) in
Spark's order against a real broker while a second member joins the group, so they can look
at what is planned *during* the rebalance, which a running query does not expose. The
queries in ``test_stream_group.py`` cover the same paths end to end through Spark.
"""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from test_stream_support import broker_options, produce

import spark_groupsource.planning.stream_driver as stream_mod
from assignment.model import TopicPartition
from helpers import committed_offsets, group_member, wait_until
from spark_groupsource.planning.offsets import StreamOffset
from spark_groupsource.stream import GroupKafkaStreamReader

PARTS = 4


@pytest.fixture(autouse=True)
def _one_plan_per_trigger(monkeypatch):
    """These tests look at single triggers inside a rebalance, so a trigger here reports "no
    batch" at once, as each plan does, instead of waiting the pause out as a running stream's
    trigger does (that wait has its own tests in tests/unit/planning/test_stream_driver.py)."""
    monkeypatch.setattr(stream_mod, "PAUSE_WAIT_S", 0.0)


def _reader(broker, topic, group, assignor):
    return GroupKafkaStreamReader(None, {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.group.id": group,
        "subscribe": topic,
        "assignor": assignor,
        "kafka.auto.offset.reset": "earliest",
        **broker_options(broker),
    })


def _until(end_json: str) -> dict[TopicPartition, int]:
    return {tp: u for tp, (_, u) in StreamOffset.from_json(end_json).ranges.items()}


def _plan_first(reader) -> str:
    """Plan (not complete) the batch over the records already there; returns its end."""
    start = reader.initialOffset()
    membership = reader._driver().membership
    wait_until(lambda: len(membership.snapshot().owned) == PARTS and not membership.snapshot().rebalancing,
               timeout=60, message="the reader to own every partition")
    return wait_until(lambda: (e := reader.latestOffset(start, ReadAllAvailable())) != start and e,
                      timeout=30, message="a first batch")


def _first_batch(reader, broker, topic) -> str:
    """Plan and complete the batch over the records already there; returns its end."""
    end = _plan_first(reader)
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # completes it; nothing new
    return end


def test_planning_through_a_cooperative_rebalance(broker, unique_name):
    """Cooperative: batches keep being planned while the group rebalances, and the offsets of
    a batch whose commit met the rebalance reach the group once it is over."""
    _planning_through_a_rebalance(broker, unique_name, "cooperative-sticky")


def test_planning_through_an_eager_rebalance(mock_broker, unique_name):
    """Eager: nothing new is planned until the rebalance is over. On the mock only: it holds a
    rebalance's join window open for most of a session, so triggers run inside it; on Kafka an
    eager rebalance of two members that rejoin at once lasts milliseconds (no trigger fits in
    it), and the planner's unit tests cover the rule
    (tests/unit/planning/test_stream_driver.py::test_eager_plans_nothing_while_rebalancing_then_commits_each_batch)."""
    _planning_through_a_rebalance(mock_broker, unique_name, "range")


def _planning_through_a_rebalance(broker, unique_name, assignor):
    topic, group = unique_name("rebal"), unique_name("g")
    broker.create_topic(topic, PARTS)
    produce(broker.bootstrap, topic, 2 * PARTS, PARTS)
    reader = _reader(broker, topic, group, assignor)
    other = None
    try:
        end = _first_batch(reader, broker, topic)
        membership = reader._driver().membership
        during, inside = end, []
        # A cooperative rebalance on Kafka lasts a few round trips: on a loaded machine one
        # trigger can outlast it (a clean-clone CI run saw none inside). Each attempt is a new
        # member joining; one that saw no trigger inside leaves and the next one joins.
        for attempt in range(4):
            if other is not None:
                other.close()
                wait_until(lambda: len(membership.snapshot().owned) == PARTS and not membership.snapshot().rebalancing,
                           timeout=60, message="the reader to own every partition again")
                during = reader.latestOffset(during, ReadAllAvailable())
            other = group_member(broker, group, topic, assignor)
            other.start()
            wait_until(lambda: membership.snapshot().rebalancing, timeout=60, message="the rebalance to start")
            generation = membership.snapshot().generation
            produce(broker.bootstrap, topic, PARTS, PARTS, start=100 + 10 * attempt)
            # plan as Spark does (one latestOffset per trigger) while this rebalance lasts; a call
            # counts only if the rebalance was still under way when it returned (it may end mid-call)
            while (s := membership.snapshot()).rebalancing and s.generation == generation:
                planned = reader.latestOffset(during, ReadAllAvailable())
                after = membership.snapshot()
                if after.rebalancing and after.generation == generation:
                    inside.append(planned != during)
                during = planned
                time.sleep(0.05)
            if inside:
                break
        assert inside, "no trigger ran inside any of 4 rebalances"
        if assignor == "range":
            assert not any(inside), "an eager member planned a batch while its group was rebalancing"
        else:
            assert any(inside), "a cooperative member stopped planning during the rebalance"
            assert all(u > _until(end)[tp] for tp, u in _until(during).items()), during

        # keep triggering until the group has settled 2+2 and every planned batch is committed
        def settled():
            nonlocal during
            during = reader.latestOffset(during, ReadAllAvailable())
            s, o = membership.snapshot(), other.snapshot()
            mine = set(s.owned)
            ok = len(mine) == 2 and len(o.owned) == 2 and not s.rebalancing and not membership.pending()
            return ok and mine

        mine = wait_until(settled, timeout=90, interval=0.1, message="a 2+2 split with nothing left to commit")
        # one more trigger completes (and commits) the last planned batch; nothing new to read
        assert reader.latestOffset(during, ReadAllAvailable()) == during
        assert not membership.pending()
        final = _until(during)
        committed = committed_offsets(broker.bootstrap, group, topic, PARTS)
        # the partitions still ours carry the last completed batch; the ones handed over were
        # committed before they left (drain), so the other member starts exactly there
        assert {tp.partition: committed[tp.partition] for tp in mine} == {tp.partition: final[tp] for tp in mine}
        assert all(committed[p] is not None and committed[p] >= 2 for p in range(PARTS)), committed
    finally:
        if other is not None:
            other.close()
        reader.stop()


def test_eager_plans_nothing_after_a_commit_refused_for_a_rebalance(mock_broker, unique_name):
    """A commit answered REBALANCE_IN_PROGRESS is the first sign of a rebalance; an eager member
    that planned on would hand the next owner two batches to re-read instead of one. The next
    trigger sends the kept offsets and, once they land, planning resumes."""
    topic, group = unique_name("refused"), unique_name("g")
    mock_broker.create_topic(topic, PARTS)
    produce(mock_broker.bootstrap, topic, 2 * PARTS, PARTS)
    reader = _reader(mock_broker, topic, group, "range")
    try:
        end = _plan_first(reader)
        membership = reader._driver().membership
        produce(mock_broker.bootstrap, topic, PARTS, PARTS, start=100)
        # OffsetCommit: REBALANCE_IN_PROGRESS for the commit and its immediate resend
        mock_broker.mock.push_request_errors(8, [27, 27])
        # completes the first batch; its commit is refused: nothing new is planned
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        assert membership.pending() == _until(end)
        # the kept offsets go out once the generation is stable; then the new records are planned
        nxt = wait_until(lambda: (e := reader.latestOffset(end, ReadAllAvailable())) != end and e,
                         timeout=30, message="planning to resume after the refused commit")
        assert committed_offsets(mock_broker.bootstrap, group, topic, PARTS) == {
            tp.partition: off for tp, off in _until(end).items()}
        assert sum(_until(nxt).values()) == sum(_until(end).values()) + PARTS
    finally:
        reader.stop()
