"""Refused connections: the texts both clients report (as measured on Kafka 4.0.1) and the
errors they become."""

from __future__ import annotations

import pytest

from spark_groupsource.config.access import (
    HANDSHAKE_REPEATS,
    RefusalWatch,
    authorization_error,
    classify,
)
from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import AuthenticationError, AuthorizationError, TlsError

# error texts seen on the secure test broker (tests/secure_kafka.py)
LIBRDKAFKA = {
    "authentication": "_AUTHENTICATION: sasl_plaintext://127.0.0.1:40307/bootstrap: SASL authentication error: "
    "Authentication failed: Invalid username or password (after 542ms in state AUTH_REQ)",
    "untrusted": "_SSL: ssl://127.0.0.1:56489/bootstrap: SSL handshake failed: error:0A000086:SSL "
    "routines::certificate verify failed: broker certificate could not be verified, verify that "
    "ssl.ca.location is correctly configured (after 204ms in state SSL_HANDSHAKE)",
    "client-certificate": "_TRANSPORT: ssl://127.0.0.1:57767/bootstrap: Receive failed: error:0A000412:SSL "
    "routines::ssl/tls alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)",
    "handshake": "_TRANSPORT: ssl://127.0.0.1:50087/bootstrap: SSL handshake failed: Disconnected: SSL "
    "connection closed by peer: connecting to a PLAINTEXT broker listener? (after 6ms in state SSL_HANDSHAKE)",
}
KAFKA_PYTHON = {
    "authentication": "SaslAuthenticationFailedError: SaslAuthenticationFailedError: Authentication failed: "
    "Invalid username or password",
    "untrusted": "KafkaConnectionError: Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
    "failed: self-signed certificate in certificate chain (_ssl.c:1006)",
    "client-certificate": "KafkaConnectionError: [SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad "
    "certificate (_ssl.c:2580)",
    "handshake": "KafkaConnectionError: Handshake failed: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in "
    "violation of protocol (_ssl.c:1006)",
}
SASL = SecurityConfig("SASL_SSL", "SCRAM-SHA-512", "bob", "pw-never-shown")


@pytest.mark.parametrize("client", [LIBRDKAFKA, KAFKA_PYTHON], ids=["librdkafka", "kafka-python"])
@pytest.mark.parametrize("kind", ["authentication", "untrusted", "client-certificate", "handshake"])
def test_both_clients_texts_classify_alike(client: dict, kind: str) -> None:
    assert classify(client[kind]) == kind


@pytest.mark.parametrize("text", [
    "_TRANSPORT: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused",
    "_ALL_BROKERS_DOWN: 1/1 brokers are down",
    "KafkaConnectionError: socket disconnected",
    "NodeNotReadyError: 1",
])
def test_outages_are_not_refusals(text: str) -> None:
    assert classify(text) is None
    w = RefusalWatch(SASL, "h:9093", "librdkafka")
    for _ in range(10):
        w.observe(text)
    assert w.error() is None and w.last == text


def test_a_failed_login_is_decisive_at_once_and_names_mechanism_user_and_servers() -> None:
    w = RefusalWatch(SASL, "h1:9093,h2:9093", "kafka-python")
    w.observe(KAFKA_PYTHON["authentication"])
    err = w.error()
    assert isinstance(err, AuthenticationError)
    for part in ("SCRAM-SHA-512", "'bob'", "h1:9093,h2:9093", "kafka.sasl.jaas.config", "Invalid username"):
        assert part in str(err)
    assert "pw-never-shown" not in str(err)
    with pytest.raises(AuthenticationError):
        w.raise_if_refused()


def test_tls_errors_say_what_to_check() -> None:
    w = RefusalWatch(SecurityConfig("SSL", ca_source="kafka.ssl.ca.location=/ca.pem"), "h:9093", "librdkafka")
    w.observe(LIBRDKAFKA["untrusted"])
    assert isinstance(w.error(), TlsError) and "not trusted" in str(w.error())
    assert "kafka.ssl.truststore.location" in str(w.error()) and "/ca.pem" in str(w.error())
    w = RefusalWatch(SecurityConfig("SSL"), "h:9093", "librdkafka")
    w.observe(LIBRDKAFKA["client-certificate"])
    assert "refused the client certificate" in str(w.error()) and "sent no client certificate" in str(w.error())


def test_a_broken_off_handshake_counts_only_when_it_repeats() -> None:
    w = RefusalWatch(SecurityConfig("SSL"), "h:9092", "librdkafka")
    for _ in range(HANDSHAKE_REPEATS - 1):
        w.observe(LIBRDKAFKA["handshake"])
    w.connected()  # a connection in between: it was an outage
    for _ in range(HANDSHAKE_REPEATS - 1):
        w.observe(LIBRDKAFKA["handshake"])
    assert w.error() is None
    w.observe(KAFKA_PYTHON["handshake"])
    assert isinstance(w.error(), TlsError)
    assert "SSL listeners" in str(w.error()) and "kafka.security.protocol" in str(w.error())


def test_authorization_error_names_principal_resource_operation() -> None:
    err = authorization_error(SASL, "Group", "orders-etl", "READ (JoinGroup, OffsetCommit)", "h:9093")
    assert isinstance(err, AuthorizationError)
    for part in ("GROUP_AUTHORIZATION_FAILED", "User:bob", "Group 'orders-etl'", "READ", "--group orders-etl"):
        assert part in str(err)
    err = authorization_error(SASL, "Topic", "orders", "DESCRIBE (ListOffsets, Metadata)", "h:9093")
    assert "TOPIC_AUTHORIZATION_FAILED" in str(err) and "--topic orders" in str(err)


# ---- refusals in a group request's answer (issue 54: ACLs revoked while a query runs)

def test_denial_reads_both_clients_names_and_texts():
    from spark_groupsource.config.access import GROUP_DENIED, TOPIC_DENIED, denial

    assert denial("GroupAuthorizationFailedError") == GROUP_DENIED  # kafka-python's class
    assert denial("GROUP_AUTHORIZATION_FAILED") == GROUP_DENIED  # librdkafka's name
    assert denial("Fatal error: Broker: Group authorization failed: ConsumerGroupHeartbeat fatal error") == GROUP_DENIED
    assert denial("[Error 29] TopicAuthorizationFailedError") == TOPIC_DENIED
    assert denial("Broker: Topic authorization failed") == TOPIC_DENIED
    assert denial("RebalanceInProgressError") is None
    assert denial("Local: Fatal error") is None


def test_denied_answer_names_principal_resource_and_operation():
    from spark_groupsource.config.access import denied_answer
    from spark_groupsource.config.security import SecurityConfig

    sec = SecurityConfig(protocol="SASL_PLAINTEXT", mechanism="PLAIN", username="carol", password="pw-1")
    err = denied_answer(sec, "g1", [("t1", "TopicAuthorizationFailedError"), ("t2", "NoError"),
                                    ("t0", "TOPIC_AUTHORIZATION_FAILED")], "h:9092", "OffsetCommit")
    text = str(err)
    assert type(err).__name__ == "AuthorizationError"
    for word in ("TOPIC_AUTHORIZATION_FAILED", "User:carol", "READ (OffsetCommit)", "Topic 't0, t1'", "h:9092"):
        assert word in text, text
    assert "pw-1" not in text and "t2" not in text
    # a group refusal is named first: it stops every commit
    err = denied_answer(sec, "g1", [("t1", "TopicAuthorizationFailedError"), ("t1", "GroupAuthorizationFailedError")],
                        "h:9092", "OffsetCommit")
    assert "GROUP_AUTHORIZATION_FAILED" in str(err) and "Group 'g1'" in str(err)
    assert denied_answer(sec, "g1", [("t1", "RebalanceInProgressError")], "h:9092", "OffsetCommit") is None
