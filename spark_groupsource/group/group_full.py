"""GROUP_MAX_SIZE_REACHED as a :class:`GroupFullError` naming the broker limit and what to do.

A full group is not transient: the Java client fails the consumer at once (classic JoinGroup and
KIP-848 ConsumerGroupHeartbeat alike), and so do we, rather than retrying until
``groupJoinTimeoutMs`` while the query waits for an assignment that never comes.
"""

from __future__ import annotations

from spark_groupsource.errors import GroupFullError

#: The broker setting that bounds a group's size, per group protocol.
LIMIT_SETTING = {"classic": "group.max.size", "consumer": "group.consumer.max.size"}
#: The code's name (kafka-python, librdkafka), librdkafka's words and the broker's, squeezed.
_NAMES = ("groupmaxsizereached", "hasreachedmaximumsize", "reacheditsmaximumcapacity")


def is_group_full(text: str) -> bool:
    """True when an error's name or text is GROUP_MAX_SIZE_REACHED (error 81), as kafka-python
    (``GroupMaxSizeReachedError``), librdkafka (``Consumer group has reached maximum size``) or
    the broker (``reached its maximum capacity``) words it."""
    low = text.lower().replace(" ", "").replace("_", "")
    return any(name in low for name in _NAMES)


def group_full_error(group_id: str, protocol: str, bootstrap: str, detail: str = "") -> GroupFullError:
    """The error of a member the coordinator would not let in: the group, the limit's setting,
    and the ways out (the members already in are not affected and keep their partitions)."""
    setting = LIMIT_SETTING[protocol]
    said = f" ({detail.strip()})" if detail.strip() else ""
    return GroupFullError(
        f"GROUP_MAX_SIZE_REACHED: group {group_id!r} is full: it already has the brokers' {setting} "
        f"members ({protocol} protocol; bootstrap servers {bootstrap}){said}, so the coordinator refused "
        f"this query's member. The members already in keep their partitions. Stop one of them, give this "
        f"query another kafka.group.id, or raise {setting} on the brokers.",
        setting,
    )
