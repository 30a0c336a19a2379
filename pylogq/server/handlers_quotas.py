"""DescribeClientQuotas (48) and AlterClientQuotas (49), over Kafka 3.9's versions (0-1).

Answered by the broker that receives them, as Kafka's ZooKeeper-mode brokers answer them:
the quotas are read from and written to the broker's store (the metadata store in a
cluster, with a change notification every broker applies), off the event loop. The
filters, checks and error messages are Kafka's (:mod:`pylogq.cluster.broker.client_quotas`
holds them).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .. import errors
from ..cluster.contract import QuotaAlteration, QuotaEntity, QuotaFilterComponent
from ..protocol.message_data import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase, error_code, error_message

__all__ = ["QuotaHandlers"]

_Entry = DescribeClientQuotasResponse.EntryData


class QuotaHandlers(HandlerBase):
    """The client quota admin APIs."""

    async def describe_client_quotas(self, conn: Connection, req: DescribeClientQuotasRequest, version: int,
                                     slot: RequestSlot) -> DescribeClientQuotasResponse:
        components = [QuotaFilterComponent(c.entity_type, c.match_type, c.match) for c in req.components]
        try:
            found: Dict[QuotaEntity, Dict[str, float]] = await self._admin(
                self.broker.describe_client_quotas, components, req.strict)
        except Exception as exc:  # noqa: BLE001 - a bad filter, or the store failed: the request's error
            failure = self._failed(conn, exc, "DescribeClientQuotas")
            message = str(failure.args[0]) if isinstance(failure, errors.BrokerError) and failure.args else \
                error_message(failure)  # Kafka's words, without pylogq's "[Error N] NAME:" prefix
            return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error_code(failure),
                                                error_message=message, entries=None)
        entries = [_Entry(entity=[DescribeClientQuotasResponse.EntityData(entity_type=kind, entity_name=name)
                                  for kind, name in entity],
                          values=[DescribeClientQuotasResponse.ValueData(key=key, value=value)
                                  for key, value in sorted(values.items())])
                   for entity, values in sorted(found.items(), key=lambda item: _order(item[0]))]
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)

    async def alter_client_quotas(self, conn: Connection, req: AlterClientQuotasRequest, version: int,
                                  slot: RequestSlot) -> AlterClientQuotasResponse:
        alterations = [QuotaAlteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                                       [(op.key, None if op.remove else op.value) for op in entry.ops])
                       for entry in req.entries]
        try:
            results: Dict[QuotaEntity, Tuple[int, Optional[str]]] = await self._admin(
                self.broker.alter_client_quotas, alterations, req.validate_only)
        except Exception as exc:  # noqa: BLE001 - every entity answers the failure
            failure = self._failed(conn, exc, "AlterClientQuotas")
            results = {a.entity: (error_code(failure), error_message(failure)) for a in alterations}
        out: List[AlterClientQuotasResponse.EntryData] = []
        for entity, (code, message) in results.items():  # each failure logged by the store, or above
            out.append(AlterClientQuotasResponse.EntryData(
                error_code=code, error_message=message,
                entity=[AlterClientQuotasResponse.EntityData(entity_type=kind, entity_name=name)
                        for kind, name in entity]))
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=out)


def _order(entity: QuotaEntity) -> Tuple[Tuple[str, int, str], ...]:
    """Entities in a stable order, defaults before names."""
    return tuple((kind, 0 if name is None else 1, name or "") for kind, name in entity)
