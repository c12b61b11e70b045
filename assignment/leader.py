"""The leader's whole round: JoinGroup member metadata in, SyncGroup assignments out.

decode -> cluster metadata for the subscribed topics -> assign -> validate ->
encode, with the time each phase took. It runs on the client's IO thread while
the heartbeat waits for the GIL, so every phase is linear with small constants
(see ``_wirefast``, ``_compact``); the caller only supplies the metadata lookup.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from assignment import protocol
from assignment.base import Assignor
from assignment.errors import ProtocolDecodeError
from assignment.model import ClusterMetadata, MemberAssignment, RebalanceProtocol
from assignment.validate import validate_assignment

PHASES = ("decode", "metadata", "assign", "validate", "encode")


@dataclass(slots=True)
class LeaderRound:
    """Bytes per member (every member of the JoinGroup response gets one), and what it cost."""

    assignments: dict[str, bytes]
    topics: set[str]
    undecodable: dict[str, ProtocolDecodeError]
    seconds: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        total = sum(self.seconds.values())
        parts = ", ".join(f"{k} {self.seconds[k]:.3f}" for k in PHASES if k in self.seconds)
        return f"{total:.3f} s ({parts})"


def lead_round(
    assignor: Assignor,
    metadata: Mapping[str, bytes],
    group_instance_ids: Mapping[str, str | None],
    cluster_for: Callable[[set[str], bool], ClusterMetadata],
    clock: Callable[[], float] = time.perf_counter,
) -> LeaderRound:
    """Decode, assign, validate, encode.

    ``cluster_for(topics, want_racks)`` returns the metadata of the subscribed
    topics; ``want_racks`` is False when no member reported a rack, so the
    caller can skip collecting replica racks per partition. ``clock`` times the
    phases (a benchmark on a shared machine passes ``time.process_time``).
    Raises InvalidAssignmentError (the assignor's output breaks the group) and
    whatever the assignor raises; undecodable members get an empty assignment.
    """
    t0 = clock()
    decoded = protocol.decode_members(metadata, group_instance_ids)
    subs, bad = decoded.subscriptions, decoded.errors
    topics: set[str] = set()
    racks = False
    for s in {id(s.topics): s for s in subs.values()}.values():  # shared tuples: once each
        topics.update(s.topics)
    racks = any(s.rack_id for s in subs.values())
    t1 = clock()
    cluster = cluster_for(topics, racks)
    t2 = clock()
    result = assignor.assign(cluster, subs)
    t3 = clock()
    validate_assignment(
        assignor.name, cluster, subs, result, replicas=int(getattr(assignor, "replicas", 1) or 1),
        cooperative=RebalanceProtocol.COOPERATIVE in assignor.supported_protocols,
    )
    t4 = clock()
    encoded = {mid: protocol.encode_assignment(a) for mid, a in result.items()}
    empty = protocol.encode_assignment(MemberAssignment(()))
    for member_id in metadata:  # undecodable or left out by the assignor: an empty assignment
        encoded.setdefault(member_id, empty)
    t5 = clock()
    seconds = dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True))
    return LeaderRound(encoded, topics, bad, seconds)
