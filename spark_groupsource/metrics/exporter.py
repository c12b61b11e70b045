"""The Prometheus/OpenMetrics endpoint on the driver, and reading it back as snapshots.

Metric names follow Spark's Kafka source where it has one (``minOffsetsBehindLatest``,
``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``) and Flink's KafkaSource where it has one
(``pendingRecords``, ``commitsSucceeded``, ``commitsFailed``, ``currentOffsets``,
``committedOffsets``), spelt as they are there, behind the ``groupkafka_`` prefix; the rest,
which only a group member knows, follow Prometheus's own conventions (docs/metrics.md).

The numbers are computed when Prometheus scrapes (a custom collector over
``metrics.registry``), so serving them costs the planner nothing between scrapes.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from assignment.model import TopicPartition
from spark_groupsource.metrics import registry
from spark_groupsource.metrics.state import MemberReading, MetricsSnapshot, Offsets

log = logging.getLogger("spark_groupsource.metrics")

PREFIX = "groupkafka_"
QUERY_LABELS = ("query", "group")


@dataclass(frozen=True)
class Scalar:
    """One per-query number: its name (after the prefix), kind, help, and where it lives."""

    name: str
    kind: str  # gauge | counter
    help: str
    read: Callable[[MetricsSnapshot], float | int | None]
    field: str  # MemberReading field, or "" for the snapshot's own


def _m(attr: str) -> Callable[[MetricsSnapshot], float | int | None]:
    return lambda s: getattr(s.member, attr)


def _s(attr: str) -> Callable[[MetricsSnapshot], float | int | None]:
    return lambda s: getattr(s, attr)


SCALARS = (
    Scalar("minOffsetsBehindLatest", "gauge", "Fewest records behind the end over the query's partitions "
           "(Spark's Kafka source)", _s("min_offsets_behind_latest"), ""),
    Scalar("maxOffsetsBehindLatest", "gauge", "Most records behind the end over the query's partitions "
           "(Spark's Kafka source)", _s("max_offsets_behind_latest"), ""),
    Scalar("avgOffsetsBehindLatest", "gauge", "Mean records behind the end over the query's partitions "
           "(Spark's Kafka source)", _s("avg_offsets_behind_latest"), ""),
    Scalar("pendingRecords", "gauge", "Records not yet planned over the query's partitions (Flink)",
           _s("pending_records"), ""),
    Scalar("commitsSucceeded", "counter", "Offset commits the group accepted (Flink)",
           _m("commits_succeeded"), "commits_succeeded"),
    Scalar("commitsFailed", "counter", "Offset commits refused or failed, fenced ones included (Flink)",
           _m("commits_failed"), "commits_failed"),
    Scalar("commits_fenced", "counter", "Commits the coordinator fenced (the member's generation or "
           "epoch was no longer current)", _m("commits_fenced"), "commits_fenced"),
    Scalar("generation", "gauge", "The member's group generation (classic) or member epoch (KIP-848)",
           _m("generation"), "generation"),
    Scalar("partitions_assigned", "gauge", "Partitions the group assigns to this member",
           _m("partitions_assigned"), "partitions_assigned"),
    Scalar("rebalances", "counter", "Rebalances this member went through (its first join included)",
           _m("rebalances"), "rebalances"),
    Scalar("rebalance_seconds", "counter", "Seconds spent in completed rebalances",
           _m("rebalance_seconds"), "rebalance_seconds"),
    Scalar("last_rebalance_seconds", "gauge", "Duration of the last completed rebalance",
           _m("last_rebalance_seconds"), "last_rebalance_seconds"),
    Scalar("rebalance_in_progress_seconds", "gauge", "How long the rebalance under way has lasted (0: none)",
           _m("rebalance_in_progress_seconds"), "rebalance_in_progress_seconds"),
    Scalar("revoke_barrier_seconds", "counter", "Seconds revoked partitions waited for their in-flight "
           "micro-batch to complete and commit", _m("revoke_barrier_seconds"), "revoke_barrier_seconds"),
    Scalar("coordinator_silence_seconds", "gauge", "Seconds since the group coordinator last answered",
           _m("coordinator_silence_seconds"), "coordinator_silence_seconds"),
    Scalar("batches_planned", "counter", "Micro-batches planned", _s("batches_planned"), ""),
    Scalar("records_planned", "counter", "Records in the micro-batches planned", _s("records_planned"), ""),
    Scalar("errors", "counter", "Errors the query met (refused commits, failed plans)", _s("errors"), ""),
)
#: per-partition offsets: metric name -> Offsets field
PARTITION_OFFSETS = {"currentOffsets": "current", "committedOffsets": "committed", "latestOffsets": "latest"}
_PARTITION_HELP = {
    "currentOffsets": "Next offset the query reads in the partition: its last planned batch's end (Flink)",
    "committedOffsets": "Last offset this member committed for the partition (Flink)",
    "latestOffsets": "The partition's end offset when the query last planned",
}


def families(snaps: list[MetricsSnapshot]) -> Iterator:
    """prometheus_client metric families of these snapshots (one family per name)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        InfoMetricFamily,
    )

    for scalar in SCALARS:
        cls = CounterMetricFamily if scalar.kind == "counter" else GaugeMetricFamily
        extra = ("protocol",) if scalar.name == "generation" else ()
        fam = cls(PREFIX + scalar.name, scalar.help, labels=QUERY_LABELS + extra)
        for s in snaps:
            value = scalar.read(s)
            if value is not None:
                fam.add_metric([s.query, s.group, *([s.protocol] if extra else [])], float(value))
        yield fam
    for name, attr in PARTITION_OFFSETS.items():
        fam = GaugeMetricFamily(PREFIX + name, _PARTITION_HELP[name], labels=(*QUERY_LABELS, "topic", "partition"))
        for s in snaps:
            for tp, off in sorted(getattr(s.offsets, attr).items()):
                fam.add_metric([s.query, s.group, tp.topic, str(tp.partition)], float(off))
        yield fam
    skipped = CounterMetricFamily(PREFIX + "records_skipped", "Records left out on purpose, by reason "
                                  "(data_loss: failOnDataLoss=false; auto_offset_reset_latest)",
                                  labels=(*QUERY_LABELS, "reason"))
    info = InfoMetricFamily(PREFIX + "last_error", "The last error the query met (secrets scrubbed)",
                            labels=QUERY_LABELS)
    for s in snaps:
        for reason, n in sorted(s.records_skipped.items()):
            skipped.add_metric([s.query, s.group, reason], float(n))
        if s.last_error is not None:
            info.add_metric([s.query, s.group], {"type": s.last_error_type or "", "message": s.last_error})
    yield skipped
    yield info


class _Collector:
    def collect(self) -> Iterator:
        yield from families(registry.snapshots())


_servers: dict[int, int] = {}  # requested port -> bound port
_serve_lock = threading.Lock()
#: how long a fixed port may stay taken (the previous run of the query still exiting) before it fails
BIND_WAIT_S = 10.0


def serve(port: int, *, host: str = "0.0.0.0") -> int:
    """Serve every registered query's metrics on ``port`` (0: any free port); the port bound.
    Once per process and port: a second query asking for a port already served shares it, and
    port 0 reuses whatever this process serves."""
    from prometheus_client import CollectorRegistry, start_http_server

    with _serve_lock:
        if port in _servers:
            return _servers[port]
        if port == 0 and _servers:
            return next(iter(_servers.values()))
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Collector())
        deadline = time.monotonic() + BIND_WAIT_S
        while True:
            try:
                server, _thread = start_http_server(port, addr=host, registry=reg)
                break
            except OSError as exc:
                if port == 0 or time.monotonic() > deadline:
                    raise OSError(exc.errno, f"metrics.port={port}: cannot listen on {host}:{port} ({exc.strerror}); "
                                  "each query of a driver needs its own port (or 0 for any free one)") from exc
                time.sleep(0.25)
        bound = server.server_address[1]
        _servers[port] = bound
        log.info("groupkafka metrics for Prometheus at http://%s:%d/metrics", host, bound)
        return bound


# -- reading an endpoint back ------------------------------------------------------------------
def parse(text: str) -> list[MetricsSnapshot]:
    """The snapshots an endpoint's text shows (Prometheus text format or OpenMetrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    by_name = {PREFIX + s.name: s for s in SCALARS}
    found: dict[tuple[str, str], dict] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            name = sample.name.removesuffix("_total")
            labels = sample.labels
            if not name.startswith(PREFIX) or "query" not in labels:
                continue
            q = found.setdefault((labels["query"], labels["group"]), {
                "member": {}, "snap": {}, "offsets": {a: {} for a in PARTITION_OFFSETS.values()},
                "skipped": {}, "protocol": "", "error": (None, None)})
            short = name[len(PREFIX):]
            if name in by_name:
                scalar = by_name[name]
                if scalar.field:
                    q["member"][scalar.field] = sample.value
                elif short in ("batches_planned", "records_planned", "errors"):
                    q["snap"][short] = int(sample.value)
                if short == "generation":
                    q["protocol"] = labels.get("protocol", "")
            elif short in PARTITION_OFFSETS:
                tp = TopicPartition(labels["topic"], int(labels["partition"]))
                q["offsets"][PARTITION_OFFSETS[short]][tp] = int(sample.value)
            elif short == "records_skipped":
                q["skipped"][labels["reason"]] = int(sample.value)
            elif short == "last_error_info":
                q["error"] = (labels.get("message"), labels.get("type"))
    out = []
    ints = {"generation", "partitions_assigned", "rebalances", "commits_succeeded", "commits_failed", "commits_fenced"}
    for (query, group), q in sorted(found.items()):
        member = {k: (int(v) if k in ints else v) for k, v in q["member"].items()}
        out.append(MetricsSnapshot(
            query=query, group=group, protocol=q["protocol"], member=MemberReading(**member),
            offsets=Offsets(**q["offsets"]), records_skipped=q["skipped"],
            batches_planned=q["snap"].get("batches_planned", 0), records_planned=q["snap"].get("records_planned", 0),
            errors=q["snap"].get("errors", 0), last_error=q["error"][0], last_error_type=q["error"][1],
        ))
    return out


def scrape(address: str, timeout_s: float = 10.0) -> list[MetricsSnapshot]:
    """Read an endpoint (``host:port`` or a URL) back as snapshots."""
    url = address if "://" in address else f"http://{address}/metrics"
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - the user's own endpoint
        return parse(answer.read().decode())
