"""Spark's KafkaSourceStressSuite ("stress test with multiple topics and partitions") as a
plan: the random actions of Spark's ``runStressTest`` (StreamTest.scala) and of the suite's
``AddKafkaData`` choices, drawn from one seed, so that a run can be replayed from its logged
seed. Pure: the plan tracks the topics and their partition counts it creates; the test
(tests/integration/test_conformance_stress.py) carries it out on both readers.

Spark's loop, per iteration: while the query runs, 10% check the answer, 60% add data, 30%
check, then stop; while it is stopped, 70% add data, 30% start it again; at the end start it if
stopped and check. Adding data is, one in five each: add a topic matching the pattern (1-6
partitions), delete a topic (only while the query runs, never the first), add 1-6 partitions
to every topic, else data only; then 0-9 new values go to one random topic (here into a
random partition each, as Spark's producer spreads keyless records).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: Spark's suite: five topics at the start, 50 iterations.
INITIAL_TOPICS = 5
SPARK_ITERATIONS = 50


@dataclass(frozen=True)
class Step:
    """One action: ``kind`` is ``data`` (with ``topic_action`` ``add-topic``, ``delete-topic``,
    ``add-partitions`` or None), ``check``, ``stop`` or ``start``. ``values`` go to ``topic``,
    value i into ``partitions[i]``; ``grow``: the partition count of the added topic, or each
    topic's new count."""

    kind: str
    topic_action: str | None = None
    target: str | None = None
    grow: tuple[tuple[str, int], ...] = ()
    topic: str | None = None
    values: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    running: bool = True

    def describe(self) -> str:
        if self.kind != "data":
            return self.kind
        what = {"add-topic": f"add topic {self.target} ({dict(self.grow).get(self.target)} partitions)", "delete-topic": f"delete topic {self.target}",
                "add-partitions": "add partitions " + ", ".join(f"{t}->{n}" for t, n in self.grow)}
        head = what.get(self.topic_action or "", "add data")
        return f"{head}; {len(self.values)} values into {self.topic} {list(self.partitions)}"


@dataclass
class StressPlan:
    seed: int
    initial: dict[str, int]
    steps: list[Step] = field(default_factory=list)

    @property
    def values(self) -> list[str]:
        """Every value the plan writes after the start (what a query from latest reads)."""
        return [v for s in self.steps for v in s.values]


def _n_partitions(rng: random.Random) -> int:
    # Spark's nextInt(1, 6) is 1 + Random.nextInt(6): 1 to 6
    return 1 + rng.randrange(6)


def stress_plan(seed: int, iterations: int = SPARK_ITERATIONS) -> StressPlan:
    """The plan of one run (topic names ``stress1``, ``stress2``...; the test prefixes them)."""
    rng = random.Random(seed)
    serial = 0

    def new_topic() -> str:
        nonlocal serial
        serial += 1
        return f"stress{serial}"

    topics = {new_topic(): _n_partitions(rng) for _ in range(INITIAL_TOPICS)}
    plan = StressPlan(seed, dict(topics))
    pos, running = 0, True

    def add_data() -> None:
        nonlocal pos
        n = rng.randrange(10)
        values = tuple(str(v) for v in range(pos, pos + n))
        pos += n
        choice = rng.randrange(5)
        action, target, grow = None, None, ()
        if choice == 0:
            action, target = "add-topic", new_topic()
            topics[target] = _n_partitions(rng)
            grow = ((target, topics[target]),)
        elif choice == 1 and running:
            victim = rng.choice(list(topics))
            first = next(iter(topics))
            if victim != first:
                action, target = "delete-topic", victim
                del topics[victim]
        elif choice == 2:
            action = "add-partitions"
            grow = tuple((t, n + _n_partitions(rng)) for t, n in topics.items())
            topics.update(grow)
        topic = rng.choice(list(topics))
        parts = tuple(rng.randrange(topics[topic]) for _ in values)
        plan.steps.append(Step("data", action, target, grow, topic, values, parts, running))

    for _ in range(iterations):
        r = rng.random()
        if not running:
            if r < 0.7:
                add_data()
            else:
                plan.steps.append(Step("start"))
                running = True
        elif r < 0.1:
            plan.steps.append(Step("check"))
        elif r < 0.7:
            add_data()
        else:
            plan.steps.append(Step("check"))
            plan.steps.append(Step("stop"))
            running = False
    if not running:
        plan.steps.append(Step("start"))
    plan.steps.append(Step("check"))
    return plan
