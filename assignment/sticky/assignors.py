"""StickyAssignor (eager, KIP-54/KIP-341) and CooperativeStickyAssignor (KIP-429)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, repeat
from operator import ne

from assignment._compact import IndexedPartitions
from assignment.base import Assignor
from assignment.errors import ProtocolDecodeError
from assignment.model import (
    ClusterMetadata,
    GroupAssignment,
    MemberAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)
from assignment.protocol import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from assignment.sticky.core import DEFAULT_GENERATION, MemberData, StickyResult, sticky_assign


def _to_group_assignment(res: StickyResult, subscriptions: Mapping[str, Subscription],
                         skip: set[int] | None = None) -> GroupAssignment:
    # Compact partition lists: the validator and the encoder read the numbers directly.
    space = res.space
    if res.per_member is not None:
        per_member = res.per_member
        if skip:
            for m in {res.owner[i] for i in skip if res.owner[i] >= 0}:
                per_member[m] = [i for i in per_member[m] if i not in skip]
        for lst in per_member:
            lst.sort()
    else:
        per_member = space.member_indices(res.owner, len(res.members), skip)
    out = {m: MemberAssignment(IndexedPartitions(space, idx))  # type: ignore[arg-type]
           for m, idx in zip(res.members, per_member, strict=True)}
    for m in subscriptions:
        out.setdefault(m, MemberAssignment(()))
    return out


class StickyAssignor(Assignor):
    """Balanced, then as few moves as possible; eager protocol.

    Each member reports its previous assignment and generation in its user data
    (KIP-341), so the leader can tell a stale claim from a current one.
    Example, 8 partitions of t, members going C0 -> C0,C1 -> C0,C1,C2::

        C0: t-0..t-7
        C0: t-0..t-3           C1: t-4..t-7
        C0: t-0, t-1, t-2      C1: t-4, t-5, t-6      C2: t-3, t-7

    Two partitions move on the second rebalance where range moves three.
    """

    name = "sticky"

    def __init__(self) -> None:
        self._partitions: tuple[TopicPartition, ...] | None = None
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: tuple[str, ...]) -> bytes | None:
        if self._partitions is None:
            return None
        return encode_sticky_user_data(self._partitions, self._generation)

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:
        self._partitions = assignment.partitions
        self._generation = generation

    @staticmethod
    def member_data(sub: Subscription) -> MemberData:
        """From user data when present (Java), else the v1+ owned partitions."""
        if sub.user_data:
            try:
                ud = decode_sticky_user_data(sub.user_data, sub.member_id)
            except ProtocolDecodeError:
                # Java ignores a previous assignment it cannot parse.
                return MemberData((), DEFAULT_GENERATION)
            return MemberData(ud.partitions, ud.generation)
        gen = sub.generation if sub.generation >= 0 else None
        return MemberData(sub.owned_partitions, gen)

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        data = {m: self.member_data(s) for m, s in subscriptions.items()}
        return _to_group_assignment(sticky_assign(cluster, subscriptions, data), subscriptions)


class CooperativeStickyAssignor(Assignor):
    """The sticky algorithm under KIP-429 incremental cooperative rebalancing.

    A partition that moves is first revoked by its owner; it is left out of the
    new owner's assignment in this round (Java's adjustAssignment) and handed
    over in the follow-up rebalance the revoking member triggers. Example, C2
    joins C0 (t-0..t-3) and C1 (t-4..t-7)::

        round 1: C0: t-0, t-1, t-2   C1: t-4, t-5, t-6   C2: -      (t-3, t-7 revoked)
        round 2: C0: t-0, t-1, t-2   C1: t-4, t-5, t-6   C2: t-3, t-7
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: tuple[str, ...]) -> bytes | None:
        return encode_cooperative_user_data(self._generation)

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:
        self._generation = generation

    @staticmethod
    def member_data(sub: Subscription) -> MemberData:
        """Owned partitions from the subscription; generation from v2+ or the user data."""
        if sub.generation >= 0:
            return MemberData(sub.owned_partitions, sub.generation)
        return MemberData(sub.owned_partitions, decode_cooperative_user_data(sub.user_data))

    def assign(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> GroupAssignment:
        data = {m: self.member_data(s) for m, s in subscriptions.items()}
        res = sticky_assign(cluster, subscriptions, data)
        return _to_group_assignment(res, subscriptions, self._transferring(res, subscriptions))

    @staticmethod
    def _transferring(res: StickyResult, subscriptions: Mapping[str, Subscription]) -> set[int]:
        """Partitions that move from one current owner to another: held back one round.

        Stale and duplicate claims were dropped before assigning (highest
        generation wins), so a stale claim alone never withholds a partition
        from the member that rightfully keeps it. As Java, per path:

        * uniform (constrained): given to a member other than its valid previous
          owner, or claimed by several members of one generation;
        * general (computePartitionsTransferringOwnership): given to a member
          that did not report it while another member reported it.
        """
        owner = res.owner
        if res.uniform:
            out: set[int] = set(i for i in (res.multi or ()) if owner[i] >= 0)
            get = owner.__getitem__
            for m, mine in enumerate(res.owned or ()):
                # C loop: the previously owned partitions now held by someone else
                moved = compress(mine, map(ne, map(get, mine), repeat(m)))
                out.update(i for i in moved if owner[i] >= 0)
            return out
        space = res.space
        claims = [space.indices(subscriptions[mid].owned_partitions) for mid in res.members]
        claimed_by_owner = set()
        for m, mine in enumerate(claims):
            for i in mine:
                if owner[i] == m:
                    claimed_by_owner.add(i)
        out = set()
        for m, mine in enumerate(claims):
            for i in mine:
                o = owner[i]
                if o >= 0 and o != m and i not in claimed_by_owner:
                    out.add(i)
        return out
