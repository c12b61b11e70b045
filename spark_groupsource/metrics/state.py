"""The driver's member as numbers, per query: what the planner and the commit hook publish at
the edges where things already happen (a plan, a commit, an error), joined at read time with
what the member counts itself (``seam.Counters``).

Pure: no client, no socket, no Prometheus. The exporter (``metrics.exporter``) and
``metrics.snapshot()`` read a :class:`MetricsSnapshot`; the planner's hot path only replaces a
few references per micro-batch (never per record), and nothing at all when metrics are off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from assignment.model import TopicPartition
from spark_groupsource.config.secrets import is_secret, scrubbed

#: why records were left out on purpose (``records_skipped`` keys)
SKIP_DATA_LOSS = "data_loss"  # failOnDataLoss=false: below the log start (retention, deletion)
SKIP_RESET_LATEST = "auto_offset_reset_latest"  # kafka.auto.offset.reset=latest on a partition without offset
#: an error message is cut to this many characters (a label value)
ERROR_CHARS = 300


@dataclass(frozen=True)
class Offsets:
    """Per-partition offsets the planner published after its last plan (replaced whole, so a
    reader on another thread never sees a dict change size under it)."""

    #: next offset the query reads: the end of the last planned batch (Flink's currentOffsets)
    current: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: the partitions' ends read by that plan (Spark's latestOffset)
    latest: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: the last offset this member's commits stored in the group (Flink's committedOffsets)
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass
class QueryMetrics:
    """Updated by the stream's driver: per plan and per error, never per record."""

    query: str
    group: str
    protocol: str
    #: secret option values of the query: never shown in ``last_error``
    secrets: tuple[str, ...] = ()
    offsets: Offsets = field(default_factory=Offsets)
    batches_planned: int = 0
    records_planned: int = 0
    errors: int = 0
    last_error: str | None = None
    last_error_type: str | None = None

    def planned(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """A micro-batch was handed to Spark."""
        self.batches_planned += 1
        self.records_planned += sum(u - s for s, u in ranges.values() if u > s)

    def publish(self, positions: Mapping[TopicPartition, tuple[int, int]], latest: Mapping[TopicPartition, int],
                committed: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """The planner's positions (partition -> (next offset, serial)), the ends it read and
        its accepted commits (partition -> (offset, serial)), for the partitions it owns now."""
        current = {tp: pos for tp, (pos, _) in positions.items()}
        self.offsets = Offsets(
            current=current,
            latest={tp: latest[tp] for tp in current if tp in latest},
            committed={tp: off for tp, (off, _) in committed.items() if tp in current},
        )

    def failed(self, error: BaseException | str) -> None:
        """An error the query met (a refused commit, a failed plan): counted, the last one kept
        with secrets scrubbed (errors can quote client settings)."""
        self.errors += 1
        if isinstance(error, BaseException):
            self.last_error_type = type(error).__name__
            text = str(error)
        else:
            self.last_error_type = "CommitError"
            text = error
        self.last_error = scrubbed(text, self.secrets)[:ERROR_CHARS]


@dataclass(frozen=True)
class MemberReading:
    """What the member itself knows right now (read when the metrics are read)."""

    generation: int = -1
    partitions_assigned: int = 0
    rebalances: int = 0
    rebalance_seconds: float = 0.0
    last_rebalance_seconds: float | None = None
    rebalance_in_progress_seconds: float = 0.0
    revoke_barrier_seconds: float = 0.0
    commits_succeeded: int = 0
    commits_failed: int = 0
    commits_fenced: int = 0
    coordinator_silence_seconds: float | None = None


@dataclass(frozen=True)
class MetricsSnapshot:
    """Every number of one query at one moment; the endpoint and ``snapshot()`` show this."""

    query: str
    group: str
    protocol: str
    member: MemberReading
    offsets: Offsets
    records_skipped: Mapping[str, int]
    batches_planned: int
    records_planned: int
    errors: int
    last_error: str | None
    last_error_type: str | None

    @property
    def offsets_behind_latest(self) -> dict[TopicPartition, int]:
        """Records between the last planned batch's end and the partition's end, per owned
        partition (Spark's Kafka source: ``latestOffset - consumed``, at least 0)."""
        latest = self.offsets.latest
        return {tp: max(0, latest[tp] - pos) for tp, pos in self.offsets.current.items() if tp in latest}

    @property
    def min_offsets_behind_latest(self) -> int | None:
        behind = self.offsets_behind_latest
        return min(behind.values()) if behind else None

    @property
    def max_offsets_behind_latest(self) -> int | None:
        behind = self.offsets_behind_latest
        return max(behind.values()) if behind else None

    @property
    def avg_offsets_behind_latest(self) -> float | None:
        behind = self.offsets_behind_latest
        return sum(behind.values()) / len(behind) if behind else None

    @property
    def pending_records(self) -> int:
        """Flink's ``pendingRecords``: records the query has not planned yet, over its partitions."""
        return sum(self.offsets_behind_latest.values())


def snapshot_of(state: QueryMetrics, member: MemberReading, skipped: Mapping[str, int]) -> MetricsSnapshot:
    return MetricsSnapshot(
        query=state.query, group=state.group, protocol=state.protocol, member=member, offsets=state.offsets,
        records_skipped=dict(skipped), batches_planned=state.batches_planned,
        records_planned=state.records_planned, errors=state.errors, last_error=state.last_error,
        last_error_type=state.last_error_type,
    )


def reading_of(counters, generation: int, assigned: int, silence_s: float | None, now: float) -> MemberReading:
    """A :class:`MemberReading` from a member's ``seam.Counters`` (monotonic ``now``)."""
    since = counters.rebalancing_since
    return MemberReading(
        generation=generation,
        partitions_assigned=assigned,
        rebalances=counters.rebalance_episodes,
        rebalance_seconds=counters.rebalance_s,
        last_rebalance_seconds=counters.last_rebalance_s,
        rebalance_in_progress_seconds=max(0.0, now - since) if since is not None else 0.0,
        revoke_barrier_seconds=counters.revoke_barrier_s,
        commits_succeeded=counters.commits,
        commits_failed=counters.commit_failures + counters.fenced_commits,
        commits_fenced=counters.fenced_commits,
        coordinator_silence_seconds=silence_s,
    )


def secret_values(params: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The values among a query's options that are secrets (``config.secrets.is_secret``)."""
    return tuple(v for k, v in params if v and is_secret(k))
