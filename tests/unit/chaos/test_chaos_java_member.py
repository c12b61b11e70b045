"""The chaos suite's Java plain member (``chaos.traffic.JavaPlainMember``, the Java reference
consumer as a plain group member on Kafka): its ``records`` events (offset ranges, no values)
become sink batches once production has ended, at the time they were read; unknown offsets are
reported, not dropped; which backend gets which kind of plain member; and the scenarios that
need it are skipped, saying why, where java-consumer.sh is missing (pure: no broker, no JVM)."""

from __future__ import annotations

import os
import threading
from collections import Counter

from chaos import __main__ as cli
from chaos import run as chaos_run
from chaos.history import Owned, order_within_ownership
from chaos.run import Run
from chaos.scenarios import for_protocol, why_not
from chaos.sink import read_batches, write_batch
from chaos.traffic import JavaPlainMember
from chaos.verdict import tally
from spark_groupsource.devbroker import _kafka
from tests.javaclient import JavaConsumer

TOPIC = "chaos-t"


def fake_java(events: list[dict]) -> JavaConsumer:
    """A JavaConsumer that never started, holding ``events`` as if its process printed them."""
    j = JavaConsumer.__new__(JavaConsumer)
    j._events, j.proc, j._cond = events, None, threading.Condition()
    return j


def member(tmp_path, events: list[dict]) -> JavaPlainMember:
    pm = JavaPlainMember.__new__(JavaPlainMember)
    pm.owner, pm.out, pm.topic = "c0", str(tmp_path), TOPIC
    pm.consumer = fake_java(events)
    pm.exit_code, pm.flushed, pm.unmapped, pm.gaps = 0, False, [], []
    return pm


def records(ts_ms: int, ranges: dict[int, tuple[int, int]]) -> dict:
    return {"event": "records", "ts_ms": ts_ms, "_mono": 0.0,
            "offset_ranges": {f"{TOPIC}-{p}": list(r) for p, r in ranges.items()},
            "per_partition": {f"{TOPIC}-{p}": r[1] - r[0] + 1 for p, r in ranges.items()}}


def test_each_poll_becomes_one_sink_batch_at_its_read_time_interleaved_with_the_queries(tmp_path) -> None:
    produced = {s: (s % 2, s // 2) for s in range(8)}  # seq s at partition s % 2, offset s // 2
    offset_to_seq = {po: s for s, po in produced.items()}
    write_batch(str(tmp_path), "a-1", 0, [(0, 0, 0), (1, 0, 1), (0, 1, 2)], t=1000.0)
    write_batch(str(tmp_path), "a-1", 1, [(0, 2, 4), (0, 3, 6)], t=1003.0)
    pm = member(tmp_path, [
        {"event": "assigned", "partitions": [f"{TOPIC}-1"], "assignment": [f"{TOPIC}-1"], "generation": 2},
        records(1_001_500, {1: (1, 2)}),  # seqs 3, 5, read at 1001.5
        records(1_004_000, {0: (2, 3), 1: (3, 3)}),  # seqs 4, 6 (re-read after a handover), 7
        {"event": "assigned", "partitions": ["other-0", f"{TOPIC}-0"], "assignment": [], "generation": 3},
    ])
    assert pm.batches == 2 and pm.acquired == [1, 0]
    assert pm.flush_to_sink(offset_to_seq) == 5 and pm.flush_to_sink(offset_to_seq) == 0  # once
    batches = read_batches(str(tmp_path))
    assert [(b.owner, b.t) for b in batches] == [("a-1", 1000.0), ("c0", 1001.5), ("a-1", 1003.0), ("c0", 1004.0)]
    assert batches[1].rows == ((1, 1, 3), (1, 2, 5)) and batches[3].rows == ((0, 2, 4), (0, 3, 6), (1, 3, 7))
    t = tally(produced, batches, acquisitions={"a": Counter({0: 1, 1: 1}), "c0": Counter(pm.acquired)})
    assert (t.lost, t.dup_total, t.wrong) == (0, 2, 0) and not t.dup_breaches
    assert not pm.unmapped and not pm.gaps


def test_an_offset_with_no_known_seq_is_reported_as_a_problem_not_dropped(tmp_path) -> None:
    run = Run.__new__(Run)
    run.dir, run.t0, run._events, run.problems, run.notes = str(tmp_path), 0.0, [], [], []
    run.log_copies = {}
    run.producer = type("P", (), {"delivered": {0: (0, 0), 1: (0, 1)}})()
    pm = member(tmp_path, [records(1_000_000, {0: (0, 3)})])
    pm.exit_code = 143  # already closed
    run.plain = [pm]
    run._flush_java_members()
    assert pm.unmapped == [(0, 2), (0, 3)]
    assert len(run.problems) == 1 and "c0 read 2 offsets" in run.problems[0] and "(0, 2)" in run.problems[0]
    assert [b.rows for b in read_batches(str(tmp_path))] == [((0, 0, 0), (0, 1, 1))]


def test_a_poll_whose_count_disagrees_with_its_range_is_reported(tmp_path) -> None:
    e = records(1_000_000, {0: (0, 3)})
    e["per_partition"][f"{TOPIC}-0"] = 3
    pm = member(tmp_path, [e])
    pm.flush_to_sink({(0, o): o for o in range(4)})
    assert pm.gaps and "holds 3 records" in pm.gaps[0]


class Recorder:
    made: list[tuple[str, tuple, dict]] = []

    def __init__(self, *args, **kwargs):
        Recorder.made.append((type(self).__name__, args, kwargs))
        self.owner = args[0]


class FakeJava(Recorder):
    pass


class FakeLibrdkafka(Recorder):
    pass


def test_plain_members_are_java_consumers_on_kafka_and_librdkafka_on_the_mock(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(chaos_run, "JavaPlainMember", FakeJava)
    monkeypatch.setattr(chaos_run, "PlainMember", FakeLibrdkafka)
    run = Run.__new__(Run)
    run.dir, run.out, run.t0, run._events, run.plain = str(tmp_path), str(tmp_path), 0.0, [], []
    run.topic, run.group = TOPIC, "g"
    run.broker = type("B", (), {"bootstrap": "127.0.0.1:1"})()
    Recorder.made.clear()
    for backend, protocol in (("kafka", "classic"), ("kafka", "consumer"), ("mock", "classic"), ("mock", "consumer")):
        run.backend, run.protocol = backend, protocol
        run.plain_member("c0", "range")
    (k1, _, kw1), (k2, _, kw2), (m1, a1, _), (m2, a2, _) = Recorder.made
    assert k1 == k2 == "FakeJava" and m1 == m2 == "FakeLibrdkafka"
    assert kw1 == {"log_dir": str(tmp_path), "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
                   "assignment_strategy": "range"}
    assert kw2 == {"log_dir": str(tmp_path), "group_protocol": "consumer"}
    assert a1[-1] == {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                      "partition.assignment.strategy": "range"}
    assert a2[-1] == {"group.protocol": "consumer"}


def test_without_java_consumer_the_kafka_run_skips_its_scenarios_saying_why(monkeypatch, capsys) -> None:
    monkeypatch.setenv("GROUPKAFKA_JAVA_CONSUMER", os.path.join(os.sep, "nowhere", "java-consumer.sh"))
    monkeypatch.setattr(_kafka, "check", lambda home=None: "found")
    java = {"cooperative_churn", "eager_plain_churn", "consumer_churn"}
    assert not java & {s.name for p in ("classic", "consumer") for s in for_protocol(p, "kafka", 3)}
    assert "cooperative_churn" in {s.name for s in for_protocol("classic", "mock")}  # librdkafka there
    for name, protocol in (("cooperative_churn", "classic"), ("eager_plain_churn", "classic"),
                           ("consumer_churn", "consumer")):
        assert "/nowhere/java-consumer.sh" in (why_not(name, protocol, "kafka", 3) or ""), name
    assert cli.main(["--broker", "kafka", "--list"]) == 0
    skipped = capsys.readouterr().out.split("not run with")[1]
    assert "eager_plain_churn" in skipped and "no Java consumer CLI at /nowhere/java-consumer.sh" in skipped
    assert cli.main(["--broker", "kafka", "--only", "cooperative_churn"]) == 2
    assert "no Java consumer CLI" in capsys.readouterr().err


def test_polls_in_one_millisecond_keep_their_order(tmp_path) -> None:
    """Two of a Java consumer's polls in the same millisecond are read back in poll order, whatever
    the directory's order (the 2-hour soak's false order breaks), so the order check passes."""
    produced = {i: (0, i) for i in range(40)}
    for i in reversed(range(20)):  # written last first: the directory holds them in any order
        write_batch(str(tmp_path), "c0", i, [(0, 2 * i, 2 * i), (0, 2 * i + 1, 2 * i + 1)], t=1000.0)
    batches = read_batches(str(tmp_path))
    assert [b.batch for b in batches] == list(range(20))
    assert order_within_ownership([(b, b.t) for b in batches], Owned([]), produced) == []
