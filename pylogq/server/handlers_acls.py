"""The ACL APIs: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's AclApis.

The dispatcher has checked the cluster operation each needs (DESCRIBE for DescribeAcls,
ALTER for the others: :data:`~pylogq.server.authorization.CLUSTER_CHECKS`). Without an
authorizer they answer SECURITY_DISABLED. A filter or binding with a code this broker
does not know (UNKNOWN) answers INVALID_REQUEST, as do the bindings Kafka refuses to
create (a pattern type of ANY or MATCH, a cluster resource not named ``kafka-cluster``, an
empty name, a name with ``/``, a principal without its type). Creations and deletions
write to the authorizer's store (a file, or the metadata store), off the event loop.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from .. import errors
from ..cluster.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    from_code,
)
from ..protocol.message_data import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase, error_code, error_message, log

__all__ = ["AclHandlers"]

_SECURITY_DISABLED = "No Authorizer is configured on the broker"


def _binding_filter(resource_type: int, name: Optional[str], pattern_type: int, principal: Optional[str],
                    host: Optional[str], operation: int, permission: int, version: int) -> AclBindingFilter:
    """A request's filter; v0 knows literal patterns only (its ANY means them, as Kafka reads it)."""
    pattern = from_code(PatternType, pattern_type)
    if version == 0:
        if pattern not in (PatternType.ANY, PatternType.LITERAL):
            raise errors.UnsupportedVersionError("Version 0 only supports literal resource pattern types")
        pattern = PatternType.LITERAL
    found = AclBindingFilter(ResourcePatternFilter(from_code(ResourceType, resource_type), name, pattern),
                             AccessControlEntryFilter(principal, host, from_code(AclOperation, operation),
                                                      from_code(AclPermissionType, permission)))
    if found.unknown_element():
        raise errors.InvalidRequestError("the filter contains UNKNOWN elements: %s" % (found,))
    return found


class AclHandlers(HandlerBase):
    """DescribeAcls, CreateAcls and DeleteAcls."""

    def describe_acls(self, conn: Connection, req: DescribeAclsRequest, version: int,
                      slot: RequestSlot) -> DescribeAclsResponse:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return DescribeAclsResponse(throttle_time_ms=0, error_code=errors.SecurityDisabledError.code,
                                        error_message=_SECURITY_DISABLED, resources=[])
        try:
            wanted = _binding_filter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                                     req.principal_filter, req.host_filter, req.operation, req.permission_type,
                                     version)
        except errors.BrokerError as exc:
            return DescribeAclsResponse(throttle_time_ms=0, error_code=exc.code, error_message=str(exc), resources=[])
        by_pattern: Dict[ResourcePattern, List[AccessControlEntry]] = {}
        for binding in authorizer.acls(wanted):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        R = DescribeAclsResponse
        return R(throttle_time_ms=0, error_code=0, error_message=None, resources=[
            R.DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                                   acls=[R.AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                                          permission_type=e.permission_type) for e in entries])
            for p, entries in by_pattern.items()])

    async def create_acls(self, conn: Connection, req: CreateAclsRequest, version: int,
                          slot: RequestSlot) -> CreateAclsResponse:
        R = CreateAclsResponse
        authorizer = self.broker.authorizer
        if authorizer is None:
            return R(throttle_time_ms=0, results=[
                R.AclCreationResult(error_code=errors.SecurityDisabledError.code, error_message=_SECURITY_DISABLED)
                for _ in req.creations])
        bindings = [AclBinding(ResourcePattern(from_code(ResourceType, c.resource_type), c.resource_name,
                                               from_code(PatternType, c.resource_pattern_type)),
                               AccessControlEntry(c.principal, c.host, from_code(AclOperation, c.operation),
                                                  from_code(AclPermissionType, c.permission_type)))
                    for c in req.creations]
        outcomes: Sequence[Optional[BaseException]]
        if version == 0 and any(b.pattern.pattern_type != PatternType.LITERAL for b in bindings):
            refusal = errors.UnsupportedVersionError("Version 0 only supports literal resource pattern types")
            outcomes = [refusal] * len(bindings)
        else:
            try:
                outcomes = await self._blocking(authorizer.create_acls, bindings)
            except Exception as exc:  # noqa: BLE001 - every creation answers the error
                outcomes = [self._failed(conn, exc, "create ACLs")] * len(bindings)
        for binding, outcome in zip(bindings, outcomes):
            if outcome is None:
                self._audit(conn, "added", binding)
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=0 if o is None else error_code(o),
                                error_message=None if o is None else error_message(o)) for o in outcomes])

    async def delete_acls(self, conn: Connection, req: DeleteAclsRequest, version: int,
                          slot: RequestSlot) -> DeleteAclsResponse:
        R = DeleteAclsResponse
        authorizer = self.broker.authorizer
        if authorizer is None:
            return R(throttle_time_ms=0, filter_results=[
                R.DeleteAclsFilterResult(error_code=errors.SecurityDisabledError.code,
                                         error_message=_SECURITY_DISABLED, matching_acls=[]) for _ in req.filters])
        try:
            filters = [_binding_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                       f.principal_filter, f.host_filter, f.operation, f.permission_type, version)
                       for f in req.filters]
        except errors.BrokerError as exc:
            return R(throttle_time_ms=0, filter_results=[
                R.DeleteAclsFilterResult(error_code=exc.code, error_message=str(exc), matching_acls=[])
                for _ in req.filters])
        try:
            deleted = await self._blocking(authorizer.delete_acls, filters)
        except Exception as exc:  # noqa: BLE001 - every filter answers the error
            failure = self._failed(conn, exc, "delete ACLs")
            return R(throttle_time_ms=0, filter_results=[
                R.DeleteAclsFilterResult(error_code=error_code(failure), error_message=error_message(failure),
                                         matching_acls=[]) for _ in req.filters])
        results = []
        for found in deleted:
            matching = []
            for binding, problem in found:
                if problem is None:
                    self._audit(conn, "removed", binding)
                p, e = binding
                matching.append(R.DeleteAclsMatchingAcl(
                    error_code=0 if problem is None else error_code(problem),
                    error_message=None if problem is None else error_message(problem),
                    resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                    principal=e.principal, host=e.host, operation=e.operation, permission_type=e.permission_type))
            results.append(R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=matching))
        return R(throttle_time_ms=0, filter_results=results)

    @staticmethod
    def _audit(conn: Connection, what: str, binding: AclBinding) -> None:
        log.info("ACL %s by %s from %s: %s", what, conn.principal, conn.peer_host, binding)
