"""A client's SASL login over the Kafka protocol, for both of pylogq's socket clients.

SaslHandshake names the mechanism, then SaslAuthenticate carries its tokens: PLAIN one
(``\\0user\\0password``); SCRAM-SHA-256 and SCRAM-SHA-512 two (client-first, then
client-final, the broker's server-final verified, :mod:`.scram`). The clients'
:class:`~pylogq.client.connection.BrokerConnection` and the brokers'
:class:`~pylogq.server.inter_broker.TcpInterBrokerClient` log in with :func:`sasl_login`,
each handing it the way it sends a request and reads its answer.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import SaslAuthenticationFailedError, ScramError, UnsupportedSaslMechanismError, error_for_code
from .constants import ApiKey
from .scram import ScramClient

__all__ = ["SaslRequest", "sasl_login"]

#: Sends one request (an API key and its body's fields) and returns the broker's answer as a dict.
SaslRequest = Callable[[int, Mapping[str, Any]], Mapping[str, Any]]


def sasl_login(request: SaslRequest, mechanism: str, username: str, password: str, peer: str) -> None:
    """Authenticate as ``username`` with ``mechanism`` through ``request``, to ``peer`` (how the
    errors name the broker: ``broker 127.0.0.1:9092``).

    Raises the broker's error (UnsupportedSaslMechanismError when it does not offer the
    mechanism, naming those it does; SaslAuthenticationFailedError with its message), or
    SaslAuthenticationFailedError when its SCRAM answers do not check out.
    """
    response = request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism})
    if response["error_code"]:
        cls = error_for_code(response["error_code"]) or UnsupportedSaslMechanismError
        raise cls("%s refused SASL mechanism %s; it offers %s"
                  % (peer, mechanism, ", ".join(response["mechanisms"] or []) or "none"))

    def step(token: bytes) -> bytes:
        answer = request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
        if answer["error_code"]:
            cls = error_for_code(answer["error_code"]) or SaslAuthenticationFailedError
            raise cls("SASL/%s authentication of %r with %s failed: %s"
                      % (mechanism, username, peer, answer.get("error_message") or "no reason given"))
        return bytes(answer["auth_bytes"] or b"")

    if mechanism == "PLAIN":
        step(b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8"))
        return
    scram = ScramClient(mechanism, username, password)
    try:
        server_first = step(scram.first_message())
        scram.verify(step(scram.final_message(server_first)))
    except ScramError as exc:
        raise SaslAuthenticationFailedError("SASL/%s authentication of %r with %s failed: %s"
                                            % (mechanism, username, peer, exc)) from None
