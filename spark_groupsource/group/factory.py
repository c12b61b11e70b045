"""The one place that builds the driver's group member, for streaming queries and backfills alike.

Two copies of this code once drifted apart: the stream made ``subscribePattern`` match whole
topic names, the coordinated backfill passed it to kafka-python raw, which matches at the start
(a backfill of ``orders`` then held ``orders_dlq``'s partitions in the group while it ran).
"""

from __future__ import annotations

from assignment.registry import create_assignors
from spark_groupsource.config import (
    CommonOptions,
    SubscribePattern,
    SubscribeTopics,
    membership_config,
)
from spark_groupsource.group.classic_member import GroupMembership, MembershipConfig
from spark_groupsource.group.seam import Membership

__all__ = ["build_membership", "classic_config", "whole_match"]


def build_membership(
    opts: CommonOptions,
    *,
    drain_timeout_s: float | None = None,
    leader_sync_delay_ms: int | None = None,
) -> Membership:
    """The member for parsed stream or batch options: KIP-848 with ``kafka.group.protocol=consumer``
    (the broker assigns), else classic with our assignors.

    ``drain_timeout_s`` (default: the rebalance timeout, ``kafka.max.poll.interval.ms``) bounds how
    long a revocation waits for the batch in flight; ``leader_sync_delay_ms`` overrides the option
    of that name (a backfill's argument)."""
    drain = drain_timeout_s if drain_timeout_s is not None else (opts.max_poll_interval_ms or 300_000) / 1000.0
    if opts.group_protocol == "consumer":
        # imported in this mode only: the driver's runner of a classic query never loads it
        from spark_groupsource.group.consumer_member import consumer_membership

        return consumer_membership(opts, drain_timeout_s=drain)
    return GroupMembership(classic_config(opts, leader_sync_delay_ms=leader_sync_delay_ms), drain_timeout_s=drain)


def classic_config(opts: CommonOptions, *, leader_sync_delay_ms: int | None = None) -> MembershipConfig:
    """What the classic member needs from the options (pure: no client is created)."""
    sub = opts.subscription
    return MembershipConfig(
        group_id=opts.group_id or "",
        assignors=tuple(create_assignors(",".join(opts.assignors), dict(opts.assignor_options))),
        topics=tuple(sub.topics) if isinstance(sub, SubscribeTopics) else (),
        pattern=whole_match(sub.pattern) if isinstance(sub, SubscribePattern) else None,
        group_instance_id=opts.group_instance_id,
        client_rack=opts.client_rack,
        # kafka-python cannot bootstrap against the mock without it; Kafka >= 2.3 serves it
        client_config={"api_version": (2, 3), **membership_config(opts)},
        leader_sync_delay_ms=opts.leader_sync_delay_ms if leader_sync_delay_ms is None else leader_sync_delay_ms,
        followup_join_delay_ms=opts.followup_join_delay_ms,
        join_timeout_ms=opts.group_join_timeout_ms,
        security=opts.security,
    )


def whole_match(pattern: str) -> str:
    """kafka-python matches a pattern at the start of a topic name (``re.match``); Java's consumer
    and our option match the whole name."""
    return f"(?:{pattern})\\Z"
