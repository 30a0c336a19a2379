"""SSL contexts from Kafka's ``ssl.*`` settings: a listener's server side, a broker's client side.

Kafka's DefaultSslEngineFactory, on Python's :mod:`ssl` (OpenSSL). The key store (this
side's certificate chain and private key) and the trust store (the certificates it
trusts) are each given one of Kafka's ways, with Kafka's rules for which keys go together:

- ``ssl.keystore.type=PKCS12``: ``ssl.keystore.location`` and ``ssl.keystore.password``
  (``ssl.key.password`` when the key has a password of its own); read with the
  ``cryptography`` library, as Python's ssl module reads no PKCS#12.
- ``ssl.keystore.type=PEM``: a file at ``ssl.keystore.location`` holding the private key
  (encrypted, ``ssl.key.password``) and the certificate chain; or the PEM text itself in
  ``ssl.keystore.key`` (``ssl.key.password`` if it is encrypted) and
  ``ssl.keystore.certificate.chain`` (the PEM text may be one line, as a properties file's
  continuation lines make it: Kafka's PEM reader takes it so).
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or the certificates in
  ``ssl.truststore.certificates``; ``PKCS12`` with a location (and a password, which
  Kafka does not require of a trust store). No trust store: the system's CAs, as the
  JVM's ``cacerts``.
- ``JKS`` (Kafka's default type) is Java's own format: refused with a ConfigError saying
  how to convert it.

Every failure (a missing file, a wrong password, a key that does not match its
certificate, text that is no PEM) is a ConfigError naming the key, raised when the
listener or the inter-broker client is built, before anything is served. The key and
certificates reach OpenSSL through an anonymous in-memory file (``memfd_create``; a
private temporary directory where there is none), the key encrypted with a one-time
password: no plain key touches the disk.
"""

from __future__ import annotations

import os
import re
import ssl
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..errors import ConfigError

__all__ = ["KeyStore", "SslConfigSource", "client_context", "load_key_store", "load_trust_store", "server_context"]

#: Reads a setting as a listener sees it: dotted key -> its value, parsed (the lists as lists),
#: and the key to name in an error (the prefixed one when that is what was given).
SslConfigSource = Callable[[str], Tuple[Any, str]]

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_JKS_MESSAGE = ("%s JKS is not supported: pylogq reads PKCS12 and PEM key stores (convert one with keytool "
                "-importkeystore -srcstoretype JKS -deststoretype PKCS12, and set %s=PKCS12)")


class KeyStore(NamedTuple):
    """A certificate chain and its private key, as PEM (the key encrypted with ``password``)."""

    chain: bytes
    key: bytes
    password: bytes


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError("Invalid value %r for configuration %s: %s" % (path, key, exc.strerror or exc)) from None


def _text(value: Any) -> Optional[str]:
    return None if value is None or value == "" else str(value)


_PEM_BLOCK = re.compile(r"(-----BEGIN [A-Z0-9 ]+-----)\s*([A-Za-z0-9+/=\s]*?)\s*(-----END [A-Z0-9 ]+-----)")


def _pem_text(value: str) -> bytes:
    """PEM text given in a setting, with each block's base64 laid out in lines again.

    A properties file's continuation lines (``\\`` at a line's end) join the lines of an
    inline certificate or key into one; Kafka's PEM reader ignores the whitespace inside a
    block, and so does this. A block with headers (``Proc-Type:``) is left as it is.
    """
    def rewrapped(m: "re.Match[str]") -> str:
        body = "".join(m.group(2).split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        return "\n".join([m.group(1), *lines, m.group(3)]) + "\n"

    return _PEM_BLOCK.sub(rewrapped, value).encode("utf-8")


def _reencrypted(private_key: Any, chain: List[Any]) -> KeyStore:
    """The key and chain as PEM, the key under a one-time password."""
    import secrets  # with the first TLS listener: it loads hashlib, which a plain broker does without

    from cryptography.hazmat.primitives import serialization

    password = secrets.token_hex(16).encode()
    key = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.BestAvailableEncryption(password))
    pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    return KeyStore(pem, key, password)


def _pem_key(data: bytes, password: Optional[str], key_name: str, password_name: str) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(data, password.encode("utf-8") if password else None)
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        raise ConfigError("%s: %s (%s)" % (password_name, exc, key_name)) from None
    except ValueError as exc:
        if password:
            raise ConfigError("%s: cannot decrypt the private key of %s with it, or it is not a PEM private key: "
                              "%s" % (password_name, key_name, exc)) from None
        raise ConfigError("%s: not a PEM private key: %s" % (key_name, exc)) from None


def _pem_certificates(data: bytes, key: str) -> List[Any]:
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise ConfigError("%s: no PEM certificate could be read: %s" % (key, exc)) from None
    return list(certs)


def _pkcs12(data: bytes, password: Optional[str], key: str, password_key: str) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    tried = [password.encode("utf-8")] if password is not None else [None, b""]
    for secret in tried:
        try:
            return pkcs12.load_pkcs12(data, secret)
        except ValueError:
            continue
    raise ConfigError("%s: wrong password for the PKCS12 store %s, or it is not a PKCS12 file" % (password_key, key))


def load_key_store(get: SslConfigSource) -> Optional[KeyStore]:
    """This side's certificate chain and key by Kafka's rules (module docstring), or None when
    no key store is configured; ConfigError naming the key that is wrong."""
    kind, kind_key = get("ssl.keystore.type")
    location, location_key = get("ssl.keystore.location")
    password, password_key = get("ssl.keystore.password")
    key_password, key_password_key = get("ssl.key.password")
    chain_text, chain_key = get("ssl.keystore.certificate.chain")
    key_text, key_key = get("ssl.keystore.key")
    kind = str(kind or "JKS").upper()
    location, password, key_password = _text(location), _text(password), _text(key_password)
    chain_text, key_text = _text(chain_text), _text(key_text)
    if key_text is not None:
        if kind != "PEM":
            raise ConfigError("SSL private key can be specified only for PEM, but key store type is %s (%s, %s)."
                              % (kind, key_key, kind_key))
        if chain_text is None:
            raise ConfigError("SSL private key is specified, but certificate chain is not specified (%s)." % chain_key)
        if location is not None:
            raise ConfigError("Both SSL key store location and separate private key are specified (%s, %s)."
                              % (location_key, key_key))
        if password is not None:
            raise ConfigError("SSL key store password cannot be specified with PEM format, only key password may "
                              "be specified (%s)." % password_key)
        private_key = _pem_key(_pem_text(key_text), key_password, key_key, key_password_key)
        return _checked(private_key, _pem_certificates(_pem_text(chain_text), chain_key), chain_key)
    if chain_text is not None:
        raise ConfigError("SSL certificate chain is specified, but private key is not specified (%s)." % key_key)
    if location is None:
        if password is not None:
            raise ConfigError("SSL key store is not specified, but key store password is specified (%s)."
                              % password_key)
        return None
    if kind == "JKS":
        raise ConfigError(_JKS_MESSAGE % (kind_key, kind_key))
    if kind == "PEM":
        if password is not None:
            raise ConfigError("SSL key store password cannot be specified with PEM format, only key password may "
                              "be specified (%s)." % password_key)
        if key_password is None:
            raise ConfigError("SSL PEM key store is specified, but key password is not specified (%s)."
                              % key_password_key)
        data = _read(location, location_key)
        private_key = _pem_key(data, key_password, location_key, key_password_key)
        return _checked(private_key, _pem_certificates(data, location_key), location_key)
    if kind != "PKCS12":
        raise ConfigError("Invalid value %r for configuration %s: PKCS12 or PEM" % (kind, kind_key))
    if password is None:
        raise ConfigError("SSL key store is specified, but key store password is not specified (%s)." % password_key)
    store = _pkcs12(_read(location, location_key), password, location_key, password_key)
    if store.key is None or store.cert is None:
        raise ConfigError("%s: the PKCS12 store %s holds no private key with its certificate"
                          % (location_key, location))
    return _checked(store.key, [store.cert.certificate] + [c.certificate for c in store.additional_certs],
                    location_key)


def _checked(private_key: Any, chain: List[Any], key: str) -> KeyStore:
    from cryptography.hazmat.primitives import serialization

    if not chain:
        raise ConfigError("%s: no certificate" % key)
    public = chain[0].public_key().public_bytes(serialization.Encoding.DER,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    if public != private_key.public_key().public_bytes(serialization.Encoding.DER,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ConfigError("%s: the private key does not match the first certificate of the chain" % key)
    return _reencrypted(private_key, chain)


def load_trust_store(get: SslConfigSource) -> Optional[str]:
    """The certificates this side trusts, as PEM text, by Kafka's rules; None when no trust
    store is configured (the system's CAs are trusted then)."""
    kind, kind_key = get("ssl.truststore.type")
    location, location_key = get("ssl.truststore.location")
    password, password_key = get("ssl.truststore.password")
    certs_text, certs_key = get("ssl.truststore.certificates")
    kind = str(kind or "JKS").upper()
    location, password, certs_text = _text(location), _text(password), _text(certs_text)
    from cryptography.hazmat.primitives import serialization

    if certs_text is not None:
        if kind != "PEM":
            raise ConfigError("SSL trust store certs can be specified only for PEM, but trust store type is %s "
                              "(%s, %s)." % (kind, certs_key, kind_key))
        if location is not None:
            raise ConfigError("Both SSL trust store location and separate trust certificates are specified "
                              "(%s, %s)." % (location_key, certs_key))
        if password is not None:
            raise ConfigError("SSL trust store password cannot be specified for PEM format (%s)." % password_key)
        certs = _pem_certificates(_pem_text(certs_text), certs_key)
    elif location is None:
        if password is not None:
            raise ConfigError("SSL trust store is not specified, but trust store password is specified (%s)."
                              % password_key)
        return None
    elif kind == "JKS":
        raise ConfigError(_JKS_MESSAGE % (kind_key, kind_key))
    elif kind == "PEM":
        if password is not None:
            raise ConfigError("SSL trust store password cannot be specified for PEM format (%s)." % password_key)
        certs = _pem_certificates(_read(location, location_key), location_key)
    elif kind == "PKCS12":
        store = _pkcs12(_read(location, location_key), password, location_key, password_key)
        certs = ([store.cert.certificate] if store.cert is not None else []) + [
            c.certificate for c in store.additional_certs]
        if not certs:
            raise ConfigError("%s: the PKCS12 store %s holds no certificate" % (location_key, location))
    else:
        raise ConfigError("Invalid value %r for configuration %s: PKCS12 or PEM" % (kind, kind_key))
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def _load_chain(context: ssl.SSLContext, store: KeyStore, key: str) -> None:
    """Hand the chain and key to OpenSSL, which reads them only from a path."""
    data = store.key + store.chain
    memfd = getattr(os, "memfd_create", None)
    try:
        if memfd is not None:
            fd = memfd("pylogq-ssl")
            try:
                os.write(fd, data)
                context.load_cert_chain("/proc/self/fd/%d" % fd, password=store.password)
            finally:
                os.close(fd)
            return
        import tempfile

        with tempfile.TemporaryDirectory(prefix="pylogq-ssl-") as directory:  # mode 0700
            path = os.path.join(directory, "key.pem")
            with open(path, "wb") as f:
                f.write(data)
            context.load_cert_chain(path, password=store.password)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError("%s: OpenSSL refused the key store: %s" % (key, exc)) from None


def _protocols(context: ssl.SSLContext, get: SslConfigSource) -> None:
    enabled, key = get("ssl.enabled.protocols")
    names = list(enabled or ())
    versions = []
    for name in names:
        version = _PROTOCOLS.get(name)
        if version is None:
            raise ConfigError("Invalid value %r for configuration %s: %r is not supported (TLSv1.2, TLSv1.3)"
                              % (",".join(names), key, name))
        versions.append(version)
    if not versions:
        raise ConfigError("Invalid value '' for configuration %s: no protocol enabled" % key)
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def openssl_cipher_name(name: str) -> str:
    """OpenSSL's name of a TLS 1.2 cipher suite given by its IANA name, as Java (and so
    Kafka's ``ssl.cipher.suites``) names them: ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` is
    ``ECDHE-RSA-AES128-GCM-SHA256``. A name that is not in that form is returned as it is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, _, rest = name[4:].partition("_WITH_")
    parts = rest.split("_")
    out = [] if exchange == "RSA" else [exchange.replace("_", "-")]
    if parts[:1] == ["AES"] and len(parts) >= 3:
        out.append("AES" + parts[1])
        parts = parts[2:]
        if parts[:1] == ["CBC"]:
            parts = parts[1:]
    elif parts[:2] == ["CHACHA20", "POLY1305"]:
        out.append("CHACHA20-POLY1305")
        parts = parts[2:]
        if parts == ["SHA256"]:
            parts = []
    out.extend(parts)
    return "-".join(out)


_KNOWN_CIPHERS: Dict[str, Mapping[str, Any]] = {}


def _known_ciphers() -> Dict[str, Mapping[str, Any]]:
    """Every suite this OpenSSL has, by its OpenSSL name: a new context lists only those enabled
    by default, and Kafka takes any suite the JVM supports (``TLS_RSA_WITH_AES_128_GCM_SHA256``,
    ``TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA``), enabled by default or not."""
    if not _KNOWN_CIPHERS:
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        probe.set_ciphers("ALL")
        _KNOWN_CIPHERS.update((c["name"], c) for c in probe.get_ciphers())
    return _KNOWN_CIPHERS


def _ciphers(context: ssl.SSLContext, get: SslConfigSource) -> None:
    suites, key = get("ssl.cipher.suites")
    names = [s for s in suites or () if s]
    if not names:
        return
    known = _known_ciphers()
    tls12: List[str] = []
    tls13 = False
    for name in names:
        found = known.get(name) or known.get(openssl_cipher_name(name))
        if found is None:
            raise ConfigError("Invalid value %r for configuration %s: cipher suite %s is not known to OpenSSL %s"
                              % (",".join(names), key, name, ssl.OPENSSL_VERSION))
        if found["protocol"] == "TLSv1.3":
            tls13 = True
        else:
            tls12.append(found["name"])
    if tls12:
        context.set_ciphers(":".join(tls12))
    elif context.minimum_version < ssl.TLSVersion.TLSv1_3:
        context.minimum_version = ssl.TLSVersion.TLSv1_3
    # Python's ssl cannot narrow TLS 1.3's suites; naming only TLS 1.2 ones turns TLS 1.3 off,
    # as a Java engine with no TLS 1.3 suite enabled cannot negotiate it.
    if not tls13 and context.maximum_version > ssl.TLSVersion.TLSv1_2:
        if context.minimum_version > ssl.TLSVersion.TLSv1_2:
            raise ConfigError("Invalid value %r for configuration %s: no cipher suite of an enabled protocol"
                              % (",".join(names), key))
        context.maximum_version = ssl.TLSVersion.TLSv1_2


def _trust(context: ssl.SSLContext, get: SslConfigSource, purpose: ssl.Purpose) -> None:
    trusted = load_trust_store(get)
    if trusted is None:
        context.load_default_certs(purpose)
        return
    try:
        context.load_verify_locations(cadata=trusted)
    except ssl.SSLError as exc:
        raise ConfigError("%s: OpenSSL refused the trust store: %s" % (get("ssl.truststore.location")[1], exc)) \
            from None


def server_context(get: SslConfigSource, listener: str) -> ssl.SSLContext:
    """The server side of SSL listener ``listener`` (ConfigError when misconfigured)."""
    store = load_key_store(get)
    if store is None:
        raise ConfigError("listener %s serves TLS: it needs a key store (ssl.keystore.location, or "
                          "ssl.keystore.key and ssl.keystore.certificate.chain, with ssl.keystore.type PKCS12 or PEM)"
                          % listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    _protocols(context, get)
    _ciphers(context, get)
    _load_chain(context, store, get("ssl.keystore.location")[1])
    auth, _ = get("ssl.client.auth")  # validated: required, requested or none
    if auth != "none":
        _trust(context, get, ssl.Purpose.CLIENT_AUTH)
        context.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    else:
        load_trust_store(get)  # read (and so checked) at start, as Kafka reads it, though unused
    return context


def client_context(get: SslConfigSource) -> ssl.SSLContext:
    """The client side (a broker reaching another over an SSL inter-broker listener): the
    trust store verifies the other broker, whose host name is checked when
    ``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default); the key
    store, when there is one, is the certificate this side shows."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    _protocols(context, get)
    _ciphers(context, get)
    algorithm, key = get("ssl.endpoint.identification.algorithm")
    algorithm = str(algorithm or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError("Invalid value %r for configuration %s: https or empty" % (algorithm, key))
    context.check_hostname = algorithm == "https"
    _trust(context, get, ssl.Purpose.SERVER_AUTH)
    store = load_key_store(get)
    if store is not None:
        _load_chain(context, store, get("ssl.keystore.location")[1])
    return context
