"""SASL/SCRAM (RFC 5802, RFC 7677): credentials as Kafka stores them, and both ends of the exchange.

A credential is derived from a password once and stored without it::

    SaltedPassword = Hi(password, salt, iterations)       (PBKDF2-HMAC, the hash's length)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

and written as Kafka writes it (``ScramCredentialUtils``), one string per mechanism::

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

The exchange, over SaslAuthenticate (or bare frames after SaslHandshake v0)::

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<both nonces>,p=<base64 ClientKey XOR HMAC(StoredKey, AuthMessage)>
    server-final  v=<base64 HMAC(ServerKey, AuthMessage)>

where AuthMessage is client-first (without its ``n,,`` header), server-first and
client-final (without its proof), joined by commas.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Callable, Dict, NamedTuple, Optional, Tuple

from ..errors import ScramError

__all__ = ["MAX_ITERATIONS", "MECHANISMS", "MECHANISM_TYPES", "ScramClient", "ScramCredential", "ScramServer",
           "failure_message", "format_credential", "make_credential", "parse_credential", "salted_password"]

#: Mechanism name -> (hashlib name, Kafka's ScramMechanism type byte, minimum iterations).
MECHANISMS: Dict[str, Tuple[str, int, int]] = {
    "SCRAM-SHA-256": ("sha256", 1, 4096),
    "SCRAM-SHA-512": ("sha512", 2, 4096),
}
#: Kafka's ScramMechanism type byte -> name (0 is UNKNOWN).
MECHANISM_TYPES: Dict[int, str] = {spec[1]: name for name, spec in MECHANISMS.items()}
#: The most iterations AlterUserScramCredentials accepts (Kafka's limit for the API).
MAX_ITERATIONS = 16384

_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII but ','
_EXTENSION = re.compile(r"[A-Za-z0-9]+=[\x21-\x2b\x2d-\x7e]*")  # Kafka's extensions: key=value
_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)+")


class ScramCredential(NamedTuple):
    """What a broker keeps of a password for one mechanism: never the password itself."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


#: A user's credential for the exchange's mechanism, or None.
LookupFn = Callable[[str], Optional[ScramCredential]]


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ScramError("unknown SCRAM mechanism %r (known: %s)" % (mechanism, ", ".join(MECHANISMS))) from None


# hashlib and hmac load with the first exchange (their OpenSSL binding is a millisecond
# of a broker's start, and most brokers never see SCRAM).

def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    import hmac

    return hmac.new(key, data, name).digest()


def _digest(name: str, data: bytes) -> bytes:
    import hashlib

    return hashlib.new(name, data).digest()


def _equal(a: bytes, b: bytes) -> bool:
    """Compared in constant time."""
    import hmac

    return hmac.compare_digest(a, b)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC and output length."""
    import hashlib

    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def make_credential(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential from a salted password (as AlterUserScramCredentials carries it)."""
    name = _hash(mechanism)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(salt, _digest(name, client_key), _hmac(name, salted, b"Server Key"),
                           iterations)


def format_credential(credential: ScramCredential) -> str:
    """Kafka's string form of a credential (what ``/config/users/<user>`` holds per mechanism)."""
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")
    return "salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (
        b64(credential.salt), b64(credential.stored_key), b64(credential.server_key), credential.iterations)


def parse_credential(text: str) -> ScramCredential:
    """Read Kafka's string form; ScramError names what is missing or bad."""
    fields: Dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ScramError("SCRAM credential field %r is not key=value" % item)
        fields[key] = value
    try:
        return ScramCredential(base64.b64decode(fields["salt"], validate=True),
                               base64.b64decode(fields["stored_key"], validate=True),
                               base64.b64decode(fields["server_key"], validate=True),
                               int(fields["iterations"]))
    except KeyError as exc:
        raise ScramError("SCRAM credential has no %s" % exc.args[0]) from None
    except (ValueError, binascii.Error) as exc:
        raise ScramError("SCRAM credential %r is malformed: %s" % (text, exc)) from None


def failure_message(mechanism: str) -> str:
    """Kafka's answer to a failed SCRAM authentication, whatever failed (no user enumeration)."""
    return ("Authentication failed during authentication due to invalid credentials with SASL mechanism %s"
            % mechanism)


def _attributes(message: str, names: str) -> Dict[str, str]:
    """``a=1,b=2`` -> {a: 1, b: 2}, requiring the attributes ``names`` in that order first."""
    parts = message.split(",")
    if len(parts) < len(names):
        raise ScramError("SCRAM message %r has too few attributes" % message)
    values: Dict[str, str] = {}
    for name, part in zip(names, parts):
        if not part.startswith(name + "="):
            raise ScramError("SCRAM message %r: expected attribute %r" % (message, name))
        values[name] = part[2:]
    return values


def _unescape(saslname: str) -> str:
    if not _SASLNAME.fullmatch(saslname):
        raise ScramError("SCRAM user name %r is not a valid saslname" % saslname)
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise ScramError("SCRAM %s is not base64" % what) from None


class ScramServer:
    """The broker's side of one exchange: client-first -> server-first, client-final -> server-final.

    ``lookup(user)`` gives the user's credential or None; an unknown user gets a made-up salt
    (the same for the same name, from ``secret``) and fails at the proof exactly like a wrong
    password, so answers never tell which users exist. Not thread-safe: one per connection.
    """

    def __init__(self, mechanism: str, lookup: LookupFn, secret: bytes, nonce: Optional[str] = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = nonce  # fixed only by tests (RFC 7677's example): fresh per exchange otherwise
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._secret = secret
        self._credential: Optional[ScramCredential] = None
        self._unknown = False
        self._state = "client-first"
        self._nonce = ""
        self._gs2_header = ""
        self._messages = ""
        self.user: Optional[str] = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def step(self, token: bytes) -> Tuple[bytes, bool]:
        """The answer to the client's next message and whether it authenticated the client.

        Raises ScramError on a malformed message or a failed proof (then the exchange is over).
        """
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == "client-first":
            return self._client_first(text), False
        if self._state == "client-final":
            return self._client_final(text), True
        raise ScramError("SCRAM exchange already %s" % self._state)

    def _client_first(self, text: str) -> bytes:
        self._state = "failed"
        match = re.fullmatch(r"([ny]),(?:a=([^,]*))?,(n=[^,]*,r=[^,]*(?:,.*)?)", text, re.DOTALL)
        if match is None:
            raise ScramError("SCRAM client-first message %r is malformed (expected n,,n=<user>,r=<nonce>)"
                             % text[:100])
        authzid, bare = match.group(2), match.group(3)
        fields = _attributes(bare, "nr")
        user = _unescape(fields["n"])
        if not _NONCE.fullmatch(fields["r"]):
            raise ScramError("SCRAM client nonce is empty or not printable")
        if authzid is not None and _unescape(authzid) != user:
            raise ScramError("SCRAM authorization id %r differs from user %r" % (authzid, user))
        for extension in bare.split(",")[2:]:
            if not _EXTENSION.fullmatch(extension):
                raise ScramError("SCRAM client-first extension %r is not key=value" % extension[:100])
            if extension == "tokenauth=true":
                raise ScramError("SCRAM delegation tokens are not supported")
        self.user = user
        self._gs2_header = text[:len(text) - len(bare)]
        credential = self._lookup(user)
        self._unknown = credential is None
        if credential is None:  # answer as for a real user; the proof cannot match
            salt = _hmac("sha256", self._secret, user.encode("utf-8"))  # 32 bytes, as pylogq's admin salts
            credential = ScramCredential(salt, os.urandom(64), os.urandom(64), MECHANISMS[self.mechanism][2])
        self._credential = credential
        server_nonce = self._server_nonce or base64.b64encode(os.urandom(24)).decode("ascii")
        self._nonce = fields["r"] + server_nonce
        server_first = "r=%s,s=%s,i=%d" % (self._nonce, base64.b64encode(credential.salt).decode("ascii"),
                                           credential.iterations)
        self._messages = bare + "," + server_first
        self._state = "client-final"
        return server_first.encode("ascii")

    def _client_final(self, text: str) -> bytes:
        self._state = "failed"
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message has no proof")
        fields = _attributes(without_proof, "cr")
        if _b64decode(fields["c"], "channel binding") != self._gs2_header.encode("utf-8"):
            raise ScramError("SCRAM channel binding does not match the client-first header")
        if not _equal(fields["r"].encode("utf-8"), self._nonce.encode("ascii")):
            raise ScramError("SCRAM nonce does not match this exchange's")
        proof = _b64decode(proof_text, "proof")
        auth_message = (self._messages + "," + without_proof).encode("utf-8")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("SCRAM proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not _equal(_digest(self._hash, client_key), credential.stored_key):
            raise ScramError("no %s credential for this user" % self.mechanism if self._unknown
                             else "SCRAM proof does not match")
        self._state = "complete"
        verifier = _hmac(self._hash, credential.server_key, auth_message)
        return ("v=" + base64.b64encode(verifier).decode("ascii")).encode("ascii")


class ScramClient:
    """A client's side of one exchange (the broker's is :class:`ScramServer`). Not thread-safe."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: Optional[str] = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._password = password
        self._nonce = nonce if nonce is not None else base64.b64encode(os.urandom(24)).decode("ascii")
        self._bare = "n=%s,r=%s" % (_escape(user), self._nonce)
        self._auth_message = b""
        self._server_key = b""

    def first_message(self) -> bytes:
        return ("n,," + self._bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        """The client-final message answering ``server_first`` (ScramError if it is not acceptable)."""
        text = server_first.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramError("broker refused SCRAM: %s" % text[2:])
        fields = _attributes(text, "rsi")
        if not fields["r"].startswith(self._nonce) or len(fields["r"]) == len(self._nonce):
            raise ScramError("broker's SCRAM nonce does not extend this client's")
        try:
            iterations = int(fields["i"])
        except ValueError:
            raise ScramError("broker's SCRAM iterations %r are not a number" % fields["i"]) from None
        if iterations < MECHANISMS[self.mechanism][2]:
            raise ScramError("broker asked for %d SCRAM iterations, fewer than %d" % (iterations,
                                                                                  MECHANISMS[self.mechanism][2]))
        salted = salted_password(self.mechanism, self._password, _b64decode(fields["s"], "salt"), iterations)
        without_proof = "c=biws,r=" + fields["r"]
        self._auth_message = ("%s,%s,%s" % (self._bare, text, without_proof)).encode("utf-8")
        client_key = _hmac(self._hash, salted, b"Client Key")
        signature = _hmac(self._hash, _digest(self._hash, client_key), self._auth_message)
        self._server_key = _hmac(self._hash, salted, b"Server Key")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return (without_proof + ",p=" + base64.b64encode(proof).decode("ascii")).encode("ascii")

    def verify(self, server_final: bytes) -> None:
        """Check the broker's signature (it proves the broker knows the credential)."""
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramError("broker refused SCRAM: %s" % text[2:])
        if not text.startswith("v="):
            raise ScramError("broker's SCRAM final message %r is malformed" % text[:100])
        expected = _hmac(self._hash, self._server_key, self._auth_message)
        if not _equal(_b64decode(text[2:], "server signature"), expected):
            raise ScramError("broker's SCRAM signature does not match: it does not know this credential")

