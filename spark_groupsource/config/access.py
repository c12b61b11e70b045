"""What a refused connection means, said once for both clients.

kafka-python and librdkafka both keep reconnecting when a broker refuses a login or a TLS
handshake fails, as if the broker were merely away: a query with a wrong password used to wait
out ``groupJoinTimeoutMs`` and then report "could not reach any bootstrap server". Both clients
do tell what went wrong (kafka-python in the failed connection's exception, librdkafka in
``error_cb``); :class:`RefusalWatch` reads those texts and turns the first decisive one into a
:class:`~spark_groupsource.errors.SecurityError` that names the mechanism or the TLS problem,
the bootstrap servers and what to check. Pure: the clients' hooks feed it strings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from spark_groupsource.config.security import SecurityConfig
from spark_groupsource.errors import (
    AuthenticationError,
    AuthorizationError,
    SecurityError,
    TlsError,
)

__all__ = ["RefusalWatch", "authorization_error", "classify", "denial", "denied_answer", "refusal_error"]

AUTHENTICATION = "authentication"
UNTRUSTED = "untrusted"  # the broker's certificate does not verify
CLIENT_CERTIFICATE = "client-certificate"  # the broker refused ours (or we sent none)
HANDSHAKE = "handshake"  # the handshake broke off: often not a TLS port

#: How many times a broken-off handshake must repeat before it counts (a broker restarting
#: can drop one); every other kind is decisive the first time, as Java's clients treat them.
HANDSHAKE_REPEATS = 3

_MARKERS = (
    (AUTHENTICATION, ("_authentication", "saslauthenticationfailed", "sasl authentication error",
                      "authentication failed", "illegal_sasl_state", "unsupported_sasl_mechanism",
                      "unsupportedsaslmechanism")),
    (UNTRUSTED, ("certificate verify failed", "certificate_verify_failed", "hostname mismatch",
                 "ip address mismatch", "broker certificate could not be verified")),
    (CLIENT_CERTIFICATE, ("bad certificate", "bad_certificate", "certificate required",
                          "certificate_required", "unknown ca", "unknown_ca")),
    (HANDSHAKE, ("ssl handshake failed", "handshake failed", "wrong_version_number", "wrong version number",
                 "unexpected_eof_while_reading", "connecting to a plaintext broker listener")),
)


def classify(text: str) -> str | None:
    """The kind of refusal a client's error text reports, or None (an ordinary outage)."""
    low = text.lower()
    for kind, markers in _MARKERS:
        if any(m in low for m in markers):
            return kind
    return None


def refusal_error(kind: str, detail: str, security: SecurityConfig | None, bootstrap: str,
                  client: str) -> SecurityError:
    """The error for a refusal of ``kind``; ``detail`` is the client's own words (no secrets:
    neither client puts passwords in its messages)."""
    s = security or SecurityConfig()
    where = f"bootstrap servers {bootstrap}"
    said = f" ({client} said: {detail.strip()})"
    if kind == AUTHENTICATION:
        return AuthenticationError(
            f"SASL {s.mechanism or '?'} authentication of user {s.username!r} failed at {where}{said}. "
            "Check the username and password in kafka.sasl.jaas.config (or kafka.sasl.username/"
            "sasl.password), that the listener enables kafka.sasl.mechanism="
            f"{s.mechanism or '?'}, and for SCRAM that the user has credentials for that mechanism; "
            f"{s.describe()}")
    if kind == UNTRUSTED:
        return TlsError(
            f"TLS handshake with {where} failed: the broker's certificate is not trusted{said}. Check "
            "that kafka.ssl.truststore.location (or ssl.ca.location) holds the CA that signed the "
            "broker's certificate, and that the certificate names the host in the bootstrap servers "
            "(kafka.ssl.endpoint.identification.algorithm=https checks it); " + s.describe())
    if kind == CLIENT_CERTIFICATE:
        mine = "sent no client certificate" if not s.cert_pem else f"sent {s.principal.removeprefix('User:')}"
        return TlsError(
            f"TLS handshake with {where} failed: the broker refused the client certificate (this client "
            f"{mine}){said}. The listener requires mutual TLS: set kafka.ssl.keystore.location (PKCS12 or "
            f"PEM) to a certificate signed by a CA the broker trusts; {s.describe()}")
    return TlsError(
        f"TLS handshake with {where} failed {HANDSHAKE_REPEATS} times{said}. Check that these ports are "
        f"the brokers' {s.protocol} listeners (a PLAINTEXT or SASL_PLAINTEXT port closes a TLS "
        f"handshake) and kafka.security.protocol; {s.describe()}")


def authorization_error(security: SecurityConfig | None, resource: str, name: str, operations: str,
                        bootstrap: str, detail: str = "") -> AuthorizationError:
    """A denied operation: who, on what, which ACL to grant."""
    principal = (security or SecurityConfig()).principal
    code = "GROUP_AUTHORIZATION_FAILED" if resource == "Group" else "TOPIC_AUTHORIZATION_FAILED"
    said = f" ({detail.strip()})" if detail.strip() else ""
    return AuthorizationError(
        f"{code}: principal {principal} is not allowed {operations} on {resource} {name!r} "
        f"(bootstrap servers {bootstrap}){said}. Grant it, e.g. kafka-acls.sh --add --allow-principal "
        f"{principal} --operation {operations.split(' ')[0]} --{resource.lower()} {name}; docs/security.md "
        "lists the ACLs a query needs")


GROUP_DENIED = "GROUP_AUTHORIZATION_FAILED"
TOPIC_DENIED = "TOPIC_AUTHORIZATION_FAILED"


def denial(text: str) -> str | None:
    """:data:`GROUP_DENIED` or :data:`TOPIC_DENIED` when an error's name or text is an
    authorization refusal (kafka-python's ``GroupAuthorizationFailedError``, librdkafka's
    ``GROUP_AUTHORIZATION_FAILED``, ...), else None."""
    low = text.lower().replace("_", "").replace(" ", "")
    if "groupauthorizationfailed" in low:
        return GROUP_DENIED
    if "topicauthorizationfailed" in low:
        return TOPIC_DENIED
    return None


def denied_answer(security: SecurityConfig | None, group: str, answers: Iterable[tuple[str, str]], bootstrap: str,
                  request: str) -> AuthorizationError | None:
    """The refusal in a group request's answer (``request``: OffsetCommit, Heartbeat, ...) as the
    :class:`AuthorizationError` to fail the query with, or None when nothing was refused.

    ``answers``: (topic, error name or text) of what was not accepted. An ACL revoked while a
    query runs is met first here (the commit of the batch that just ended, a heartbeat): it is
    not a transient error, retrying cannot help, and the query must fail at once, not keep the
    offsets and wait for a retry that never succeeds. The group is named first: a
    group refusal stops every commit, a topic refusal that topic's."""
    topics = set()
    detail = ""
    for topic, why in answers:
        code = denial(why)
        if code == GROUP_DENIED:
            return authorization_error(security, "Group", group, f"READ ({request})", bootstrap, why)
        if code == TOPIC_DENIED:
            topics.add(topic)
            detail = detail or why
    if not topics:
        return None
    return authorization_error(security, "Topic", ", ".join(sorted(topics)), f"READ ({request})", bootstrap,
                               detail)


def subscription_denied(security: SecurityConfig | None, topics: tuple[str, ...] | list[str], pattern: str | None,
                        bootstrap: str, detail: str = "") -> AuthorizationError:
    """A member's subscription the principal may not describe or read: its topics, or its pattern
    (what both group members report when the coordinator refuses the subscription)."""
    names = ", ".join(topics) or f"matching {pattern}"
    return authorization_error(security, "Topic", names, "DESCRIBE and READ", bootstrap, detail)


class RefusalWatch:
    """Collects what a client reports about failed connections; :meth:`error` is the
    :class:`SecurityError` once one is decisive (thread-safe: clients report from their own
    threads)."""

    def __init__(self, security: SecurityConfig | None, bootstrap: str, client: str):
        self.security, self.bootstrap, self.client = security, bootstrap, client
        self._lock = threading.Lock()
        self._handshakes = 0
        self._error: SecurityError | None = None
        self.last: str | None = None  # the last connection error seen, for outage messages

    def observe(self, text: str) -> None:
        kind = classify(text)
        with self._lock:
            self.last = text
            if self._error is not None or kind is None:
                return
            if kind == HANDSHAKE:
                self._handshakes += 1
                if self._handshakes < HANDSHAKE_REPEATS:
                    return
            self._error = refusal_error(kind, text, self.security, self.bootstrap, self.client)

    def connected(self) -> None:
        """A connection succeeded: broken-off handshakes before it were an outage."""
        with self._lock:
            self._handshakes = 0

    def error(self) -> SecurityError | None:
        with self._lock:
            return self._error

    def raise_if_refused(self) -> None:
        err = self.error()
        if err is not None:
            raise err
