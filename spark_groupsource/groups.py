"""``python -m spark_groupsource.groups``: a consumer group's offsets, lag and members.

What ``kafka-consumer-groups.sh --describe`` shows, without Java tools: per partition the
group's committed offset, the log end offset and the lag, then the members and their
assignments where the broker answers DescribeGroups. Every broker call has a timeout; what a
broker does not answer is said, not guessed::

    python -m spark_groupsource.groups --bootstrap host:9092 --group orders-etl
    python -m spark_groupsource.groups --bootstrap host:9092 --group g --topic orders \\
        -X security.protocol=SASL_SSL -X sasl.mechanism=PLAIN \\
        -X 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required
            username="u" password="...";' -X ssl.truststore.location=/etc/kafka/truststore.p12 ...

Security properties take the same names as the data source's ``kafka.*`` options (Java's or
librdkafka's; see spark_groupsource/config/security.py).

Exit status: 0 when the offsets were read, 1 when the broker could not be asked, 2 for
usage errors.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spark_groupsource.errors import BrokerError, GroupKafkaError, OptionError

__all__ = ["GroupReport", "Member", "PartitionRow", "committed_offsets", "describe_group", "format_report", "main"]

NO_OFFSET = "-"


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member: Member | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


@dataclass(frozen=True)
class GroupReport:
    group: str
    rows: tuple[PartitionRow, ...]
    #: DescribeGroups' answer; ``members`` is None and ``describe_error`` says why when the
    #: broker did not answer it (librdkafka's mock cluster does not implement DescribeGroups)
    state: str | None = None
    protocol: str | None = None
    members: tuple[Member, ...] | None = None
    describe_error: str | None = None
    #: CLASSIC, or CONSUMER once a KIP-848 member has converted the group: then the broker's
    #: own assignor decides and a classic member's configured assignor no longer runs
    group_type: str | None = None

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.rows)


def format_report(report: GroupReport) -> str:
    """The report as text: a partition table, the total lag, then the members."""
    head = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID")
    table = [head]
    for r in report.rows:
        m = r.member
        table.append((report.group, r.topic, str(r.partition), _num(r.committed), _num(r.log_end),
                      _num(r.lag), m.member_id if m else NO_OFFSET, m.host if m else NO_OFFSET,
                      m.client_id if m else NO_OFFSET))
    lines = _columns(table) if report.rows else [f"Group {report.group!r} has no committed offsets."]
    lines.append(f"TOTAL-LAG {report.total_lag}")
    lines.append("")
    if report.members is None:
        lines.append(f"Members: not available: the broker did not answer DescribeGroups "
                     f"({report.describe_error}).")
    else:
        kind = f"type {report.group_type}, " if report.group_type else ""
        lines.append(f"Members, as the broker reports them: {len(report.members)} ({kind}state {report.state or '?'}, "
                     f"protocol {report.protocol or '?'})")
        if report.members:
            rows = [("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")]
            for m in report.members:
                rows.append((m.member_id, m.group_instance_id or NO_OFFSET, m.host, m.client_id,
                             str(len(m.assignment)), _assignment(m.assignment)))
            lines.extend(_columns(rows))
    return "\n".join(lines)


def _num(value: int | None) -> str:
    return NO_OFFSET if value is None else str(value)


def _assignment(tps: Iterable[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or NO_OFFSET


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


# --------------------------------------------------------------------------- broker side


def client_config(config: dict[str, str]) -> dict[str, str]:
    """``-X`` properties for librdkafka: the security ones (Java or librdkafka names, as for the
    data source) through :func:`spark_groupsource.config.security.parse_security`, the rest as given."""
    from spark_groupsource.config.security import SECURITY_KEYS, parse_security

    lowered = {k.strip().lower(): v for k, v in config.items()}
    security = parse_security(lowered)
    rest = {k: v for k, v in config.items()
            if k.strip().lower() not in SECURITY_KEYS and not k.strip().lower().startswith(("ssl.", "sasl."))}
    return {**rest, **security.librdkafka()}


def describe_group(bootstrap: str, group: str, *, topics: Sequence[str] = (), timeout_s: float = 10.0,
                   config: dict[str, str] | None = None) -> GroupReport:
    """Ask the brokers (bounded by ``timeout_s`` per request) and build a :class:`GroupReport`.

    Committed offsets come from an OffsetFetch for every partition of ``topics`` (every topic
    when none is given), sent by a consumer of the group that never subscribes, so never
    joins. Not the admin client's: librdkafka 2.16's kills the process when the coordinator
    answers NOT_COORDINATOR, as it does while a coordinator moves (confluentinc/librdkafka#5318;
    planning/offset_reader.py). DescribeGroups comes first, so a missing group ACL is said at
    once rather than after the consumer's timeout.
    """
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from spark_groupsource.config.access import RefusalWatch, authorization_error
    from spark_groupsource.config.client_configs import NO_AUTO_CREATE
    from spark_groupsource.config.security import parse_security

    security = parse_security({k.strip().lower(): v for k, v in (config or {}).items()})
    refusals = RefusalWatch(security, bootstrap, "librdkafka")
    # never creating the topics it is asked about (an AdminClient's default would: client_configs.NO_AUTO_CREATE)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, **client_config(config or {}),
                         **NO_AUTO_CREATE, "error_cb": lambda err: refusals.observe(f"{err.name()}: {err.str()}")})
    deadline = time.monotonic() + timeout_s
    while True:  # in short slices: a refused login or TLS handshake is said as such, at once
        try:
            meta = admin.list_topics(timeout=min(0.5, timeout_s))
            break
        except KafkaException as exc:
            admin.poll(0)
            refusals.raise_if_refused()
            if time.monotonic() >= deadline:
                raise BrokerError(f"cannot read metadata from {bootstrap} within {timeout_s:g}s "
                                  f"({security.describe()}): {exc}") from None
    wanted = [t for t in (topics or sorted(meta.topics)) if t in meta.topics and not t.startswith("__")]
    missing = [t for t in topics if t not in meta.topics]
    if missing:
        raise BrokerError(f"topic(s) not found: {', '.join(missing)}")
    all_tps = [TopicPartition(t, p) for t in wanted for p in sorted(meta.topics[t].partitions)]

    state = protocol = describe_error = group_type = None
    members: tuple[Member, ...] | None = None
    try:
        d = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group].result(timeout=timeout_s + 1)
        state = getattr(d.state, "name", str(d.state))
        protocol = d.partition_assignor or None
        kind = getattr(d, "type", None)
        group_type = getattr(kind, "name", None) if kind is not None else None
        if group_type == "UNKNOWN":
            group_type = None  # a broker without the group type in its answer
        members = tuple(
            Member(m.member_id, m.client_id, m.host, m.group_instance_id,
                   tuple(sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or ()))))
            for m in d.members)
    except KafkaException as exc:
        if "GROUP_AUTHORIZATION_FAILED" in str(exc):
            raise authorization_error(security, "Group", group, "DESCRIBE", bootstrap, str(exc)) from None
        describe_error = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
    except TimeoutError:
        describe_error = f"no answer within {timeout_s:g}s"

    committed = committed_offsets(group, all_tps, timeout_s, {**client_config(config or {}), "bootstrap.servers": bootstrap})

    owner = {tp: m for m in members or () for tp in m.assignment}
    keys = set(committed) | {tp for tp in owner if not topics or tp[0] in topics}
    if topics:
        keys |= {(tp.topic, tp.partition) for tp in all_tps}
    ends: dict[tuple[str, int], int] = {}
    if keys:
        futures = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in keys},
                                     request_timeout=timeout_s)
        for tp, fut in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = fut.result(timeout=timeout_s + 1).offset
            except (KafkaException, TimeoutError):
                pass  # shown as "-": the broker did not say
    rows = tuple(PartitionRow(t, p, committed.get((t, p)), ends.get((t, p)), owner.get((t, p)))
                 for t, p in sorted(keys))
    return GroupReport(group, rows, state, protocol, members, describe_error, group_type)


def committed_offsets(group: str, tps: Iterable, timeout_s: float, config: dict[str, str]) -> dict[tuple[str, int], int]:
    """The group's committed offsets of ``tps`` (``topic``, ``partition`` pairs; those with an
    offset), read as the query's planner reads them (planning/offset_reader.py: a consumer of
    the group that never subscribes, DescribeGroups first). Each ask is bounded by
    ``timeout_s``; what a moving or loading coordinator did not answer (NOT_COORDINATOR right
    after an ACL change or a broker start) is asked again three times, a second apart."""
    from assignment.model import TopicPartition
    from spark_groupsource.config.security import parse_security
    from spark_groupsource.planning.offset_reader import OffsetReader, RetryPolicy

    wanted = [TopicPartition(tp.topic, tp.partition) for tp in tps]
    if not wanted:
        return {}
    security = parse_security({k.strip().lower(): v for k, v in config.items()})
    reader = OffsetReader(config, policy=RetryPolicy(request_timeout_ms=int(timeout_s * 1000)), security=security)
    try:
        found = reader.committed(group, wanted)
    finally:
        reader.close()
    return {(tp.topic, tp.partition): off for tp, off in found.items() if off is not None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_groupsource.groups",
        description="A consumer group's committed offsets, log end offsets, lag and members.")
    parser.add_argument("--bootstrap", required=True, help="bootstrap servers, host:port[,...]")
    parser.add_argument("--group", required=True, help="consumer group id")
    parser.add_argument("--topic", action="append", default=[], help="only these topics (repeatable)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per broker request (default 10)")
    parser.add_argument("-X", dest="config", action="append", default=[], metavar="KEY=VALUE",
                        help="client property (security, SASL, SSL), repeatable")
    args = parser.parse_args(argv)
    config = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"-X expects KEY=VALUE, got {item!r}")
        config[key.strip()] = value
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    try:
        client_config(config)
    except OptionError as exc:
        parser.error(str(exc).replace("option 'kafka.", "-X '"))
    try:
        report = describe_group(args.bootstrap, args.group, topics=args.topic, timeout_s=args.timeout,
                                config=config)
    except GroupKafkaError as exc:  # BrokerError, or a refused login / TLS handshake / ACL
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
