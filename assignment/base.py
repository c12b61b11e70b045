"""The assignor interface: the contract between group membership and a strategy."""

from __future__ import annotations

import abc
from collections.abc import Mapping

from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    RebalanceProtocol,
    Subscription,
)


class Assignor(abc.ABC):
    """A client-side partition assignment strategy.

    ``name`` is the protocol name on the wire: members of one group agree on an
    assignor by this name, so built-ins use the Java client's and librdkafka's
    names. Only the elected leader calls ``assign``; every member calls
    ``on_assignment`` with what it received.
    """

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Assignor:
        """Build from (lower-cased) string options; assignors with settings override this."""
        return cls()

    def subscription_user_data(self, topics: tuple[str, ...]) -> bytes | None:
        """The user data this member puts in its subscription (None for none)."""
        return None

    @abc.abstractmethod
    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        """Decide every member's partitions. Pure: no I/O, no clock, no randomness."""

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:
        """Remember what this member got (stateful assignors: sticky user data)."""
        return None
