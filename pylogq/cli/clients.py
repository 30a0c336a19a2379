"""How the ``pylogq`` tools reach a broker: one factory for their clients, and the shared options.

Every networked tool (``topics``, ``produce``, ``consume``, ``groups``,
``perf``) is a function of its parsed arguments, a :class:`Clients` factory
and its output streams, so the same code runs against ``--bootstrap-server``
(the command line) and against a :class:`pylogq.Broker` in this process (the
tests, and programs that embed the tools). Settings given on the command line
in Kafka's dotted form (``--producer-property linger.ms=5``) become the
clients' keyword arguments (``linger_ms=5``), and a client's configuration
error names them in that form again (``unknown producer configuration:
linger.mss``): what the user typed, not the keyword it became.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional

from ..client.admin import AdminClient
from ..client.consumer import Consumer
from ..client.producer import DEFAULT_CONFIG as PRODUCER_DEFAULTS
from ..client.producer import Producer
from ..client.tcp import without_protocol
from ..config import client_keywords, parse_properties
from ..errors import CommandError, ConfigError, PylogqError
from ._errors import error_text

__all__ = ["DEFAULT_BOOTSTRAP", "Clients", "add_bootstrap_argument", "client_configs", "error_text",
           "parse_key_values", "read_properties"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):(\d{1,5})$")


class Clients:
    """Builds the clients a tool needs, all connected to the same broker.

    Give ``bootstrap_servers`` (``"host:port[,host:port...]"``) or ``broker``
    (a :class:`pylogq.Broker` in this process). Every client built is closed
    by :meth:`close` (or on leaving the ``with`` block), so a tool that fails
    half-way leaves no sender or heartbeat thread behind.
    """

    def __init__(self, bootstrap_servers: Optional[str] = None, broker: Any = None,
                 options: Optional[Mapping[str, Any]] = None) -> None:
        if (bootstrap_servers is None) == (broker is None):
            raise ConfigError("give exactly one of bootstrap_servers or broker")
        self.bootstrap_servers = bootstrap_servers
        self.broker = broker
        self.options: Dict[str, Any] = dict(options or {})
        self._open: List[Any] = []

    def configured(self, options: Mapping[str, Any]) -> "Clients":
        """A factory for the same broker whose clients also take ``options`` (a ``--command-config``
        file's: security_protocol, ssl_context, ...), over what a tool asks for, as Kafka's tools
        let the file's settings win. An in-process broker needs none and ignores them."""
        return Clients(self.bootstrap_servers, self.broker, {**self.options, **options})

    def _where(self, configs: Mapping[str, Any]) -> Dict[str, Any]:
        where = {"broker": self.broker} if self.broker is not None else {"bootstrap_servers": self.bootstrap_servers}
        return {**configs, **self.options, **where}

    def admin(self, **configs: Any) -> AdminClient:
        with _kafka_names(configs):
            client = AdminClient(**self._where(configs))
        self._open.append(client)
        return client

    def producer(self, **configs: Any) -> Producer:
        with _kafka_names(configs, lambda: PRODUCER_DEFAULTS):
            client = Producer(**self._where(configs))
        self._open.append(client)
        return client

    def consumer(self, *topics: str, **configs: Any) -> Consumer:
        with _kafka_names(configs, lambda: inspect.signature(Consumer).parameters):
            client = Consumer(*topics, **self._where(configs))
        self._open.append(client)
        return client

    def close(self) -> None:
        """Close every client built here, newest first; the broker stays up."""
        while self._open:
            client = self._open.pop()
            try:
                client.close()
            except PylogqError:
                pass  # a client that cannot close cleanly must not hide the tool's own outcome

    def __enter__(self) -> "Clients":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bootstrap(text: str) -> str:
    """Check ``host:port[,host:port...]`` so a typo fails before any connection attempt. A
    listener prefix (``PLAINTEXT://``, ``SSL://``, any ``NAME://``) is taken, as Kafka's tools
    take it."""
    for item in text.split(","):
        match = _HOST_PORT.match(without_protocol(item.strip()))
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise argparse.ArgumentTypeError("%r is not HOST:PORT (a list is comma-separated)" % (item,))
    return text


def add_bootstrap_argument(parser: argparse.ArgumentParser, default: str = DEFAULT_BOOTSTRAP) -> None:
    """``--bootstrap-server`` (Kafka's name; ``--broker-list``, the 0.8-0.10 name, is an alias).

    ``default`` argparse.SUPPRESS: the option of a command (``pylogq transactions list
    --bootstrap-server ...``) that leaves the tool's own, given before the command, as it is.
    """
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", metavar="HOST:PORT",
                        type=_bootstrap, default=default,
                        help="the broker to connect to (default: %s)" % DEFAULT_BOOTSTRAP)


@contextlib.contextmanager
def _kafka_names(configs: Mapping[str, Any], known: Callable[[], Iterable[str]] = tuple) -> Iterator[None]:
    """A client's ConfigError raised inside, with each keyword it names (``linger_mss``: given, or
    among the client's ``known()`` ones) in Kafka's dotted spelling (``linger.mss``), as the command
    line takes them. Every Kafka client setting is dotted where its keyword has an underscore."""
    try:
        yield
    except ConfigError as exc:
        names = sorted({name for name in (*configs, *known()) if "_" in name}, key=len, reverse=True)
        if not names:
            raise
        pattern = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, names)))
        raise ConfigError(pattern.sub(lambda m: m.group(1).replace("_", "."), str(exc))) from None


def parse_key_values(items: Optional[Iterable[str]], what: str, split_commas: bool = False) -> Dict[str, str]:
    """``["k=v", ...]`` as an ordered dict; with ``split_commas`` an item may hold several (``a=1,b=2``).

    The value is everything after the first ``=``, kept verbatim (a
    ``key.separator`` may be a space or ``=``); an item without ``=`` raises
    CommandError naming it.
    """
    out: Dict[str, str] = {}
    for item in items or ():
        for part in (_split_commas(item) if split_commas else [item]):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CommandError("%s %r is not KEY=VALUE" % (what, part))
            out[key] = value
    return out


def parse_keys(items: Optional[Iterable[str]]) -> List[str]:
    """``--delete-config`` items, each comma-separated keys (``["a,b", "c"]``), as one list of
    keys in order, blanks left out."""
    return [key.strip() for item in items or () for key in item.split(",") if key.strip()]


def _split_commas(item: str) -> List[str]:
    """Split ``a=1,b=2`` into items, keeping commas that belong to a value (``cleanup.policy=compact,delete``)."""
    parts: List[str] = []
    for piece in item.split(","):
        if parts and "=" not in piece:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p for p in parts if p.strip()]


def read_properties(path: str) -> Dict[str, str]:
    """A Java ``.properties`` file as a dict, read as Kafka reads one (:func:`pylogq.config.parse_properties`:
    ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` continuation lines and escapes).
    A file that cannot be read raises CommandError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None
    return parse_properties(text)


def client_configs(properties: Mapping[str, str]) -> Dict[str, Any]:
    """Kafka's dotted client settings (``linger.ms=5``) as keyword arguments (``linger_ms=5``).

    ``bootstrap.servers`` is left out: it chooses the broker, which the
    :class:`Clients` factory already knows.
    """
    return client_keywords({key: value for key, value in properties.items() if key != "bootstrap.servers"})


def int_argument(minimum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse ``type`` for integers, at least ``minimum`` when given."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not an integer" % (text,)) from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError("must be at least %d, got %d" % (minimum, value))
        return value

    return parse
