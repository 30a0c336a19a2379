"""``pylogq-broker``: a single-node Kafka broker on the command line.

    pylogq-broker [--config server.properties] [--data-dir DIR]
                  [--listeners PLAINTEXT://127.0.0.1:9092] [--override key=value ...]

With no arguments: a broker on 127.0.0.1:9092 with its data in ``./pylogq-data``
and the settings of Kafka's shipped single-node ``server.properties``
(``group.initial.rebalance.delay.ms=0``).
Settings are Kafka's keys, from the properties file, then ``--override``, then the
flags. It prints one line when it is ready ("pylogq-broker 0 ready on
127.0.0.1:9092") and logs connections and errors to stderr as ``key=value``
lines (``--log-format json`` for one JSON object per line). SIGTERM or Ctrl-C stops
it cleanly: requests already read are answered, the logs are flushed and their
checkpoints written, so the next start needs no recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional

__all__ = ["main"]

DEFAULT_DATA_DIR = "pylogq-data"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: Dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + ".%03dZ" % record.msecs,
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("pylogq")
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))
    root.propagate = False


def _parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pylogq-broker", description="Serve a pylogq broker to Kafka clients over the Kafka protocol.")
    parser.add_argument("config", nargs="?", help="server.properties file (Kafka's keys); also --config")
    parser.add_argument("--config", dest="config_flag", metavar="FILE", help="server.properties file")
    parser.add_argument("--data-dir", help="data directory (log.dirs); default ./%s" % DEFAULT_DATA_DIR)
    parser.add_argument("--listeners", help="listeners, e.g. PLAINTEXT://127.0.0.1:9092")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a config key (repeatable); wins over the properties file")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (must be installed)")
    return parser.parse_args(argv)


def _settings(args: argparse.Namespace) -> Dict[str, Any]:
    from ..config import parse_properties
    from ..errors import ConfigError

    settings: Dict[str, Any] = {}
    path = args.config_flag or args.config
    if path:
        try:
            with open(path) as f:
                settings.update(parse_properties(f.read()))
        except OSError as exc:
            raise ConfigError("cannot read config file %s: %s" % (path, exc.strerror)) from None
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--override expects key=value, got %r" % item)
        settings[key.strip()] = value.strip()
    if args.listeners:
        settings["listeners"] = args.listeners
    return settings


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse_args(argv)
    _setup_logging(args.log_level, args.log_format)
    log = logging.getLogger("pylogq.server")
    from ..cluster.broker import Broker
    from ..errors import ConfigError, PylogqError
    from ..server import KafkaServer, new_event_loop

    try:
        settings = _settings(args)
        data_dir = args.data_dir
        if data_dir is None:
            dirs = settings.get("log.dirs") or settings.get("log.dir")
            data_dir = dirs.split(",")[0].strip() if dirs else DEFAULT_DATA_DIR
        if args.data_dir is not None:
            settings.pop("log.dir", None)
            settings["log.dirs"] = args.data_dir
        # With no properties file the broker takes the settings of the server.properties
        # that ships with Kafka for a single development node (DEVELOPMENT_DEFAULTS).
        broker = Broker(data_dir, development_defaults=not (args.config_flag or args.config), **settings)
    except (ConfigError, PylogqError, OSError) as exc:
        print("pylogq-broker: %s" % exc, file=sys.stderr)
        return 2
    loop = new_event_loop(args.uvloop)
    asyncio.set_event_loop(loop)
    try:
        server = KafkaServer(broker)
        loop.run_until_complete(server.start())
    except (ConfigError, OSError) as exc:
        broker.close()
        print("pylogq-broker: %s" % exc, file=sys.stderr)
        return 2
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("pylogq-broker %d ready on %s" % (broker.broker_id, ", ".join("%s:%d" % a for a in server.addresses)),
          flush=True)
    log.info("ready broker_id=%d cluster_id=%s data_dir=%s pid=%d", broker.broker_id, broker.cluster_id,
             os.path.abspath(data_dir), os.getpid())
    try:
        loop.run_until_complete(stop.wait())
        log.info("shutting down")
        loop.run_until_complete(server.stop())
    finally:
        broker.close()
        loop.close()
    log.info("stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
