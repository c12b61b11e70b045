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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from spark_groupsource.config.client_configs import admin_config

log = logging.getLogger("spark_groupsource.consumer_member")

TARGET_CHECK_S = 1.0
#: answers after which asking again cannot help (the broker or our principal cannot describe)
_UNANSWERABLE = frozenset({
    KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION,
    KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.INVALID_REQUEST,
})


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
