"""tests/conformance/stress.py: the stress port's plans, replayable from a seed and shaped as
Spark's runStressTest draws them."""

from __future__ import annotations

from conformance.stress import INITIAL_TOPICS, stress_plan

CI_SEED, CI_ITERATIONS = 20261207, 12  # tests/integration/test_conformance_stress.py


def test_a_seed_replays_the_same_plan():
    assert stress_plan(7, 50) == stress_plan(7, 50)
    assert stress_plan(7, 50) != stress_plan(8, 50)


def test_ci_seed_meets_every_action():
    plan = stress_plan(CI_SEED, CI_ITERATIONS)
    kinds = {s.kind for s in plan.steps} | {s.topic_action for s in plan.steps if s.kind == "data"}
    assert {"check", "stop", "start", "add-topic", "delete-topic", "add-partitions"} <= kinds, kinds
    stopped = False
    written_while_stopped = 0
    for s in plan.steps:
        stopped = {"stop": True, "start": False}.get(s.kind, stopped)
        written_while_stopped += len(s.values) if stopped else 0
    assert written_while_stopped > 0


def test_plans_keep_sparks_rules():
    for seed in range(200):
        plan = stress_plan(seed, 50)
        assert len(plan.initial) == INITIAL_TOPICS and all(1 <= n <= 6 for n in plan.initial.values())
        topics, running, first = dict(plan.initial), True, next(iter(plan.initial))
        assert plan.values == [str(v) for v in range(len(plan.values))]  # 0, 1, 2... once each
        for s in plan.steps:
            if s.kind in ("start", "stop"):
                assert running == (s.kind == "stop")
                running = s.kind == "start"
                continue
            if s.kind == "check":
                assert running
                continue
            if s.topic_action == "add-topic":
                assert s.target not in topics and 1 <= dict(s.grow)[s.target] <= 6
            if s.topic_action == "delete-topic":
                assert running and s.target != first, "a topic deleted while stopped, or the first"
                del topics[s.target]
            if s.topic_action == "add-partitions":
                assert {t for t, _ in s.grow} == set(topics)
                assert all(1 <= n - topics[t] <= 6 for t, n in s.grow)
            topics.update(s.grow)
            assert s.topic in topics and all(0 <= p < topics[s.topic] for p in s.partitions)
            assert len(s.values) <= 9
        assert running and plan.steps[-1].kind == "check"
