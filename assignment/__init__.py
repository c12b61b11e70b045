"""Client-side partition assignment: assignors, the consumer embedded protocol, validation.

Pure Python and standard library only, so it runs (and is tested) without a
broker, a Kafka client library or Spark.
"""

from assignment.base import Assignor
from assignment.copartition import CoPartitionAssignor
from assignment.errors import (
    AssignmentError,
    AssignorConfigError,
    InvalidAssignmentError,
    ProtocolDecodeError,
    UnknownAssignorError,
)
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)
from assignment.protocol import (
    DecodedMembers,
    decode_assignment,
    decode_members,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from assignment.range import RangeAssignor
from assignment.redundant import RedundantAssignor, primary_partitions
from assignment.registry import BUILTIN, create_assignor, create_assignors
from assignment.roundrobin import RoundRobinAssignor
from assignment.sticky import CooperativeStickyAssignor, StickyAssignor
from assignment.validate import validate_assignment

__all__ = [
    "BUILTIN",
    "Assignor",
    "AssignmentError",
    "AssignorConfigError",
    "ClusterMetadata",
    "CoPartitionAssignor",
    "CooperativeStickyAssignor",
    "DecodedMembers",
    "GroupAssignment",
    "InvalidAssignmentError",
    "MemberAssignment",
    "ProtocolDecodeError",
    "RangeAssignor",
    "RebalanceProtocol",
    "RedundantAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "UnknownAssignorError",
    "create_assignor",
    "create_assignors",
    "decode_assignment",
    "decode_members",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "primary_partitions",
    "validate_assignment",
]
