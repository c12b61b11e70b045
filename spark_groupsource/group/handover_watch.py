"""Is a KIP-848 handover to this member still under way? The broker's answer, not a guess.

In the consumer protocol the broker computes each member's *target* assignment at once, but
hands a partition to its new owner only after the old owner acknowledged its revocation (after
the old owner's in-flight batch committed, for another query: possibly long). Until then the new
member holds nothing, exactly like a member that was assigned nothing (more members than
partitions). ConsumerGroupDescribe tells the two apart: the member's target assignment names
partitions its current assignment lacks. AvailableNow and ``processAllAvailable`` need that
difference, or a query joining a busy group looks caught up and ends with zero rows.

The question is asked from a thread of its own, at most every ``TARGET_CHECK_S``, and the last
answer is what the planner sees: a snapshot never waits for the broker.

Kafka >= 4.3 batches target assignments (KIP-1263): a joiner's target is computed only at the
group's next assignment interval (``consumer.assignment.interval.ms``, default 1 s, up to 15 s),
and until then ConsumerGroupDescribe shows it with an empty target, which reads as "nothing on
its way". The watch therefore also asks, once, for the group's configs: the interval the broker
reports lengthens the grace a joiner with nothing gets (:func:`join_grace_s`). A broker that
does not report it (4.0: no batching) or refuses to (no DESCRIBE_CONFIGS on the group) leaves
the grace as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from spark_groupsource.config.client_configs import admin_config

log = logging.getLogger("spark_groupsource.consumer_member")

TARGET_CHECK_S = 1.0
#: answers after which asking again cannot help (the broker or our principal cannot describe)
_UNANSWERABLE = frozenset({
    KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION,
    KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.INVALID_REQUEST,
})


#: the group config (Kafka >= 4.3) naming how long a new target assignment may take
ASSIGNMENT_INTERVAL_CONFIG = "consumer.assignment.interval.ms"


def join_grace_s(base_s: float, assignment_interval_ms: int | None) -> float:
    """How long a member that joined with nothing reads as "an assignment is on its way" before
    only the broker's target assignment decides: ``base_s``, plus the group's assignment
    interval where the broker batches assignments (its target may be empty that long)."""
    return base_s + (max(0, assignment_interval_ms) / 1000.0 if assignment_interval_ms else 0.0)


def parse_assignment_interval(configs: Mapping[str, object]) -> int | None:
    """``consumer.assignment.interval.ms`` from a group's DescribeConfigs answer, or None."""
    entry = configs.get(ASSIGNMENT_INTERVAL_CONFIG)
    value = getattr(entry, "value", entry)
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


class HandoverWatch:
    """The last known answer to "does the broker's target assignment for ``member_id`` name
    partitions it does not hold yet?" (None: not known)."""

    def __init__(self, client_config: Mapping[str, object], group_id: str, timeout_s: float = 5.0):
        self._conf = admin_config(client_config)
        self._group = group_id
        self._timeout_s = timeout_s
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()
        self._answer: bool | None = None
        self._answered = False  # a question has completed (answered or failed)
        self._asked_at = float("-inf")
        self._busy = False
        #: why the broker cannot answer (then nobody asks again and only the grace applies)
        self.unavailable: str | None = None
        #: the group's assignment interval as the broker reports it (None: not reported / not yet)
        self.assignment_interval_ms: int | None = None
        self._interval_asked = False

    def pending(self, member_id: str) -> bool | None:
        """The last answer; asks again in the background when it is older than TARGET_CHECK_S.
        Before the first question completed: True (unknown yet, so not settled), unless the
        broker is known not to answer."""
        with self._lock:
            now = time.monotonic()
            if member_id and not self._busy and self.unavailable is None and now - self._asked_at >= TARGET_CHECK_S:
                self._busy, self._asked_at = True, now
                threading.Thread(target=self._ask, args=(member_id,), daemon=True,
                                 name=f"groupkafka-handover-{self._group}").start()
            if not self._answered and self.unavailable is None:
                return True
            return self._answer

    def _ask(self, member_id: str) -> None:
        answer: bool | None = None
        try:
            if self._admin is None:
                self._admin = AdminClient(self._conf)
            if not self._interval_asked:
                self._interval_asked = True
                self._ask_interval(self._admin)
            future = self._admin.describe_consumer_groups([self._group], request_timeout=self._timeout_s)[self._group]
            d = future.result(timeout=self._timeout_s + 1)
            me = next((m for m in d.members if m.member_id == member_id), None)
            if me is not None:
                target = {(tp.topic, tp.partition) for tp in getattr(me.target_assignment, "topic_partitions", None) or ()}
                held = {(tp.topic, tp.partition) for tp in getattr(me.assignment, "topic_partitions", None) or ()}
                answer = bool(target - held)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in _UNANSWERABLE:
                self.unavailable = err.str()
                log.info("group %s: the broker cannot describe the group (%s); a member that holds nothing "
                         "cannot tell a pending handover from an empty assignment", self._group, err.str())
        except Exception as exc:  # noqa: BLE001 - unknown for now; asked again later
            log.debug("group %s: describing the group failed: %s", self._group, exc)
        with self._lock:
            self._answer, self._busy, self._answered = answer, False, True

    def _ask_interval(self, admin: AdminClient) -> None:
        """Once: the group's ``consumer.assignment.interval.ms`` (absent before Kafka 4.3)."""
        try:
            resource = ConfigResource(ResourceType.GROUP, self._group)
            configs = admin.describe_configs([resource], request_timeout=self._timeout_s)[resource].result(
                timeout=self._timeout_s + 1)
            self.assignment_interval_ms = parse_assignment_interval(configs)
        except Exception as exc:  # noqa: BLE001 - unauthorized, unsupported or away: the grace stays
            log.debug("group %s: the group's configs could not be described: %s", self._group, exc)
            return
        if self.assignment_interval_ms:
            log.info("group %s: the broker batches assignments every %d ms; a member that joined with "
                     "nothing waits that much longer for one", self._group, self.assignment_interval_ms)
