"""GROUP_MAX_SIZE_REACHED recognised in each client's words, and the error it becomes."""

from __future__ import annotations

import pytest

from spark_groupsource.errors import GroupFullError, MembershipError
from spark_groupsource.group.group_full import group_full_error, is_group_full


@pytest.mark.parametrize("text", [
    "[Error 81] GroupMaxSizeReachedError: g",  # kafka-python's JoinGroup error
    # librdkafka's fatal ConsumerGroupHeartbeat error (Kafka 4.3.1, KIP-848), and its code name
    "Fatal error: Broker: Consumer group has reached maximum size: ConsumerGroupHeartbeat fatal error: "
    "Broker: Consumer group has reached maximum size",
    "KafkaError{code=GROUP_MAX_SIZE_REACHED,val=81}",
    "The consumer group has reached its maximum capacity of 2 members.",  # the broker's message
])
def test_every_clients_wording_of_a_full_group_is_recognised(text):
    assert is_group_full(text)


@pytest.mark.parametrize("text", ["Fatal error: Broker: Group authorization failed", "GroupIdNotFound",
                                  "Local: Maximum application poll interval (max.poll.interval.ms) exceeded"])
def test_other_errors_are_not_a_full_group(text):
    assert not is_group_full(text)


@pytest.mark.parametrize(("protocol", "setting"), [("classic", "group.max.size"),
                                                   ("consumer", "group.consumer.max.size")])
def test_the_error_names_the_group_the_limit_and_the_ways_out(protocol, setting):
    exc = group_full_error("orders", protocol, "b1:9092", "JoinGroup: [Error 81]")
    assert isinstance(exc, GroupFullError) and isinstance(exc, MembershipError)
    assert exc.setting == setting
    text = str(exc)
    for word in ("GROUP_MAX_SIZE_REACHED", "'orders'", setting, "b1:9092", "JoinGroup: [Error 81]",
                 "kafka.group.id", f"raise {setting}"):
        assert word in text, word
