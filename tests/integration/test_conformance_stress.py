"""KafkaSourceStressSuite "stress test with multiple topics and partitions" as Spark runs it:
random actions from a logged seed (tests/conformance/stress.py), on both readers at once,
the records compared after every step.

CI runs one fixed seed in each option set, bounded (``GROUPKAFKA_STRESS_ITERATIONS``, default
12 of Spark's 50 iterations). By hand: ``GROUPKAFKA_STRESS_SEED`` is a seed, a comma list,
``random`` or ``random:N`` (N random seeds, one case each), and ``GROUPKAFKA_STRESS_ITERATIONS=50``.
The seed is in the test id and every step is printed (``-s``) and named in a failure, so a
failing run is replayed with its seed. docs/conformance.md has the results.
"""

from __future__ import annotations

import os
import random

import pytest
from conformance.harness import MODES, SKIP_WITHOUT_SPARK_SOURCE, StreamPair, options_for
from conformance.kafka_ops import add_partitions, create_topic, delete_topic, send
from conformance.stress import stress_plan

pytestmark = SKIP_WITHOUT_SPARK_SOURCE

#: CI's seed (any fixed number; this one's 12 iterations add a topic, add partitions, delete a
#: topic and restart the query: tests/unit/test_conformance_stress_plan.py checks it).
CI_SEED = 20261207
SEED_ENV, ITERATIONS_ENV = "GROUPKAFKA_STRESS_SEED", "GROUPKAFKA_STRESS_ITERATIONS"
CI_ITERATIONS = 12


def _seeds() -> list[int]:
    raw = os.environ.get(SEED_ENV, "").strip()
    if raw.startswith("random"):
        n = int(raw.partition(":")[2] or 1)
        return [random.SystemRandom().randrange(2**31) for _ in range(n)]
    return [int(v) for v in raw.split(",")] if raw else [CI_SEED]


@pytest.mark.extended(only={"mode": ["spark-options"]}, why="CI runs the seed in the defaults mode")
@pytest.mark.parametrize("seed", _seeds())
@pytest.mark.parametrize("mode", MODES)
def test_stress_multiple_topics_and_partitions(spark, kafka_broker, unique_name, tmp_path, mode, seed):
    """KafkaSourceStressSuite: five topics matching the pattern with 1-6 partitions and five
    records each (before the start, so neither reader reads them: from latest), then the plan's
    steps. After every step while the queries run, and at each of Spark's checks, both readers
    must have delivered the same records, and Spark's source every value written so far (its
    CheckAnswer); a replayed batch must repeat its first delivery (the harness). Spark's test
    options in ``spark-options`` (``kafka.metadata.max.age.ms=1``, ``kafka.request.timeout.ms``;
    ``kafka.default.api.timeout.ms``, a Java client setting, to Spark's source only);
    ``failOnDataLoss=false`` in both, as deleting a topic needs."""
    iterations = int(os.environ.get(ITERATIONS_ENV, "") or CI_ITERATIONS)
    plan = stress_plan(seed, iterations)
    bs, prefix = kafka_broker.bootstrap, unique_name("stress")
    name = {t: f"{prefix}-{t}" for t in (*plan.initial, *(s.target for s in plan.steps if s.target))}
    print(f"stress: seed {seed}, {iterations} iterations, {len(plan.steps)} steps ({SEED_ENV}={seed} replays it)")
    for t, n in plan.initial.items():
        create_topic(bs, name[t], n)
        send(bs, name[t], [str(v) for v in range(101, 106)], spread=n)
    opts = options_for(mode, {"subscribePattern": f"{prefix}-stress.*", "failOnDataLoss": "false"},
                       {"kafka.metadata.max.age.ms": "1", "kafka.request.timeout.ms": "3000"})
    kafka_only = {"kafka.default.api.timeout.ms": "3000"} if mode == "spark-options" else {}
    written: list[str] = []
    running = True
    with StreamPair(spark, bs, tmp_path, opts, kafka_options=kafka_only) as pair:
        pair.start().process_all()  # makeSureGetOffsetCalled

        def compare(i, step):
            pair.catch_up()
            pair.assert_same(f"seed {seed}, step {i} ({step.describe()})", expect_values=written)

        for i, step in enumerate(plan.steps):
            print(f"stress: step {i}: {step.describe()}")
            if step.kind == "start":
                pair.start()
                running = True
            elif step.kind == "stop":
                pair.stop()
                running = False
            elif step.kind == "data":
                if running:
                    # AddKafkaData: no Spark job runs while topics change
                    pair.process_all()
                if step.topic_action == "add-topic":
                    create_topic(bs, name[step.target], dict(step.grow)[step.target])
                elif step.topic_action == "delete-topic":
                    delete_topic(bs, name[step.target])
                else:
                    for t, total in step.grow:
                        add_partitions(bs, name[t], total)
                if step.values:
                    send(bs, name[step.topic], list(step.values), partitions=list(step.partitions))
                written.extend(step.values)
            if running:
                compare(i, step)
    assert written == plan.values

