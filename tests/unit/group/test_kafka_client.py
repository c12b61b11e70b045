"""The pure rule of kafka_client.py's heartbeat fix: which answers may reset a generation."""

from kafka import errors as kerr
from kafka.coordinator.base import Generation

from spark_groupsource.group.kafka_client import _stale_answer

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
