"""Security options, translated once for both Kafka clients.

The driver's classic group member is kafka-python; the executors' fetchers, the driver's
offset reader, the KIP-848 member and the ``groups`` command are librdkafka. Users write the
options they already write for Spark's Kafka source (Java client names) or librdkafka's names;
:func:`parse_security` reads either into one :class:`SecurityConfig`, and that object renders
both clients' settings (:meth:`SecurityConfig.librdkafka`, :meth:`SecurityConfig.kafka_python`).
So one client cannot be configured differently from the other.

Accepted (``kafka.`` prefix omitted):

* ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
* ``sasl.mechanism`` (librdkafka also spells it ``sasl.mechanisms``): PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512; the credentials as ``sasl.jaas.config`` (a ``PlainLoginModule`` or
  ``ScramLoginModule`` line) or ``sasl.username`` + ``sasl.password``
* trust: ``ssl.truststore.location`` + ``.password`` + ``.type`` (PKCS12, PEM; JKS is refused
  with the keytool command that converts it), ``ssl.truststore.certificates`` (PEM text),
  ``ssl.ca.location`` (PEM file), ``ssl.ca.pem`` (PEM text); none: the system's CAs
* client certificate (mutual TLS): ``ssl.keystore.location`` + ``.password`` + ``.type``
  (PKCS12, PEM), ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (PEM text),
  ``ssl.certificate.location`` + ``ssl.key.location`` (PEM files), ``ssl.certificate.pem`` +
  ``ssl.key.pem``; ``ssl.key.password`` for an encrypted key
* ``ssl.endpoint.identification.algorithm``: ``https`` (default: the broker's certificate must
  name the host connected to) or empty / ``none`` (no hostname check; the chain is still
  verified)

Key stores are read once, on the driver, when the query is defined: the certificates and the
key travel as PEM text inside the options (the key re-encrypted with its password when it had
one), so executors need no files. Anything else under ``sasl.*`` / ``ssl.*`` that one of the
clients could not honour is refused with :class:`OptionError` saying what to use instead,
never dropped silently. Secrets (passwords, the JAAS line, keys) are kept out of ``repr``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_groupsource.errors import OptionError

__all__ = ["SECURITY_KEYS", "SecurityConfig", "parse_security"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_STORE_TYPES = ("PKCS12", "PEM", "JKS")

#: Every property this module reads; none of them passes through to a client as given.
SECURITY_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)

# Java settings whose default is what both clients do anyway: accepted at that value only.
_JAVA_DEFAULTS = {
    "ssl.keymanager.algorithm": ("sunx509",),
    "ssl.trustmanager.algorithm": ("pkix",),
    "ssl.protocol": ("tls", "tlsv1.2", "tlsv1.3"),
    "ssl.enabled.protocols": ("tlsv1.2,tlsv1.3", "tlsv1.3,tlsv1.2", "tlsv1.2", "tlsv1.3"),
    "ssl.client.auth": ("none", "required"),
}
# Other properties under sasl.* / ssl.* that one of the two clients cannot honour, and why.
_REFUSED = {
    "sasl.login.callback.handler.class": "Java classes cannot be loaded by the Python and librdkafka "
    "clients; use sasl.jaas.config with PlainLoginModule or ScramLoginModule",
    "sasl.client.callback.handler.class": "Java classes cannot be loaded by the Python and librdkafka "
    "clients; use sasl.jaas.config with PlainLoginModule or ScramLoginModule",
    "sasl.login.class": "Java classes cannot be loaded; use sasl.jaas.config with PlainLoginModule "
    "or ScramLoginModule",
    "ssl.engine.factory.class": "Java classes cannot be loaded; give the key and trust stores with "
    "ssl.keystore.* / ssl.truststore.*",
    "ssl.provider": "the clients use OpenSSL; remove it",
    "ssl.secure.random.implementation": "the clients use OpenSSL's random source; remove it",
    "enable.ssl.certificate.verification": "kafka-python always verifies the broker's certificate; "
    "trust its CA instead (kafka.ssl.truststore.location or kafka.ssl.ca.location)",
}
_REFUSED_PREFIXES = {
    "sasl.oauthbearer.": "OAUTHBEARER is not supported by this connector's group member "
    "(kafka-python); use SASL PLAIN or SCRAM, or mutual TLS",
    "sasl.kerberos.": "GSSAPI (Kerberos) is not supported by this connector's group member; use "
    "SASL PLAIN or SCRAM, or mutual TLS",
    "sasl.login.": "login refresh settings belong to OAUTHBEARER/Kerberos, which this connector does "
    "not support; use SASL PLAIN or SCRAM, or mutual TLS",
}
# librdkafka-only SSL tuning both sides can take: the cipher list (kafka-python: set_ciphers).
_CIPHERS = ("ssl.cipher.suites",)

_JAAS_RE = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<rest>.*?);?\s*$",
    re.DOTALL,
)
_JAAS_OPTION_RE = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PEM_CERT_RE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)
_PEM_KEY_RE = re.compile(r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.+?-----END \1PRIVATE KEY-----", re.DOTALL)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


@dataclass(frozen=True)
class SecurityConfig:
    """What both clients need to connect: protocol, SASL login, trust, client certificate."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: CA certificates (PEM) the broker's certificate must chain to; None: the system's CAs
    ca_pem: str | None = field(default=None, repr=False)
    #: where the CAs came from, for messages (an option name and file)
    ca_source: str | None = None
    #: client certificate chain (PEM) and its key (PEM, encrypted with key_password if set)
    cert_pem: str | None = field(default=None, repr=False)
    key_pem: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    cert_source: str | None = None
    check_hostname: bool = True
    #: the client certificate's subject (RFC 2253, as Kafka's default principal builder)
    cert_subject: str | None = None
    ciphers: str | None = None

    @property
    def principal(self) -> str:
        """The principal the broker sees, for ACL messages: User:<sasl user>, User:<subject>."""
        if self.sasl and self.username:
            return f"User:{self.username}"
        if self.tls and self.cert_subject:
            return f"User:{self.cert_subject}"
        return "User:ANONYMOUS"

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def describe(self) -> str:
        """A secret-free summary for messages: protocol, mechanism, user, trust, certificate."""
        parts = [f"security.protocol={self.protocol}"]
        if self.sasl:
            parts.append(f"sasl.mechanism={self.mechanism} user {self.username!r}")
        if self.tls:
            parts.append(f"trusting {self.ca_source or 'the system CA certificates'}")
            if self.cert_pem:
                parts.append(f"client certificate from {self.cert_source}")
            if not self.check_hostname:
                parts.append("no hostname verification")
        return ", ".join(parts)

    # ---- renderings -----------------------------------------------------------------------
    def librdkafka(self) -> dict[str, str]:
        """librdkafka properties (executors' fetchers, offset reader, KIP-848 member, groups)."""
        out = {"security.protocol": self.protocol}
        if self.sasl:
            out.update({"sasl.mechanism": str(self.mechanism), "sasl.username": str(self.username),
                        "sasl.password": str(self.password)})
        if self.tls:
            out["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            if self.ca_pem:
                out["ssl.ca.pem"] = self.ca_pem
            if self.cert_pem:
                out["ssl.certificate.pem"] = self.cert_pem
                out["ssl.key.pem"] = str(self.key_pem)
                if self.key_password:
                    out["ssl.key.password"] = self.key_password
            if self.ciphers:
                out["ssl.cipher.suites"] = self.ciphers
        return out

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python keyword arguments (the driver's classic member). Builds the SSLContext
        now: it holds the key in memory and cannot be pickled, so call it where it is used."""
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        if self.tls:
            out["ssl_check_hostname"] = self.check_hostname
            out["ssl_context"] = self.ssl_context()
        return out

    def ssl_context(self) -> ssl.SSLContext:
        """An SSLContext as librdkafka sets itself up: TLS 1.2+, chain verified against the CAs
        (or the system's), hostname checked unless turned off, the client certificate if any."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        if self.ca_pem:
            ctx.load_verify_locations(cadata=self.ca_pem)
        else:
            ctx.load_default_certs()
        if self.ciphers:
            ctx.set_ciphers(self.ciphers)
        if self.cert_pem:
            _load_cert_chain(ctx, str(self.cert_pem), str(self.key_pem), self.key_password)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert_pem: str, key_pem: str, password: str | None) -> None:
    """``load_cert_chain`` takes only files: write them 0600 into a private directory, load,
    delete."""
    tmp = tempfile.mkdtemp(prefix="groupkafka-tls-")  # 0700
    try:
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        for path, text in ((cert, cert_pem), (key, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        ctx.load_cert_chain(cert, key, password=password)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- parsing


def parse_security(params: Mapping[str, str]) -> SecurityConfig:
    """Read the security properties of ``params`` (``kafka.*`` options without the prefix,
    lower-cased keys). Raises :class:`OptionError` naming the option and what to use instead."""
    p = {k.lower(): v for k, v in params.items()}
    _refuse_unsupported(p)
    protocol = _protocol(p)
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        mechanism, username, password = _sasl(p)
    else:
        for key in ("sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username", "sasl.password"):
            if key in p:
                raise OptionError(f"kafka.{key}", f"SASL settings need kafka.security.protocol=SASL_SSL or "
                                                  f"SASL_PLAINTEXT, got {protocol}")
    tls = protocol in ("SSL", "SASL_SSL")
    if not tls:
        for key in sorted(p):
            if key in SECURITY_KEYS and key.startswith("ssl.") or key in _CIPHERS:
                raise OptionError(f"kafka.{key}", f"TLS settings need kafka.security.protocol=SSL or "
                                                  f"SASL_SSL, got {protocol}")
        return SecurityConfig(protocol, mechanism, username, password)
    ca_pem, ca_source = _trust(p)
    cert_pem, key_pem, key_password, cert_source, subject = _client_certificate(p)
    algorithm = p.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise OptionError("kafka.ssl.endpoint.identification.algorithm",
                          f"expected https (check the broker's host name) or an empty value / none "
                          f"(do not), got {algorithm!r}")
    return SecurityConfig(
        protocol, mechanism, username, password, ca_pem, ca_source, cert_pem, key_pem, key_password,
        cert_source, check_hostname=algorithm == "https", cert_subject=subject,
        ciphers=p.get("ssl.cipher.suites") or None,
    )


def _refuse_unsupported(p: Mapping[str, str]) -> None:
    for key in sorted(p):
        if key in _REFUSED:
            raise OptionError(f"kafka.{key}", f"cannot be honoured: {_REFUSED[key]}")
        for prefix, why in _REFUSED_PREFIXES.items():
            if key.startswith(prefix):
                raise OptionError(f"kafka.{key}", f"cannot be honoured: {why}")
        if key in _JAVA_DEFAULTS:
            if p[key].strip().lower() not in _JAVA_DEFAULTS[key]:
                raise OptionError(f"kafka.{key}", f"only {', '.join(_JAVA_DEFAULTS[key])} can be honoured "
                                                  f"(both clients use OpenSSL with TLS 1.2+); got {p[key]!r}")
            continue
        if (key.startswith("ssl.") or key.startswith("sasl.")) and key not in SECURITY_KEYS \
                and key not in _CIPHERS:
            raise OptionError(
                f"kafka.{key}",
                "is not a security setting this connector can give both of its Kafka clients; "
                "accepted: security.protocol, sasl.mechanism, sasl.jaas.config (or sasl.username/"
                "sasl.password), ssl.truststore.*, ssl.keystore.*, ssl.key.password, "
                "ssl.ca.location, ssl.certificate.location, ssl.key.location, "
                "ssl.endpoint.identification.algorithm, ssl.cipher.suites (see docs/security.md)",
            )


def _protocol(p: Mapping[str, str]) -> str:
    value = p.get("security.protocol", "PLAINTEXT").strip().upper()
    if value not in PROTOCOLS:
        raise OptionError("kafka.security.protocol", f"expected one of {', '.join(PROTOCOLS)}, got {value!r}")
    return value


def _sasl(p: Mapping[str, str]) -> tuple[str, str, str]:
    given = [k for k in ("sasl.mechanism", "sasl.mechanisms") if k in p]
    if len(given) == 2 and p[given[0]].strip().upper() != p[given[1]].strip().upper():
        raise OptionError("kafka.sasl.mechanism", "given twice (sasl.mechanism and sasl.mechanisms) with "
                                                  "different values; keep one")
    mechanism = p[given[0]].strip().upper() if given else "GSSAPI"
    if mechanism not in MECHANISMS:
        raise OptionError(
            f"kafka.{given[0] if given else 'sasl.mechanism'}",
            f"expected one of {', '.join(MECHANISMS)}, got {mechanism!r}"
            + (" (Kafka's default when none is given)" if not given else "")
            + "; GSSAPI and OAUTHBEARER are not supported by this connector's group member",
        )
    if "sasl.jaas.config" in p:
        if "sasl.username" in p or "sasl.password" in p:
            raise OptionError("kafka.sasl.jaas.config", "give the credentials once: either sasl.jaas.config "
                                                        "or sasl.username + sasl.password")
        username, password = _jaas(p["sasl.jaas.config"], mechanism)
    else:
        username, password = p.get("sasl.username", ""), p.get("sasl.password", "")
        if not username or not password:
            raise OptionError("kafka.sasl.jaas.config", f"SASL {mechanism} needs credentials: "
                              f"kafka.sasl.jaas.config='{_example_jaas(mechanism)}', or "
                              "kafka.sasl.username and kafka.sasl.password")
    return mechanism, username, password


def _example_jaas(mechanism: str) -> str:
    module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
    return f'{module} required username="..." password="...";'


def _jaas(text: str, mechanism: str) -> tuple[str, str]:
    """Username and password of a PlainLoginModule / ScramLoginModule line. Messages never
    quote the line (it holds the password)."""
    m = _JAAS_RE.match(text)
    if m is None:
        raise OptionError("kafka.sasl.jaas.config", f"cannot parse it; expected {_example_jaas(mechanism)}")
    module = m.group("module")
    want = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
    if module != want:
        short = module.rsplit(".", 1)[-1]
        raise OptionError("kafka.sasl.jaas.config",
                          f"uses {short}, which does not go with sasl.mechanism={mechanism} (or is not "
                          f"supported: only PlainLoginModule and ScramLoginModule are); expected "
                          f"{_example_jaas(mechanism)}")
    rest, opts, pos = m.group("rest"), {}, 0
    while pos < len(rest.rstrip()):
        om = _JAAS_OPTION_RE.match(rest, pos)
        if om is None:
            raise OptionError("kafka.sasl.jaas.config", f"cannot parse its options; expected "
                                                        f"{_example_jaas(mechanism)}")
        value = om.group(2) if om.group(2) is not None else om.group(3)
        opts[om.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = om.end()
    username, password = opts.get("username"), opts.get("password")
    if not username or password is None:
        raise OptionError("kafka.sasl.jaas.config", f"needs username=\"...\" and password=\"...\"; expected "
                                                    f"{_example_jaas(mechanism)}")
    extra = sorted(set(opts) - {"username", "password"})
    if extra and extra != ["tokenauth"]:
        raise OptionError("kafka.sasl.jaas.config", f"has options this connector cannot pass on: "
                                                    f"{', '.join(extra)} (only username and password)")
    if opts.get("tokenauth", "false").lower() == "true":
        raise OptionError("kafka.sasl.jaas.config", "tokenauth=true (delegation tokens) is not supported; "
                                                    "use a SCRAM user's username and password")
    return username, password


# ---- trust and key stores -------------------------------------------------------------------


def _read(option: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise OptionError(option, f"cannot read {path!r} on the driver ({exc.strerror}); the file must "
                                  "exist where the query is defined") from None


def _store_type(p: Mapping[str, str], key: str, data: bytes, default: str = "PKCS12") -> str:
    given = p.get(key)
    kind = given.strip().upper() if given else None
    if kind is not None and kind not in _STORE_TYPES:
        raise OptionError(f"kafka.{key}", f"expected PKCS12, PEM or JKS, got {given!r}")
    if data.startswith(_JKS_MAGIC):
        kind = "JKS"
    elif kind is None:
        kind = "PEM" if data.lstrip().startswith(b"-----BEGIN") else default
    return kind


def _jks_refusal(option: str, path: str, which: str) -> OptionError:
    return OptionError(
        option,
        f"{path!r} is a JKS {which}, which neither OpenSSL-based client can read. Convert it once "
        f"to PKCS12: keytool -importkeystore -srcstoretype JKS -srckeystore {path} "
        f"-deststoretype PKCS12 -destkeystore {os.path.splitext(path)[0]}.p12, then set "
        f"kafka.ssl.{which}.location to the .p12 file and kafka.ssl.{which}.type=PKCS12",
    )


def _trust(p: Mapping[str, str]) -> tuple[str | None, str | None]:
    given = [k for k in ("ssl.truststore.location", "ssl.truststore.certificates", "ssl.ca.location",
                         "ssl.ca.pem") if k in p]
    if len(given) > 1:
        raise OptionError(f"kafka.{given[1]}", f"trust is given twice ({' and '.join(given)}); keep one")
    if not given:
        for key in ("ssl.truststore.password", "ssl.truststore.type"):
            if key in p:
                raise OptionError(f"kafka.{key}", "needs kafka.ssl.truststore.location")
        return None, None
    key = given[0]
    option = f"kafka.{key}"
    if key in ("ssl.truststore.certificates", "ssl.ca.pem"):
        return _certs_pem(option, p[key].encode()), option
    path = p[key].strip()
    data = _read(option, path)
    source = f"{option}={path}"
    if key == "ssl.ca.location":
        return _certs_pem(option, data), source
    kind = _store_type(p, "ssl.truststore.type", data)
    if kind == "JKS":
        raise _jks_refusal(option, path, "truststore")
    if kind == "PEM":
        return _certs_pem(option, data), source
    password = p.get("ssl.truststore.password")
    _key, cert, extra = _pkcs12(option, "kafka.ssl.truststore.password", data, password)
    certs = ([cert] if cert is not None else []) + list(extra)
    if not certs:
        raise OptionError(option, f"{path!r} holds no certificate")
    return "".join(_cert_to_pem(c) for c in certs), source


def _client_certificate(p: Mapping[str, str]) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    """(cert chain PEM, key PEM, key password, source, subject) of the client certificate."""
    forms = {
        "ssl.keystore.location": ("ssl.keystore.location",),
        "ssl.keystore.certificate.chain": ("ssl.keystore.certificate.chain", "ssl.keystore.key"),
        "ssl.certificate.location": ("ssl.certificate.location", "ssl.key.location"),
        "ssl.certificate.pem": ("ssl.certificate.pem", "ssl.key.pem"),
    }
    partners = {"ssl.keystore.key": "ssl.keystore.certificate.chain", "ssl.key.location": "ssl.certificate.location",
                "ssl.key.pem": "ssl.certificate.pem"}
    given = [k for k in forms if k in p]
    if len(given) > 1:
        raise OptionError(f"kafka.{given[1]}", f"the client certificate is given twice "
                                               f"({' and '.join(given)}); keep one")
    for key, partner in partners.items():
        if key in p and partner not in p:
            raise OptionError(f"kafka.{key}", f"needs kafka.{partner} as well")
    if not given:
        for key in ("ssl.keystore.password", "ssl.keystore.type", "ssl.key.password"):
            if key in p:
                raise OptionError(f"kafka.{key}", "needs kafka.ssl.keystore.location (or "
                                                  "kafka.ssl.certificate.location + ssl.key.location)")
        return None, None, None, None, None
    form = given[0]
    for key in forms[form][1:]:
        if key not in p:
            raise OptionError(f"kafka.{key}", f"is required with kafka.{form}")
    option = f"kafka.{form}"
    key_password = p.get("ssl.key.password") or None
    if form == "ssl.keystore.location":
        path = p[form].strip()
        data = _read(option, path)
        source = f"{option}={path}"
        kind = _store_type(p, "ssl.keystore.type", data)
        if kind == "JKS":
            raise _jks_refusal(option, path, "keystore")
        if kind == "PKCS12":
            store_password = p.get("ssl.keystore.password")
            key, cert, extra = _pkcs12(option, "kafka.ssl.keystore.password", data, store_password, key_password)
            if key is None or cert is None:
                raise OptionError(option, f"{path!r} holds no private key with its certificate")
            chain = _cert_to_pem(cert) + "".join(_cert_to_pem(c) for c in extra)
            password = key_password or store_password or None
            return chain, _key_to_pem(key, password), password, source, _subject(cert)
        cert_text, key_text = data, data  # a PEM keystore holds the key and the chain
        if "ssl.keystore.password" in p and key_password is None:
            key_password = p["ssl.keystore.password"] or None
    elif form == "ssl.certificate.location":
        cert_text = _read(option, p[form].strip())
        key_text = _read("kafka.ssl.key.location", p["ssl.key.location"].strip())
        source = f"{option}={p[form].strip()}"
    else:
        cert_text, key_text = p[form].encode(), p[forms[form][1]].encode()
        source = option
    chain = _certs_pem(option, cert_text)
    key = _private_key(f"kafka.{forms[form][1]}" if len(forms[form]) > 1 else option, key_text, key_password)
    from cryptography import x509

    first = x509.load_pem_x509_certificate(chain.encode())
    return chain, _key_to_pem(key, key_password), key_password, source, _subject(first)


def _certs_pem(option: str, data: bytes) -> str:
    found = _PEM_CERT_RE.findall(data.decode("ascii", errors="replace"))
    if not found:
        raise OptionError(option, "holds no PEM certificate (-----BEGIN CERTIFICATE-----); for a PKCS12 "
                                  "store use kafka.ssl.truststore.location with ssl.truststore.type=PKCS12")
    from cryptography import x509

    for pem in found:
        try:
            x509.load_pem_x509_certificate(pem.encode())
        except ValueError:
            raise OptionError(option, "holds a PEM certificate that cannot be parsed") from None
    return "\n".join(found) + "\n"


def _private_key(option: str, data: bytes, password: str | None) -> Any:
    from cryptography.hazmat.primitives import serialization

    m = _PEM_KEY_RE.search(data.decode("ascii", errors="replace"))
    if m is None:
        raise OptionError(option, "holds no PEM private key (-----BEGIN PRIVATE KEY-----)")
    try:
        return serialization.load_pem_private_key(m.group(0).encode(), password.encode() if password else None)
    except TypeError:
        raise OptionError(option, "the private key is encrypted: set kafka.ssl.key.password") from None
    except ValueError:
        raise OptionError(option, "cannot decrypt or parse the private key: check "
                                  "kafka.ssl.key.password") from None


def _pkcs12(option: str, password_option: str, data: bytes, password: str | None,
            other: str | None = None) -> tuple[Any, Any, list]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    tried = [password] + ([other] if other and other != password else [])
    for pw in tried:
        try:
            return pkcs12.load_key_and_certificates(data, pw.encode() if pw else None)
        except ValueError:
            continue
    raise OptionError(password_option, f"cannot open the PKCS12 store of {option}: wrong password, or "
                                       "not a PKCS12 file")


def _cert_to_pem(cert: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_to_pem(key: Any, password: str | None) -> str:
    from cryptography.hazmat.primitives import serialization

    algorithm = (serialization.BestAvailableEncryption(password.encode()) if password
                 else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             algorithm).decode()


def _subject(cert: Any) -> str | None:
    """The subject as Kafka's default principal builder names it (RFC 2253 order)."""
    with contextlib.suppress(Exception):
        return cert.subject.rfc4514_string()
    return None
