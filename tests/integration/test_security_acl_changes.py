"""ACLs changed while a query runs (issue 54, part 1), on the secured Apache Kafka node.

A stream reads as ``carol`` (SASL/PLAIN, StandardAuthorizer) holding only READ on its topic and
its group; the test revokes one of them with the admin client while the query runs, the way an
operator would. An authorization refusal is not a transient error: the query must fail within
seconds, whatever the session timeout (the default 45 s here), with an error naming the
principal, the resource and the missing operation. Before the fix, a topic READ revoked at the
end of a micro-batch hung the query silently (the commit refused with
TOPIC_AUTHORIZATION_FAILED was kept and retried for ever, and no batch was planned while it was
pending), and a group READ revoked failed it only when the member's session ran out. Then the
ACL is granted again and the query restarted from its checkpoint: it reads every record (none
lost) and the group's committed offsets reach the log end.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from secure_kafka import PASSWORDS, SecureKafka, jaas, start_or_skip
from test_stream_support import produce, stop

from helpers import committed_offsets, kafka_rebalance_reasons, wait_until
from spark_groupsource.config import fetcher_config, parse_stream_options
from spark_groupsource.errors import AuthorizationError
from spark_groupsource.executor import native
from spark_groupsource.executor.fetch import _POOL, fetch_range
from spark_groupsource.ranges import OffsetRange

pytestmark = [pytest.mark.integration, pytest.mark.kafka39(only={"protocol": ["classic"]}, why="the KIP-848 cases need a preview that is off by default on Kafka 3.9")]  # also on Kafka 3.9.1 (make test-compat)

PARTS = 2
USER = "carol"
PRINCIPAL = f"User:{USER}"
#: How soon after the revocation the query must have failed: below the default 45 s session (the
#: group cases failed only when it ran out before) and far below for ever (the topic cases hung).
#: Measured 0.4-2.6 s idle; the mid-batch topic case includes Spark failing the batch's job, which
#: took longer than 15 s in a clean-clone CI run with both Spark groups busy (2026-12-01 23:50 UTC)
FAIL_WITHIN_S = 40
CONSUMER_PROTOCOL = {"kafka.group.protocol": "consumer"}
#: How long a query may take to its first batch (a harness wait, no product bound: Spark starts
#: the stream's Python runner and worker first; 60 s ran out at load 40-70, 2026-12-02)
FIRST_BATCH_S = 150


#: KIP-368 on the SASL_PLAINTEXT listener's SCRAM-SHA-512 logins only (the ACL cases log in with
#: PLAIN): the broker closes a connection whose session outlived it without re-authenticating
REAUTH_MS = 10_000
REAUTH = {"listener.name.sasl.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS)}
#: How long the SCRAM stream runs under it: three periods in CI; issue 54 asks for a 5-minute
#: run, made by hand with GROUPKAFKA_REAUTH_STREAM_S=300 (docs/security.md has the result)
REAUTH_STREAM_S = float(os.environ.get("GROUPKAFKA_REAUTH_STREAM_S", 3 * REAUTH_MS / 1000))


@pytest.fixture(scope="module")
def secure(kafka_home_param: str | None) -> Iterator[SecureKafka]:
    sk = start_or_skip(home=kafka_home_param, extra_config=REAUTH)
    yield sk
    sk.close()


class _Sink:
    """A foreachBatch sink (it runs in this process) that records (partition, offset) of every
    row. ``after_first``: called once, at the end of the first batch with rows (an operator
    revoking an ACL "at the end of a micro-batch"). ``hold_batch``: that batch id is held before
    it reads anything until ``release`` is set (a revocation mid-batch)."""

    def __init__(self, after_first=None, hold_batch: int | None = None):
        self.after_first, self.hold_batch = after_first, hold_batch
        self.rows: list[tuple[int, int]] = []
        self.first_done = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.revoked_at: float | None = None

    def __call__(self, df, batch_id: int) -> None:
        if batch_id == self.hold_batch:
            self.entered.set()
            self.release.wait(60)
        got = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
        self.rows.extend(got)
        if got and not self.first_done.is_set():
            if self.after_first is not None:
                self.after_first()
                self.revoked_at = time.monotonic()
            self.first_done.set()


def _options(sk: SecureKafka, group: str, topic: str, protocol: str) -> dict[str, str]:
    opts = {"kafka.bootstrap.servers": sk.listener("SASL"), "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas("PLAIN", USER),
            "kafka.group.id": group, "subscribe": topic, "kafka.auto.offset.reset": "earliest"}
    # no session or heartbeat settings: the default 45 s session is what the refusal must not wait for
    return {**opts, **(CONSUMER_PROTOCOL if protocol == "consumer" else {})}


def _start(spark: Any, options: dict[str, str], sink: _Sink, checkpoint: str) -> Any:
    return (spark.readStream.format("groupkafka").options(**options).load()
            .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds").start())


def _failure(query: Any, since: float, within_s: float) -> str:
    """The query's error, which must come within ``within_s`` of ``since`` (monotonic)."""
    left = max(1.0, since + within_s - time.monotonic())
    try:
        ended = query.awaitTermination(left)
    except Exception as exc:  # noqa: BLE001 - awaitTermination raises the query's exception
        took = time.monotonic() - since
        said = next((line for line in str(exc).splitlines() if "Error: " in line and "groupkafka" not in line), "")
        print(f"MEASURED: the query failed {took:.1f}s after the change: {said.strip()[:600]}")
        assert took < within_s, f"failed {took:.1f}s after the revocation (bound {within_s}s)"
        return str(exc)
    assert ended, (f"the query still runs {time.monotonic() - since:.1f}s after the revocation, with no "
                   f"error: it waits silently")
    assert query.exception() is not None, "the query stopped without an error"
    return str(query.exception())


def _assert_names(text: str, code: str, resource: str, operation: str) -> None:
    for word in ("AuthorizationError", code, PRINCIPAL, resource, operation):
        assert word in text, f"{word!r} missing from the error: {text[-3000:]}"
    assert PASSWORDS[USER] not in text


def _committed(sk: SecureKafka, group: str, topic: str) -> dict[int, int | None] | None:
    """The group's committed offsets; None while its coordinator is not ready (NOT_COORDINATOR
    right after the node started)."""
    from confluent_kafka import KafkaException

    try:
        return committed_offsets(sk.admin_bootstrap, group, topic, PARTS)
    except KafkaException:
        return None


def _restart_reads_everything(spark: Any, sk: SecureKafka, options: dict[str, str], checkpoint: str,
                              first: _Sink, records, topic: str, group: str) -> None:
    """Restarted from the checkpoint (ACLs granted again): every record read by one run or the
    other, and the group's committed offsets reach the log end."""
    sink = _Sink()
    query = _start(spark, options, sink, checkpoint)
    want = {(r.partition, r.offset) for r in records}
    try:
        wait_until(lambda: want <= set(first.rows) | set(sink.rows) or query.exception() is not None,
                   timeout=60, interval=0.3, message="the restarted query to read every record")
        assert query.exception() is None, str(query.exception())[-3000:]
        ends = {p: max(o for q, o in want if q == p) + 1 for p in range(PARTS)}
        wait_until(lambda: _committed(sk, group, topic) == ends,
                   timeout=30, interval=0.3, message=f"group {group} to commit {ends}")
    finally:
        stop(query)
    assert set(first.rows) | set(sink.rows) == want, "records lost"
    assert not set(sink.rows) - want, "foreign rows"


def _setup(sk: SecureKafka, unique_name) -> tuple[str, str, list]:
    topic, group = unique_name("aclrv"), unique_name("g")
    sk.create_topic(topic, PARTS)
    sk.grant(PRINCIPAL, "TOPIC", topic, "READ")
    sk.grant(PRINCIPAL, "GROUP", group, "READ")
    return topic, group, produce(sk.admin_bootstrap, topic, 20, PARTS)


#: In CI only the group ACL on KIP-848: the topic ACL between batches is in make test-extended (CI
#: keeps it mid-batch and idle), and so is the group ACL on classic (CI keeps it mid-batch, with the
#: refused commit and heartbeats and the restart from the checkpoint, and idle). That case took
#: 145 s of a loaded CI run (58 s quiet): its restart waits out the failed member's 45 s session,
#: as the member cannot leave a group it may no longer read.
_BETWEEN_EXTENDED = {
    "topic": "CI keeps the topic ACL mid-batch and idle",
    "group-classic": "CI keeps the group ACL on classic mid-batch and idle, and between batches on KIP-848",
}


@pytest.mark.parametrize(("revoked", "protocol"), [
    pytest.param("topic", "classic", id="topic-classic", marks=pytest.mark.extended(why=_BETWEEN_EXTENDED["topic"])),
    pytest.param("topic", "consumer", id="topic-consumer", marks=pytest.mark.extended(why=_BETWEEN_EXTENDED["topic"])),
    pytest.param("group", "classic", id="group-classic",
                 marks=pytest.mark.extended(why=_BETWEEN_EXTENDED["group-classic"])),
    pytest.param("group", "consumer", id="group-consumer"),
])
def test_an_acl_revoked_between_batches_fails_the_query_at_once(spark, secure, revoked, protocol, unique_name,
                                                                tmp_path):
    """Revoked at the end of a micro-batch (inside the sink, so before the next trigger commits
    that batch): the next trigger's commit is refused, and so is every heartbeat after a group
    revocation. The query fails within seconds naming principal, resource and operation."""
    topic, group, records = _setup(secure, unique_name)
    resource = ("TOPIC", topic) if revoked == "topic" else ("GROUP", group)
    sink = _Sink(after_first=lambda: secure.revoke(PRINCIPAL, *resource, "READ"))
    options = _options(secure, group, topic, protocol)
    checkpoint = str(tmp_path / "ck")
    query = _start(spark, options, sink, checkpoint)
    try:
        assert sink.first_done.wait(FIRST_BATCH_S), "no first batch"
        records += produce(secure.admin_bootstrap, topic, 10, PARTS, start=20)  # written after the revocation
        text = _failure(query, sink.revoked_at, FAIL_WITHIN_S)
    finally:
        stop(query)
    if revoked == "topic":
        _assert_names(text, "TOPIC_AUTHORIZATION_FAILED", f"Topic '{topic}'", "READ")
    else:
        _assert_names(text, "GROUP_AUTHORIZATION_FAILED", f"Group '{group}'", "READ")

    secure.grant(PRINCIPAL, *resource, "READ")
    _restart_reads_everything(spark, secure, options, checkpoint, sink, records, topic, group)


@pytest.mark.parametrize("revoked", ["topic", "group"])
def test_an_acl_revoked_mid_batch_fails_the_query_at_once(spark, secure, revoked, unique_name, tmp_path):
    """Revoked while a batch is in flight (the sink holds batch 1 before it reads anything): a
    topic READ revoked meets the executors' Fetch, which fails the task with the error (no retry
    loop until kafkaConsumer.pollTimeoutMs); a group READ revoked meets the heartbeats at once
    and the batch's commit, and the query fails before it plans again."""
    topic, group, records = _setup(secure, unique_name)
    resource = ("TOPIC", topic) if revoked == "topic" else ("GROUP", group)
    sink = _Sink(hold_batch=1)
    options = _options(secure, group, topic, "classic")
    checkpoint = str(tmp_path / "ck")
    query = _start(spark, options, sink, checkpoint)
    try:
        assert sink.first_done.wait(FIRST_BATCH_S), "no first batch"
        records += produce(secure.admin_bootstrap, topic, 10, PARTS, start=20)
        assert sink.entered.wait(FIRST_BATCH_S), "batch 1 never started"
        secure.revoke(PRINCIPAL, *resource, "READ")
        revoked_at = time.monotonic()
        sink.release.set()
        text = _failure(query, revoked_at, FAIL_WITHIN_S)
    finally:
        sink.release.set()
        stop(query)
    if revoked == "topic":
        _assert_names(text, "TOPIC_AUTHORIZATION_FAILED", f"Topic '{topic}'", "READ (Fetch)")
    else:
        _assert_names(text, "GROUP_AUTHORIZATION_FAILED", f"Group '{group}'", "READ")

    secure.grant(PRINCIPAL, *resource, "READ")
    _restart_reads_everything(spark, secure, options, checkpoint, sink, records, topic, group)


def _read_as_carol(sk: SecureKafka, topic: str, start: int, until: int, path: str) -> float:
    """Read ``[start, until)`` of partition 0 on the executors' fetch path; seconds it took."""
    opts = parse_stream_options({**_options(sk, "g-unused", topic, "classic")})
    began = time.monotonic()
    for _ in fetch_range(fetcher_config(opts), OffsetRange(topic, 0, start, until), include_headers=False,
                         fail_on_data_loss=True, max_records_per_batch=1000, poll_timeout_ms=60_000,
                         security=opts.security, fetcher=path):
        pass
    return time.monotonic() - began


@pytest.mark.parametrize("path", ["native", "python"])
@pytest.mark.parametrize("fetcher", ["pooled", "new", "new-describe-kept"])
def test_a_fetcher_meets_a_revoked_topic_read_whatever_it_knew_before(secure, unique_name, fetcher, path):
    """A topic's READ revoked, then a range read on the executors' fetch path. ``pooled``: the
    fetcher read the partition before (librdkafka reports the refused Fetch). ``new``: created
    after the revocation, it is refused the topic's metadata and librdkafka then fetches
    nothing and reports nothing: it waited the whole pollTimeoutMs (60 s here; the clean-clone
    CI at adef941 met it as a mid-batch revocation that never failed the query within 40 s).
    ``new-describe-kept``: only READ revoked, metadata and watermarks still answer (the case of
    a refusal librdkafka reports once per handle and partition, then never again). Each must
    fail within seconds naming principal, topic and operation."""
    if path == "native" and native.unavailable_reason():
        pytest.skip(f"the native fetch path: {native.unavailable_reason()}")
    topic = unique_name("aclfetch")
    secure.create_topic(topic, 1)
    secure.grant(PRINCIPAL, "TOPIC", topic, *(("READ", "DESCRIBE") if fetcher == "new-describe-kept" else ("READ",)))
    produce(secure.admin_bootstrap, topic, 20, 1)
    _POOL.clear()
    try:
        if fetcher == "pooled":
            _read_as_carol(secure, topic, 0, 5, path)  # the pooled fetcher knows the partition
        secure.revoke(PRINCIPAL, "TOPIC", topic, "READ")
        began = time.monotonic()
        with pytest.raises(AuthorizationError) as refused:
            _read_as_carol(secure, topic, 10, 20, path)
        took = time.monotonic() - began
    finally:
        _POOL.clear()
    print(f"MEASURED: {fetcher} {path} fetcher failed {took:.1f}s after it began: {str(refused.value)[:200]}")
    assert took < 15, f"the fetcher failed only after {took:.1f}s"
    _assert_names(f"{type(refused.value).__name__}: {refused.value}", "TOPIC_AUTHORIZATION_FAILED", f"Topic '{topic}'",
                  "READ (Fetch)")


@pytest.mark.parametrize(("revoked", "protocol"), [("group", "classic"), ("group", "consumer"), ("topic", "classic")])
def test_an_acl_revoked_while_the_query_is_idle_fails_it_at_once(spark, secure, revoked, protocol, unique_name,
                                                                 tmp_path):
    """Revoked once everything is read and committed, nothing more written: no commit meets it.
    A group READ revoked meets the member's next heartbeat (classic: kafka-python only logged the
    refusal and heartbeated on until the 45 s session expired; KIP-848: librdkafka makes the
    refused ConsumerGroupHeartbeat fatal and says so only in its log); a topic READ (and so
    DESCRIBE) revoked meets the planner's next ListOffsets."""
    topic, group, records = _setup(secure, unique_name)
    resource = ("TOPIC", topic) if revoked == "topic" else ("GROUP", group)
    sink = _Sink()
    options = _options(secure, group, topic, protocol)
    query = _start(spark, options, sink, str(tmp_path / "ck"))
    ends = {p: max(r.offset for r in records if r.partition == p) + 1 for p in range(PARTS)}
    try:
        wait_until(lambda: _committed(secure, group, topic) == ends
                   or query.exception() is not None, timeout=60, interval=0.3, message="everything committed")
        assert query.exception() is None, str(query.exception())[-3000:]
        secure.revoke(PRINCIPAL, *resource, "READ")
        text = _failure(query, time.monotonic(), FAIL_WITHIN_S)
    finally:
        stop(query)
    if revoked == "topic":
        _assert_names(text, "TOPIC_AUTHORIZATION_FAILED", f"Topic '{topic}'", "DESCRIBE")
    else:
        _assert_names(text, "GROUP_AUTHORIZATION_FAILED", f"Group '{group}'", "READ")


# ------------------------------------------------------------------ SCRAM: re-authentication, rotation


def _scram_options(sk: SecureKafka, group: str, topic: str, password: str | None = None) -> dict[str, str]:
    return {"kafka.bootstrap.servers": sk.listener("SASL"), "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas("SCRAM-SHA-512", USER, password),
            "kafka.group.id": group, "subscribe": topic, "kafka.auto.offset.reset": "earliest"}


def test_kafka_python_re_authenticates_before_connections_max_reauth_ms(secure):
    """kafka-python 3.0.12 implements KIP-368 (kafka/net/connection.py, SaslReauthenticator): it
    reads the session lifetime from SaslAuthenticate v1 and logs in again on the same connection
    at 85-95% of it. Checked on the broker that enforces ``connections.max.reauth.ms``: over
    2.5 lifetimes the connection re-authenticates and is never closed or made again."""
    import logging

    from kafka import KafkaConsumer

    lines: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = _Keep(logging.DEBUG), logging.getLogger("kafka.net.connection")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    consumer = KafkaConsumer(bootstrap_servers=secure.listener("SASL"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER,
                             sasl_plain_password=PASSWORDS[USER])
    try:
        until = time.monotonic() + 2.5 * REAUTH_MS / 1000
        while time.monotonic() < until:
            consumer.topics()  # a Metadata request on the connection now and then
            time.sleep(0.5)
    finally:
        consumer.close()
        logger.removeHandler(handler)
        logger.setLevel(old)
    text = "\n".join(lines)
    assert "session_lifetime_ms=" in text, "the broker advertised no session lifetime: " + text[-2000:]
    assert text.count("Beginning SASL re-authentication") >= 2, text[-3000:]
    assert "re-authentication failed" not in text, text[-3000:]


def test_scram_reauthentication_then_a_rotated_password(spark, secure, unique_name, tmp_path):
    """A stream logged in with SCRAM-SHA-512 runs through three re-authentication periods of the
    broker (``REAUTH_STREAM_S``) with no failure and no rebalance (the coordinator's log) and
    reads every record written meanwhile, once (its member's, reader's and fetchers'
    connections log in again; none is dropped for an expired session). Then the
    user's password is rotated: the next login (the next re-authentication, at most a period
    later) is refused and the query fails naming the user, nothing else."""
    topic, group = unique_name("scram"), unique_name("g")
    secure.create_topic(topic, PARTS)
    secure.grant(PRINCIPAL, "TOPIC", topic, "READ")
    secure.grant(PRINCIPAL, "GROUP", group, "READ")
    records = produce(secure.admin_bootstrap, topic, 10, PARTS)
    sink = _Sink()
    query = _start(spark, _scram_options(secure, group, topic), sink, str(tmp_path / "ck"))
    rotated = False
    try:
        assert sink.first_done.wait(FIRST_BATCH_S), "no first batch"
        until = time.monotonic() + REAUTH_STREAM_S
        while time.monotonic() < until:
            records += produce(secure.admin_bootstrap, topic, 2, PARTS, start=len(records))
            assert query.exception() is None, str(query.exception())[-3000:]
            time.sleep(1)
        want = {(r.partition, r.offset) for r in records}
        wait_until(lambda: want <= set(sink.rows) or query.exception() is not None, timeout=30, interval=0.3,
                   message="every record read")
        assert query.exception() is None, str(query.exception())[-3000:]
        assert sorted(sink.rows) == sorted(want), "a record read twice or a foreign one"
        rebalances = kafka_rebalance_reasons(secure.cluster, group)
        assert len(rebalances) == 1, f"the member rebalanced during re-authentication: {rebalances}"

        secure.set_scram_password(USER, "SCRAM-SHA-512", "rotated-Pw-5150")
        rotated = True
        text = _failure(query, time.monotonic(), REAUTH_MS / 1000 + 15)
    finally:
        stop(query)
        if rotated:
            secure.set_scram_password(USER, "SCRAM-SHA-512", PASSWORDS[USER])
    for word in ("AuthenticationError", f"SCRAM-SHA-512 authentication of user '{USER}' failed"):
        assert word in text, text[-3000:]
    assert PASSWORDS[USER] not in text and "rotated-Pw-5150" not in text


def test_the_groups_command_without_the_group_acl_fails_at_once(secure, unique_name):
    """``python -m spark_groupsource.groups`` as a principal that may read the topic but not
    describe the group: exit 1 within seconds naming principal, group and operation (its
    OffsetFetch goes through a consumer, which would wait out its timeout on the refused
    FindCoordinator); once the group's ACL is granted it reads the offsets."""
    import subprocess
    import sys

    topic, group = unique_name("aclgc"), unique_name("g")
    secure.create_topic(topic, 1)
    secure.grant(PRINCIPAL, "TOPIC", topic, "READ", "DESCRIBE")
    opts = _options(secure, group, topic, "classic")
    args = [sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", opts["kafka.bootstrap.servers"],
            "--group", group, "--topic", topic, "--timeout", "30"]
    for key in ("kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.jaas.config"):
        args += ["-X", f"{key.removeprefix('kafka.')}={opts[key]}"]

    began = time.monotonic()
    refused = subprocess.run(args, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - began
    assert refused.returncode == 1, (refused.returncode, refused.stdout[-2000:], refused.stderr[-2000:])
    assert took < 25, f"the refusal took {took:.1f}s (the consumer's 30 s timeout is what it must not wait for)"
    for word in ("GROUP_AUTHORIZATION_FAILED", PRINCIPAL, f"Group '{group}'", "DESCRIBE"):
        assert word in refused.stderr, f"{word!r} missing from the error: {refused.stderr[-3000:]}"

    secure.grant(PRINCIPAL, "GROUP", group, "DESCRIBE")
    read = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    assert f"Group {group!r} has no committed offsets." in read.stdout or topic in read.stdout, read.stdout
    assert PASSWORDS[USER] not in read.stdout + read.stderr + refused.stdout + refused.stderr
