"""Certificates for the TLS tests, made with ``cryptography``: a CA, a broker and clients.

:func:`make_certificates` writes, into a directory:

- ``ca.pem``: the CA every good certificate is signed by; ``truststore.p12`` holds it
  (password ``trust-pw``);
- ``broker.pem`` + ``broker-key.pem`` (the key encrypted with ``broker-key-pw``) for
  ``localhost`` and ``127.0.0.1``; ``broker.p12`` (password ``broker-pw``); ``broker-store.pem``
  (Kafka's PEM key store file: the encrypted key, then the chain);
- ``client.pem`` + ``client-key.pem`` (no password) for ``CN=alice,OU=Clients,O=pylogq,C=US``;
  ``client-key-enc.pem`` (password ``client-pw``); ``client.p12`` (password ``client-pw``);
- ``expired.pem`` + ``expired-key.pem``: signed by the CA, expired yesterday;
- ``rogue.pem`` + ``rogue-key.pem``: signed by ``rogue-ca.pem``, a CA the broker does not trust;
- ``other-ca.pem``: a CA that signed nothing here (a client trusting only it does not trust the broker).

EC P-256 keys: quick to make, and every client here speaks them.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

BROKER_KEY_PASSWORD = "broker-key-pw"
BROKER_P12_PASSWORD = "broker-pw"
TRUST_P12_PASSWORD = "trust-pw"
CLIENT_PASSWORD = "client-pw"
CLIENT_DN = "CN=alice,OU=Clients,O=pylogq,C=US"


class Certificates(NamedTuple):
    """Where :func:`make_certificates` wrote each file."""

    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def text(self, name: str) -> str:
        return (self.dir / name).read_text()

    def broker_pem_settings(self) -> Dict[str, Any]:
        """A broker's SSL settings with PEM files (the key store inline, the trust store a file)."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": self.text("broker.pem"),
                "ssl.keystore.key": self.text("broker-key.pem"), "ssl.key.password": BROKER_KEY_PASSWORD,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.path("ca.pem")}

    def broker_p12_settings(self) -> Dict[str, Any]:
        """A broker's SSL settings with PKCS12 stores."""
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.path("broker.p12"),
                "ssl.keystore.password": BROKER_P12_PASSWORD, "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": self.path("truststore.p12"),
                "ssl.truststore.password": TRUST_P12_PASSWORD}


def _name(common_name: str, unit: Optional[str] = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pylogq")]
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _certificate(subject: x509.Name, key: Any, issuer: x509.Name, issuer_key: Any, ca: bool = False,
                 hosts: Sequence[str] = (), days: int = 30, expired: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)) if expired else (
        now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days))
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                        critical=False)
    if hosts:
        names: List[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: Any, password: Optional[str] = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)

    def new_key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    ca_key, rogue_ca_key, other_ca_key = new_key(), new_key(), new_key()
    ca = _certificate(_name("pylogq test CA"), ca_key, _name("pylogq test CA"), ca_key, ca=True)
    rogue_ca = _certificate(_name("rogue CA"), rogue_ca_key, _name("rogue CA"), rogue_ca_key, ca=True)
    other_ca = _certificate(_name("other CA"), other_ca_key, _name("other CA"), other_ca_key, ca=True)
    files: Dict[str, bytes] = {"ca.pem": _pem(ca), "rogue-ca.pem": _pem(rogue_ca), "other-ca.pem": _pem(other_ca)}

    broker_key = new_key()
    broker = _certificate(_name("localhost", "Brokers"), broker_key, ca.subject, ca_key,
                          hosts=["localhost", "127.0.0.1"])
    files["broker.pem"] = _pem(broker) + _pem(ca)
    files["broker-key.pem"] = _key_pem(broker_key, BROKER_KEY_PASSWORD)
    files["broker-store.pem"] = files["broker-key.pem"] + files["broker.pem"]
    files["broker.p12"] = pkcs12.serialize_key_and_certificates(
        b"broker", broker_key, broker, [ca], serialization.BestAvailableEncryption(BROKER_P12_PASSWORD.encode()))
    files["truststore.p12"] = pkcs12.serialize_key_and_certificates(
        b"ca", None, None, [ca], serialization.BestAvailableEncryption(TRUST_P12_PASSWORD.encode()))

    client_key = new_key()
    client = _certificate(_name("alice", "Clients"), client_key, ca.subject, ca_key)
    files["client.pem"] = _pem(client)
    files["client-key.pem"] = _key_pem(client_key)
    files["client-key-enc.pem"] = _key_pem(client_key, CLIENT_PASSWORD)
    files["client.p12"] = pkcs12.serialize_key_and_certificates(
        b"client", client_key, client, [ca], serialization.BestAvailableEncryption(CLIENT_PASSWORD.encode()))

    expired_key = new_key()
    files["expired.pem"] = _pem(_certificate(_name("expired", "Clients"), expired_key, ca.subject, ca_key,
                                             expired=True))
    files["expired-key.pem"] = _key_pem(expired_key)
    rogue_key = new_key()
    files["rogue.pem"] = _pem(_certificate(_name("mallory", "Clients"), rogue_key, rogue_ca.subject, rogue_ca_key))
    files["rogue-key.pem"] = _key_pem(rogue_key)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return Certificates(directory)
