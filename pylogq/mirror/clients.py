"""A flow's clients: Kafka's client properties of a flow made into pylogq's clients.

A :class:`~pylogq.mirror.config.FlowConfig` holds each client's settings as Kafka property
names (``bootstrap.servers``, ``security.protocol``, ``ssl.truststore.location``,
``linger.ms``: :meth:`~pylogq.mirror.config.FlowConfig.client_config`). A *converter*,
``client_options(props, kind) -> keyword arguments``, turns them into the keyword
arguments of :class:`~pylogq.client.producer.Producer`,
:class:`~pylogq.client.consumer.Consumer` or :class:`~pylogq.client.admin.AdminClient`
(``kind`` is ``producer``, ``consumer`` or ``admin``). The ``pylogq mirror-maker`` command
injects the tools' own converter (TLS contexts and SASL logins made as for
``--command-config``); :func:`plain_client_options`, the default, takes PLAINTEXT
connections only, which is what tests and programs embedding a mirror on loopback need.

:class:`FlowClients` builds a flow's clients from the converted settings with the
mirror's own settings over them (a task's producer never creates topics, a task's
consumer never commits, ...). A client's ConfigError names the flow, the cluster and
the client, and the setting in Kafka's dotted spelling. Thread-safe: every call builds
a new client.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Mapping, Optional

from ..client.admin import AdminClient
from ..client.consumer import Consumer
from ..client.producer import Producer
from ..config import client_keywords
from ..errors import ConfigError
from .config import FlowConfig

__all__ = ["ClientOptions", "FlowClients", "plain_client_options"]

#: ``client_options(props, kind)``: Kafka client properties as a pylogq client's keyword arguments.
ClientOptions = Callable[[Mapping[str, str], str], Dict[str, Any]]

def plain_client_options(props: Mapping[str, str], kind: str) -> Dict[str, Any]:
    """Kafka client properties of a PLAINTEXT connection as keyword arguments: ``bootstrap.servers``
    becomes ``bootstrap_servers``, every other ``a.b`` becomes ``a_b`` (ints and booleans typed).
    A secured connection (``security.protocol`` other than PLAINTEXT, ``ssl.*``, ``sasl.*``)
    is a ConfigError: the command line's converter makes those."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip()
    if protocol.upper() != "PLAINTEXT":
        raise ConfigError("security.protocol %s: the plain client converter connects over PLAINTEXT only; run the "
                          "mirror with the command line's converter (pylogq mirror-maker) for TLS and SASL" % protocol)
    # ssl.* and sasl.* are not used over PLAINTEXT, as Kafka's clients ignore them.
    out = client_keywords({key: value for key, value in props.items()
                           if key != "security.protocol" and not key.startswith(("ssl.", "sasl."))})
    if "bootstrap_servers" in out:
        out["bootstrap_servers"] = props["bootstrap.servers"].strip()
    return out


class FlowClients:
    """Makes the clients of one flow on either of its clusters (``side`` ``source`` or ``target``).

    ``client_options`` converts the flow's Kafka client properties (module docstring). The
    keyword arguments given to :meth:`producer`, :meth:`consumer` and :meth:`admin` are the
    mirror's: ``defaults`` under the user's settings, ``forced`` over them. Thread-safe.
    """

    def __init__(self, flow: FlowConfig, client_options: Optional[ClientOptions] = None) -> None:
        self.flow = flow
        self.client_options: ClientOptions = client_options or plain_client_options

    def options(self, side: str, kind: str) -> Dict[str, Any]:
        """The user's settings of a ``kind`` client on ``side``, converted."""
        props = self.flow.client_config(side, kind)
        try:
            return dict(self.client_options(props, kind))
        except ConfigError as exc:
            raise ConfigError("%s: %s" % (self._what(side, kind), exc)) from None

    def _what(self, side: str, kind: str) -> str:
        return "flow %s, %s of cluster %s" % (self.flow.name, kind, self.flow.cluster_alias(side))

    def _build(self, factory: Callable[..., Any], side: str, kind: str, defaults: Mapping[str, Any],
               forced: Mapping[str, Any]) -> Any:
        options = dict(defaults)
        options.update(self.options(side, kind))
        options.update(forced)
        try:
            return factory(**options)
        except ConfigError as exc:
            raise ConfigError("%s: %s" % (self._what(side, kind), _dotted(str(exc), options))) from None

    def producer(self, side: str, defaults: Optional[Mapping[str, Any]] = None, **forced: Any) -> Producer:
        """A producer on ``side``."""
        return self._build(Producer, side, "producer", defaults or {}, forced)  # type: ignore[no-any-return]

    def consumer(self, side: str, defaults: Optional[Mapping[str, Any]] = None, **forced: Any) -> Consumer:
        """A consumer on ``side`` (it commits nothing unless ``forced`` says so: the flow's settings
        turn ``enable.auto.commit`` off)."""
        return self._build(Consumer, side, "consumer", defaults or {}, forced)  # type: ignore[no-any-return]

    def admin(self, side: str, defaults: Optional[Mapping[str, Any]] = None, **forced: Any) -> AdminClient:
        """An admin client on ``side``."""
        return self._build(AdminClient, side, "admin", defaults or {}, forced)  # type: ignore[no-any-return]


def _dotted(message: str, options: Mapping[str, Any]) -> str:
    """A client's message with the keywords it names in Kafka's dotted spelling, as the file had them."""
    names = sorted((name for name in options if "_" in name), key=len, reverse=True)
    if not names:
        return message
    pattern = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, names)))
    return pattern.sub(lambda m: m.group(1).replace("_", "."), message)
