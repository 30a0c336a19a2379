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
checkpoints written, so the next start needs no recovery. If that has not finished
``--shutdown-timeout`` seconds after the signal (a request stuck, the event loop
blocked), or at a second signal, it logs an error naming the step it was stuck in and
exits with status 1 without finishing; the next start then recovers the logs as after
a crash (acknowledged records are in the files already).

A broker that cannot start (a bad setting, a port in use, an unreadable file) says
why in one line, ``Error: <message>``, as every pylogq tool does, and exits with
status 2 (1 is the forced shutdown above). ``--version`` prints the package's version.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from .._version import __version__
from . import allocator as _allocator
from ._errors import report_error
from ._logging import setup_logging

if TYPE_CHECKING:
    import asyncio

__all__ = ["main"]

DEFAULT_DATA_DIR = "pylogq-data"
# How long a clean shutdown may take from the signal before the process exits anyway: past
# the listeners' own 30 s for requests in flight and the broker's 30 s for a topic
# administration, and below systemd's 90 s before SIGKILL.
SHUTDOWN_TIMEOUT_S = 75.0
EXIT_FORCED = 1
EXIT_NOT_STARTED = 2
# How long the watchdog waits for a log line to be written (the blocked thread may hold
# the log handler's lock) before it exits regardless.
_LOG_WAIT_S = 1.0


class _Shutdown:
    """Stops the process on SIGTERM or SIGINT even when the event loop is blocked.

    A handler on the loop would never run while a request holds the loop, so the signals
    are blocked in every thread (set in the main thread before any other thread starts,
    and inherited) and taken by one watchdog thread with ``sigwait``. The first signal asks
    for the clean path (``request``, once main has one: stop the listeners, answer what was
    read, close the broker); if the process is still alive ``timeout`` seconds later, or
    at a second signal, the watchdog logs an error naming ``stage`` and ends the process
    with :data:`EXIT_FORCED`. SIGINT is left alone when it was ignored at start (a
    background job). Thread-safe: ``stage`` is one string, ``request`` is set under a lock.

    A thread started before :meth:`install` (a native library's, when ``main`` is called
    from a program that loaded one) does not block the signals and may be the one the
    kernel hands them to; :meth:`_forward` then passes the signal on to the watchdog from
    the main thread, as Python's handler or, while the loop runs (:meth:`watch_loop`), as
    the loop's signal handler, which the loop's wakeup runs at once. That case works
    unless the loop is blocked; ``pylogq-broker`` starts no thread before ``main``.
    """

    def __init__(self, timeout: float, log: logging.Logger) -> None:
        self.timeout = timeout
        self.log = log
        self.stage = "starting"
        self.signals = {signal.SIGTERM}
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self.signals.add(signal.SIGINT)
        self._lock = threading.Lock()
        self._request: Optional[Callable[[], None]] = None
        self.requested = False
        self._mask: Optional[Any] = None
        self._handlers: Dict[int, Any] = {}
        self._watchdog: Optional[threading.Thread] = None
        self.installed = False

    def install(self) -> None:
        """Block the signals in this (the main) thread and start the watchdog."""
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, self.signals)
        self._watchdog = threading.Thread(target=self._watch, name="pylogq-shutdown", daemon=True)
        self._watchdog.start()
        for sig in self.signals:
            self._handlers[sig] = signal.signal(sig, self._forward)
        self.installed = True

    def uninstall(self) -> None:
        """Give the process its handlers and this thread its mask back (main returning to
        an in-process caller; the watchdog stays, waiting for nothing)."""
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        if self._mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)

    def watch_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forward the signals a thread without the mask takes from the loop, at once (a
        Python handler would wait for the loop's next timer to run)."""
        for sig in self.signals:
            loop.add_signal_handler(sig, self._forward, sig, None)

    def unwatch_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in self.signals:
            loop.remove_signal_handler(sig)  # which resets Python's handler: ours again
            signal.signal(sig, self._forward)

    def _forward(self, signum: int, frame: Any) -> None:
        if self._watchdog is not None and self._watchdog.ident is not None:
            signal.pthread_kill(self._watchdog.ident, signum)

    def on_signal(self, request: Callable[[], None]) -> None:
        """How to ask for the clean path; called at once if a signal came first."""
        with self._lock:
            self._request = request
            requested = self.requested
        if requested:
            request()

    def _watch(self) -> None:
        first = signal.sigwait(self.signals)
        self._log(logging.INFO, "shutting down signal=%s timeout_s=%g", signal.Signals(first).name, self.timeout)
        with self._lock:
            self.requested = True
            request = self._request
        if request is not None:
            request()
        second = signal.sigtimedwait(self.signals, self.timeout)
        if second is None:
            why = "did not finish within %g s of %s" % (self.timeout, signal.Signals(first).name)
        else:
            why = "interrupted by a second signal (%s)" % signal.Signals(second.si_signo).name
        self._log(logging.ERROR, "shutdown %s, stuck %s; exiting with status %d without a clean shutdown "
                  "(the next start recovers the logs)", why, self.stage, EXIT_FORCED)
        os._exit(EXIT_FORCED)

    def _log(self, level: int, message: str, *args: Any) -> None:
        # From a thread of its own: the blocked main thread may hold the log handler's lock.
        writer = threading.Thread(target=self.log.log, args=(level, message, *args), daemon=True)
        writer.start()
        writer.join(_LOG_WAIT_S)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("expected a positive number of seconds, got %r" % text)
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, with the terminal's width found without importing shutil (argparse builds
    a formatter for every argument added, so shutil would be imported at every start)."""

    def __init__(self, prog: str) -> None:
        columns = 80  # without COLUMNS, a terminal or a stdout at all
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            if sys.__stdout__ is not None:
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
                except (OSError, ValueError):
                    pass
        super().__init__(prog, width=max(columns - 2, 11))


def _parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pylogq-broker", description="Serve a pylogq broker to Kafka clients over the Kafka protocol.",
        formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    parser.add_argument("config", nargs="?", help="server.properties file (Kafka's keys); also --config")
    parser.add_argument("--config", dest="config_flag", metavar="FILE", help="server.properties file")
    parser.add_argument("--data-dir", help="data directory (log.dirs); default ./%s" % DEFAULT_DATA_DIR)
    parser.add_argument("--listeners", help="listeners, e.g. PLAINTEXT://127.0.0.1:9092")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a config key (repeatable); wins over the properties file")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (must be installed)")
    parser.add_argument("--shutdown-timeout", type=_seconds, default=SHUTDOWN_TIMEOUT_S, metavar="SECONDS",
                        help="after SIGTERM or Ctrl-C, exit with status 1 if the clean shutdown has not "
                             "finished within this time (default %.0f)" % SHUTDOWN_TIMEOUT_S)
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
    # Starting creates only objects that live as long as the broker (modules, classes, the
    # logs): the cyclic collector is held off until the broker is ready, which spares the
    # start a tenth of its time and would find nothing to free.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(argv, collecting)
    finally:
        if collecting:
            gc.enable()


def _main(argv: Optional[List[str]], collecting: bool) -> int:
    args = _parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    log = logging.getLogger("pylogq.server")
    # Request buffers reused instead of page-faulted in afresh (pylogq/cli/allocator.py);
    # this process is a broker, so malloc is its to tune.
    if _allocator.tune():
        log.debug("malloc mmap_threshold=%d trim_threshold=%d", _allocator.MMAP_THRESHOLD, _allocator.TRIM_THRESHOLD)
    # Before any thread starts (the broker starts some), so that every thread inherits
    # the blocked signals and only the watchdog takes them. Signals are the main thread's
    # to handle: called from another thread, main leaves them to its caller.
    shutdown = _Shutdown(args.shutdown_timeout, log)
    if threading.current_thread() is threading.main_thread():
        shutdown.install()
    try:
        return _run(args, shutdown, log, collecting)
    finally:
        shutdown.uninstall()


def _run(args: argparse.Namespace, shutdown: _Shutdown, log: logging.Logger, collecting: bool) -> int:
    import asyncio  # here, with the collector held off (see main)

    from ..cluster.broker.broker import Broker
    from ..errors import ConfigError, PylogqError
    from ..server import KafkaServer, new_event_loop

    shutdown.stage = "opening the broker"
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
        report_error(sys.stderr, exc)
        return EXIT_NOT_STARTED
    loop = new_event_loop(args.uvloop)
    asyncio.set_event_loop(loop)
    shutdown.stage = "starting the listeners"
    try:
        server = KafkaServer(broker)
        loop.run_until_complete(server.start())
        # A broker of a cluster registers once its listeners are bound (Kafka's order).
        if broker.clustered:
            shutdown.stage = "joining the cluster"
            # Off the loop, which serves the controller's requests meanwhile.
            loop.run_until_complete(loop.run_in_executor(None, broker.join_cluster, server.endpoints()))
    except (ConfigError, PylogqError, OSError) as exc:
        try:
            loop.run_until_complete(server.stop())
        except NameError:
            pass
        broker.close()
        report_error(sys.stderr, exc)
        return EXIT_NOT_STARTED
    stop = asyncio.Event()

    def request_stop() -> None:
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop is closed: main is past serving already
            pass

    # With every log directory offline there is nothing to serve: the broker stops as on a
    # signal (a member first moves its leaderships away) and exits 1, as Kafka halts.
    storage_failure: List[str] = []

    def storage_failed(why: str) -> None:
        storage_failure.append(why)
        request_stop()

    broker.on_storage_failure = storage_failed
    shutdown.stage = "waiting for the event loop to take the stop request"
    if shutdown.installed:
        shutdown.watch_loop(loop)
    shutdown.on_signal(request_stop)
    if collecting:
        gc.enable()
    print("pylogq-broker %d ready on %s" % (broker.broker_id, ", ".join("%s:%d" % a for a in server.addresses)),
          flush=True)
    if broker.metrics_url is not None:
        print("pylogq-broker %d metrics on %s" % (broker.broker_id, broker.metrics_url), flush=True)
    log.info("ready broker_id=%d cluster_id=%s data_dir=%s pid=%d", broker.broker_id, broker.cluster_id,
             os.path.abspath(data_dir), os.getpid())
    try:
        loop.run_until_complete(stop.wait())
        if broker.clustered:
            # Controlled shutdown while still serving: leaderships move first, clients follow.
            shutdown.stage = "moving leaderships away (controlled shutdown)"
            loop.run_until_complete(loop.run_in_executor(None, broker.controlled_shutdown))
        shutdown.stage = "stopping the listeners"
        loop.run_until_complete(server.stop())
    finally:
        shutdown.stage = "closing the broker (flush and checkpoints)"
        broker.close()
        if shutdown.installed:
            shutdown.unwatch_loop(loop)
        loop.close()
    shutdown.stage = "exiting (threads still running after the broker closed)"
    if storage_failure:
        log.critical("stopped: %s", storage_failure[0])
        print("pylogq-broker: stopped: %s" % storage_failure[0], file=sys.stderr, flush=True)
        return 1
    log.info("stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
