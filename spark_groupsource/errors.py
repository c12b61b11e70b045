"""The connector's exception hierarchy: one base a caller can catch, a type per failure kind."""

from __future__ import annotations


class GroupKafkaError(Exception):
    """Base of every error this connector raises on purpose."""


class OptionError(GroupKafkaError, ValueError):
    """A user option is missing, unknown or invalid. Raised before any data moves."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(f"option '{option}': {message}")


class DataLossError(GroupKafkaError):
    """Records the query expected to read are gone (retention, truncation, deleted topic)."""

    def __init__(self, topic: str, partition: int, expected: int, available: int | None, detail: str = ""):
        self.topic, self.partition = topic, partition
        self.expected, self.available = expected, available
        avail = "none" if available is None else str(available)
        msg = (
            f"data loss in {topic}-{partition}: expected offset {expected}, "
            f"first available offset is {avail}"
        )
        if detail:
            msg += f" ({detail})"
        msg += ". Set failOnDataLoss=false to log, count and skip the missing records instead."
        super().__init__(msg)


class MembershipError(GroupKafkaError):
    """The driver could not join, stay in, or leave the consumer group."""


class FencedError(MembershipError):
    """The coordinator fenced this member (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""


class CommitError(GroupKafkaError):
    """An offset commit failed for a reason that is not a fence."""


class BrokerError(GroupKafkaError):
    """A broker request (metadata, offsets, fetch) failed after its retries."""


class InterpreterError(GroupKafkaError):
    """Spark runs the connector in a Python interpreter that lacks its dependencies
    (PYSPARK_PYTHON unset or pointing elsewhere than the venv where it is installed)."""


class GroupUnreachableError(MembershipError):
    """The group member could not reach the cluster, find the group's coordinator, or get an
    assignment within ``groupJoinTimeoutMs``. ``step`` says which: "bootstrap",
    "coordinator" or "assignment"."""

    step: str = ""


class SecurityError(GroupKafkaError):
    """The brokers refused this client: a failed login, a failed TLS handshake or a missing ACL.
    Retrying cannot help, so it is raised at once, naming what to check."""


class AuthenticationError(SecurityError):
    """SASL authentication failed (wrong username or password, mechanism not enabled)."""


class TlsError(SecurityError):
    """The TLS handshake failed (untrusted or mismatched certificate, client certificate
    refused, or the port does not speak TLS)."""


class AuthorizationError(SecurityError):
    """A broker denied an operation for lack of an ACL (GROUP_/TOPIC_AUTHORIZATION_FAILED)."""


class GroupFullError(MembershipError):
    """The group's coordinator refused this member with GROUP_MAX_SIZE_REACHED: the group already
    holds as many members as the brokers' ``group.max.size`` (classic) or
    ``group.consumer.max.size`` (KIP-848) allows. Fatal, as in the Java client: waiting cannot
    free a place."""

    def __init__(self, message: str, setting: str):
        self.setting = setting
        super().__init__(message)
