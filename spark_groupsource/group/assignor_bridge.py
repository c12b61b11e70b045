"""The boundary between kafka-python's group client and our pure assignors.

kafka-python runs the JoinGroup/SyncGroup state machine; everything that decides
or encodes an assignment is ours (``assignment/``), so the bytes on the wire are
the ones our protocol module writes and a corrupt member cannot crash the leader.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.coordinator.assignors.abstract import RebalanceProtocol as KpRebalanceProtocol
from kafka.structs import TopicPartition as KpTP

from assignment import protocol
from assignment.base import Assignor
from assignment.leader import lead_round
from assignment.model import (
    ClusterMetadata,
    MemberAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)

log = logging.getLogger("spark_groupsource.membership")


class BridgedAssignor(AbstractPartitionAssignor):
    """Presents one of our assignors to kafka-python under its wire name.

    ``metadata`` returns raw subscription bytes (our encoder, version 3), built
    from what the member owns now so sticky and cooperative assignors see it.
    """

    def __init__(
        self,
        assignor: Assignor,
        owned: Callable[[], tuple[frozenset[TopicPartition], int]],
        rack_id: str | None,
    ):
        self.assignor = assignor
        self._owned = owned
        self._rack_id = rack_id
        self.last_assignment: MemberAssignment | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.assignor.name

    def supported_protocols(self):
        return [KpRebalanceProtocol(p.value) for p in self.assignor.supported_protocols]

    def metadata(self, topics):
        owned, generation = self._owned()
        topics_t = tuple(sorted(topics))
        sub = Subscription(
            member_id="",
            topics=topics_t,
            user_data=self.assignor.subscription_user_data(topics_t),
            owned_partitions=tuple(sorted(owned)),
            generation=generation,
            rack_id=self._rack_id,
        )
        return protocol.encode_subscription(sub)

    def assign(self, cluster, members):  # pragma: no cover - leader path goes through perform_assignment
        raise NotImplementedError("groupkafka assigns through perform_assignment")

    def on_assignment(self, assignment, generation):
        ours = MemberAssignment.of(
            (TopicPartition(t, p) for t, ps in assignment.assigned_partitions for p in ps),
            assignment.user_data,
        )
        with self._lock:
            self.last_assignment = ours
        self.assignor.on_assignment(ours, generation)


def cluster_snapshot(kp_cluster, topics: set[str], want_racks: bool = True) -> ClusterMetadata:
    """Turn kafka-python's metadata cache into our plain snapshot (with replica racks).

    Replica racks are collected per partition (a million partitions: a second on
    the IO thread), so only when some member reported a rack and some broker has one.
    """
    counts: dict[str, int] = {}
    racks: dict[TopicPartition, frozenset[str]] = {}
    for topic in sorted(topics):
        ids = kp_cluster.partitions_for_topic(topic)
        if ids:
            counts[topic] = max(ids) + 1
    if not want_racks or not any(getattr(b, "rack", None) for b in kp_cluster.brokers()):
        return ClusterMetadata(counts, racks)
    # public API only (is_replica_node): kafka_client.py is the one module touching internals
    with_racks = [(b.node_id, b.rack) for b in kp_cluster.brokers() if getattr(b, "rack", None)]
    for topic in counts:
        for p in kp_cluster.partitions_for_topic(topic) or ():
            kp_tp = KpTP(topic, p)
            replica_racks = {rack for node, rack in with_racks if kp_cluster.is_replica_node(kp_tp, node)}
            if replica_racks:
                racks[TopicPartition(topic, p)] = frozenset(replica_racks)
    return ClusterMetadata(counts, racks)


def perform_assignment(
    assignors: dict[str, Assignor], kp_cluster, protocol_name: str, members
) -> tuple[dict[str, bytes], set[str]]:
    """Leader side: decode, assign, validate, encode. Returns (bytes per member, topics)."""
    assignor = assignors.get(protocol_name)
    if assignor is None:
        raise ValueError(f"coordinator chose protocol {protocol_name!r}, which this member did not offer")
    result = lead_round(
        assignor,
        {m.member_id: bytes(m.metadata) for m in members},
        {m.member_id: getattr(m, "group_instance_id", None) for m in members},
        lambda topics, want_racks: cluster_snapshot(kp_cluster, topics, want_racks),
    )
    for member_id, reason in result.undecodable.items():
        log.error("group member %s sent an undecodable subscription; it gets no partitions: %s",
                  member_id, reason)
    log.info("leader assigned group with %s to %d members in %s", assignor.name,
             len(result.assignments), result.describe())
    return result.assignments, result.topics


def rebalance_protocol_of(assignors: list[Assignor]) -> RebalanceProtocol:
    common = set(assignors[0].supported_protocols)
    for a in assignors[1:]:
        common &= set(a.supported_protocols)
    return RebalanceProtocol.COOPERATIVE if RebalanceProtocol.COOPERATIVE in common else RebalanceProtocol.EAGER
