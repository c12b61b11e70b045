"""One Apache Kafka node with every kind of secured listener, for the security tests.

Listeners (one JVM, so the whole security suite pays one broker start):

=========  ==============  ==========================================================
PLAINTEXT  PLAINTEXT       inter-broker and the tests' admin client (User:ANONYMOUS, a
                           super user): produce, create topics, SCRAM users and ACLs
SASL       SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
SSL        SSL             server authentication only (the client is User:ANONYMOUS)
MTLS       SSL             ``ssl.client.auth=required`` (User:CN=groupkafka-client)
SASLSSL    SASL_SSL        PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 over TLS
=========  ==============  ==========================================================

ACLs are enforced (StandardAuthorizer, nothing allowed without an ACL). ``alice`` (PLAIN),
``bob`` (SCRAM) and the mTLS client are super users; ``carol``, ``dave`` and ``erin`` (PLAIN)
have only the ACLs a test grants. Certificates come from :func:`tlsfiles.make_pki`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from spark_groupsource.devbroker._kafka import KafkaCluster
from tlsfiles import STORE_PASSWORD, Pki, make_pki

PASSWORDS = {
    "alice": "alice-Pw-4411",
    "bob": "bob-Pw-9902",
    "carol": "carol-Pw-1357",
    "dave": "dave-Pw-2468",
    "erin": "erin-Pw-8642",
}
PLAIN_USERS = ("alice", "carol", "dave", "erin")
SCRAM_USERS = ("bob", "carol")
LISTENERS = {"SASL": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASLSSL": "SASL_SSL"}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(mechanism: str, user: str, password: str | None = None) -> str:
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    return f'{module} required username="{user}" password="{password or PASSWORDS[user]}";'


def _broker_config(pki: Pki) -> dict[str, str]:
    plain_users = " ".join(f'user_{u}="{PASSWORDS[u]}"' for u in PLAIN_USERS)
    cfg = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.broker_keystore_pem,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_pem,
        "listener.name.mtls.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;User:alice;User:bob;{pki.client_principal}",
        "allow.everyone.if.no.acl.found": "false",
    }
    for listener in ("sasl", "saslssl"):
        cfg[f"listener.name.{listener}.plain.sasl.jaas.config"] = f"{PLAIN_MODULE} required {plain_users};"
        for mech in ("scram-sha-256", "scram-sha-512"):
            cfg[f"listener.name.{listener}.{mech}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
    return cfg


@dataclass
class SecureKafka:
    cluster: KafkaCluster
    pki: Pki
    directory: str | None = None  # deleted by close() (made by start_secure_kafka)

    @property
    def admin_bootstrap(self) -> str:
        """The PLAINTEXT listener (super user): for producing and checking, never under test."""
        return self.cluster.bootstrap

    def listener(self, name: str) -> str:
        return self.cluster.listener_bootstrap(name)

    def node_listener(self, name: str, node_id: int) -> str:
        """One node's address on the listener ``name`` (a bootstrap of one node)."""
        return f"127.0.0.1:{self.cluster.node(node_id).listener_ports[name.upper()]}"

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.admin_bootstrap, "log_level": 0})

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # must outlive the future
        rf = self.cluster.replication_factor
        admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)[name].result(timeout=60)

    def grant(self, principal: str, resource: str, name: str, *operations: str) -> None:
        """ALLOW ``operations`` (READ, DESCRIBE, ...) on a literal TOPIC/GROUP for ``principal``,
        and wait until the broker's authorizer has them."""
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        rtype = ResourceType[resource]
        bindings = [AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", AclOperation[op],
                               AclPermissionType.ALLOW) for op in operations]
        admin = self.admin()
        for fut in admin.create_acls(bindings, request_timeout=30).values():
            fut.result(timeout=60)
        flt = AclBindingFilter(rtype, name, ResourcePatternType.LITERAL, principal, None, AclOperation.ANY,
                               AclPermissionType.ANY)
        deadline = time.monotonic() + 30
        while len(admin.describe_acls(flt, request_timeout=10).result(timeout=20)) < len(bindings):
            if time.monotonic() > deadline:
                raise AssertionError(f"ACLs for {principal} on {resource} {name} not visible after 30 s")
            time.sleep(0.2)

    def revoke(self, principal: str, resource: str, name: str, *operations: str) -> None:
        """Delete the ALLOW ACLs of ``operations`` on a literal TOPIC/GROUP for ``principal`` (all of
        them without ``operations``), and wait until the broker no longer lists them (the
        authorizer applies a deletion from the metadata log, on one node at once)."""
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        rtype = ResourceType[resource]
        ops = [AclOperation[op] for op in operations] or [AclOperation.ANY]
        filters = [AclBindingFilter(rtype, name, ResourcePatternType.LITERAL, principal, None, op,
                                    AclPermissionType.ALLOW) for op in ops]
        admin = self.admin()
        for fut in admin.delete_acls(filters, request_timeout=30).values():
            fut.result(timeout=60)
        deadline = time.monotonic() + 30
        while any(admin.describe_acls(f, request_timeout=10).result(timeout=20) for f in filters):
            if time.monotonic() > deadline:
                raise AssertionError(f"ACLs for {principal} on {resource} {name} still listed after 30 s")
            time.sleep(0.1)

    def set_scram_password(self, user: str, mechanism: str, password: str) -> None:
        """Rotate ``user``'s SCRAM credential of ``mechanism`` (SCRAM-SHA-256/512) to ``password``."""
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        mech = ScramMechanism[mechanism.replace("-", "_")]
        admin = self.admin()
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(timeout=60)

    def close(self) -> None:
        self.cluster.close()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_secure_kafka(directory: str | None = None, home: str | None = None, brokers: int = 1,
                       extra_config: dict[str, str] | None = None) -> SecureKafka:
    """Make the certificates, start ``brokers`` nodes (of the Kafka installation ``home``; None:
    the dev broker's default; each with every listener, PLAINTEXT between them, and
    ``extra_config`` besides), create the SCRAM users (raises DevBrokerError)."""
    own = directory is None
    directory = directory or tempfile.mkdtemp(prefix="groupkafka-secure-")
    pki = make_pki(os.path.join(directory, "pki"))
    config = {**_broker_config(pki), **(extra_config or {})}
    cluster = KafkaCluster(brokers, config=config, workdir=os.path.join(directory, "kafka"),
                           extra_listeners=LISTENERS, home=home)
    # a set-up bound, not a property under test: 120 s ran out for 3.9.1 nodes at load average
    # 40-50 (tests/conftest.py) and for a 4.0.1 node at 72 (2026-12-07 13:31 UTC, serving ~100 s in)
    try:
        cluster.start(timeout=300.0)
        sk = SecureKafka(cluster, pki, directory if own else None)
        _create_scram_users(sk)
    except BaseException:
        cluster.close()
        if own:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return sk


def start_or_skip(home: str | None = None, brokers: int = 1, extra_config: dict[str, str] | None = None) -> SecureKafka:
    """:func:`start_secure_kafka` for a test fixture: skips where no Kafka can run here or tests
    point elsewhere (GROUPKAFKA_TEST_BOOTSTRAP), fails the test if the nodes do not start."""
    import pytest

    from spark_groupsource.devbroker import DevBrokerError, kafka_missing

    missing = kafka_missing(home)
    if missing:
        pytest.skip(f"no Apache Kafka for a secured cluster of {brokers}: {missing}")
    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP", "").strip():
        pytest.skip("needs the embedded kafka broker; GROUPKAFKA_TEST_BOOTSTRAP points tests elsewhere")
    try:
        return start_secure_kafka(home=home, brokers=brokers, extra_config=extra_config)
    except DevBrokerError as exc:
        pytest.fail(f"cannot start the secured Kafka cluster of {brokers}: {exc}", pytrace=False)


def _create_scram_users(sk: SecureKafka) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(mech, 4096), PASSWORDS[u].encode())
                   for u in SCRAM_USERS]
        admin = sk.admin()  # must outlive the futures; a user once per request (else DUPLICATE_RESOURCE)
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(timeout=60)


__all__ = ["PASSWORDS", "STORE_PASSWORD", "SecureKafka", "jaas", "start_or_skip", "start_secure_kafka"]
