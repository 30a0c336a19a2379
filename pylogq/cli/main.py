"""``pylogq``: the command-line entry point.

``pylogq dump-log --files F[,F...]`` prints segment files as Kafka's
``kafka-dump-log.sh`` does (see :mod:`pylogq.cli.dump_log`).

``pylogq topics|produce|consume|groups|configs|acls|reassign-partitions|leader-election|transactions|perf``
are Kafka's tools for a running broker (``--bootstrap-server HOST:PORT``, default
127.0.0.1:9092), in the output formats of ``kafka-topics.sh``, ``kafka-console-producer.sh``,
``kafka-console-consumer.sh``, ``kafka-consumer-groups.sh``, ``kafka-configs.sh``, ``kafka-acls.sh``,
``kafka-reassign-partitions.sh``, ``kafka-leader-election.sh``, ``kafka-transactions.sh`` and
``kafka-*-perf-test.sh``; see :mod:`pylogq.cli.topics`, :mod:`~pylogq.cli.console`, :mod:`~pylogq.cli.groups`,
:mod:`~pylogq.cli.configs`, :mod:`~pylogq.cli.acls`, :mod:`~pylogq.cli.reassign`, :mod:`~pylogq.cli.leader_election`,
:mod:`~pylogq.cli.transactions` and :mod:`~pylogq.cli.perf`. :func:`run` runs any of
them against clients the caller builds (a :class:`pylogq.Broker` in this
process, for instance) and streams it chooses. A broker with only SSL or SASL
listeners is reached as with Kafka's tools: ``--command-config FILE``
(``leader-election``: also ``--admin.config``), and the console and perf tools'
``--producer.config`` / ``--consumer.config``, a properties file of Kafka's client
keys (:mod:`pylogq.cli.command_config`).

``pylogq demo [DIR]`` appends record batches in every format and codec pylogq
reads (v2 with none, gzip, snappy, lz4 and zstd; legacy v0 and v1) to a log
``DIR/demo-0``, closes it, reopens it (no recovery needed after a clean close)
and reads it back as Kafka fetches do, printing each batch and the kernels in use.

``pylogq mirror-maker CONFIG`` mirrors topics between clusters as Kafka's MirrorMaker 2 does,
and ``pylogq mirror-maker status`` / ``translate-offsets`` report on it (see
:mod:`pylogq.cli.mirror_maker`).

``pylogq zookeeper-server-start [zookeeper.properties]`` runs the system's ZooKeeper
in the foreground, as Kafka's ``zookeeper-server-start.sh`` does (see
:mod:`pylogq.cli.zookeeper_server`).

Conventions every subcommand follows: a flag it does not know is a usage error
reported with its own usage (``pylogq topics: error: unrecognized arguments:
--bogus``, exit status 2); a failure is one line ``Error: <message>`` on stderr
with exit status 1 (:mod:`pylogq.cli._errors`); ``pylogq --version`` prints the
package's version; a closed stdout (``pylogq dump-log ... | head``) ends the
command quietly with exit status 0 (:func:`main`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import IO, Any, BinaryIO, List, Optional, TextIO, cast

from .. import _speedups, records
from .._version import __version__
from ..errors import PylogqError
from ..records import codecs, crc
from ..records.legacy import LegacyRecordBatchBuilder, iter_legacy_records
from . import (
    _interrupts,
    acls,
    config_files,
    configs,
    console,
    dump_log,
    groups,
    leader_election,
    mirror_maker,
    perf,
    reassign,
    topics,
    transactions,
    zookeeper_server,
)
from ._errors import report_error
from .clients import Clients
from .command_config import read_command_config

__all__ = ["build_parser", "run", "main"]


def _demo(directory: str) -> int:
    """Append batches of every format to a log, close it, reopen it and read it back."""
    from ..storage.log import Log

    path = os.path.join(directory, "demo-0")
    now = int(time.time() * 1000)
    log = Log.open(path, segment_bytes=64 * 1024)
    for codec in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        values = [b"value %d compressed with %s" % (i, codecs.NAMES[codec].encode()) for i in range(1000)]
        keys = [b"key-%d" % (i % 10) for i in range(1000)]
        log.append(records.build_batch(values, keys=keys, timestamps=now, compression_type=codec))
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic, codecs.GZIP)
        for i in range(100):
            builder.append(i, now, b"legacy-key", b"legacy v%d message %d" % (magic, i))
        log.append(builder.build())  # a producer of Kafka 0.8-0.10 sends these
    end = log.log_end_offset
    log.close()

    log = Log.open(path)
    print("log %s: offsets %d..%d in %d segments, %d bytes; reopened with %d bytes recovered" % (
        path, log.log_start_offset, log.log_end_offset - 1, log.num_segments, log.size_in_bytes,
        log.recovered_bytes))
    print("kernels: %s; crc: %s" % (
        ", ".join("%s=%s" % (k, "compiled" if v else "pure") for k, v in sorted(_speedups.loaded.items())),
        crc.IMPLEMENTATION,
    ))
    count = 0
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()  # whole batches of one segment
        for info in records.iter_batches(data, check_crc=True):
            entry = data[info.position : info.position + info.size]
            if info.magic == 2:
                batch = records.RecordBatch(entry)
                recs = batch.records()
                kind = codecs.NAMES[batch.compression_type]
            else:
                recs = list(iter_legacy_records(entry))
                kind = "legacy v%d" % info.magic
            count += len(recs)
            print("  offsets %6d..%6d  %-10s %5d records  %6d bytes  first value %r" % (
                recs[0].offset, recs[-1].offset, kind, len(recs), info.size, recs[0].value))
            offset = recs[-1].offset + 1
    columns = records.decode_columns(log.read(0, 1 << 30).read())
    print("columnar: %d records of the first segment, offsets %d..%d" % (
        len(columns), columns.offsets[0], columns.offsets[-1]))
    log.close()
    assert count == end
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that arguments a subcommand does not know are reported by that
    subcommand's parser, with its usage.

    A subparser is asked through ``parse_known_args`` and leaves what it does not
    know to the top level, which would report it with the top-level usage.
    ``add_subparsers`` makes subparsers of the parent's class, so every level
    (``pylogq perf produce``) reports its own.
    """

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error("unrecognized arguments: %s" % " ".join(extras))
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pylogq", description="pylogq command-line tools")
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="append record batches in every format to a log and read them back")
    demo.add_argument("directory", nargs="?", help="the log directory to use (default: a temp dir)")
    dump = sub.add_parser("dump-log", help=dump_log.SUMMARY, description=dump_log.SUMMARY)
    dump_log.add_arguments(dump)
    topics.add_arguments(sub.add_parser("topics", help=topics.SUMMARY, description=topics.SUMMARY))
    console.add_produce_arguments(sub.add_parser("produce", help=console.PRODUCE_SUMMARY,
                                                 description=console.PRODUCE_SUMMARY))
    console.add_consume_arguments(sub.add_parser("consume", help=console.CONSUME_SUMMARY,
                                                 description=console.CONSUME_SUMMARY))
    groups.add_arguments(sub.add_parser("groups", help=groups.SUMMARY, description=groups.SUMMARY))
    configs.add_arguments(sub.add_parser("configs", help=configs.SUMMARY, description=configs.SUMMARY))
    acls.add_arguments(sub.add_parser("acls", help=acls.SUMMARY, description=acls.SUMMARY))
    # Kafka's --broker-list of this tool is the target brokers: it takes the name from the bootstrap alias.
    reassign.add_arguments(sub.add_parser("reassign-partitions", help=reassign.SUMMARY, description=reassign.SUMMARY,
                                          conflict_handler="resolve"))
    leader_election.add_arguments(sub.add_parser("leader-election", help=leader_election.SUMMARY,
                                                 description=leader_election.SUMMARY))
    transactions.add_arguments(sub.add_parser("transactions", help=transactions.SUMMARY,
                                              description=transactions.SUMMARY))
    perf.add_arguments(sub.add_parser("perf", help=perf.SUMMARY, description=perf.SUMMARY))
    # Parsed by the tool itself (its own commands and MirrorMaker 1's flags): see run().
    mirror_maker.add_arguments(sub.add_parser("mirror-maker", help=mirror_maker.SUMMARY, add_help=False,
                                              description=mirror_maker.SUMMARY))
    zookeeper_server.add_arguments(sub.add_parser("zookeeper-server-start", help=zookeeper_server.SUMMARY,
                                                  description=zookeeper_server.SUMMARY))
    config_files.add_arguments(sub.add_parser("config-files", help=config_files.SUMMARY,
                                              description=config_files.SUMMARY))
    return parser


def _binary(stream: Any) -> BinaryIO:
    """The byte stream under a text stream (records are bytes); a byte stream as it is."""
    return cast(BinaryIO, getattr(stream, "buffer", stream))


def run(argv: Optional[List[str]] = None, clients: Optional[Clients] = None, stdin: Optional[IO[Any]] = None,
        stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None, progress: Optional[bool] = None) -> int:
    """Run one ``pylogq`` command; -> its exit status.

    The broker tools use ``clients`` when given (and close the clients they
    built from it before returning; the broker stays up), else clients for
    ``--bootstrap-server``; either way with the options of a ``--command-config``
    file (:mod:`pylogq.cli.command_config`). The streams default to the process's; ``progress``
    forces the perf tools' progress bar on or off (None: on for a terminal).
    """
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["mirror-maker"]:
        # Its own parsers: a properties file, or MirrorMaker 1's flags, or a command of its own.
        return mirror_maker.main(given[1:], sys.stdout if stdout is None else stdout,
                                 sys.stderr if stderr is None else stderr)
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args.directory or tempfile.mkdtemp(prefix="pylogq-demo-"))
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    if args.command == "dump-log":
        return dump_log.run(args, out, err)
    if args.command == "zookeeper-server-start":
        return zookeeper_server.run(args, out, err)
    if args.command == "config-files":
        return config_files.run(args, out, err)
    if clients is None:
        clients = Clients(bootstrap_servers=perf.bootstrap_override(args) or args.bootstrap_server)
    command_config = getattr(args, "command_config", None)
    if command_config is not None:
        try:
            clients = clients.configured(read_command_config(command_config, err))
        except PylogqError as exc:
            return report_error(err, exc)
    try:
        with _interrupts.stop_signals():
            if args.command == "topics":
                return topics.run(args, clients, out, err)
            if args.command == "produce":
                source = sys.stdin if stdin is None else stdin
                return console.run_produce(args, clients, _binary(source), err)
            if args.command == "consume":
                out.flush()
                return console.run_consume(args, clients, _binary(out), err)
            if args.command == "groups":
                return groups.run(args, clients, out, err)
            if args.command == "configs":
                return configs.run(args, clients, out, err)
            if args.command == "acls":
                return acls.run(args, clients, out, err, stdin)
            if args.command == "reassign-partitions":
                return reassign.run(args, clients, out, err)
            if args.command == "leader-election":
                return leader_election.run(args, clients, out, err)
            if args.command == "transactions":
                return transactions.run(args, clients, out, err)
            return perf.run(args, clients, out, err, progress=progress)
    finally:
        clients.close()


class _Stdout:
    """The process's stdout for the tools: text written to a closed pipe ends the command.

    It raises SystemExit(0) after pointing stdout at /dev/null: SystemExit is not an
    Exception, so it goes through the tools' handlers of OSError (BrokenPipeError's
    base) and ``except Exception`` up to the interpreter, which exits quietly.
    ``buffer`` (and everything else) is the stream's own: ``consume`` writes
    records to the bytes under it and handles a closed pipe itself, as it
    reports how many records it printed.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _output_closed(self._stream)
            raise  # not reached

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _output_closed(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _discard_stdout(stream: TextIO) -> None:
    """Point stdout's descriptor at /dev/null: what is left in its buffer is flushed at exit,
    and must find nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def _output_closed(stream: TextIO) -> None:
    """The reader of stdout went away: stop here, quietly, with exit status 0."""
    _discard_stdout(stream)
    raise SystemExit(0)


def main(argv: Optional[List[str]] = None) -> int:
    """The ``pylogq`` command: :func:`run` on the process's streams; -> its exit status.

    When the reader of stdout goes away (``pylogq dump-log ... | head``), the
    command stops there, says nothing and exits with status 0, as the Python
    documentation's note on SIGPIPE recommends handling it: catch
    BrokenPipeError and send what stdout still holds to /dev/null (SIGPIPE itself
    stays ignored, so a broker connection that breaks is an error, not a silent
    death). Every subcommand gets it, through the stdout given to it.
    """
    real = sys.stdout
    stdout = cast(TextIO, _Stdout(real))
    sys.stdout = stdout  # print() too, as in demo
    try:
        status = run(argv, stdout=stdout)
    finally:
        sys.stdout = real
    try:
        real.flush()
    except BrokenPipeError:
        _discard_stdout(real)  # consume stopped at its closed pipe already; the records it could not write are left
    return status


if __name__ == "__main__":
    sys.exit(main())
