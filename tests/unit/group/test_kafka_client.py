"""The pure rules of kafka_client.py's heartbeat and commit fixes: which answers may reset a
generation."""

from kafka import errors as kerr
from kafka.coordinator.base import Generation
from kafka.structs import MemberState

from spark_groupsource.group.kafka_client import _stale_answer, _stale_fence

NOW = Generation(7, "m-1", "range")


def test_a_resetting_answer_to_a_heartbeat_of_an_older_generation_is_stale():
    for error in (kerr.IllegalGenerationError, kerr.UnknownMemberIdError):
        assert _stale_answer(error.errno, (6, "m-1"), NOW)
        assert _stale_answer(error.errno, (7, "m-0"), NOW)  # rejoined under a new member id


def test_an_answer_to_a_heartbeat_of_the_current_generation_is_not_stale():
    for error in (kerr.IllegalGenerationError, kerr.UnknownMemberIdError):
        assert not _stale_answer(error.errno, (7, "m-1"), NOW)


def test_other_answers_are_never_stale():
    for error in (kerr.NoError, kerr.RebalanceInProgressError, kerr.FencedInstanceIdError,
                  kerr.NotCoordinatorError):
        assert not _stale_answer(error.errno, (6, "m-1"), NOW)


def test_a_fence_answered_to_a_commit_while_the_member_rejoins_is_stale():
    assert _stale_fence((7, "m-1"), NOW, MemberState.REBALANCING)  # join in flight
    assert _stale_fence((6, "m-1"), NOW, MemberState.STABLE)  # joined generation 7 since
    assert _stale_fence((7, "m-0"), NOW, MemberState.STABLE)  # rejoined under a new member id


def test_a_fence_answered_to_a_commit_of_the_generation_held_is_not_stale():
    assert not _stale_fence((7, "m-1"), NOW, MemberState.STABLE)
    # already reset by the heartbeat: the fence agrees, nothing is in flight
    assert not _stale_fence((7, "m-1"), Generation(-1, "m-1", None), MemberState.UNJOINED)
