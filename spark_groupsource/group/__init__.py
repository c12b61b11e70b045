"""The driver as a member of the consumer group.

Users of membership (the stream driver, backfills) see only :mod:`.seam` and get a member
from :func:`.factory.build_membership`, the one place that builds it.

- :mod:`.seam`             the narrow interface: ownership, generations, commits, revocations
- :mod:`.factory`          builds the member for a query or a backfill from parsed options
- :mod:`.classic_member`   the classic protocol (JoinGroup/SyncGroup), our assignors as leader
- :mod:`.kafka_client`     the only module touching kafka-python's internals
- :mod:`.assignor_bridge`  kafka-python's group client <-> our pure ``assignment`` package
- :mod:`.consumer_member`  KIP-848 (``kafka.group.protocol=consumer``) over librdkafka
- :mod:`.handover_watch`   is a KIP-848 handover still under way? (the broker's answer)
- :mod:`.memory_member`    an in-memory member for unit tests of the seam's users
"""
