"""``pylogq configs`` on quota entities (clients, users, ips), as ``kafka-configs.sh`` handles them.

An entity is one ``--entity-type`` with its ``--entity-name`` (or ``--entity-default``), or
``--entity-type users`` and ``--entity-type clients`` together, each followed by its name::

    pylogq configs --alter --entity-type users --entity-name alice --entity-type clients \\
        --entity-default --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    Completed updating config for user alice.

``--describe`` prints each matching entity as Kafka's command does (values as Java prints a
double), and for users without a client, their SCRAM credentials too::

    Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2097152.0, ...

Without a name it describes every entity of the type(s). ``--delete-config`` of a quota the
entity does not have is refused (``Invalid config(s): ...``), as Kafka refuses it.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ..client.admin import ClientQuotaAlteration, ClientQuotaFilterComponent
from ..cluster.broker.client_quotas import CLIENT_QUOTA_KEYS, IP_QUOTA_KEYS
from ..config import java_double
from ..errors import CommandError, InvalidConfigError

__all__ = ["alter_quotas", "describe_quotas"]

_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}

#: (entity type as the command names it, name: "" for the default, None for any).
Pair = Tuple[str, Optional[str]]


def _components(pairs: List[Pair]) -> List[ClientQuotaFilterComponent]:
    out = []
    for kind, name in pairs:
        entity_type = _TYPES[kind]
        if name is None:
            out.append(ClientQuotaFilterComponent.of_entity_type(entity_type))
        elif name == "":
            out.append(ClientQuotaFilterComponent.of_default_entity(entity_type))
        else:
            out.append(ClientQuotaFilterComponent.of_entity(entity_type, name))
    return out


def describe_quotas(admin: Any, pairs: List[Pair], out: TextIO) -> int:
    """Print the quotas of the entities matching ``pairs`` (strictly: no other entity type);
    users alone get their SCRAM credentials printed after."""
    found = admin.describe_client_quotas(_components(pairs), strict=True)
    for entity in sorted(found, key=lambda e: tuple((k, n is not None, n or "") for k, n in e)):
        names = dict(entity)
        parts = []
        for entity_type in ("user", "client-id", "ip"):
            if entity_type in names:
                name = names[entity_type]
                parts.append("%s '%s'" % (_LABELS[entity_type], name) if name is not None
                             else "the default %s" % _LABELS[entity_type])
        values = ", ".join("%s=%s" % (k, java_double(v)) for k, v in sorted(found[entity].items()))
        out.write("Quota configs for %s are %s\n" % (", ".join(parts), values))
    kinds = [kind for kind, _ in pairs]
    if kinds == ["users"] and pairs[0][1] != "":
        from ._configs_users import describe_users

        describe_users(admin, pairs[0][1], out)
    return 0


def alter_quotas(admin: Any, pairs: List[Pair], added: Dict[str, str], deleted: List[str], out: TextIO) -> int:
    """Set and remove the quotas of one entity (every pair named, each with its name: the
    caller's _entity refuses one without), as one AlterClientQuotas."""
    kinds = [kind for kind, _ in pairs]
    keys = IP_QUOTA_KEYS if kinds == ["ips"] else CLIENT_QUOTA_KEYS
    unknown = [k for k in list(added) + deleted if k not in keys]
    if unknown:
        what = "connection quota" if kinds == ["ips"] else "quota"
        raise CommandError("Only %s configs can be added for '%s' using --bootstrap-server. Unexpected config "
                           "names: %s" % (what, kinds[-1] if kinds != ["users", "clients"] else "clients",
                                          ",".join(unknown)))
    current = admin.describe_client_quotas(_components(pairs), strict=True)
    existing: Dict[str, float] = next(iter(current.values()), {})
    missing = [k for k in deleted if k not in existing]
    if missing:
        raise InvalidConfigError("Invalid config(s): %s" % ",".join(missing))
    ops: List[Tuple[str, Optional[float]]] = []
    for key, text in added.items():
        try:
            ops.append((key, float(text)))
        except ValueError:
            raise CommandError("Cannot parse quota configuration value for %s: %s" % (key, text)) from None
    ops.extend((key, None) for key in deleted)
    entity = {_TYPES[kind]: (name or None) for kind, name in pairs}
    admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])
    kind, name = pairs[0]
    if name:
        out.write("Completed updating config for %s %s.\n" % (kind[:-1], name))
    else:
        out.write("Completed updating default config for %s in the cluster.\n" % kind)
    return 0


class EntityName(argparse.Action):
    """``--entity-name N`` and ``--entity-default``, in the order given: each names the entity
    type given at the same place among the ``--entity-type`` options (kafka-configs.sh's rule)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append("" if values is None or isinstance(values, list) else str(values))
        namespace.entity_names = names
