"""Security end to end on Apache Kafka (issue 17).

One Kafka node (tests/secure_kafka.py) with SASL_PLAINTEXT, SSL, mutual-TLS and SASL_SSL
listeners, SCRAM users and ACLs enforced. For every listener and mechanism, with the options
users write for Spark's Kafka source: a streaming query (classic group) reads every record and
commits, a batch read, a group-coordinated backfill that commits, and the ``groups`` command.
After each run the secrets (passwords, key passwords, the JAAS line) are searched for in the
query's progress, ``explain`` output, the checkpoint, the groups command's output and every
error message. Wrong credentials, an untrusted certificate, a missing client certificate, TLS
to a plaintext port and missing ACLs each fail at once with a typed error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from secure_kafka import PASSWORDS, SecureKafka, jaas, start_or_skip
from test_stream_support import (
    assert_exactly,
    process_all,
    produce,
    stop,
    table_name,
    to_memory,
    wait_rows,
)

from helpers import committed_offsets, wait_until
from spark_groupsource.backfill import BackfillPlan
from spark_groupsource.errors import AuthorizationError
from tlsfiles import KEY_PASSWORD, STORE_PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.kafka39(only={"protocol": ["classic"]}, why="the KIP-848 cases need a preview that is off by default on Kafka 3.9")]  # also on Kafka 3.9.1 (make test-compat)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: A refused login or handshake must fail the query long before this (groupJoinTimeoutMs is
#: 120 s by default, and the old behaviour was to wait it out).
FAIL_FAST_S = 45
GROUP_TIMEOUTS = {"kafka.session.timeout.ms": "6000", "kafka.heartbeat.interval.ms": "1000"}
#: The KIP-848 member (librdkafka): the broker sets its session and heartbeat timeouts.
CONSUMER_PROTOCOL = {"kafka.group.protocol": "consumer"}


def group_timeouts(options: dict[str, str]) -> dict[str, str]:
    return {} if options.get("kafka.group.protocol") == "consumer" else GROUP_TIMEOUTS


@pytest.fixture(scope="module")
def secure(kafka_home_param: str | None) -> Iterator[SecureKafka]:
    """The secured node: the main Kafka, and the second version for tests marked ``compat``."""
    sk = start_or_skip(home=kafka_home_param)
    yield sk
    sk.close()


def case_options(sk: SecureKafka, case: str) -> tuple[str, dict[str, str], list[str]]:
    """(listener, kafka.* options, the secrets among them) for one way users connect."""
    pki = sk.pki
    p12_trust = {"kafka.ssl.truststore.location": pki.truststore_p12,
                 "kafka.ssl.truststore.password": STORE_PASSWORD, "kafka.ssl.truststore.type": "PKCS12"}
    if case.startswith("sasl_plaintext-") or case.startswith("sasl_ssl-"):
        mechanism = case.split("-", 1)[1]
        user = "alice" if mechanism == "PLAIN" else "bob"
        line = jaas(mechanism, user)
        opts = {"kafka.security.protocol": "SASL_SSL" if case.startswith("sasl_ssl") else "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": mechanism, "kafka.sasl.jaas.config": line}
        if case.startswith("sasl_ssl"):
            return "SASLSSL", {**opts, **p12_trust}, [PASSWORDS[user], line, STORE_PASSWORD]
        return "SASL", opts, [PASSWORDS[user], line]
    if case == "ssl":
        return "SSL", {"kafka.security.protocol": "SSL", **p12_trust}, [STORE_PASSWORD]
    if case == "mtls-pkcs12":
        return "MTLS", {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": pki.ca_pem,
                        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.keystore.location": pki.client_p12,
                        "kafka.ssl.keystore.password": STORE_PASSWORD, "kafka.ssl.keystore.type": "PKCS12",
                        "kafka.ssl.key.password": STORE_PASSWORD}, [STORE_PASSWORD]
    if case == "mtls-pem":
        return "MTLS", {"kafka.security.protocol": "SSL", "kafka.ssl.ca.location": pki.ca_pem,
                        "kafka.ssl.certificate.location": pki.client_cert_pem,
                        "kafka.ssl.key.location": pki.client_key_pem, "kafka.ssl.key.password": KEY_PASSWORD,
                        "kafka.ssl.endpoint.identification.algorithm": ""}, [KEY_PASSWORD]
    raise ValueError(case)


CASES = ["sasl_plaintext-PLAIN", "sasl_plaintext-SCRAM-SHA-256", "sasl_plaintext-SCRAM-SHA-512", "ssl",
         "mtls-pkcs12", "mtls-pem", "sasl_ssl-PLAIN", "sasl_ssl-SCRAM-SHA-512"]


def assert_no_secrets(secrets: list[str], **texts: str) -> None:
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"a secret appears in {where}"


def checkpoint_text(path: str) -> str:
    out = []
    for root, _dirs, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out.append(f.read().decode("utf-8", errors="replace"))
    return "\n".join(out)


def groups_command(bootstrap: str, group: str, topic: str, options: dict[str, str]) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "spark_groupsource.groups", "--bootstrap", bootstrap, "--group", group,
            "--topic", topic]
    for k, v in options.items():
        args += ["-X", f"{k.removeprefix('kafka.')}={v}"]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def wait_group_committed(sk: SecureKafka, group: str, topic: str, want: dict[int, int], timeout: float = 60) -> None:
    wait_until(lambda: committed_offsets(sk.admin_bootstrap, group, topic, sorted(want)) == want,
               timeout=timeout, interval=0.3, message=f"group {group} to commit {want}")


def ends(records) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in records:
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out


def read_and_commit(spark: Any, sk: SecureKafka, options: dict[str, str], topic: str, group: str, records,
                    name: str, checkpoint: str) -> str:
    """A stream of ``options`` on ``topic`` in ``group`` reads every record and the group
    commits them all; the query's progress as JSON."""
    df = spark.readStream.format("groupkafka").options(
        **options, **group_timeouts(options), subscribe=topic,
        **{"kafka.group.id": group, "kafka.auto.offset.reset": "earliest"}).load()
    query = to_memory(df, name, checkpoint)
    try:
        wait_rows(spark, name, len(records), query=query)
        wait_group_committed(sk, group, topic, ends(records))
        return json.dumps(query.recentProgress, default=str)
    finally:
        stop(query)


@pytest.mark.compat(only={"case": ["sasl_plaintext-PLAIN"]})
@pytest.mark.extended(only={"case": ["sasl_plaintext-SCRAM-SHA-256", "mtls-pkcs12", "sasl_ssl-PLAIN"]},
                      why="CI keeps one case per mechanism and transport")
@pytest.mark.parametrize("case", CASES)
def test_stream_batch_backfill_and_groups_command(spark, secure, case, unique_name, tmp_path):
    listener, security, secrets = case_options(secure, case)
    bootstrap = secure.listener(listener)
    topic, group, backfill_group = unique_name("sec"), unique_name("g"), unique_name("bf")
    secure.create_topic(topic, 2)
    records = produce(secure.admin_bootstrap, topic, 20, 2)
    common = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **security}

    # a streaming query in a classic group reads everything and commits it
    name, checkpoint = table_name(unique_name), str(tmp_path / "checkpoint")
    df = spark.readStream.format("groupkafka").options(
        **common, **GROUP_TIMEOUTS, **{"kafka.group.id": group, "kafka.auto.offset.reset": "earliest"}).load()
    query = to_memory(df, name, checkpoint)
    try:
        wait_rows(spark, name, len(records), query=query)
        process_all(query)
        wait_group_committed(secure, group, topic, ends(records))
        progress = json.dumps([p.json for p in query.recentProgress]) if hasattr(query.recentProgress[0], "json") \
            else json.dumps(query.recentProgress, default=str)
        stream_plan = query._jsq.explainInternal(True)
    finally:
        stop(query)
    assert_exactly(spark, name, records)

    # a batch read
    batch = spark.read.format("groupkafka").options(**common).load()
    assert sorted((r.partition, r.offset) for r in batch.select("partition", "offset").collect()) == sorted(
        (r.partition, r.offset) for r in records)
    batch_plan = batch._jdf.queryExecution().toString()

    # a group-coordinated backfill that commits
    with BackfillPlan.resolve({**common, **GROUP_TIMEOUTS, "kafka.group.id": backfill_group,
                               "groupCoordinated": "true"}, settle_s=1.0) as plan:
        assert plan.records == len(records)
        got = plan.read(spark).select("partition", "offset").collect()
        assert sorted((r.partition, r.offset) for r in got) == sorted((r.partition, r.offset) for r in records)
        plan.commit()
        plan_text = repr(plan)
    assert committed_offsets(secure.admin_bootstrap, backfill_group, topic, 2) == ends(records)

    # the groups command, with the same options as -X properties
    out = groups_command(bootstrap, group, topic, security)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "TOTAL-LAG 0" in out.stdout
    for p, end in ends(records).items():
        assert any(line.split()[1:5] == [topic, str(p), str(end), str(end)] for line in out.stdout.splitlines())

    assert_no_secrets(secrets, progress=progress, stream_explain=stream_plan, batch_explain=batch_plan,
                      checkpoint=checkpoint_text(checkpoint), backfill_repr=plan_text,
                      groups_output=out.stdout + out.stderr)


@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_consumer_protocol_member_over_sasl_ssl(spark, secure, unique_name, tmp_path):
    """The KIP-848 member (librdkafka) gets the same rendered settings: reads and commits."""
    listener, security, secrets = case_options(secure, "sasl_ssl-SCRAM-SHA-512")
    topic, group = unique_name("sec"), unique_name("g")
    secure.create_topic(topic, 2)
    records = produce(secure.admin_bootstrap, topic, 10, 2)
    name = table_name(unique_name)
    progress = read_and_commit(spark, secure, {"kafka.bootstrap.servers": secure.listener(listener),
                                               **CONSUMER_PROTOCOL, **security},
                               topic, group, records, name, str(tmp_path / "cp"))
    assert_exactly(spark, name, records)
    assert_no_secrets(secrets, progress=progress, checkpoint=checkpoint_text(str(tmp_path / "cp")))


# ------------------------------------------------------------------ refusals


def failure_of_stream(spark: Any, options: dict[str, str], topic: str, name: str, checkpoint: str) -> BaseException:
    """Start a stream that must fail; its exception, which must come within FAIL_FAST_S."""
    df = spark.readStream.format("groupkafka").options(**options, **group_timeouts(options), subscribe=topic).load()
    query = to_memory(df, name, checkpoint)
    try:
        try:
            ended = query.awaitTermination(FAIL_FAST_S)
        except Exception as exc:  # noqa: BLE001 - awaitTermination raises the query's exception
            return exc
        assert ended, f"the query did not fail within {FAIL_FAST_S}s (groupJoinTimeoutMs is 120s): it retried"
        assert query.exception() is not None, "the query stopped without an error"
        return query.exception()
    finally:
        stop(query)


def failure_of_batch(spark: Any, options: dict[str, str], topic: str) -> BaseException:
    result: list[BaseException] = []

    def run() -> None:
        try:
            spark.read.format("groupkafka").options(**options, subscribe=topic).load().collect()
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(FAIL_FAST_S)
    assert not t.is_alive(), f"the batch read did not fail within {FAIL_FAST_S}s"
    assert result, "the batch read succeeded"
    return result[0]


REFUSALS = {
    # case: (listener, options change, the words the error must contain)
    "wrong-password-PLAIN": ("SASL", {"kafka.sasl.jaas.config": jaas("PLAIN", "alice", "wrong-Pw-000")},
                             ["AuthenticationError", "SASL PLAIN authentication of user 'alice' failed",
                              "kafka.sasl.jaas.config"]),
    "wrong-password-SCRAM": ("SASLSSL", {"kafka.sasl.jaas.config": jaas("SCRAM-SHA-512", "bob", "wrong-Pw-000")},
                             ["AuthenticationError", "SASL SCRAM-SHA-512 authentication of user 'bob' failed"]),
    "untrusted-certificate": ("SSL", {"kafka.ssl.truststore.location": "UNTRUSTED", "kafka.ssl.truststore.type": "PEM"},
                              ["TlsError", "certificate is not trusted", "kafka.ssl.truststore.location"]),
    "no-client-certificate": ("MTLS", {}, ["TlsError", "refused the client certificate", "kafka.ssl.keystore.location"]),
    "tls-to-plaintext-port": ("PLAINTEXT", {}, ["TlsError", "TLS handshake with", "kafka.security.protocol"]),
}


def refusal_options(sk: SecureKafka, case: str) -> tuple[str, dict[str, str], list[str]]:
    listener, change, words = REFUSALS[case]
    base = {"wrong-password-PLAIN": "sasl_plaintext-PLAIN", "wrong-password-SCRAM": "sasl_ssl-SCRAM-SHA-512"}.get(
        case, "ssl")
    _, security, _ = case_options(sk, base)
    security = {**security, **{k: (sk.pki.untrusted_ca_pem if v == "UNTRUSTED" else v) for k, v in change.items()}}
    if case == "untrusted-certificate":
        security.pop("kafka.ssl.truststore.password")
    bootstrap = sk.admin_bootstrap if listener == "PLAINTEXT" else sk.listener(listener)
    return bootstrap, {"kafka.bootstrap.servers": bootstrap, **security}, words


@pytest.mark.compat(only={"case": ["wrong-password-PLAIN"]})
@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_connections_fail_at_once_and_say_why(spark, secure, case, unique_name, tmp_path):
    bootstrap, options, words = refusal_options(secure, case)
    topic = unique_name("sec")
    secure.create_topic(topic, 1)
    secrets = ["wrong-Pw-000", STORE_PASSWORD, *PASSWORDS.values()]

    exc = failure_of_stream(spark, {**options, "kafka.group.id": unique_name("g")}, topic,
                            table_name(unique_name), str(tmp_path / "cp"))
    text = str(exc)
    for word in words:
        assert word in text, text[-3000:]
    assert bootstrap in text
    assert_no_secrets(secrets, stream_error=text)

    exc = failure_of_batch(spark, options, topic)
    text = str(exc)
    assert words[0] in text and bootstrap in text, text[-3000:]
    assert_no_secrets(secrets, batch_error=text)

    out = groups_command(bootstrap, "g", topic, {k: v for k, v in options.items() if k != "kafka.bootstrap.servers"})
    assert out.returncode == 1 and words[1] in out.stderr, out.stderr[-2000:]


@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
@pytest.mark.parametrize("case", ["wrong-password-SCRAM", "no-client-certificate"])
def test_refused_connections_fail_at_once_with_the_consumer_protocol_member(spark, secure, case, unique_name,
                                                                            tmp_path):
    bootstrap, options, words = refusal_options(secure, case)
    topic = unique_name("sec")
    secure.create_topic(topic, 1)
    exc = failure_of_stream(spark, {**options, **CONSUMER_PROTOCOL, "kafka.group.id": unique_name("g")}, topic,
                            table_name(unique_name), str(tmp_path / "cp"))
    text = str(exc)
    for word in words:
        assert word in text, text[-3000:]
    assert_no_secrets(["wrong-Pw-000", STORE_PASSWORD, *PASSWORDS.values()], stream_error=text)


# ------------------------------------------------------------------ ACLs


def user_options(sk: SecureKafka, user: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": sk.listener("SASL"), "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas("PLAIN", user)}


def test_the_acls_the_readme_lists_are_enough(spark, secure, unique_name, tmp_path):
    """READ on the topic and READ on the group (READ implies DESCRIBE): stream + commit, a
    batch read, a coordinated backfill that commits, the groups command."""
    topic, group, backfill_group = unique_name("acl"), unique_name("g"), unique_name("bf")
    secure.create_topic(topic, 2)
    records = produce(secure.admin_bootstrap, topic, 10, 2)
    secure.grant("User:erin", "TOPIC", topic, "READ")
    secure.grant("User:erin", "GROUP", group, "READ")
    secure.grant("User:erin", "GROUP", backfill_group, "READ")
    options = {**user_options(secure, "erin"), "subscribe": topic}

    read_and_commit(spark, secure, user_options(secure, "erin"), topic, group, records, table_name(unique_name),
                    str(tmp_path / "cp"))
    assert spark.read.format("groupkafka").options(**options).load().count() == len(records)  # no group
    with BackfillPlan.resolve({**options, **GROUP_TIMEOUTS, "kafka.group.id": backfill_group,
                               "groupCoordinated": "true"}, settle_s=1.0) as plan:
        assert plan.read(spark).count() == len(records)
        plan.commit()
    assert committed_offsets(secure.admin_bootstrap, backfill_group, topic, 2) == ends(records)
    out = groups_command(options["kafka.bootstrap.servers"], group, topic,
                         {k: v for k, v in options.items() if k.startswith("kafka.") and "bootstrap" not in k})
    assert out.returncode == 0 and "TOTAL-LAG 0" in out.stdout, out.stderr[-2000:]


@pytest.mark.kafka39(False, why="needs KIP-848, a preview that is off by default on Kafka 3.9 (docs/kafka-versions.md)")
def test_the_same_acls_are_enough_for_the_consumer_protocol_member(spark, secure, unique_name, tmp_path):
    """READ on the topic and READ on the group: the KIP-848 member joins, the stream reads every
    record and the group commits."""
    topic, group = unique_name("acl"), unique_name("g")
    secure.create_topic(topic, 2)
    records = produce(secure.admin_bootstrap, topic, 10, 2)
    secure.grant("User:erin", "TOPIC", topic, "READ")
    secure.grant("User:erin", "GROUP", group, "READ")
    name = table_name(unique_name)
    read_and_commit(spark, secure, {**user_options(secure, "erin"), **CONSUMER_PROTOCOL}, topic, group, records,
                    name, str(tmp_path / "cp"))
    assert_exactly(spark, name, records)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("missing", ["group-read", "topic-all", "topic-read"])
def test_a_missing_acl_fails_at_once_naming_principal_resource_and_operation(
        spark, secure, missing, protocol, unique_name, tmp_path):
    """Both members: the KIP-848 one (librdkafka) hears of a missing group or topic ACL only as
    an error from its poll (FindCoordinator, ConsumerGroupHeartbeat), and used to wait out
    groupJoinTimeoutMs."""
    topic, group = unique_name("acl"), unique_name("g")
    secure.create_topic(topic, 1)
    produce(secure.admin_bootstrap, topic, 4, 1)
    user = {"group-read": "carol", "topic-all": "dave", "topic-read": "carol"}[missing]
    if missing != "group-read":
        secure.grant(f"User:{user}", "GROUP", group, "READ")
    if missing == "group-read":
        secure.grant(f"User:{user}", "TOPIC", topic, "READ")
    if missing == "topic-read":
        secure.grant(f"User:{user}", "TOPIC", topic, "DESCRIBE")
    options = user_options(secure, user)
    code = "GROUP_AUTHORIZATION_FAILED" if missing == "group-read" else "TOPIC_AUTHORIZATION_FAILED"
    resource = f"Group '{group}'" if missing == "group-read" else f"Topic '{topic}'"

    member = CONSUMER_PROTOCOL if protocol == "consumer" else {}
    exc = failure_of_stream(spark, {**options, **member, "kafka.group.id": group,
                                    "kafka.auto.offset.reset": "earliest"},
                            topic, table_name(unique_name), str(tmp_path / "cp"))
    text = str(exc)
    for word in ("AuthorizationError", code, f"User:{user}", resource, "READ" if missing != "topic-all" else "DESCRIBE"):
        assert word in text, text[-3000:]
    assert_no_secrets([PASSWORDS[user]], stream_error=text)

    if missing != "group-read" and protocol == "classic":  # a batch read without a group: topic ACLs only
        text = str(failure_of_batch(spark, options, topic))
        assert code in text and f"User:{user}" in text and resource in text, text[-3000:]


# ------------------------------------------------------------------ secrets in logs and the event log

SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")


def all_text(*roots: str) -> str:
    return "\n".join(checkpoint_text(r) for r in roots if os.path.isdir(r))


def test_secrets_appear_in_no_log_event_log_or_output(spark, secure, unique_name, tmp_path):
    """The stream job under spark-submit on a local cluster (two executor processes with their
    own logs), connector logs at DEBUG, Spark's event log on (uncompressed, to be searched)."""
    if not os.path.exists(SPARK_SUBMIT):
        pytest.skip(f"{SPARK_SUBMIT} not found")
    pki = secure.pki
    _, security, secrets = case_options(secure, "sasl_ssl-PLAIN")
    security |= {"kafka.ssl.keystore.location": pki.client_p12, "kafka.ssl.keystore.password": STORE_PASSWORD,
                 "kafka.ssl.key.password": STORE_PASSWORD}  # parsed and carried (the listener asks no certificate)
    secrets += ["PRIVATE KEY"]
    topic, group = unique_name("sec"), unique_name("g")
    secure.create_topic(topic, 2)
    produce(secure.admin_bootstrap, topic, 20, 2)
    config = tmp_path / "groupkafka.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in {
        "kafka.bootstrap.servers": secure.listener("SASLSSL"), "subscribe": topic, "kafka.group.id": group,
        "kafka.auto.offset.reset": "earliest", **GROUP_TIMEOUTS, **security}.items()))
    events = tmp_path / "events"
    events.mkdir()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "GROUPKAFKA_LOG_LEVEL": "DEBUG"}
    cmd = [SPARK_SUBMIT, "--master", "local-cluster[2,1,1024]",
           "--properties-file", os.path.join(ROOT, "conf", "spark-defaults.conf"),
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{events}",
           "--conf", "spark.eventLog.compress=false",
           os.path.join(ROOT, "jobs", "stream_to_parquet.py"), "--config", str(config), "--log-level", "DEBUG",
           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"), "--trigger", "availableNow"]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "rows=20" in run.stdout, run.stdout
    event_log = all_text(str(events))
    # local-cluster workers keep executor logs under SPARK_HOME/work/<app id>/<executor>/stderr
    import pyspark

    app_id = re.search(r'"App ID":"([^"]+)"', event_log).group(1)
    work = os.path.join(os.path.dirname(pyspark.__file__), "work", app_id)
    logs = [os.path.join(d, f) for d, _, files in os.walk(work) for f in files if f == "stderr"]
    assert len(logs) == 2, f"expected the two executors' logs under {work}, found {logs}"
    executor_logs = all_text(work)
    shutil.rmtree(work, ignore_errors=True)
    assert "SparkListenerApplicationStart" in event_log and "QueryProgressEvent" in event_log  # what was searched
    assert_no_secrets(secrets, driver_logs=run.stdout + run.stderr, event_log=event_log,
                      executor_logs=executor_logs, checkpoint=all_text(str(tmp_path / "cp")),
                      output=all_text(str(tmp_path / "out")))


def test_an_unreachable_tls_port_fails_within_the_bound_naming_it(spark, secure, unique_name, tmp_path,
                                                                  closed_port):
    """Nothing listens there: an outage, not a refusal, so it fails after groupJoinTimeoutMs
    (the stream) or the offset retries (a batch read), saying which servers, which protocol."""
    topic = unique_name("sec")
    secure.create_topic(topic, 1)
    bootstrap = f"127.0.0.1:{closed_port}"
    _, security, secrets = case_options(secure, "ssl")
    options = {"kafka.bootstrap.servers": bootstrap, **security}
    exc = failure_of_stream(spark, {**options, "kafka.group.id": unique_name("g"), "groupJoinTimeoutMs": "8000"},
                            topic, table_name(unique_name), str(tmp_path / "cp"))
    text = str(exc)
    # the member's own join bound or the planner's may say it first (both are groupJoinTimeoutMs)
    for word in ("groupJoinTimeoutMs", bootstrap, "security.protocol=SSL"):
        assert word in text, text[-3000:]
    text = str(failure_of_batch(spark, {**options, "fetchOffset.numRetries": "1"}, topic))
    assert bootstrap in text and "kafka.security.protocol" in text, text[-3000:]
    assert_no_secrets(secrets, errors=text)


@pytest.mark.parametrize("granted", ["group-read", "none"])
def test_a_plain_backfill_commit_under_acls(spark, secure, granted, unique_name):
    """A backfill that does not join the group commits as a non-member (OffsetFetch, then
    OffsetCommit): READ on the group is enough; without it the commit fails naming the ACL."""
    topic, group = unique_name("acl"), unique_name("bf")
    secure.create_topic(topic, 2)
    records = produce(secure.admin_bootstrap, topic, 6, 2)
    secure.grant("User:erin", "TOPIC", topic, "READ")
    if granted == "group-read":
        secure.grant("User:erin", "GROUP", group, "READ")
    options = {**user_options(secure, "erin"), "subscribe": topic, "kafka.group.id": group}
    with BackfillPlan.resolve(options) as plan:
        assert plan.read(spark).count() == len(records)
        if granted == "group-read":
            plan.commit()
            assert committed_offsets(secure.admin_bootstrap, group, topic, 2) == ends(records)
            return
        with pytest.raises(AuthorizationError) as info:
            plan.commit()
    text = str(info.value)
    for word in ("GROUP_AUTHORIZATION_FAILED", "User:erin", f"Group '{group}'", "READ"):
        assert word in text, text
    assert committed_offsets(secure.admin_bootstrap, group, topic, 2) == {0: None, 1: None}
