"""The crowded-group scenario's pure parts (chaos/crowd.py): the crowds' waves, which one the
environment picks, when a description of the group says it settled, and which plain member a
run starts (pure: no broker, no Spark)."""

from __future__ import annotations

import pytest

from chaos.crowd import FIFTY, LEAN, Crowd, crowd_from_env, first_settled, unsettled
from chaos.run import plain_kind
from chaos.scenarios import SCENARIOS
from chaos.traffic import described_partitions

FOUR = {"a": (0, 1), "b": (2,), "r0": (3,)}


def test_the_lean_crowd_and_the_fifty_count_their_members_wave_by_wave() -> None:
    assert LEAN.members_after() == [2 + 2 + 6, 2 + 2 + 7]
    assert max(LEAN.members_after()) == 11 and LEAN.partitions == 24 and LEAN.librdkafka == 10
    assert FIFTY.members_after() == [30, 50, 38, 50]
    assert FIFTY.java == 4 and FIFTY.partitions == 64 and FIFTY.librdkafka == 56


@pytest.mark.parametrize("waves, why", [
    (((2, 0), (1, 3)), r"wave 1 \(1 joining, 3 leaving\) with 2"),  # more leave than are in
    (((2, -1),), "wave 0"),
    (((2, 0), (1, 1)), "must change the group's size"),  # settling could be read before the wave
])
def test_a_crowd_whose_waves_cannot_run_is_refused(waves, why) -> None:
    with pytest.raises(ValueError, match=why):
        Crowd(partitions=4, java=0, waves=waves, settle_s=10)


def test_the_environment_picks_the_fifty_only_when_asked() -> None:
    assert crowd_from_env({}) is LEAN
    assert crowd_from_env({"GROUPKAFKA_CROWDED_FULL": "0"}) is LEAN
    assert crowd_from_env({"GROUPKAFKA_CROWDED_FULL": " "}) is LEAN
    assert crowd_from_env({"GROUPKAFKA_CROWDED_FULL": "1"}) is FIFTY


def test_a_group_has_settled_only_when_stable_complete_and_each_partition_owned_once() -> None:
    assert unsettled("Stable", FOUR, 3, 4) is None
    assert unsettled("PreparingRebalance", FOUR, 3, 4) == "state PreparingRebalance"
    assert unsettled("Stable", FOUR, 4, 4) == "3 members, not 4"
    assert unsettled("Stable", {**FOUR, "r0": (2, 3)}, 3, 4) == "partitions assigned twice: [2]"
    assert unsettled("Stable", {**FOUR, "r0": ()}, 3, 4) == "partitions unassigned: [3]"
    assert unsettled("Stable", {**FOUR, "r0": (3, 4)}, 3, 4) == "partitions not of the topic: [4]"


def test_the_first_settled_description_after_the_waves_is_the_one_measured() -> None:
    samples = [(1.0, "Stable", FOUR),  # before the last wave: not counted
               (2.0, "CompletingRebalance", FOUR), (3.0, "Stable", FOUR), (4.0, "Stable", FOUR)]
    assert first_settled(samples, after=1.5, expected=3, partitions=4) == (3.0, "")
    assert first_settled(samples, after=5.0, expected=3, partitions=4) == (
        None, "no description of the group since the last wave")
    assert first_settled(samples[:2], after=1.5, expected=3, partitions=4) == (None, "state CompletingRebalance")


def test_plain_members_are_java_on_kafka_and_librdkafka_on_the_mock_unless_asked() -> None:
    assert plain_kind("kafka") == "java" and plain_kind("mock") == "librdkafka"
    assert plain_kind("kafka", "librdkafka") == "librdkafka"
    with pytest.raises(ValueError, match="Kafka only"):
        plain_kind("mock", "java")
    with pytest.raises(ValueError, match="one of"):
        plain_kind("kafka", "jvm")


def test_the_crowded_group_runs_by_name_on_kafka_with_the_chosen_crowds_partitions() -> None:
    spec = next(s for s in SCENARIOS if s.name == "crowded_group")
    assert spec.named_only and spec.backends == ("kafka",) and spec.protocols == ("classic",)
    assert spec.partitions == LEAN.partitions  # the tests run without GROUPKAFKA_CROWDED_FULL


def test_the_group_sampler_reads_a_members_partitions_in_each_form_kafka_python_gives() -> None:
    """kafka-python 3's describe_groups hands the assignment as the decoded object's to_dict();
    read as an object only, every member seemed to own nothing (the settling never came)."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    raw = ConsumerProtocolAssignment(version=0, assigned_partitions=[("t", [3, 1]), ("u", [0])],
                                     user_data=b"").encode()
    decoded = ConsumerProtocolAssignment.decode(raw)
    assert described_partitions(decoded, "t") == [1, 3]
    assert described_partitions(decoded.to_dict(), "t") == [1, 3]
    assert described_partitions(decoded.to_dict(), "u") == [0]
    assert described_partitions("", "t") == [] and described_partitions(None, "t") == []
    with pytest.raises(ValueError, match="did not decode"):
        described_partitions("\\x00\\x01garbage", "t")
