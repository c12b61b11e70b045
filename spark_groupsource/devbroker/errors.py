"""The dev broker's single error type."""

from __future__ import annotations

from spark_groupsource.errors import GroupKafkaError


class DevBrokerError(GroupKafkaError):
    """A dev broker could not be found, started, configured or reached.

    The message is one line that says what went wrong and, where useful, what to do.
    """
