"""A crowded classic group (``crowded_group``, Kafka only, run by name): two Spark queries, Java
consumers and many librdkafka consumers (threads of the harness: a JVM each would not fit 2
cores) in one ``range`` group, joining and leaving in waves while the producer writes. Besides
the suite's verdict and the history checker, the group must settle after the last wave: the
coordinator's description (the run's group sampler, DescribeGroups every second) Stable, every
member there and every partition assigned to exactly one of them, within the crowd's bound.

A classic round waits for every member's JoinGroup: a query's member rejoins once its batch in
flight drained (a trigger, 1-10 s on a loaded machine), the others within their poll loops, and
joiners arriving one after the other can take a few rounds; the bound is that many rounds with
room for load. ``GROUPKAFKA_CROWDED_FULL=1`` runs the 50-member crowd instead of the lean one.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chaos.run import START_WAIT_S, Run

#: the environment variable that selects :data:`FIFTY` over :data:`LEAN`
FULL_ENV = "GROUPKAFKA_CROWDED_FULL"
#: the Spark members (queries) of the crowd
QUERIES = ("a", "b")
#: batches each query writes before the crowd joins: a query's first batches read the backlog in
#: a cold session (a-1's first one with rows took 53.6 s at load 25, 2026-12-07), and its revoke
#: barrier holds every member's rejoin until the batch in flight is done
WARM_BATCHES = 3
#: seconds after each wave before the next: the wave's rebalances under way while records flow
WAVE_GAP_S = 5.0
#: seconds the members read on once the group settled, before the scenario ends
READ_ON_S = 10.0


@dataclass(frozen=True)
class Crowd:
    """How many of each plain member, and the waves: each wave first stops ``leaving`` of the
    librdkafka consumers in (the oldest first), then starts ``joining`` more. The Java consumers
    join before the first wave and stay; ``settle_s`` bounds the settling after the last wave."""

    partitions: int
    java: int
    waves: tuple[tuple[int, int], ...]  # (joining, leaving)
    settle_s: float

    def __post_init__(self) -> None:
        live = 0
        for i, (joining, leaving) in enumerate(self.waves):
            if joining < 0 or leaving < 0 or leaving > live:
                raise ValueError(f"wave {i} ({joining} joining, {leaving} leaving) with {live} librdkafka "
                                 f"consumers in the group")
            live += joining - leaving
        if self.waves and self.waves[-1][0] == self.waves[-1][1]:
            # the settling is told by the member count: an unchanged count could be read from a
            # description of the group before the last wave's joiners were in
            raise ValueError(f"the last wave must change the group's size, not {self.waves[-1]}")

    @property
    def librdkafka(self) -> int:
        """The librdkafka consumers the waves start in all."""
        return sum(joining for joining, _ in self.waves)

    def members_after(self) -> list[int]:
        """The group's members (queries, Java and librdkafka consumers) after each wave."""
        out, live = [], 0
        for joining, leaving in self.waves:
            live += joining - leaving
            out.append(len(QUERIES) + self.java + live)
        return out


#: CI's crowd: 2 queries + 2 Java + 10 librdkafka consumers, the librdkafka ones started in 2
#: waves and 3 of them stopped in the second (11 members at the peak and at the end), 24 partitions
LEAN = Crowd(partitions=24, java=2, waves=((6, 0), (4, 3)), settle_s=90.0)
#: The 50-member crowd: 2 queries + 4 Java + 44 librdkafka consumers at the peak (56 librdkafka
#: started in 4 waves, 12 of them stopped in the third), 64 partitions
FIFTY = Crowd(partitions=64, java=4, waves=((24, 0), (20, 0), (0, 12), (12, 0)), settle_s=120.0)


def crowd_from_env(environ: Mapping[str, str]) -> Crowd:
    """:data:`FIFTY` when ``GROUPKAFKA_CROWDED_FULL`` is set to anything but empty or 0, else :data:`LEAN`."""
    return FIFTY if environ.get(FULL_ENV, "").strip() not in ("", "0") else LEAN


CROWD = crowd_from_env(os.environ)


def unsettled(state: str, members: Mapping[str, Sequence[int]], expected: int, partitions: int) -> str | None:
    """None when a description of the group says it settled: Stable, ``expected`` members,
    partitions 0 .. ``partitions``-1 each assigned to exactly one of them; else what is not so."""
    if state.lower() != "stable":
        return f"state {state}"
    if len(members) != expected:
        return f"{len(members)} members, not {expected}"
    owned = Counter(p for ps in members.values() for p in ps)
    twice = sorted(p for p, n in owned.items() if n > 1)
    missing = sorted(set(range(partitions)) - set(owned))
    unknown = sorted(set(owned) - set(range(partitions)))
    wrong = [f"{what} {ps}" for what, ps in (("assigned twice:", twice), ("unassigned:", missing),
                                              ("not of the topic:", unknown)) if ps]
    return f"partitions {'; '.join(wrong)}" if wrong else None


def first_settled(samples: Sequence[tuple[float, str, Mapping[str, Sequence[int]]]], *, after: float,
                  expected: int, partitions: int) -> tuple[float | None, str]:
    """(time of the first sample after ``after`` that says the group settled, or None; what
    the last sample after ``after`` said was missing, when none did)."""
    why = "no description of the group since the last wave"
    for t, state, members in samples:
        if t <= after:
            continue
        why = unsettled(state, members, expected, partitions) or ""
        if not why:
            return t, ""
    return None, why


def crowded_group(r: Run, crowd: Crowd | None = None) -> None:
    """Both queries read, then the Java consumers join, then the librdkafka waves; after the
    last wave the group must settle within the crowd's bound (a problem of the run if not)."""
    crowd = crowd or CROWD
    r.produce(seconds=2 * START_WAIT_S + 600)  # the run ends it 5 s after the scenario
    queries = [r.start(name) for name in QUERIES]
    for q in queries:  # past the cold first batches: one in flight holds every eager round up
        r.wait_reading(q, batches=WARM_BATCHES)
    java = [r.plain_member(f"j{i}", "range", kind="java") for i in range(crowd.java)]
    live, gone = [], []
    started = 0
    wave_began = time.monotonic()
    for i, (joining, leaving) in enumerate(crowd.waves):
        wave_began = time.monotonic()
        for _ in range(leaving):
            c = live.pop(0)
            c.close()
            gone.append(c)
            r.event(f"plain consumer {c.owner} left")
        for _ in range(joining):
            live.append(r.plain_member(f"r{started}", "range", kind="librdkafka"))
            started += 1
        r.event(f"wave {i + 1}: {joining} joined, {leaving} left; {len(QUERIES) + len(java) + len(live)} members")
        if i < len(crowd.waves) - 1:
            r.sleep(WAVE_GAP_S)
    members = len(QUERIES) + len(java) + len(live)
    r.notes.append(f"the crowd at its peak: {max(crowd.members_after())} members ({len(QUERIES)} queries, "
                   f"{crowd.java} Java, the rest librdkafka); {members} after the last wave; "
                   f"{crowd.partitions} partitions")
    waves_done = time.monotonic()
    took, why = None, ""
    while took is None and time.monotonic() < wave_began + crowd.settle_s:
        r.sleep(0.5)
        at, why = first_settled(list(r.group_sampler.samples), after=waves_done, expected=members,
                                partitions=crowd.partitions)
        took = None if at is None else at - wave_began
    if took is None:
        r.problems.append(f"the group did not settle within {crowd.settle_s:.0f}s of the last wave ({members} "
                          f"members expected; the coordinator's last description: {why})")
    else:
        r.notes.append(f"the group settled {took:.1f}s after the last wave began ({members} members, every "
                       f"partition assigned once; bound {crowd.settle_s:.0f}s)")
        r.event(r.notes[-1])
    r.sleep(READ_ON_S)
    quiet = [pm.owner for pm in [*java, *live, *gone] if not pm.batches]
    r.notes.append(f"plain consumers that read: {len(java) + len(live) + len(gone) - len(quiet)} of "
                   f"{len(java) + len(live) + len(gone)}" + (f" (none: {quiet})" if quiet else ""))
