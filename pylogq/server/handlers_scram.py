"""SASL/SCRAM on the wire: the exchange over SaslAuthenticate, and the credential admin APIs.

DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) are answered by the
broker that receives them, as Kafka's ZooKeeper-mode brokers answer them
(``ZkAdminManager``): the credentials are written to the broker's store (the metadata
store in a cluster, with a change notification every broker applies). The client sends
the salt and the salted password; the broker derives and keeps only the stored and
server keys (:mod:`pylogq.protocol.scram`).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Callable, Dict, List, Optional, Tuple, Union

from .. import errors
from ..errors import ScramError
from ..protocol.message_data import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from ..protocol.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS,
    ScramCredential,
    ScramServer,
    failure_message,
    format_credential,
    make_credential,
    parse_credential,
)
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase, error_code

__all__ = ["ScramHandlers"]

_Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
_DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult

log = logging.getLogger("pylogq.server")

_EMPTY_NAME = "Username must not be empty"


class ScramHandlers(HandlerBase):
    """SCRAM's steps of SaslAuthenticate, DescribeUserScramCredentials and AlterUserScramCredentials."""

    # -- authentication -----------------------------------------------------------------

    def _scram_step(self, conn: Connection, token: bytes) -> Tuple[bytes, Optional[str]]:
        """One step of ``conn``'s SCRAM exchange -> (answer, error message or None).

        Every failure, whether a malformed message, an unknown user or a wrong proof,
        gets Kafka's one message (the log says which)."""
        mechanism = conn.sasl_mechanism
        assert mechanism is not None
        exchange = conn.sasl_exchange
        if exchange is None:
            exchange = conn.sasl_exchange = ScramServer(mechanism, self._scram_lookup(mechanism),
                                                        self.server.scram_secret)
        try:
            answer, done = exchange.step(token)
        except ScramError as exc:
            log.warning("authentication failed id=%d peer=%s mechanism=%s user=%r: %s", conn.id, conn.peer,
                        mechanism, exchange.user, exc)
            return b"", failure_message(mechanism)
        if done:
            conn.sasl_exchange = None
            assert exchange.user is not None
            conn.authenticated_as(exchange.user, mechanism)
        return answer, None

    def _scram_lookup(self, mechanism: str) -> Callable[[str], Optional[ScramCredential]]:
        broker = self.broker

        def lookup(user: str) -> Optional[ScramCredential]:
            text = broker.scram_credential(user, mechanism)
            if text is None:
                return None
            try:
                return parse_credential(text)
            except ScramError:
                log.error("user %r has a malformed %s credential", user, mechanism)
                return None
        return lookup

    # -- DescribeUserScramCredentials (50) ------------------------------------------------

    async def describe_user_scram_credentials(self, conn: Connection, req: DescribeUserScramCredentialsRequest,
                                              version: int, slot: RequestSlot) -> DescribeUserScramCredentialsResponse:
        requested = [u.name for u in req.users] if req.users else None
        try:
            results: List[_DescribeResult] = await self._admin(self._describe_scram, requested)
        except Exception as exc:  # noqa: BLE001 - the store did not answer: the whole request fails
            failure = self._failed(conn, exc, "DescribeUserScramCredentials")
            return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=error_code(failure),
                                                        error_message=str(failure), results=[])
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                                    results=results)

    def _describe_scram(self, requested: Optional[List[str]]) -> List[_DescribeResult]:
        """Kafka's answer: every user with a credential (sorted) when none are named; else one
        result per distinct name, in the order asked, RESOURCE_NOT_FOUND for one without."""
        def result(user: str, code: int = 0, message: Optional[str] = None,
                   config: Optional[Dict[str, str]] = None) -> _DescribeResult:
            infos = []
            for name, (_, kind, _) in MECHANISMS.items():
                if config and name in config:
                    try:
                        infos.append(DescribeUserScramCredentialsResponse.CredentialInfo(
                            mechanism=kind, iterations=parse_credential(config[name]).iterations))
                    except ScramError as exc:
                        return result(user, errors.UnknownServerError.code, str(exc))
            return _DescribeResult(user=user, error_code=code, error_message=message, credential_infos=infos)

        if requested is None:
            configs = self.broker.describe_user_configs(None)
            return [result(u, config=c) for u, c in sorted(configs.items())
                    if any(m in c for m in MECHANISMS)]
        counts = Counter(requested)
        wanted = [u for u in counts if u and counts[u] == 1]
        configs = self.broker.describe_user_configs(wanted)
        out = []
        for user in counts:  # distinct, in the order asked
            if not user:
                out.append(result(user, errors.ResourceNotFoundError.code, _EMPTY_NAME))
            elif counts[user] > 1:
                out.append(result(user, errors.DuplicateResourceError.code,
                                  "Cannot describe SCRAM credentials for the same user twice in a single request: "
                                  + user))
            elif not any(m in configs.get(user, {}) for m in MECHANISMS):
                out.append(result(user, errors.ResourceNotFoundError.code,
                                  "Attempt to describe a user credential that does not exist: " + user))
            else:
                out.append(result(user, config=configs[user]))
        return out

    # -- AlterUserScramCredentials (51) ---------------------------------------------------

    async def alter_user_scram_credentials(self, conn: Connection, req: AlterUserScramCredentialsRequest,
                                           version: int, slot: RequestSlot) -> AlterUserScramCredentialsResponse:
        results: List[_AlterResult] = await self._admin(self._alter_scram, conn, req.deletions, req.upsertions)
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)

    def _alter_scram(self, conn: Connection, deletions: List[_Deletion],
                     upsertions: List[_Upsertion]) -> List[_AlterResult]:
        """Kafka's checks, in Kafka's order; a user with any bad change gets no change at all."""
        results: List[_AlterResult] = []
        failed: Dict[str, Tuple[int, str]] = {}
        for d in deletions:
            if not d.name:
                failed[d.name] = (errors.UnacceptableCredentialError.code, _EMPTY_NAME)
            elif d.mechanism not in MECHANISM_TYPES:
                failed[d.name] = (errors.UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism")
        for u in upsertions:
            if not u.name:
                failed[u.name] = (errors.UnacceptableCredentialError.code, _EMPTY_NAME)
            elif u.mechanism not in MECHANISM_TYPES:
                failed[u.name] = (errors.UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism")
            elif u.iterations > MAX_ITERATIONS:
                failed[u.name] = (errors.UnacceptableCredentialError.code, "Too many iterations")
            elif u.iterations < MECHANISMS[MECHANISM_TYPES[u.mechanism]][2]:
                failed[u.name] = (errors.UnacceptableCredentialError.code, "Too few iterations")
        for user, (code, message) in failed.items():
            results.append(_AlterResult(user=user, error_code=code, error_message=message))
        changed: List[Union[_Upsertion, _Deletion]] = [*upsertions, *deletions]
        pairs = Counter((c.name, c.mechanism) for c in changed if c.name not in failed)
        duplicated = {user for (user, _), n in pairs.items() if n > 1}
        for user in sorted(duplicated):
            results.append(_AlterResult(user=user, error_code=errors.DuplicateResourceError.code,
                                        error_message="A user credential cannot be altered twice in the same request"))
        users = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
        try:
            configs = self.broker.describe_user_configs(users)
        except Exception as exc:  # noqa: BLE001 - the store did not answer: every change fails
            failure = self._failed(conn, exc, "AlterUserScramCredentials")
            return results + [_AlterResult(user=u, error_code=error_code(failure), error_message=str(failure))
                              for u in users]
        for user in users:
            config = configs.get(user, {})
            changes: Dict[str, Optional[str]] = {}
            missing = False
            for d in deletions:
                if d.name == user:
                    name = MECHANISM_TYPES[d.mechanism]
                    missing = missing or name not in config
                    changes[name] = None
            if missing:
                results.append(_AlterResult(user=user, error_code=errors.ResourceNotFoundError.code,
                                            error_message="Attempt to delete a user credential that does not exist"))
                continue
            try:
                for u in upsertions:
                    if u.name == user:
                        name = MECHANISM_TYPES[u.mechanism]
                        changes[name] = format_credential(make_credential(name, u.salted_password or b"",
                                                                          u.salt or b"", u.iterations))
                self.broker.alter_user_config(user, changes)
            except Exception as exc:  # noqa: BLE001 - answered per user, as Kafka does
                failure = self._failed(conn, exc, "AlterUserScramCredentials")
                results.append(_AlterResult(user=user, error_code=error_code(failure), error_message=str(failure)))
                continue
            log.info("SCRAM credentials of user %r changed (%s) by id=%d peer=%s", user,
                     ", ".join("%s %s" % ("deleted" if v is None else "set", k) for k, v in sorted(changes.items())),
                     conn.id, conn.peer)
            results.append(_AlterResult(user=user, error_code=0, error_message=None))
        return results

