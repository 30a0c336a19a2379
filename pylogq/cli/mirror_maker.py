"""``pylogq mirror-maker``: mirror topics between clusters, as Kafka's ``connect-mirror-maker.sh`` does.

Three commands:

- ``pylogq mirror-maker CONFIG [--clusters A [B ...]] [--metrics-listener URL]``: run the
  flows of a ``connect-mirror-maker.properties`` file (:mod:`pylogq.mirror.config`), those
  into the ``--clusters`` named (all by default), until SIGTERM or Ctrl-C, which stop it
  cleanly (copies acknowledged, positions committed or the last transaction committed,
  the workers' groups left, so other processes take the tasks over at once). MirrorMaker
  1's flags run one flow instead: ``--consumer.config FILE --producer.config FILE
  --whitelist RE`` (or ``--include RE``) ``[--num.streams N]``;
- ``pylogq mirror-maker status --config CONFIG``: per flow and source partition, the
  source's end offset, the mirror's position and the lag, and the processes running the
  flow's tasks (:mod:`pylogq.mirror.status`);
- ``pylogq mirror-maker translate-offsets --config CONFIG --source A --target B --group G
  [--execute]``: the group's offsets on B translated from its offsets on A by the flow's
  checkpoints, printed as ``kafka-consumer-groups.sh --reset-offsets`` prints a plan, and
  with ``--execute`` committed to the group on B (which must have no member consuming).

The properties' client settings (``<alias>.security.protocol``, ``<alias>.ssl.*``,
``<alias>.sasl.*``, ``client.id``, ``<alias>.producer.linger.ms``, ...) become pylogq's
client options the way ``--command-config`` files do (:mod:`pylogq.cli.command_config`);
settings pylogq's clients do not use are named in one warning each.

What ``pylogq mirror-maker CONFIG`` prints on stdout (one line each, flushed):

- when every flow's internal topics exist and its workers' group has been joined::

      pylogq mirror-maker ready: A->B, B->A

- with ``--metrics-listener`` (``http://host:port``, port 0 picks one), the address of
  the Prometheus endpoint (:mod:`pylogq.mirror.metrics`)::

      pylogq mirror-maker metrics on http://127.0.0.1:9404/metrics

- every ``--progress-interval`` seconds (5), one line per flow: the records and bytes
  this process copied per second since the last line, all it copied since it started,
  the lag of the partitions it copies (records of the source not yet acknowledged by
  the target) and the tasks it runs::

      A->B: 20013.2 records/s, 2.10 MB/s, 1234567 records, lag 120, tasks 0,1 of 2

- when it stopped cleanly: ``pylogq mirror-maker stopped``.

Its log (the mirror's and the clients', ``--log-level``, INFO by default) goes to stderr.
Exit status: 0 after a clean stop; 1 when a flow cannot start (a bad setting, a refused
internal topic, a cluster not answering within ``admin.timeout.ms``) or fails for good
(``Error: <reason>`` on stderr); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any, Dict, List, Mapping, Sequence, Set, TextIO, Tuple

from ..client.admin import AdminClient
from ..errors import CommandError, ConfigError, PylogqError
from ..mirror.config import MirrorConfig, legacy_config, load_config
from ..mirror.metrics import MirrorMetrics
from ..mirror.status import flow_status, translate_group
from ..mirror.worker import TASK_STOP_TIMEOUT_S, MirrorMaker
from . import _interrupts
from ._errors import report_error
from ._logging import logging_to
from .clients import client_configs, int_argument, read_properties
from .command_config import connection_options

__all__ = ["SUMMARY", "ClientOptionsConverter", "main"]

SUMMARY = "mirror topics between clusters as Kafka's MirrorMaker 2 does (connect-mirror-maker.sh)"

_COMMANDS = ("status", "translate-offsets")


class ClientOptionsConverter:
    """The mirror's ``client_options``: Kafka client properties as pylogq client options, the way
    ``--command-config`` files are read (TLS contexts, SASL logins), each distinct set of
    ignored keys warned about once on ``err``. Thread-safe."""

    def __init__(self, err: TextIO) -> None:
        self._err = err
        self._lock = threading.Lock()
        self._warned: Set[Tuple[str, str]] = set()

    def __call__(self, props: Mapping[str, str], kind: str) -> Dict[str, Any]:
        found = connection_options(props)
        options: Dict[str, Any] = {**client_configs(found.rest), **found.options}
        options["bootstrap_servers"] = props.get("bootstrap.servers", "").strip()
        with self._lock:
            for key, reason in found.ignored:
                if (key, reason) not in self._warned:
                    self._warned.add((key, reason))
                    self._err.write("Warning: %s of the mirror's clients ignored (%s)\n" % (key, reason))
        return options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylogq mirror-maker", description=SUMMARY,
        epilog="Other commands: 'pylogq mirror-maker status --config CONFIG' and 'pylogq mirror-maker "
               "translate-offsets --config CONFIG --source A --target B --group G'.")
    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help="the connect-mirror-maker.properties file of the clusters and flows")
    parser.add_argument("--clusters", nargs="+", metavar="ALIAS",
                        help="run only the flows into these clusters (default: every enabled flow)")
    parser.add_argument("--metrics-listener", metavar="URL",
                        help="serve Prometheus metrics on http://host:port (port 0 picks one)")
    parser.add_argument("--progress-interval", type=float, default=5.0, metavar="SECONDS",
                        help="seconds between the progress lines (default 5; 0: none)")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        type=str.upper, help="the log's level on stderr (default INFO)")
    legacy = parser.add_argument_group("MirrorMaker 1's flags", "one flow from the consumer's cluster to the "
                                       "producer's, topic names kept")
    legacy.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                        help="the source cluster's consumer settings (bootstrap.servers required)")
    legacy.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                        help="the target cluster's producer settings (bootstrap.servers required)")
    legacy.add_argument("--whitelist", "--include", dest="include", metavar="RE",
                        help="the topics to mirror (a regular expression; a comma means or)")
    legacy.add_argument("--num.streams", dest="num_streams", type=int_argument(1), default=1, metavar="N",
                        help="the tasks the flow's partitions are shared between (default 1)")
    return parser


def _status_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylogq mirror-maker status",
                                     description="Each flow's partitions (source end offset, mirror position, lag) "
                                                 "and the processes running its tasks.")
    parser.add_argument("--config", required=True, metavar="CONFIG", help="the mirror maker's properties file")
    parser.add_argument("--clusters", nargs="+", metavar="ALIAS", help="only the flows into these clusters")
    return parser


def _translate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylogq mirror-maker translate-offsets",
                                     description="A consumer group's offsets on the target, translated from its "
                                                 "offsets on the source by the flow's checkpoints.")
    parser.add_argument("--config", required=True, metavar="CONFIG", help="the mirror maker's properties file")
    parser.add_argument("--source", required=True, metavar="ALIAS", help="the cluster the group consumed from")
    parser.add_argument("--target", required=True, metavar="ALIAS", help="the cluster the group moves to")
    parser.add_argument("--group", required=True, help="the consumer group")
    parser.add_argument("--execute", action="store_true",
                        help="commit the offsets to the group on the target (it must have no member consuming)")
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """What ``pylogq --help`` lists; :func:`main` parses the command itself (``pylogq.cli.main``
    hands it everything after ``mirror-maker``)."""
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="see 'pylogq mirror-maker --help'")


def main(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    """Run ``pylogq mirror-maker`` with ``argv`` (what follows ``mirror-maker``); -> the exit status."""
    args = list(argv)
    try:
        if args and args[0] == "status":
            return _status(_status_parser().parse_args(args[1:]), out, err)
        if args and args[0] == "translate-offsets":
            return _translate(_translate_parser().parse_args(args[1:]), out, err)
        parser = _parser()
        return _mirror(parser, parser.parse_args(args), out, err)
    except (ConfigError, CommandError, PylogqError) as exc:
        return report_error(err, exc)


# -- running the flows ------------------------------------------------------------------------


def _load(parser: argparse.ArgumentParser, args: argparse.Namespace) -> MirrorConfig:
    legacy = [args.consumer_config, args.producer_config, args.include]
    if args.config is not None:
        if any(flag is not None for flag in legacy):
            parser.error("give a properties file or MirrorMaker 1's flags (--consumer.config, --producer.config, "
                         "--whitelist), not both")
        return load_config(args.config, args.clusters)
    if not any(flag is not None for flag in legacy):
        parser.error("the properties file of the clusters and flows is required (or MirrorMaker 1's "
                     "--consumer.config, --producer.config and --whitelist)")
    missing = [flag for flag, given in (("--consumer.config", args.consumer_config),
                                        ("--producer.config", args.producer_config),
                                        ("--whitelist", args.include)) if given is None]
    if missing:
        parser.error("MirrorMaker 1's flags need %s too" % " and ".join(missing))
    if args.clusters:
        parser.error("--clusters names clusters of a properties file; MirrorMaker 1's flags make one flow")
    return legacy_config(read_properties(args.consumer_config), read_properties(args.producer_config), args.include,
                         args.num_streams)


def _progress(mirror: MirrorMaker, previous: Dict[str, Tuple[float, int, int]], out: TextIO) -> None:
    """One line per flow: what this process copied per second since the last line, in all, its lag."""
    now = time.monotonic()
    for worker in mirror.flows:
        flow = worker.flow
        totals = mirror.metrics.flow_totals(flow.source, flow.target)
        since, records, nbytes = previous.get(flow.name, (now, totals.records, totals.bytes))
        elapsed = now - since
        rate = (totals.records - records) / elapsed if elapsed > 0 else 0.0
        byte_rate = (totals.bytes - nbytes) / elapsed if elapsed > 0 else 0.0
        owned = worker.owned
        out.write("%s: %.1f records/s, %.2f MB/s, %d records, lag %d, tasks %s of %d\n"
                  % (flow.name, rate, byte_rate / 1e6, totals.records, totals.lag,
                     ",".join(map(str, owned)) or "none", flow.tasks_max))
        previous[flow.name] = (now, totals.records, totals.bytes)
    out.flush()


def _mirror(parser: argparse.ArgumentParser, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.progress_interval < 0:
        parser.error("--progress-interval must be at least 0")
    config = _load(parser, args)
    for key, why in sorted(config.unused.items()):
        err.write("Warning: %s is ignored: %s\n" % (key, why))
    with logging_to(err, args.log_level):
        return _run_mirror(args, config, out, err)


def _run_mirror(args: argparse.Namespace, config: MirrorConfig, out: TextIO, err: TextIO) -> int:
    metrics = MirrorMetrics()
    server = metrics.registry().serve(args.metrics_listener, "--metrics-listener") if args.metrics_listener else None
    mirror = MirrorMaker(config, ClientOptionsConverter(err), metrics)
    status = 0
    stopped = True
    with _interrupts.stop_signals():
        try:
            with _interrupts.deferred():  # a stop request while a flow starts is taken once it has
                mirror.start()
            while not mirror.wait_joined(0.2):
                _check_flows(mirror)
            out.write("pylogq mirror-maker ready: %s\n" % ", ".join(w.flow.name for w in mirror.flows))
            if server is not None:
                out.write("pylogq mirror-maker metrics on %s\n" % server.url)
            out.flush()
            previous: Dict[str, Tuple[float, int, int]] = {}
            _progress_baseline(mirror, previous)
            interval = args.progress_interval
            next_line = time.monotonic() + interval
            while True:
                _check_flows(mirror)
                time.sleep(0.2)
                if interval and time.monotonic() >= next_line:
                    _progress(mirror, previous, out)
                    next_line = time.monotonic() + interval
        except KeyboardInterrupt:
            pass
        except PylogqError as exc:
            status = report_error(err, exc)
        finally:
            try:
                with _interrupts.deferred():  # a second stop request waits for this one
                    stopped = mirror.stop(STOP_TIMEOUT_S)
                    if server is not None:
                        server.close()
            except KeyboardInterrupt:
                pass
    if not stopped:
        # A task that did not finish within its bound: its copies and positions are as a kill
        # would leave them (duplicates at least once, nothing exactly once), so the exit says so.
        status = report_error(err, PylogqError("the mirror did not stop within %g s" % STOP_TIMEOUT_S))
    if status == 0:
        out.write("pylogq mirror-maker stopped\n")
        out.flush()
    return status


#: How long a stop may take before the process gives up on it: a task's own bound and a margin.
STOP_TIMEOUT_S = TASK_STOP_TIMEOUT_S + 30.0


def _progress_baseline(mirror: MirrorMaker, previous: Dict[str, Tuple[float, int, int]]) -> None:
    now = time.monotonic()
    for worker in mirror.flows:
        totals = mirror.metrics.flow_totals(worker.flow.source, worker.flow.target)
        previous[worker.flow.name] = (now, totals.records, totals.bytes)


def _check_flows(mirror: MirrorMaker) -> None:
    """A flow whose group membership failed ends the process (its tasks are stopped)."""
    for worker in mirror.flows:
        if worker.error is not None:
            raise PylogqError("flow %s stopped: %s" % (worker.flow.name, worker.error))


# -- status -----------------------------------------------------------------------------------


def _table(rows: List[Tuple[str, ...]], out: TextIO) -> None:
    """Rows padded to their columns' widths, separated by a space, as Kafka's group tool prints them."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write(" ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")


def _status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config = load_config(args.config, args.clusters)
    converter = ClientOptionsConverter(err)
    partitions: List[Tuple[str, ...]] = [("FLOW", "TOPIC", "PARTITION", "REMOTE-TOPIC", "TASK", "END-OFFSET",
                                          "POSITION", "LAG")]
    workers: List[Tuple[str, ...]] = [("FLOW", "GROUP-STATE", "TASKS", "CLIENT-ID", "HOST", "MEMBER-ID")]
    for flow in config.flows:
        found = flow_status(flow, converter)
        for row in found.partitions:
            partitions.append((found.flow, row.topic, str(row.partition), row.remote_topic, str(row.task),
                               str(row.end_offset), "-" if row.position is None else str(row.position),
                               str(row.lag)))
        for member in found.workers:
            workers.append((found.flow, found.workers_state, ",".join(map(str, member.tasks)) or "-",
                            member.client_id, member.host, member.member_id))
        if not found.workers:
            workers.append((found.flow, found.workers_state, "-", "-", "-", "-"))
    _table(partitions, out)
    out.write("\n")
    _table(workers, out)
    return 0


# -- translate-offsets ------------------------------------------------------------------------


def _translate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config = load_config(args.config)
    for alias in (args.source, args.target):
        if alias not in config.clusters:
            raise ConfigError("%r is not one of the clusters (%s)" % (alias, ", ".join(config.clusters)))
    converter = ClientOptionsConverter(err)
    offsets = translate_group(config, args.source, args.target, args.group, converter)
    if not offsets:
        return report_error(err, "no checkpoints of group %r from %s on %s (%s): the flow %s->%s has not "
                                 "checkpointed it yet" % (args.group, args.source, args.target,
                                                          config.policy.checkpoints_topic(args.source),
                                                          args.source, args.target))
    group_w = max(30, len(args.group))
    topic_w = max([30] + [len(tp.topic) for tp in offsets])
    line = "%%-%ds %%-%ds %%-10s %%s" % (group_w, topic_w)
    out.write("\n" + line % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + "\n")
    for tp in sorted(offsets):
        out.write(line % (args.group, tp.topic, tp.partition, offsets[tp].offset) + "\n")
    if args.execute:
        options = converter(config.client_config(args.target, "admin"), "admin")
        with AdminClient(**options) as admin:
            admin.alter_consumer_group_offsets(args.group, dict(offsets))
    return 0
