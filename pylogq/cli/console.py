"""``pylogq produce`` and ``pylogq consume``: Kafka's console producer and consumer.

``produce`` sends a record per line of stdin (the line terminator, ``\\n`` or
``\\r\\n``, is not part of the record) until end of input, as
``kafka-console-producer.sh`` does. Its ``--property`` keys are Kafka's line
reader's: ``parse.key`` with ``key.separator`` (default a tab), ``parse.headers``
with ``headers.delimiter``, ``headers.separator`` and ``headers.key.separator``,
``null.marker`` (that text becomes a null key, value or header value) and
``ignore.error`` (a line without the key separator becomes a keyless record
instead of an error). A line is read as ``[headers<delimiter>][key<separator>]value``.

``consume`` prints a record per line, as ``kafka-console-consumer.sh``'s
default formatter does: with ``--property print.timestamp=true print.key=true``
a line is ``CreateTime:1700000000000<TAB>key<TAB>value``; ``print.partition``,
``print.offset`` and ``print.headers`` add ``Partition:0``, ``Offset:5`` and
``k1:v1,k2:v2`` fields in Kafka's order; ``print.value=false`` leaves the value
out; ``key.separator``, ``line.separator``, ``headers.separator`` and
``null.literal`` change the punctuation. It stops after ``--max-messages``,
after ``--timeout-ms`` without a record, at Ctrl-C or SIGTERM, or when the
reader of its output goes away, and reports ``Processed a total of N messages``
on stderr. With ``--max-messages`` the consumer's position (and a ``--group``'s
commit) stops right after the last record printed.

Without ``--group`` the consumer reads every partition of the topic without a
group (nothing is committed); with one, it joins the group and commits what it
printed. ``--from-beginning`` starts where there is no committed offset at the
start of the log instead of its end; ``--partition`` with ``--offset`` reads one
partition from a chosen offset.

Exit status: 0 when done (the reader of the output going away counts as done),
1 on an error (``Error: ...`` on stderr; a record the producer could not send
is reported so, and the others are sent), 130 after Ctrl-C (the records read so
far were printed, and a producer's lines sent).
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, TextIO, Tuple, cast

from .. import errors
from ..client.consumer import TopicPartition
from ..errors import CommandError
from . import _interrupts
from ._errors import error_text, report_error
from .clients import Clients, add_bootstrap_argument, int_argument, parse_key_values
from .command_config import add_client_config_argument, client_settings

__all__ = [
    "CONSUME_SUMMARY",
    "PRODUCE_SUMMARY",
    "LineReader",
    "MessageFormatter",
    "add_consume_arguments",
    "add_produce_arguments",
    "run_consume",
    "run_produce",
]

PRODUCE_SUMMARY = "send a record per line of stdin to a topic, as Kafka's kafka-console-producer.sh does"
CONSUME_SUMMARY = "print the records of a topic, a record per line, as Kafka's kafka-console-consumer.sh does"

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _flag(props: Dict[str, str], key: str, default: bool) -> bool:
    value = props.pop(key, None)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise CommandError("property %s=%r: expected true or false" % (key, value))
    return lowered == "true"


def _text(props: Dict[str, str], key: str, default: Optional[str]) -> Optional[str]:
    value = props.pop(key, default)
    if value is not None:
        value = _unescape(value)
        if value == "":
            raise CommandError("property %s must not be empty" % key)
    return value


def _unescape(value: str) -> str:
    r"""``\t``, ``\n``, ``\r`` and ``\\`` in a property as the characters (a shell passes them literally)."""
    return re.sub(r"\\([tnr\\])", lambda m: {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[m.group(1)], value)


def _unknown(props: Dict[str, str], known: Sequence[str]) -> None:
    if props:
        raise CommandError("unknown propert%s %s; known: %s" % (
            "y" if len(props) == 1 else "ies", ", ".join(sorted(props)), ", ".join(known)))


# -- produce ---------------------------------------------------------------------------------------


class LineReader:
    """Splits an input line into ``(key, value, headers)`` as Kafka's LineMessageReader does.

    Stateless apart from the line count used in error messages.
    """

    PROPERTIES = ("parse.key", "key.separator", "ignore.error", "null.marker", "parse.headers",
                  "headers.delimiter", "headers.separator", "headers.key.separator")

    def __init__(self, properties: Dict[str, str]) -> None:
        props = dict(properties)
        self.parse_key = _flag(props, "parse.key", False)
        self.ignore_error = _flag(props, "ignore.error", False)
        self.parse_headers = _flag(props, "parse.headers", False)
        self.key_separator = _encode(_text(props, "key.separator", "\t"))
        self.headers_delimiter = _encode(_text(props, "headers.delimiter", "\t"))
        self.headers_separator = _encode(_text(props, "headers.separator", ","))
        self.headers_key_separator = _encode(_text(props, "headers.key.separator", ":"))
        marker = props.pop("null.marker", None)
        self.null_marker = None if marker is None else marker.encode("utf-8")
        _unknown(props, self.PROPERTIES)
        if self.parse_key and self.parse_headers and self.key_separator == self.headers_delimiter:
            raise CommandError("key.separator and headers.delimiter must differ when both parse.key and "
                               "parse.headers are on")
        self.line_number = 0

    def read(self, line: bytes) -> Tuple[Optional[bytes], Optional[bytes], Optional[List[Tuple[str, Optional[bytes]]]]]:
        """One line (without its terminator) -> ``(key, value, headers or None)``."""
        self.line_number += 1
        headers: Optional[List[Tuple[str, Optional[bytes]]]] = None
        rest = line
        if self.parse_headers:
            found = rest.find(self.headers_delimiter)
            if found < 0:
                if not self.ignore_error:
                    raise CommandError("No headers delimiter found on line number %d: %r"
                                       % (self.line_number, _show(line)))
            else:
                headers = self._headers(rest[:found])
                rest = rest[found + len(self.headers_delimiter):]
        key: Optional[bytes] = None
        if self.parse_key:
            found = rest.find(self.key_separator)
            if found < 0:
                if not self.ignore_error:
                    raise CommandError("No key separator found on line number %d: %r"
                                       % (self.line_number, _show(line)))
            else:
                key = self._null(rest[:found])
                rest = rest[found + len(self.key_separator):]
        return key, self._null(rest), headers

    def _null(self, data: bytes) -> Optional[bytes]:
        return None if self.null_marker is not None and data == self.null_marker else data

    def _headers(self, data: bytes) -> List[Tuple[str, Optional[bytes]]]:
        out: List[Tuple[str, Optional[bytes]]] = []
        if not data:
            return out
        for item in data.split(self.headers_separator):
            name, sep, value = item.partition(self.headers_key_separator)
            if self.null_marker is not None and name == self.null_marker:
                raise CommandError("Header keys must not be equal to the null marker (line %d)" % self.line_number)
            out.append((name.decode("utf-8", "replace"), self._null(value) if sep else None))
        return out


def _encode(value: Optional[str]) -> bytes:
    assert value is not None
    return value.encode("utf-8")


def _show(line: bytes) -> str:
    return line.decode("utf-8", "replace")


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to send to")
    parser.add_argument("--property", action="append", metavar="KEY=VALUE",
                        help="a line reader property (%s); repeatable" % ", ".join(LineReader.PROPERTIES))
    parser.add_argument("--compression-type", "--compression-codec", choices=_CODECS,
                        help="how batches are compressed (default: none)")
    parser.add_argument("--acks", "--request-required-acks", choices=("0", "1", "-1", "all"),
                        help="acknowledgements the broker gives before a send counts as done (default: 1)")
    parser.add_argument("--producer-property", "--command-property", dest="producer_property", action="append",
                        metavar="KEY=VALUE", help="a producer setting in Kafka's spelling (linger.ms=5, "
                                                  "security.protocol=SSL); repeatable; wins over the file's")
    add_client_config_argument(parser, "producer")


def run_produce(args: argparse.Namespace, clients: Clients, stdin: BinaryIO, err: TextIO) -> int:
    """Send a record per line of ``stdin``; -> the exit status.

    However the input ends (end of file, a bad line, Ctrl-C), the lines read
    before are sent before the tool returns.
    """
    failures: List[BaseException] = []

    def failed(exc: BaseException) -> None:
        failures.append(exc)
        report_error(err, "sending a message to topic %s failed: %s" % (args.topic, error_text(exc)))

    try:
        reader = LineReader(parse_key_values(args.property, "--property"))
        producer = clients.producer(**_producer_configs(args, err))
    except KeyboardInterrupt:
        return 130
    except (errors.PylogqError, OSError, ValueError, TypeError) as exc:
        return report_error(err, exc)
    status = 0
    try:
        for raw in stdin:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            key, value, headers = reader.read(line)
            with _interrupts.deferred():  # a stop request waits for the send: the line read is sent
                try:
                    # A header may have a null value, as in Kafka; the producer writes it as such.
                    future = producer.send(args.topic, value=value, key=key, headers=cast(Any, headers))
                except errors.BrokerError as exc:  # this record cannot be sent (too large, ...); go on
                    failed(exc)
                    continue
                future.add_errback(failed)
    except KeyboardInterrupt:
        status = 130
    except (errors.PylogqError, OSError, ValueError, TypeError) as exc:
        status = report_error(err, exc)
    try:
        _interrupts.flush(producer)
    except KeyboardInterrupt:
        return 130  # a second Ctrl-C: stop waiting for the last acknowledgements
    except errors.PylogqError as exc:
        return report_error(err, exc)
    return status or (1 if failures else 0)


def _producer_configs(args: argparse.Namespace, err: TextIO) -> Dict[str, Any]:
    """The producer's settings: a properties file, overridden by ``--producer-property``, overridden by
    ``--acks`` and ``--compression-type``; acks=1 when none says, as the 0.8-0.10 console producer."""
    configs = client_settings(args.producer_config, args.producer_property, "--producer-property", err)
    if args.acks is not None:
        configs["acks"] = -1 if args.acks in ("-1", "all") else int(args.acks)
    configs.setdefault("acks", 1)
    if args.compression_type is not None:
        configs["compression_type"] = None if args.compression_type == "none" else args.compression_type
    return configs


# -- consume ---------------------------------------------------------------------------------------


class MessageFormatter:
    """Writes consumer records as Kafka's DefaultMessageFormatter does; not thread-safe."""

    PROPERTIES = ("print.timestamp", "print.key", "print.value", "print.partition", "print.offset",
                  "print.headers", "key.separator", "line.separator", "headers.separator", "null.literal")

    def __init__(self, properties: Dict[str, str]) -> None:
        props = dict(properties)
        self.print_timestamp = _flag(props, "print.timestamp", False)
        self.print_key = _flag(props, "print.key", False)
        self.print_value = _flag(props, "print.value", True)
        self.print_partition = _flag(props, "print.partition", False)
        self.print_offset = _flag(props, "print.offset", False)
        self.print_headers = _flag(props, "print.headers", False)
        self.key_separator = _encode(_text(props, "key.separator", "\t"))
        self.line_separator = _encode(_text(props, "line.separator", "\n"))
        self.headers_separator = _encode(_text(props, "headers.separator", ","))
        literal = props.pop("null.literal", "null")
        self.null_literal = literal.encode("utf-8")
        _unknown(props, self.PROPERTIES)

    def format(self, record: Any) -> bytes:
        """One record as the bytes the console consumer prints, line separator included."""
        fields: List[bytes] = []
        if self.print_timestamp:
            kind = _TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(b"NO_TIMESTAMP" if kind is None or record.timestamp < 0
                          else ("%s:%d" % (kind, record.timestamp)).encode())
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            headers = record.headers
            fields.append(self.headers_separator.join(
                k.encode("utf-8") + b":" + (self.null_literal if v is None else bytes(v)) for k, v in headers)
                if headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if record.key is None else bytes(record.key))
        if self.print_value:
            fields.append(self.null_literal if record.value is None else bytes(record.value))
        return self.key_separator.join(fields) + self.line_separator


def _offset(text: str) -> str:
    if text in ("earliest", "latest") or re.fullmatch(r"\d+", text):
        return text
    raise argparse.ArgumentTypeError("%r is not earliest, latest or an offset >= 0" % (text,))


_non_negative = int_argument(0)

def add_consume_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic to read")
    which.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                       help="read every topic whose name matches this regular expression")
    parser.add_argument("--group", help="the consumer group to join (its committed offsets are used and updated)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="without a committed offset, start at the beginning of the log, not its end")
    parser.add_argument("--partition", type=_non_negative, help="read only this partition (with --topic)")
    parser.add_argument("--offset", type=_offset,
                        help="with --partition: earliest, latest (the default) or an offset")
    parser.add_argument("--max-messages", type=_non_negative, help="exit after printing this many records")
    parser.add_argument("--timeout-ms", type=_non_negative, help="exit after this many ms without a record")
    parser.add_argument("--property", action="append", metavar="KEY=VALUE",
                        help="a formatter property (%s); repeatable" % ", ".join(MessageFormatter.PROPERTIES))
    parser.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                        default="read_uncommitted", help="which records of transactions to read")
    parser.add_argument("--consumer-property", "--command-property", dest="consumer_property", action="append",
                        metavar="KEY=VALUE", help="a consumer setting in Kafka's spelling (max.poll.records=100, "
                                                  "security.protocol=SSL); repeatable; wins over the file's")
    add_client_config_argument(parser, "consumer")


# The longest a single poll waits, so a deadline or a signal is noticed promptly.
_POLL_SLICE_MS = 500


def run_consume(args: argparse.Namespace, clients: Clients, out: BinaryIO, err: TextIO) -> int:
    """Print records until a stop condition; -> the exit status."""
    count = 0
    status = 0
    consumer: Any = None
    try:
        formatter = MessageFormatter(parse_key_values(args.property, "--property"))
        consumer = _open_consumer(args, clients, err)
        limit = args.max_messages
        idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000.0
        last = time.monotonic()
        while limit is None or count < limit:
            wait_ms = _POLL_SLICE_MS
            if idle_s is not None:
                left = last + idle_s - time.monotonic()
                if left <= 0:
                    break
                wait_ms = min(wait_ms, max(1, int(left * 1000)))
            want = consumer.max_poll_records if limit is None else min(consumer.max_poll_records, limit - count)
            with _interrupts.deferred():  # a stop request waits for the poll (at most _POLL_SLICE_MS)
                batch = consumer.poll(timeout_ms=wait_ms, max_records=want)
            if not batch:
                continue
            chunks = [formatter.format(record) for records in batch.values() for record in records]
            # Counted before writing: a signal that lands right after the write must not lose them.
            count += len(chunks)
            try:
                out.write(b"".join(chunks))
                out.flush()
            except BrokenPipeError:
                count -= len(chunks)
                raise
            last = time.monotonic()
    except KeyboardInterrupt:
        status = 130
    except BrokenPipeError:
        status = 0  # the reader (head, less) has what it wanted
    except (errors.PylogqError, OSError, ValueError, TypeError) as exc:
        status = report_error(err, exc)
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except (errors.PylogqError, OSError, KeyboardInterrupt) as exc:
                report_error(err, "closing the consumer: %s" % error_text(exc))
    err.write("Processed a total of %d messages\n" % count)
    err.flush()
    return status


def _open_consumer(args: argparse.Namespace, clients: Clients, err: TextIO) -> Any:
    """The consumer the options ask for, subscribed or assigned and positioned."""
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition needs --topic")
    if args.partition is not None and args.group is not None:
        raise CommandError("Options group and partition cannot be specified together.")
    if args.offset is not None and args.partition is None:
        raise CommandError("--offset needs --partition")
    if args.offset is not None and args.from_beginning:
        raise CommandError("Options from-beginning and offset cannot be specified together.")
    configs = client_settings(args.consumer_config, args.consumer_property, "--consumer-property", err)
    group = args.group if args.group is not None else configs.pop("group_id", None)
    configs.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    configs.setdefault("isolation_level", args.isolation_level)
    if group is not None:
        configs["group_id"] = group
    else:
        configs.setdefault("enable_auto_commit", False)
    consumer = clients.consumer(**configs)
    if args.partition is not None:
        count = consumer.partitions_for_topic(args.topic)
        if count is None:
            raise CommandError("Topic '%s' does not exist" % args.topic)
        if args.partition not in count:
            raise CommandError("Topic %s has no partition %d (it has %d)" % (args.topic, args.partition, len(count)))
        tp = TopicPartition(args.topic, args.partition)
        consumer.assign([tp])
        offset = args.offset or ("earliest" if args.from_beginning else "latest")
        if offset == "earliest":
            consumer.seek_to_beginning(tp)
        elif offset == "latest":
            consumer.seek_to_end(tp)
        else:
            consumer.seek(tp, int(offset))
    elif args.topic is not None:
        consumer.subscribe([args.topic])
    else:
        try:
            re.compile(args.include)
        except re.error as exc:
            raise CommandError("--include %r is not a regular expression: %s" % (args.include, exc)) from None
        consumer.subscribe(pattern=args.include)
    return consumer
