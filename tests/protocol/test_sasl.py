"""pylogq/protocol/sasl.py: the SASL login both socket clients use, against a broker's side made of
pylogq's own SCRAM server (its answers as the handlers give them)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pytest

from pylogq.errors import SaslAuthenticationFailedError, ScramError, UnsupportedSaslMechanismError
from pylogq.protocol.constants import ApiKey
from pylogq.protocol.sasl import sasl_login
from pylogq.protocol.scram import ScramCredential, ScramServer, failure_message, make_credential, salted_password

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

PEER = "broker 127.0.0.1:9092"


class Broker:
    """A broker's SaslHandshake and SaslAuthenticate answers for one connection."""

    def __init__(self, offered: Tuple[str, ...], password: str = "alice-secret") -> None:
        self.offered = offered
        self.password = password
        self.tokens: List[bytes] = []
        self.scram: Optional[ScramServer] = None
        self.forge_final = False

    def credential(self, mechanism: str) -> ScramCredential:
        salt = os.urandom(16)
        return make_credential(mechanism, salted_password(mechanism, self.password, salt, 4096), salt, 4096)

    def __call__(self, api_key: int, body: Mapping[str, Any]) -> Dict[str, Any]:
        if api_key == ApiKey.SASL_HANDSHAKE:
            mechanism = body["mechanism"]
            if mechanism not in self.offered:
                return {"error_code": UnsupportedSaslMechanismError.code, "mechanisms": list(self.offered)}
            if mechanism.startswith("SCRAM"):
                credential = self.credential(mechanism)
                self.scram = ScramServer(mechanism, lambda user: credential if user == "alice" else None, b"s")
            return {"error_code": 0, "mechanisms": list(self.offered)}
        assert api_key == ApiKey.SASL_AUTHENTICATE
        token = bytes(body["auth_bytes"])
        self.tokens.append(token)
        if self.scram is None:
            return {"error_code": 0, "error_message": None, "auth_bytes": b""}
        try:
            answer, done = self.scram.step(token)
        except ScramError:
            return {"error_code": SaslAuthenticationFailedError.code, "error_message": failure_message(
                self.scram.mechanism), "auth_bytes": b""}
        if done and self.forge_final:
            answer = b"v=" + b"A" * 44
        return {"error_code": 0, "error_message": None, "auth_bytes": answer}


def test_plain_sends_one_token() -> None:
    broker = Broker(("PLAIN",))
    sasl_login(broker, "PLAIN", "alice", "alice-secret", PEER)
    assert broker.tokens == [b"\0alice\0alice-secret"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchanges_two_tokens_and_checks_the_brokers_proof(mechanism: str) -> None:
    broker = Broker(("PLAIN", mechanism))
    sasl_login(broker, mechanism, "alice", "alice-secret", PEER)
    assert len(broker.tokens) == 2 and broker.scram is not None and broker.scram.complete
    forged = Broker((mechanism,))
    forged.forge_final = True
    with pytest.raises(SaslAuthenticationFailedError, match="SASL/%s authentication of 'alice' with %s failed: "
                       % (mechanism, PEER)):
        sasl_login(forged, mechanism, "alice", "alice-secret", PEER)


def test_the_brokers_refusals_are_its_errors() -> None:
    with pytest.raises(UnsupportedSaslMechanismError,
                       match="broker 127.0.0.1:9092 refused SASL mechanism PLAIN; it offers SCRAM-SHA-512$"):
        sasl_login(Broker(("SCRAM-SHA-512",)), "PLAIN", "alice", "alice-secret", PEER)
    with pytest.raises(SaslAuthenticationFailedError) as refused:
        sasl_login(Broker(("SCRAM-SHA-256",)), "SCRAM-SHA-256", "alice", "wrong", PEER)
    assert str(refused.value).endswith("SASL/SCRAM-SHA-256 authentication of 'alice' with %s failed: %s"
                                       % (PEER, failure_message("SCRAM-SHA-256")))
