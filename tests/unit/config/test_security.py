"""Security options: one parse, both clients rendered from the same inputs, refusals, secrets."""

from __future__ import annotations

import glob
import os
import pickle
import re
import ssl
import tempfile

import pytest
from confluent_kafka import Consumer

from spark_groupsource.config import fetcher_config, membership_config, parse_stream_options
from spark_groupsource.config.security import SecurityConfig, parse_security
from spark_groupsource.errors import OptionError
from tlsfiles import CLIENT_CN, KEY_PASSWORD, STORE_PASSWORD, make_pki

SECRET = "pw-Secret-7731"
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{SECRET}";'
SCRAM_JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="{SECRET}";'
BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.group.id": "g", "subscribe": "t"}


@pytest.fixture(scope="module")
def pki():
    with tempfile.TemporaryDirectory() as d:
        yield make_pki(d)


def opts(**kafka: str):
    return parse_stream_options({**BASE, **{f"kafka.{k}": v for k, v in kafka.items()}})


def both(**kafka: str) -> tuple[dict, dict]:
    """The librdkafka config (fetchers, offset reader) and the kafka-python kwargs (member)."""
    o = opts(**kafka)
    return fetcher_config(o), membership_config(o)


def refused(**kafka: str) -> OptionError:
    with pytest.raises(OptionError) as info:
        opts(**kafka)
    return info.value


def accepted_by_librdkafka(config: dict) -> None:
    """librdkafka checks SSL settings (PEM parsing, key password) when the client is made."""
    Consumer({**config, "log_level": 0}).close()


# ------------------------------------------------------------------ SASL


@pytest.mark.parametrize(("mechanism", "jaas", "user"), [
    ("PLAIN", PLAIN_JAAS, "alice"), ("SCRAM-SHA-256", SCRAM_JAAS, "bob"), ("SCRAM-SHA-512", SCRAM_JAAS, "bob"),
])
def test_jaas_config_gives_both_clients_the_same_login(mechanism: str, jaas: str, user: str) -> None:
    rd, kp = both(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    assert (rd["security.protocol"], rd["sasl.mechanism"], rd["sasl.username"], rd["sasl.password"]) == (
        "SASL_PLAINTEXT", mechanism, user, SECRET)
    assert (kp["security_protocol"], kp["sasl_mechanism"], kp["sasl_plain_username"], kp["sasl_plain_password"]) == (
        "SASL_PLAINTEXT", mechanism, user, SECRET)
    assert "sasl.jaas.config" not in rd  # librdkafka has no such property
    accepted_by_librdkafka(rd)


def test_java_and_librdkafka_spellings_parse_to_the_same_config() -> None:
    java = parse_security({"security.protocol": "sasl_plaintext", "sasl.mechanism": "scram-sha-512",
                           "sasl.jaas.config": SCRAM_JAAS})
    rdk = parse_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                          "sasl.username": "bob", "sasl.password": SECRET})
    assert java == rdk and java.principal == "User:bob"


@pytest.mark.parametrize(("jaas", "user"), [
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="a\\"b" password="p;q";', 'a"b'),
    ("org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=alice\n  password=\"p;q\"",
     "alice"),
])
def test_jaas_quoting_and_layout(jaas: str, user: str) -> None:
    s = parse_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    assert (s.username, s.password) == (user, "p;q")


@pytest.mark.parametrize(("extra", "match"), [
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS}, "ScramLoginModule.*PLAIN.*PlainLoginModule required"),
    ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": "nonsense"}, "cannot parse"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required username="u";'}, "password"),
    ({"sasl.mechanism": "OAUTHBEARER"}, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ({"sasl.mechanism": "GSSAPI"}, "GSSAPI and OAUTHBEARER are not supported"),
    ({}, "Kafka's default"),
    ({"sasl.mechanism": "PLAIN"}, "needs credentials.*PlainLoginModule required"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS, "sasl.password": SECRET}, "once"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{SECRET}" tokenauth=true;'},
     "ScramLoginModule"),
])
def test_sasl_settings_that_cannot_work_are_refused(extra: dict, match: str) -> None:
    e = refused(**{"security.protocol": "SASL_SSL", **extra})
    assert e.option.startswith("kafka.sasl.")
    assert re.search(match, str(e), re.S), str(e)
    assert SECRET not in str(e)


@pytest.mark.parametrize(("key", "value", "match"), [
    ("sasl.login.callback.handler.class", "com.example.Handler", "Java classes"),
    ("sasl.oauthbearer.token.endpoint.url", "https://idp", "OAUTHBEARER is not supported"),
    ("sasl.kerberos.service.name", "kafka", "GSSAPI"),
    ("ssl.engine.factory.class", "x.Y", "Java classes"),
    ("ssl.curves.list", "P-256", "can give both of its Kafka clients"),
    ("enable.ssl.certificate.verification", "false", "always verifies"),
    ("ssl.keymanager.algorithm", "PKIX", "only sunx509"),
])
def test_options_one_client_cannot_honour_are_refused_with_what_to_use(key: str, value: str, match: str) -> None:
    e = refused(**{"security.protocol": "SSL", key: value})
    assert e.option == f"kafka.{key}" and match in str(e)


def test_java_defaults_are_accepted_and_not_passed_on() -> None:
    rd, _ = both(**{"security.protocol": "SSL", "ssl.protocol": "TLSv1.3", "ssl.keymanager.algorithm": "SunX509"})
    assert "ssl.protocol" not in rd and "ssl.keymanager.algorithm" not in rd


@pytest.mark.parametrize("key", ["sasl.jaas.config", "sasl.password", "ssl.truststore.location"])
def test_security_settings_without_the_protocol_that_uses_them_are_refused(key: str) -> None:
    e = refused(**{key: PLAIN_JAAS if "jaas" in key else "x"})
    assert e.option == f"kafka.{key}" and "kafka.security.protocol=" in str(e)
    assert SECRET not in str(e)


def test_plaintext_default_renders_the_protocol_only() -> None:
    rd, kp = both()
    assert rd["security.protocol"] == "PLAINTEXT" and kp["security_protocol"] == "PLAINTEXT"
    assert not any(k.startswith(("ssl", "sasl")) for k in list(rd) + list(kp))


# ------------------------------------------------------------------ TLS


def _ca_subjects(ctx: ssl.SSLContext) -> list[str]:
    return [dict(x[0] for x in c["subject"])["commonName"] for c in ctx.get_ca_certs()]


@pytest.mark.parametrize("trust", ["truststore_p12", "ca_pem", "pem_truststore", "ca_location", "inline"])
def test_every_form_of_trust_gives_both_clients_the_ca(pki, trust: str) -> None:
    ca_text = open(pki.ca_pem).read()
    given = {
        "truststore_p12": {"ssl.truststore.location": pki.truststore_p12, "ssl.truststore.password": STORE_PASSWORD,
                           "ssl.truststore.type": "PKCS12"},
        "ca_pem": {"ssl.truststore.location": pki.ca_pem, "ssl.truststore.type": "PEM"},
        "pem_truststore": {"ssl.truststore.location": pki.ca_pem},  # type from the content
        "ca_location": {"ssl.ca.location": pki.ca_pem},
        "inline": {"ssl.truststore.certificates": ca_text},
    }[trust]
    rd, kp = both(**{"security.protocol": "SSL", **given})
    assert "groupkafka-test-ca" in _ca_subjects(kp["ssl_context"])
    assert rd["ssl.ca.pem"].strip() == ca_text.strip()
    assert rd["ssl.endpoint.identification.algorithm"] == "https" and kp["ssl_check_hostname"] is True
    assert kp["ssl_context"].check_hostname and kp["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert not any(k.startswith("ssl.truststore") for k in rd)
    accepted_by_librdkafka(rd)


@pytest.mark.parametrize("store", ["p12", "pem_files", "pem_keystore", "inline"])
def test_every_form_of_client_certificate_gives_both_clients_the_key(pki, store: str, tmp_path, monkeypatch) -> None:
    # the key files go to a temp dir of this test's own: the machine's /tmp holds other test
    # workers' key files while their clients are being built (a clean-clone CI run saw one)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cert_text, key_text = open(pki.client_cert_pem).read(), open(pki.client_key_pem).read()
    given = {
        "p12": {"ssl.keystore.location": pki.client_p12, "ssl.keystore.password": STORE_PASSWORD,
                "ssl.keystore.type": "PKCS12", "ssl.key.password": STORE_PASSWORD},
        "pem_files": {"ssl.certificate.location": pki.client_cert_pem, "ssl.key.location": pki.client_key_pem,
                      "ssl.key.password": KEY_PASSWORD},
        "pem_keystore": {"ssl.keystore.location": _pem_keystore(pki), "ssl.keystore.type": "PEM",
                         "ssl.key.password": KEY_PASSWORD},
        "inline": {"ssl.keystore.certificate.chain": cert_text, "ssl.keystore.key": key_text,
                   "ssl.key.password": KEY_PASSWORD},
    }[store]
    o = opts(**{"security.protocol": "SSL", "ssl.ca.location": pki.ca_pem, **given})
    assert o.security.principal == f"User:CN={CLIENT_CN}"
    rd, kp = fetcher_config(o), membership_config(o)
    assert CLIENT_CN in rd["ssl.certificate.pem"] or "BEGIN CERTIFICATE" in rd["ssl.certificate.pem"]
    assert "ENCRYPTED PRIVATE KEY" in rd["ssl.key.pem"]  # the key travels encrypted with its password
    assert rd["ssl.key.password"]
    assert isinstance(kp["ssl_context"], ssl.SSLContext)  # load_cert_chain accepted key and chain
    accepted_by_librdkafka(rd)
    assert not glob.glob(os.path.join(str(tmp_path), "groupkafka-tls-*")), "key files left behind"


def _pem_keystore(pki) -> str:
    path = os.path.join(pki.directory, "client-keystore.pem")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(open(pki.client_key_pem).read() + open(pki.client_cert_pem).read())
    return path


def test_hostname_verification_off_for_both(pki) -> None:
    rd, kp = both(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS,
                     "ssl.ca.location": pki.ca_pem, "ssl.endpoint.identification.algorithm": ""})
    assert rd["ssl.endpoint.identification.algorithm"] == "none"
    assert kp["ssl_check_hostname"] is False and kp["ssl_context"].check_hostname is False
    assert kp["ssl_context"].verify_mode == ssl.CERT_REQUIRED  # the chain is still verified
    e = refused(**{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"})
    assert "https" in str(e)


def test_system_cas_when_no_trust_is_given() -> None:
    rd, kp = both(**{"security.protocol": "SSL"})
    assert "ssl.ca.pem" not in rd and isinstance(kp["ssl_context"], ssl.SSLContext)


def test_jks_is_refused_with_the_keytool_command(pki) -> None:
    if pki.truststore_jks is None:
        path = os.path.join(pki.directory, "fake.jks")
        with open(path, "wb") as f:
            f.write(b"\xfe\xed\xfe\xed" + b"\0" * 32)
    else:
        path = pki.truststore_jks
    e = refused(**{"security.protocol": "SSL", "ssl.truststore.location": path,
                   "ssl.truststore.password": STORE_PASSWORD})
    assert e.option == "kafka.ssl.truststore.location"
    assert "keytool -importkeystore -srcstoretype JKS" in str(e) and "-deststoretype PKCS12" in str(e)
    assert STORE_PASSWORD not in str(e)
    e = refused(**{"security.protocol": "SSL", "ssl.keystore.location": path, "ssl.keystore.type": "JKS",
                   "ssl.keystore.password": STORE_PASSWORD})
    assert "keystore" in str(e) and "keytool" in str(e)


@pytest.mark.parametrize(("given", "option"), [
    ({"ssl.truststore.location": "/nonexistent/ts.p12"}, "kafka.ssl.truststore.location"),
    ({"ssl.keystore.location": "KS", "ssl.keystore.password": "wrong-pw"}, "kafka.ssl.keystore.password"),
    ({"ssl.truststore.location": "TS", "ssl.truststore.password": "wrong-pw", "ssl.truststore.type": "PKCS12"},
     "kafka.ssl.truststore.password"),
    ({"ssl.certificate.location": "CERT", "ssl.key.location": "KEY"}, "kafka.ssl.key.location"),
    ({"ssl.certificate.location": "CERT", "ssl.key.location": "KEY", "ssl.key.password": "wrong-pw"},
     "kafka.ssl.key.location"),
    ({"ssl.key.location": "KEY"}, "kafka.ssl.key.location"),
    ({"ssl.ca.location": "CA", "ssl.truststore.location": "CA"}, "kafka.ssl.ca.location"),
])
def test_bad_stores_fail_at_definition_naming_the_option(pki, given: dict, option: str) -> None:
    paths = {"KS": pki.client_p12, "TS": pki.truststore_p12, "CERT": pki.client_cert_pem,
             "KEY": pki.client_key_pem, "CA": pki.ca_pem}
    e = refused(**{"security.protocol": "SSL", **{k: paths.get(v, v) for k, v in given.items()}})
    assert e.option == option, str(e)
    assert "wrong-pw" not in str(e)


def test_secrets_never_in_repr_describe_or_pickle_text(pki) -> None:
    o = opts(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS,
                "ssl.keystore.location": pki.client_p12, "ssl.keystore.password": STORE_PASSWORD,
                "ssl.truststore.location": pki.truststore_p12, "ssl.truststore.password": STORE_PASSWORD})
    for text in (repr(o), str(o), repr(o.security), o.security.describe()):
        for secret in (SECRET, STORE_PASSWORD, "PRIVATE KEY", "ScramLoginModule"):
            assert secret not in text
    assert "SCRAM-SHA-256 user 'bob'" in o.security.describe()
    assert pickle.loads(pickle.dumps(o)).security == o.security  # executors get it in the reader


def test_config_is_a_frozen_value() -> None:
    s = SecurityConfig()
    with pytest.raises(AttributeError):
        s.protocol = "SSL"  # type: ignore[misc]
