"""ctypes bindings to librdkafka's mock cluster, as bundled in the confluent-kafka wheel.

Only the child process that hosts a mock cluster imports and uses this module: the mock's group
coordinator calls ``abort()`` on some inputs (members whose first protocols differ), which must not
take the test runner or a Spark driver down with it.

Every function used has its ``argtypes`` and ``restype`` declared (see ``_SIGNATURES``); the
signatures follow ``src/rdkafka_mock.h`` and ``src/rdkafka.h`` of librdkafka 2.x.
"""

from __future__ import annotations

import ctypes
import glob
import os
from ctypes import (
    POINTER,
    c_char_p,
    c_int,
    c_int16,
    c_int32,
    c_int64,
    c_size_t,
    c_void_p,
)

from .errors import DevBrokerError

RD_KAFKA_PRODUCER = 0
RD_KAFKA_CONF_OK = 0

_c_int_p = POINTER(c_int)  # rd_kafka_resp_err_t is a C enum: int-sized
_c_void_pp = POINTER(c_void_p)
_c_size_t_p = POINTER(c_size_t)

# name: (restype, argtypes)
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    # rdkafka.h
    "rd_kafka_version_str": (c_char_p, []),
    "rd_kafka_conf_new": (c_void_p, []),
    "rd_kafka_conf_destroy": (None, [c_void_p]),
    "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
    "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
    "rd_kafka_destroy": (None, [c_void_p]),
    "rd_kafka_err2name": (c_char_p, [c_int]),
    # rdkafka_mock.h
    "rd_kafka_mock_cluster_new": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (c_char_p, [c_void_p]),
    "rd_kafka_mock_topic_create": (c_int, [c_void_p, c_char_p, c_int, c_int]),
    "rd_kafka_mock_topic_delete": (c_int, [c_void_p, c_char_p]),
    "rd_kafka_mock_push_request_errors_array": (None, [c_void_p, c_int16, c_size_t, _c_int_p]),
    "rd_kafka_mock_clear_request_errors": (None, [c_void_p, c_int16]),
    # variadic: (rd_kafka_resp_err_t err, int rtt_ms) pairs follow, passed as c_int
    "rd_kafka_mock_broker_push_request_error_rtts": (c_int, [c_void_p, c_int32, c_int16, c_size_t]),
    "rd_kafka_mock_broker_error_stack_cnt": (c_int, [c_void_p, c_int32, c_int16, _c_size_t_p]),
    "rd_kafka_mock_broker_set_down": (c_int, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_up": (c_int, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_rtt": (c_int, [c_void_p, c_int32, c_int]),
    "rd_kafka_mock_broker_set_rack": (c_int, [c_void_p, c_int32, c_char_p]),
    "rd_kafka_mock_coordinator_set": (c_int, [c_void_p, c_char_p, c_char_p, c_int32]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [c_void_p, c_int32]),
    # KIP-848 ("consumer" protocol) groups
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [c_void_p, c_int]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [c_void_p, c_int]),
    "rd_kafka_mock_set_apiversion": (c_int, [c_void_p, c_int16, c_int16, c_int16]),
    "rd_kafka_mock_partition_set_leader": (c_int, [c_void_p, c_char_p, c_int32, c_int32]),
    "rd_kafka_mock_topic_set_error": (None, [c_void_p, c_char_p, c_int]),
    "rd_kafka_mock_partition_delete_records": (c_int, [c_void_p, c_char_p, c_int32, c_int64]),
    "rd_kafka_mock_start_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [c_void_p]),
    "rd_kafka_mock_get_requests": (_c_void_pp, [c_void_p, _c_size_t_p]),
    "rd_kafka_mock_request_id": (c_int32, [c_void_p]),
    "rd_kafka_mock_request_api_key": (c_int16, [c_void_p]),
    "rd_kafka_mock_request_timestamp": (c_int64, [c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [_c_void_pp, c_size_t]),
}

REQUIRED_SYMBOLS = tuple(_SIGNATURES)


def find_librdkafka() -> str:
    """Path of the librdkafka shared library bundled in the confluent-kafka wheel."""
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - confluent-kafka is a hard dependency
        raise DevBrokerError(f"confluent-kafka is not installed: {exc}") from exc
    pkg_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    site = os.path.dirname(pkg_dir)
    patterns = [
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),
        os.path.join(pkg_dir, ".dylibs", "librdkafka*.dylib"),
        os.path.join(pkg_dir, "librdkafka*.so*"),
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise DevBrokerError(
        f"librdkafka not found next to confluent-kafka in {site} (looked for "
        "confluent_kafka.libs/librdkafka*.so*); the mock backend needs the confluent-kafka wheel"
    )


_LIB: ctypes.CDLL | None = None


def load() -> ctypes.CDLL:
    """Load librdkafka once and declare the signatures of every function used."""
    global _LIB
    if _LIB is not None:
        return _LIB
    path = find_librdkafka()
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise DevBrokerError(f"cannot load {path}: {exc}") from exc
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise DevBrokerError(f"{path} lacks mock-cluster symbols: {', '.join(missing)}")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    _LIB = lib
    return lib


def err_name(code: int) -> str:
    raw = load().rd_kafka_err2name(code)
    return raw.decode() if raw else str(code)


class MockCluster:
    """One librdkafka mock cluster hosted by a producer handle in this process."""

    def __init__(self, brokers: int = 1, *, initial_rebalance_delay_ms: int = 100):
        if brokers < 1:
            raise DevBrokerError(f"brokers must be >= 1, got {brokers}")
        lib = load()
        self._lib = lib
        self.brokers = brokers
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # Quiet handle: it exists only to own the cluster (errors still reach stderr).
        for key, value in (("log_level", "3"), ("client.id", "groupkafka-devbroker-mock")):
            rc = lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr))
            if rc != RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise DevBrokerError(f"rd_kafka_conf_set({key}) failed: {errstr.value.decode()}")
        rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))  # takes conf
        if not rk:
            raise DevBrokerError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._rk = rk
        mcluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
        if not mcluster:
            lib.rd_kafka_destroy(rk)
            self._rk = None
            raise DevBrokerError("rd_kafka_mock_cluster_new failed")
        self._mc = mcluster
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        self.set_group_initial_rebalance_delay_ms(initial_rebalance_delay_ms)

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        mc, rk = getattr(self, "_mc", None), getattr(self, "_rk", None)
        self._mc = self._rk = None
        if mc:
            self._lib.rd_kafka_mock_cluster_destroy(mc)
        if rk:
            self._lib.rd_kafka_destroy(rk)

    def _cluster(self) -> int:
        if not self._mc:
            raise DevBrokerError("mock cluster is closed")
        return self._mc

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            raise DevBrokerError(f"{what} failed: {err_name(code)} ({code})")

    # -- topics --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> int:
        """Create a topic; returns the librdkafka error code (0 or TOPIC_ALREADY_EXISTS, 36)."""
        replication = min(self.brokers, 3)
        return self._lib.rd_kafka_mock_topic_create(
            self._cluster(), name.encode(), int(partitions), replication
        )

    def delete_topic(self, name: str) -> None:
        """Delete a topic with its records (clients see it gone at their next metadata)."""
        self._check(f"deleting topic {name!r}", self._lib.rd_kafka_mock_topic_delete(self._cluster(), name.encode()))

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        rc = self._lib.rd_kafka_mock_partition_set_leader(
            self._cluster(), topic.encode(), int(partition), int(broker_id)
        )
        self._check(f"set_partition_leader({topic}, {partition}, {broker_id})", rc)

    def set_topic_error(self, topic: str, error: int) -> None:
        self._lib.rd_kafka_mock_topic_set_error(self._cluster(), topic.encode(), int(error))

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete a partition's records below ``before_offset`` (its log start moves there), as
        retention does."""
        rc = self._lib.rd_kafka_mock_partition_delete_records(
            self._cluster(), topic.encode(), int(partition), int(before_offset)
        )
        self._check(f"delete_records({topic}, {partition}, {before_offset})", rc)

    # -- fault injection -----------------------------------------------------------------------
    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        arr = (c_int * len(errors))(*[int(e) for e in errors])
        self._lib.rd_kafka_mock_push_request_errors_array(
            self._cluster(), int(api_key), len(errors), arr
        )

    def push_broker_request_error(self, broker_id: int, api_key: int, error: int, rtt_ms: int) -> None:
        """The next request with ``api_key`` to this broker fails with ``error``, its response
        held back ``rtt_ms`` (the broker acts on the error at once, the client learns it late)."""
        rc = self._lib.rd_kafka_mock_broker_push_request_error_rtts(
            self._cluster(), int(broker_id), int(api_key), 1, c_int(int(error)), c_int(int(rtt_ms))
        )
        self._check(f"push_broker_request_error({broker_id}, {api_key})", rc)

    def broker_pending_errors(self, broker_id: int, api_key: int) -> int:
        """How many errors pushed with :meth:`push_broker_request_error` are still unused."""
        cnt = c_size_t(0)
        rc = self._lib.rd_kafka_mock_broker_error_stack_cnt(
            self._cluster(), int(broker_id), int(api_key), ctypes.byref(cnt)
        )
        self._check(f"broker_pending_errors({broker_id}, {api_key})", rc)
        return int(cnt.value)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._cluster(), int(api_key))

    def broker_down(self, broker_id: int) -> None:
        self._check(
            f"broker_down({broker_id})",
            self._lib.rd_kafka_mock_broker_set_down(self._cluster(), int(broker_id)),
        )

    def broker_up(self, broker_id: int) -> None:
        self._check(
            f"broker_up({broker_id})",
            self._lib.rd_kafka_mock_broker_set_up(self._cluster(), int(broker_id)),
        )

    def set_rtt(self, broker_id: int, ms: int) -> None:
        self._check(
            f"set_rtt({broker_id}, {ms})",
            self._lib.rd_kafka_mock_broker_set_rtt(self._cluster(), int(broker_id), int(ms)),
        )

    def set_rack(self, broker_id: int, rack: str) -> None:
        self._check(
            f"set_rack({broker_id}, {rack!r})",
            self._lib.rd_kafka_mock_broker_set_rack(self._cluster(), int(broker_id), rack.encode()),
        )

    def set_coordinator(self, group_id: str, broker_id: int) -> None:
        rc = self._lib.rd_kafka_mock_coordinator_set(
            self._cluster(), b"group", group_id.encode(), int(broker_id)
        )
        self._check(f"set_coordinator({group_id}, {broker_id})", rc)

    def set_group_initial_rebalance_delay_ms(self, ms: int) -> None:
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._cluster(), int(ms))

    def set_group_consumer_session_timeout_ms(self, ms: int) -> None:
        """KIP-848 groups: the broker-owned session timeout (group.consumer.session.timeout.ms)."""
        self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._cluster(), int(ms))

    def set_group_consumer_heartbeat_interval_ms(self, ms: int) -> None:
        """KIP-848 groups: the heartbeat interval the broker hands its members."""
        self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._cluster(), int(ms))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        rc = self._lib.rd_kafka_mock_set_apiversion(
            self._cluster(), int(api_key), int(min_version), int(max_version)
        )
        self._check(f"set_apiversion({api_key}, {min_version}, {max_version})", rc)

    # -- request tracking ----------------------------------------------------------------------
    # librdkafka 2.16's rd_kafka_mock_stop_request_tracking() also discards the tracked requests
    # (its header says it keeps them). Keep a snapshot so that requests() after stop still shows
    # them, as documented, until clear_requests() or the next start.
    _tracking = False
    _snapshot: list[tuple[int, int, int]] | None = None

    def start_request_tracking(self) -> None:
        self._snapshot = None
        self._tracking = True
        self._lib.rd_kafka_mock_start_request_tracking(self._cluster())

    def stop_request_tracking(self) -> None:
        if self._tracking:
            self._snapshot = self._live_requests()
        self._tracking = False
        self._lib.rd_kafka_mock_stop_request_tracking(self._cluster())

    def clear_requests(self) -> None:
        self._snapshot = None
        self._lib.rd_kafka_mock_clear_requests(self._cluster())

    def requests(self) -> list[tuple[int, int, int]]:
        """Tracked requests as (broker_id, api_key, timestamp_us), oldest first."""
        if not self._tracking and self._snapshot is not None:
            return list(self._snapshot)
        return self._live_requests()

    def _live_requests(self) -> list[tuple[int, int, int]]:
        cnt = c_size_t(0)
        arr = self._lib.rd_kafka_mock_get_requests(self._cluster(), ctypes.byref(cnt))
        if not arr:
            return []
        try:
            out = []
            for i in range(cnt.value):
                req = arr[i]
                out.append(
                    (
                        int(self._lib.rd_kafka_mock_request_id(req)),
                        int(self._lib.rd_kafka_mock_request_api_key(req)),
                        int(self._lib.rd_kafka_mock_request_timestamp(req)),
                    )
                )
            return out
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(arr, cnt.value)


def check() -> str:
    """One line describing the library, or raise DevBrokerError."""
    lib = load()
    version = lib.rd_kafka_version_str().decode()
    return f"mock: OK librdkafka {version} at {find_librdkafka()} ({len(REQUIRED_SYMBOLS)} symbols)"
