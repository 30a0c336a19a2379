"""The tools' logging: pylogq's loggers to stderr, as text or as JSON lines (``--log-format``)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, TextIO, Tuple

__all__ = ["JsonFormatter", "logging_to", "setup_logging"]

#: The loggers a tool sets up: pylogq's, and the ZooKeeper client's.
_LOGGERS = ("pylogq", "kazoo")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message and any exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: Dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + ".%03dZ" % record.msecs,
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        import json  # only with --log-format json

        return json.dumps(entry)


def setup_logging(level: str, fmt: str = "text", stream: Optional[TextIO] = None) -> None:
    """pylogq's log (and the ZooKeeper client's) to ``stream`` (stderr) at ``level``, as text or
    JSON lines."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("pylogq")
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))
    root.propagate = False
    # The ZooKeeper client's own messages (a broker of a cluster), in the same format; its
    # connection retries are warnings at most.
    kazoo = logging.getLogger("kazoo")
    kazoo.handlers[:] = [handler]
    kazoo.setLevel(max(logging.WARNING, root.level))
    kazoo.propagate = False


@contextlib.contextmanager
def logging_to(stream: TextIO, level: str, fmt: str = "text") -> Iterator[None]:
    """:func:`setup_logging` for the block only: the loggers are as they were after it, for a tool
    run in a process that goes on (``pylogq.cli.main.run`` called from Python, or a test)."""
    saved: List[Tuple[logging.Logger, List[logging.Handler], int, bool]] = []
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.level, logger.propagate))
    setup_logging(level, fmt, stream)
    try:
        yield
    finally:
        for logger, handlers, level_no, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level_no)
            logger.propagate = propagate
