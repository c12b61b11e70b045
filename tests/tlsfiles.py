"""Certificates for the security tests, made at test time (nothing secret is checked in).

``make_pki(directory)`` writes a test CA, a broker certificate for 127.0.0.1/localhost, a
client certificate (mutual TLS) and a second CA nobody trusts, in the forms users have: PEM
files, PKCS12 stores, and (when ``keytool`` is on PATH) a JKS truststore. Made with the
``cryptography`` package, which the connector itself needs for PKCS12.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

STORE_PASSWORD = "store-pw-Xq81"
KEY_PASSWORD = "key-pw-Zr52"
CLIENT_CN = "groupkafka-client"


@dataclass(frozen=True)
class Pki:
    directory: str
    ca_pem: str  # the CA certificate (PEM file)
    # broker key (not encrypted: Java 17 cannot read PBES2-encrypted PKCS8, "PBES2 SecretKeyFactory
    # not available") + chain, for ssl.keystore.type=PEM
    broker_keystore_pem: str
    client_p12: str  # client key + certificate, PKCS12, password STORE_PASSWORD
    client_cert_pem: str
    client_key_pem: str  # encrypted with KEY_PASSWORD
    truststore_p12: str  # the CA as a PKCS12 truststore, password STORE_PASSWORD
    untrusted_ca_pem: str  # a CA that signed nothing the broker uses
    truststore_jks: str | None  # the CA in a JKS truststore (None without keytool)

    @property
    def client_principal(self) -> str:
        return f"User:CN={CLIENT_CN}"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key, issuer_name: x509.Name, issuer_key, *, ca: bool = False,
          sans: list | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None) -> bytes:
    enc = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: str) -> Pki:
    os.makedirs(directory, exist_ok=True)
    curve = ec.SECP256R1()
    ca_key = ec.generate_private_key(curve)
    ca = _cert("groupkafka-test-ca", ca_key, _name("groupkafka-test-ca"), ca_key, ca=True)
    other_key = ec.generate_private_key(curve)
    other = _cert("untrusted-ca", other_key, _name("untrusted-ca"), other_key, ca=True)
    broker_key = ec.generate_private_key(curve)
    broker = _cert("localhost", broker_key, ca.subject, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = ec.generate_private_key(curve)
    client = _cert(CLIENT_CN, client_key, ca.subject, ca_key)
    d = directory
    p12_enc = serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
    jks = None
    truststore_p12 = os.path.join(d, "truststore.p12")
    keytool = shutil.which("keytool")
    ca_pem = _write(os.path.join(d, "ca.pem"), _pem(ca))
    if keytool:  # a truststore as Java users make it (keytool marks the entry as trusted)
        for store, kind in ((truststore_p12, "PKCS12"), (os.path.join(d, "truststore.jks"), "JKS")):
            subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", ca_pem,
                            "-keystore", store, "-storetype", kind, "-storepass", STORE_PASSWORD],
                           check=True, capture_output=True, timeout=60)
        jks = os.path.join(d, "truststore.jks")
    else:
        _write(truststore_p12, pkcs12.serialize_key_and_certificates(None, None, None, [ca], p12_enc))
    return Pki(
        directory=d,
        ca_pem=ca_pem,
        broker_keystore_pem=_write(os.path.join(d, "broker.pem"),
                                   _key_pem(broker_key, None) + _pem(broker) + _pem(ca)),
        client_p12=_write(os.path.join(d, "client.p12"), pkcs12.serialize_key_and_certificates(
            b"client", client_key, client, [ca], p12_enc)),
        client_cert_pem=_write(os.path.join(d, "client.pem"), _pem(client) + _pem(ca)),
        client_key_pem=_write(os.path.join(d, "client.key"), _key_pem(client_key, KEY_PASSWORD)),
        truststore_p12=truststore_p12,
        untrusted_ca_pem=_write(os.path.join(d, "untrusted-ca.pem"), _pem(other)),
        truststore_jks=jks,
    )
