"""What only a real coordinator does (issue 15), on Apache Kafka 4.0.1 (``kafka_broker``):

* static membership: a duplicate ``group.instance.id`` is fenced (FENCED_INSTANCE_ID) and the
  fenced member or query says so and stops, without retrying;
* the rebalance timeout: a revoke barrier whose batch never completes is given up before the
  coordinator would remove the member;
* group conversion: a KIP-848 (``group.protocol=consumer``) Java consumer joining our classic
  group converts it to a consumer group and back when it leaves; with ``redundant`` (user data
  in the assignments) the broker refuses the joiner and our group carries on.

The Java reference consumer is ``../shared/kafka/java-consumer.sh`` (JSON lines) through
:class:`javaclient.JavaConsumer`: its own process group, stopped at the end of each test.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from typing import Any

import pytest

from assignment.model import TopicPartition
from helpers import committed_offsets, group_member, kafka_rebalance_reasons, wait_until
from javaclient import JavaConsumer
from spark_groupsource.errors import BrokerError, FencedError
from spark_groupsource.groups import describe_group


def group_type(bootstrap: str, group: str) -> str | None:
    """The group's type (CLASSIC/CONSUMER) as the groups command reports it; None while the
    broker does not answer (e.g. NOT_COORDINATOR while the offsets partition loads: ask again)."""
    try:
        return describe_group(bootstrap, group, timeout_s=5).group_type
    except BrokerError:
        return None


def _parts(m) -> set[TopicPartition]:
    return set(m.snapshot().owned)


def _batch_that_never_completes(a) -> tuple[dict, str]:
    """``a`` owns both partitions, has committed offset 1 of each and runs a batch of both that
    never completes: (its ownership serials, its member id)."""
    assert a.wait_for_assignment(60), a.describe()
    wait_until(lambda: len(_parts(a)) == 2, 30, message="a to own both partitions")
    serials = dict(a.snapshot().owned)
    assert a.commit({tp: 1 for tp in serials}).committed == set(serials)
    assert a.batch_planned(serials)
    return serials, a.snapshot().member_id


# ------------------------------------------------------------------------------------------
# static membership
# ------------------------------------------------------------------------------------------
@pytest.mark.compat
def test_duplicate_instance_id_is_fenced_and_the_member_says_so(kafka_broker, unique_name, caplog):
    """KIP-345 on Kafka: a second member joining with a ``group.instance.id`` already in use
    takes the first one's place (and its partitions, without a rebalance); the coordinator
    answers the first one's next Heartbeat with FENCED_INSTANCE_ID. The first member must then
    drop every partition at once (two owners otherwise: kafka-python only stops heartbeating
    and keeps its assignment as if stable), stop, and say why, naming the group, the instance
    id and what to do; it must not rejoin (that would fence the other member in turn)."""
    b = kafka_broker
    topic, group = unique_name("static"), unique_name("g")
    b.create_topic(topic, 4)
    caplog.set_level(logging.ERROR, logger="spark_groupsource.membership")
    first = group_member(b, group, topic, group_instance_id="etl-1")
    first.start()
    second = None
    try:
        assert first.wait_for_assignment(60), first.describe()
        wait_until(lambda: len(_parts(first)) == 4, 30, message="the first member to own all 4 partitions")
        gen = first.snapshot().generation
        second = group_member(b, group, topic, group_instance_id="etl-1")
        t0 = time.monotonic()
        second.start()
        assert second.wait_for_assignment(60), second.describe()

        def fenced():
            try:
                first.snapshot()
            except FencedError as exc:
                return exc
            return None

        err = wait_until(fenced, 30, interval=0.05, message="the first member to report the fence")
        took = time.monotonic() - t0
        text = str(err)
        for part in (repr(group), "FENCED_INSTANCE_ID", "group.instance.id 'etl-1'", "kafka.group.instance.id"):
            assert part in text, text
        # the new member holds everything, the fenced one nothing; the group did not rebalance
        s2 = second.snapshot()
        assert len(s2.owned) == 4 and s2.generation == gen, (s2, gen)
        assert not first._book.owned() and first.counters.partitions_lost == 4
        assert any("FENCED_INSTANCE_ID" in r.getMessage() for r in caplog.records)
        # no retry: the fenced member stays out, the other keeps its generation and partitions
        time.sleep(3)  # > one heartbeat interval (2 s): a rejoin would have shown by now
        s2 = second.snapshot()
        assert len(s2.owned) == 4 and s2.generation == gen and not s2.rebalancing, s2
        assert isinstance(fenced(), FencedError)
        print(f"fenced after {took:.1f}s: {text}")
    finally:
        first.close()
        if second is not None:
            second.close()


# ------------------------------------------------------------------------------------------
# a heartbeat answered after the member moved on
# ------------------------------------------------------------------------------------------
async def _heartbeat_in(coord, generation: int, member_id: str):
    """A Heartbeat sent in ``generation``; its answer handled as the member's heartbeat loop
    handles one. Returns the broker's error code."""
    from kafka.protocol.consumer import HeartbeatRequest

    request = HeartbeatRequest(group_id=coord.group_id, generation_id=generation, member_id=member_id,
                               group_instance_id=coord.group_instance_id)
    response = await coord._manager.send(request, node_id=coord.coordinator_id)
    coord._handle_heartbeat_response(response, time.monotonic(), (generation, member_id))
    return response.error_code


def test_heartbeat_answer_from_an_older_generation_keeps_the_new_one(kafka_broker, unique_name, caplog):
    """A heartbeat sent before the member rejoined and answered ILLEGAL_GENERATION after it
    joined the new generation must not reset that generation: kafka-python's handler did, the
    join in flight then failed ("invalid assignment protocol: None") and the next commit was
    fenced, its partitions lost and their last batch read twice (CI, Kafka 4.0.1, loaded
    machine). The Java client ignores such an answer; so do we: same generation, no rebalance,
    the commit lands."""
    from kafka import errors as kerr

    b = kafka_broker
    topic, group = unique_name("stalehb"), unique_name("g")
    b.create_topic(topic, 2)
    caplog.set_level(logging.INFO, logger="spark_groupsource.membership")
    a, other = group_member(b, group, topic), group_member(b, group, topic)
    a.start()
    try:
        assert a.wait_for_assignment(60), a.describe()
        old = a.snapshot()
        other.start()
        wait_until(lambda: not a.snapshot().rebalancing and a.snapshot().generation > old.generation
                   and len(_parts(a)) == 1, 60, message="a to join the generation with the other member")
        now = a.snapshot()
        coord = a._client._coord
        code = coord._net.run(_heartbeat_in, coord, old.generation, now.member_id)
        assert code == kerr.IllegalGenerationError.errno, code  # the broker's real answer
        assert any("answered IllegalGenerationError" in r.getMessage() for r in caplog.records)
        time.sleep(3)  # > one heartbeat interval: a reset would have rejoined by now
        after = a.snapshot()
        assert after.generation == now.generation and not after.rebalancing, (now, after)
        assert after.member_id == now.member_id
        tp = next(iter(after.owned))
        result = a.commit({tp: 0}, {tp: after.owned[tp]})
        assert result.committed == {tp} and not result.lost, result
    finally:
        a.close()
        other.close()


# ------------------------------------------------------------------------------------------
# the rebalance timeout
# ------------------------------------------------------------------------------------------
def test_revoke_barrier_held_past_the_rebalance_timeout(kafka_broker, unique_name, caplog):
    """An in-flight batch that never completes holds an eager revocation. Kafka removes a member
    that has not rejoined within the rebalance timeout (``max.poll.interval.ms``, counted from
    when the rebalance began at the coordinator); before the fix the drain waited the whole
    rebalance timeout (measured: the member was removed, the other member got both partitions
    while ours still held them, and a second rebalance followed). Now the drain gives up at 80%
    of the rebalance timeout less a heartbeat interval: the member stays in the group (same
    member id), the revoked partition goes to the other member, which resumes
    from the last commit (nothing lost), the late batch's commit of it is skipped (no stale
    offset lands), and the give-up is logged and counted."""
    b = kafka_broker
    topic, group = unique_name("rbt"), unique_name("g")
    b.create_topic(topic, 2)
    rebalance_ms = 6000
    client = {"max_poll_interval_ms": rebalance_ms}
    caplog.set_level(logging.WARNING, logger="spark_groupsource.membership")
    a = group_member(b, group, topic, client=client)
    # the helper asks for a 5 s drain; the bound caps it (heartbeat interval 2 s)
    assert a.drain_timeout_s <= 0.8 * rebalance_ms / 1000 - 2.0 + 1e-9
    a.start()
    other = None
    try:
        serials, member_id = _batch_that_never_completes(a)
        other = group_member(b, group, topic, client=client)
        t0 = time.monotonic()
        other.start()

        def split():
            sa, so = a.snapshot(), other.snapshot()
            if sa.rebalancing or so.rebalancing or len(sa.owned) != 1 or len(so.owned) != 1:
                return None
            return sa, so

        sa, so = wait_until(split, 60, interval=0.05, message="a 1+1 split despite the held barrier")
        took = time.monotonic() - t0
        assert set(sa.owned).isdisjoint(so.owned)
        # the coordinator kept our member: same member id (before the fix it was removed and
        # rejoined under a new one), both in one generation. Usually that is generation 2; one
        # clean-clone CI run saw [1, 2, 3] (an extra rebalance after the give-up, cause not yet
        # known: recorded as an open finding), so the count is printed, not asserted
        assert sa.member_id == member_id and sa.generation == so.generation, (sa, so)
        assert a.counters.drain_timeouts == 1 and a.join_stats().synced[0] == 1, a.join_stats()
        # the batch completes late: its commit of the partition that moved is skipped
        late = a.commit({tp: 5 for tp in serials}, serials)
        a.batch_completed()
        moved = set(so.owned)
        assert moved <= late.skipped and not late.lost, late
        offs = committed_offsets(b.bootstrap, group, topic, 2)
        assert all(offs[tp.partition] == 1 for tp in moved), offs  # the next owner resumes at 1
        assert any("did not complete and commit within" in r.getMessage()
                   and "kafka.max.poll.interval.ms" in r.getMessage() for r in caplog.records)
        print(f"drain bound {a.drain_timeout_s:.1f}s of a {rebalance_ms / 1000:.0f}s rebalance timeout; "
              f"split after {took:.1f}s; generations {a.join_stats().synced}")
        if a.join_stats().synced != [1, 2]:
            # the open finding: say, in the run's warnings summary, why the broker rebalanced again
            warnings.warn("extra generation after the drain gave up: " + a.describe() + "\n"
                          + "\n".join(kafka_rebalance_reasons(b, group)), stacklevel=1)
    finally:
        a.close()
        if other is not None:
            other.close()


def test_member_removed_while_its_revocation_waits_loses_the_partitions_at_once(kafka_broker, unique_name, caplog):
    """Should the drain outlast the rebalance timeout anyway (a bound misjudged, a driver paused
    for seconds), Kafka removes the member and gives its partitions to the other member. The
    heartbeats that go on during the wait then get UNKNOWN_MEMBER_ID: the partitions must be
    dropped from planning at that moment (counted as lost), not when the drain would have ended,
    or two members would read them. The member rejoins under a new member id; the late batch's
    commit is skipped; the other member resumes from the last commit."""
    b = kafka_broker
    topic, group = unique_name("rmv"), unique_name("g")
    b.create_topic(topic, 2)
    rebalance_ms = 6000
    client = {"max_poll_interval_ms": rebalance_ms}
    caplog.set_level(logging.WARNING, logger="spark_groupsource.membership")
    a = group_member(b, group, topic, client=client)
    a.drain_timeout_s = 60.0  # past the rebalance timeout: the bound is what is being bypassed
    a.start()
    other = None
    try:
        serials, member_id = _batch_that_never_completes(a)
        other = group_member(b, group, topic, client=client)
        t0 = time.monotonic()
        other.start()
        # the coordinator removes a at the rebalance timeout; a drops both partitions when its
        # next heartbeat is answered UNKNOWN_MEMBER_ID, long before its 60 s drain would end
        wait_until(lambda: a.counters.partitions_lost == 2, 45, interval=0.05,
                   message="a's partitions marked lost once the coordinator removed it")
        dropped = time.monotonic() - t0
        # nothing of the old acquisitions is held; a may already have rejoined under a new member
        # id and been given a partition again (a clean-clone CI run saw generation 3 by now)
        snap = a.snapshot()
        assert all(snap.owned.get(tp) != serials[tp] for tp in serials), (snap, serials)
        assert not snap.owned or snap.member_id != member_id, snap
        assert a.counters.drain_timeouts == 0
        assert dropped < a.drain_timeout_s / 2, dropped
        assert any("removed from the group while the revocation waited" in r.getMessage() for r in caplog.records)
        # the batch completes late: nothing of it is committed
        late = a.commit({tp: 5 for tp in serials}, serials)
        a.batch_completed()
        assert not late.committed, late
        # a rejoins as a new member; the group settles 1+1, disjoint, from the last commit

        def split():
            sa, so = a.snapshot(), other.snapshot()
            if sa.rebalancing or so.rebalancing or len(sa.owned) != 1 or len(so.owned) != 1:
                return None
            return sa, so

        sa, so = wait_until(split, 60, interval=0.05, message="a 1+1 split after a rejoined")
        assert set(sa.owned).isdisjoint(so.owned) and sa.member_id != member_id, (sa, so)
        offs = committed_offsets(b.bootstrap, group, topic, 2)
        assert offs == {0: 1, 1: 1}, offs
        print(f"partitions dropped {dropped:.1f}s after the other member joined "
              f"(rebalance timeout {rebalance_ms / 1000:.0f}s); generations {a.join_stats().synced}")
    finally:
        a.close()
        if other is not None:
            other.close()


# ------------------------------------------------------------------------------------------
# group conversion classic <-> consumer (KIP-848)
# ------------------------------------------------------------------------------------------
@pytest.mark.compat
@pytest.mark.kafka39(False, why="Kafka 3.9 converts no group: a KIP-848 member is refused (docs/kafka-versions.md)")
def test_group_converts_to_kip848_and_back_around_our_member(kafka_broker, unique_name, caplog):
    """Our classic cooperative-sticky member leads a group; a Java consumer joins with
    ``group.protocol=consumer``: the broker converts the group to a consumer group (its
    server-side assignor now decides, no leader in JoinGroup answers: counted and logged once),
    our member gives up part of its partitions and commits under the converted group. Never two
    owners (sampled every 20 ms), never a partition without an owner once settled. The Java
    consumer leaves: the group converts back to classic, our member owns every partition and
    leads again."""
    b = kafka_broker
    topic, group = unique_name("conv"), unique_name("g")
    b.create_topic(topic, 4)
    every = {TopicPartition(topic, p) for p in range(4)}
    caplog.set_level(logging.WARNING, logger="spark_groupsource.membership")
    ours = group_member(b, group, topic, "cooperative-sticky")
    ours.start()
    java = None
    overlaps: list[tuple[float, set]] = []
    stop = threading.Event()

    def watch() -> None:  # a partition held by both for more than a sampling interval or two
        seen: dict[Any, int] = {}
        while not stop.wait(0.02):
            both = {(tp.topic, tp.partition) for tp in ours._book.owned()} & (java.owned() if java else frozenset())
            seen = {k: seen.get(k, 0) + 1 for k in both}
            if any(n >= 5 for n in seen.values()):  # 100 ms
                overlaps.append((time.monotonic(), set(both)))

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        assert ours.wait_for_assignment(60), ours.describe()
        wait_until(lambda: _parts(ours) == every, 30, message="our member to own all 4 partitions")
        assert wait_until(lambda: group_type(b.bootstrap, group), 20, message="describe") == "CLASSIC"
        watcher.start()
        t0 = time.monotonic()
        java = JavaConsumer(b.bootstrap, group, [topic], group_protocol="consumer", start=True)

        def converted_split():
            s = ours.snapshot()
            mine = {(tp.topic, tp.partition) for tp in s.owned}
            theirs = java.owned()
            if s.rebalancing or not mine or not theirs or mine & theirs:
                return None
            return (mine, set(theirs)) if len(mine | theirs) == 4 else None

        mine, theirs = wait_until(converted_split, 60, interval=0.05,
                                  message="a disjoint split between our member and the Java consumer")
        t_split = time.monotonic() - t0
        assert wait_until(lambda: group_type(b.bootstrap, group) == "CONSUMER", 20,
                          message="the group to be a consumer group")
        assert ours.broker_assigns and ours.counters.broker_assigned_joins >= 1
        assert ours.join_stats().broker_assigned
        assert sum("KIP-848 consumer group" in r.getMessage() for r in caplog.records) == 1
        # commits carry the member epoch the broker gave as generation: accepted
        result = ours.commit({tp: 3 for tp in ours.snapshot().owned})
        assert result.committed == set(ours.snapshot().owned) and not result.lost, result
        led_before = len(ours.join_stats().led)
        t1 = time.monotonic()
        java.stop()
        assert java.closed_cleanly(), java.describe()  # a clean leave (exit status 143: SIGTERM)

        def back():
            s = ours.snapshot()
            return set(s.owned) == every and not s.rebalancing and group_type(b.bootstrap, group) == "CLASSIC"

        wait_until(back, 60, interval=0.1, message="the group back to classic with our member owning all")
        t_back = time.monotonic() - t1
        wait_until(lambda: len(ours.join_stats().led) > led_before, 30,
                   message="our member to lead again (its assignor runs again)")
        assert not overlaps, overlaps[:3]
        offs = committed_offsets(b.bootstrap, group, topic, 4)
        assert all(offs[tp.partition] == 3 for tp in result.committed), offs
        print(f"converted split after {t_split:.1f}s (ours {sorted(mine)}, java {sorted(theirs)}); "
              f"back to classic {t_back:.1f}s after the Java consumer left; "
              f"broker-assigned generations {ours.join_stats().broker_assigned}, led {ours.join_stats().led}")
    finally:
        stop.set()
        if java is not None:
            java.close()
        ours.close()


def test_redundant_group_refuses_the_kip848_joiner_and_carries_on(kafka_broker, unique_name):
    """``redundant`` puts user data in its assignments; Kafka does not convert such a group
    (KAFKA-18134): the new-protocol joiner is refused with GROUP_ID_NOT_FOUND, while our two
    members keep their generation, both replicas of every partition and their primaries."""
    b = kafka_broker
    topic, group = unique_name("red"), unique_name("g")
    b.create_topic(topic, 4)
    every = {TopicPartition(topic, p) for p in range(4)}
    a = group_member(b, group, topic, "redundant")
    c = group_member(b, group, topic, "redundant")
    a.start()
    java = None
    try:
        assert a.wait_for_assignment(60), a.describe()
        c.start()

        def both():
            sa, sc = a.snapshot(), c.snapshot()
            ok = (set(sa.owned) == every == set(sc.owned) and not sa.rebalancing and not sc.rebalancing
                  and sa.committable | sc.committable == every and not sa.committable & sc.committable)
            return (sa, sc) if ok else None

        sa, sc = wait_until(both, 60, message="two replicas of every partition")
        java = JavaConsumer(b.bootstrap, group, [topic], group_protocol="consumer", start=True)
        err = wait_until(lambda: java.events("error") or (not java.running and ["exited"]), 60,
                         interval=0.1, message="the Java consumer to be refused")
        text = json.dumps(err)
        assert "GroupIdNotFound" in text or "GROUP_ID_NOT_FOUND" in text or "does not exist" in text, text
        assert not java.owned() and not java.offsets_read()
        time.sleep(2)  # one more heartbeat round of our members
        sa2, sc2 = a.snapshot(), c.snapshot()
        assert (sa2.generation, sa2.committable, set(sa2.owned)) == (sa.generation, sa.committable, set(sa.owned))
        assert (sc2.generation, sc2.committable, set(sc2.owned)) == (sc.generation, sc.committable, set(sc.owned))
        assert not a.broker_assigns and not c.broker_assigns
        assert group_type(b.bootstrap, group) == "CLASSIC"
        r = a.commit({tp: 2 for tp in every})
        assert r.committed == sa.committable and not r.lost and not r.failed, r
        print(f"java refused: {text[:300]}")
    finally:
        if java is not None:
            java.close()
        a.close()
        c.close()



# ------------------------------------------------------------------------------------------
# the same with a Spark query
# ------------------------------------------------------------------------------------------
def _query(spark, b, topic: str, group: str, name: str, checkpoint: str, **options: str):
    from test_stream_support import broker_options

    opts = {"kafka.bootstrap.servers": b.bootstrap, "kafka.group.id": group, "subscribe": topic,
            "kafka.auto.offset.reset": "earliest", **broker_options(b), **options}
    df = spark.readStream.format("groupkafka").options(**opts).load()
    return (df.select("topic", "partition", "offset", "key", "value").writeStream.format("memory")
            .queryName(name).option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds").start())


def test_query_fenced_by_a_duplicate_instance_id_fails_clearly(spark, kafka_broker, unique_name, tmp_path):
    """A query with ``kafka.group.instance.id=etl-q``; a Java consumer starts with the same
    instance id in the same group. Kafka gives it the query's place; the query fails within a
    few heartbeats with an error naming the group, the instance id and what to do (no hang, no
    retry loop), and the Java consumer owns every partition."""
    from test_stream_support import produce, rows, stop, table_name

    b = kafka_broker
    topic, group = unique_name("t"), unique_name("g")
    b.create_topic(topic, 2)
    produce(b.bootstrap, topic, 20, 2)
    name = table_name(unique_name, "fenced")
    q = _query(spark, b, topic, group, name, str(tmp_path / "ck"), **{"kafka.group.instance.id": "etl-q"})
    java = None
    try:
        wait_until(lambda: len(rows(spark, name)) >= 20 or q.exception(), 90, interval=0.3,
                   message=f"the query to read 20 records ({q.status}, {q.lastProgress})")
        assert q.exception() is None, q.exception()
        java = JavaConsumer(b.bootstrap, group, [topic], group_instance_id="etl-q", session_timeout_ms=6000,
                            start=True)
        t0 = time.monotonic()
        wait_until(lambda: q.exception() is not None, 60, interval=0.2, message="the query to fail")
        took = time.monotonic() - t0
        text = str(q.exception())
        for part in (f"group {group!r}", "FENCED_INSTANCE_ID", "group.instance.id 'etl-q'",
                     "kafka.group.instance.id"):
            assert part in text, text
        assert not q.isActive
        wait_until(lambda: len(java.owned()) == 2, 30, message="the Java consumer to own both partitions")
        print(f"query failed {took:.1f}s after the duplicate started: {text.splitlines()[0][:400]}")
    finally:
        stop(q)
        if java is not None:
            java.close()


def test_query_through_a_conversion_to_kip848_and_back(spark, kafka_broker, unique_name, tmp_path):
    """Issue 15, scenario 2, on Kafka: a cooperative-sticky query reads while records keep
    arriving; a Java consumer joins with ``group.protocol=consumer`` (the broker converts the
    group to a KIP-848 consumer group), reads for a while and leaves (the group converts back).
    Every record is read exactly once by one of them, the query never stops, and the group's
    commits end at the log end."""
    from test_stream_support import (
        BackgroundProducer,
        duplicates,
        ends,
        process_all,
        produce,
        rows,
        stop,
        table_name,
    )

    b = kafka_broker
    topic, group = unique_name("t"), unique_name("g")
    b.create_topic(topic, 4)
    produced = produce(b.bootstrap, topic, 40, 4)
    name = table_name(unique_name, "conv")
    q = _query(spark, b, topic, group, name, str(tmp_path / "ck"), assignor="cooperative-sticky")
    java = None
    types_seen: list[str] = []
    producer = BackgroundProducer(b.bootstrap, topic, 4, produced, start=40, per_round=8, every_s=0.2, limit=4000)
    try:
        wait_until(lambda: q.exception() is None and len(rows(spark, name)) >= 40, 90, interval=0.3, message="the query to read 40 records")
        producer.start()
        java = JavaConsumer(b.bootstrap, group, [topic], group_protocol="consumer", start=True)
        t0 = time.monotonic()

        def converted() -> bool:
            t = group_type(b.bootstrap, group)
            if t and (not types_seen or types_seen[-1] != t):
                types_seen.append(t)
            return t == "CONSUMER" and len(java.owned()) >= 1 and java.record_count() >= 20
        wait_until(converted, 60, interval=0.2, message="the group converted and the Java consumer reading")
        t_conv = time.monotonic() - t0
        time.sleep(2)  # records keep arriving under the converted group
        t1 = time.monotonic()
        java.stop()
        assert java.closed_cleanly(), java.describe()

        def back() -> bool:
            t = group_type(b.bootstrap, group)
            if t and types_seen[-1] != t:
                types_seen.append(t)
            return t == "CLASSIC"
        wait_until(back, 60, interval=0.2, message="the group to convert back to classic")
        t_back = time.monotonic() - t1
        time.sleep(1)
        producer.stop()
        final = produce(b.bootstrap, topic, 8, 4, start=100_000)
        produced += final
        want = {(r.partition, r.offset) for r in produced}
        theirs = [(p, o) for _, p, o in java.offsets_read().elements()]

        def everyone() -> set[tuple[int, int]]:
            return {(r[1], r[2]) for r in rows(spark, name)} | set(theirs)
        wait_until(lambda: process_all(q) or everyone() >= want, 90, interval=0.5,
                   message="every record to be read")
        got = rows(spark, name)
        ours = [(r[1], r[2]) for r in got]
        assert everyone() == want, "records read that were not produced"
        assert not duplicates(got), "the query read a record twice"
        assert len(set(theirs)) == len(theirs), "the Java consumer read a record twice"
        assert not set(ours) & set(theirs), f"read by both: {sorted(set(ours) & set(theirs))[:5]}"
        # after the Java consumer left, the query owns everything: the final records are its
        assert {(r.partition, r.offset) for r in final} <= set(ours)
        wait_until(lambda: process_all(q) or committed_offsets(b.bootstrap, group, topic, 4) == ends(produced),
                   60, interval=0.5, message="the group's commits to reach the log end")
        assert q.isActive and q.exception() is None
        assert types_seen[:1] != ["CONSUMER"] and "CONSUMER" in types_seen and types_seen[-1] == "CLASSIC", types_seen
        print(f"{len(produced)} produced: query {len(ours)}, java {len(theirs)}; converted {t_conv:.1f}s after "
              f"the Java consumer started, back to classic {t_back:.1f}s after it left; types {types_seen}")
    finally:
        producer.stop()
        stop(q)
        if java is not None:
            java.close()
