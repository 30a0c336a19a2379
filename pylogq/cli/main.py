"""``pylogq``: the command-line entry point.

``pylogq dump-log --files F[,F...]`` prints segment files as Kafka's
``kafka-dump-log.sh`` does (see :mod:`pylogq.cli.dump_log`).

``pylogq demo [DIR]`` appends record batches in every format and codec pylogq
reads (v2 with none, gzip, snappy, lz4 and zstd; legacy v0 and v1) to a log
``DIR/demo-0``, closes it, reopens it (no recovery needed after a clean close)
and reads it back as Kafka fetches do, printing each batch and the kernels in use.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import List, Optional

from .. import _speedups, records
from ..records import codecs, crc
from ..records.legacy import LegacyRecordBatchBuilder, iter_legacy_records
from . import dump_log


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


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="pylogq", description="pylogq command-line tools")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="append record batches in every format to a log and read them back")
    demo.add_argument("directory", nargs="?", help="the log directory to use (default: a temp dir)")
    dump = sub.add_parser("dump-log", help=dump_log.SUMMARY, description=dump_log.SUMMARY)
    dump_log.add_arguments(dump)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args.directory or tempfile.mkdtemp(prefix="pylogq-demo-"))
    if args.command == "dump-log":
        return dump_log.run(args)
    return 2  # argparse has already rejected anything else


if __name__ == "__main__":
    sys.exit(main())
