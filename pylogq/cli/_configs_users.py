"""``pylogq configs --entity-type users``: users' SCRAM credentials, as ``kafka-configs.sh`` handles them.

``--alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``
sets a credential (iterations default to 4096; the password is salted here and never
sent); ``--delete-config SCRAM-SHA-256`` removes one. ``--describe`` prints, per user::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192

(every user with a credential when no name is given; nothing for a user without one).
User quotas are altered and described by :mod:`pylogq.cli._configs_quotas`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ..client.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion
from ..errors import CommandError, ResourceNotFoundError
from .clients import parse_keys

__all__ = ["MECHANISMS", "alter_users", "describe_users", "entry_keys"]

#: The SCRAM mechanisms a user's config names.
MECHANISMS = _MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096  # Kafka's kafka-configs.sh default
# One `MECHANISM=[k=v,k=v]` entry of --add-config (the value's commas are inside brackets).
_ENTRY = re.compile(r"\s*([^=,\[\]]+?)\s*=\s*(\[[^\]]*\]|[^,]*)\s*(?:,|\Z)")


def describe_users(admin: Any, name: Optional[str], out: TextIO) -> int:
    described = admin.describe_user_scram_credentials(None if name is None else [name])
    for user in sorted(described):
        result = described[user]
        if isinstance(result, ResourceNotFoundError):
            continue  # no credentials: nothing to say, as kafka-configs.sh
        if isinstance(result, Exception):
            raise result
        text = ", ".join("%s=iterations=%d" % (mechanism, iterations) for mechanism, iterations in result)
        out.write("SCRAM credential configs for user-principal '%s' are %s\n" % (user, text))
    return 0


def alter_users(args: argparse.Namespace, admin: Any, name: str, out: TextIO) -> int:
    if args.add_config_file:
        raise CommandError("--add-config-file is not supported for users: give --add-config "
                           "'SCRAM-SHA-256=[iterations=8192,password=...]'")
    added = _parse_added(args.add_config or [])
    deleted = parse_keys(args.delete_config)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config or --delete-config")
    for key in list(added) + deleted:
        if key not in _MECHANISMS:
            raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using "
                               "--bootstrap-server. Unexpected config names: %s" % key)
    alterations: List[Any] = [UserScramCredentialDeletion(name, m) for m in deleted]
    for mechanism, (password, iterations) in added.items():
        alterations.append(UserScramCredentialUpsertion(name, mechanism, password, iterations))
    admin.alter_user_scram_credentials(alterations)
    out.write("Completed updating config for user %s.\n" % name)
    return 0


def entry_keys(items: List[str]) -> List[str]:
    """The keys of ``--add-config`` items (a SCRAM value's brackets kept whole)."""
    keys: List[str] = []
    for item in items:
        pos = 0
        while pos < len(item):
            match = _ENTRY.match(item, pos)
            if match is None or match.end() == pos:
                break
            keys.append(match.group(1))
            pos = match.end()
    return keys


def _parse_added(items: List[str]) -> Dict[str, Tuple[str, int]]:
    """``SCRAM-SHA-256=[iterations=8192,password=secret],...`` -> mechanism -> (password, iterations)."""
    added: Dict[str, Tuple[str, int]] = {}
    for item in items:
        pos = 0
        while pos < len(item):
            match = _ENTRY.match(item, pos)
            if match is None or match.end() == pos:
                raise CommandError("--add-config %r: expected MECHANISM=[iterations=N,password=P]" % item)
            pos = match.end()
            key, value = match.group(1), match.group(2)
            if key not in _MECHANISMS:
                raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using "
                                   "--bootstrap-server. Unexpected config names: %s" % key)
            if not (value.startswith("[") and value.endswith("]")):
                raise CommandError("--add-config %s: the value must be [iterations=N,password=P], got %r"
                                   % (key, value))
            fields: Dict[str, str] = {}
            for part in value[1:-1].split(","):
                k, sep, v = part.partition("=")
                if not sep or k.strip() not in ("iterations", "password"):
                    raise CommandError("--add-config %s: %r is not iterations=N or password=P" % (key, part))
                fields[k.strip()] = v
            if "password" not in fields:
                raise CommandError("--add-config %s: a password is required ([password=P])" % key)
            try:
                iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
            except ValueError:
                raise CommandError("--add-config %s: iterations %r is not a number" % (key, fields["iterations"])) \
                    from None
            added[key] = (fields["password"], iterations)
    return added
