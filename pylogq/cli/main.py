"""``pylogq``: the command-line entry point.

``pylogq dump-log --files F[,F...]`` prints segment files as Kafka's
``kafka-dump-log.sh`` does (see :mod:`pylogq.cli.dump_log`).

``pylogq demo [DIR]`` writes a file of record batches in every format and
codec pylogq reads (v2 with none, gzip, snappy, lz4 and zstd; legacy v0 and
v1), then reads it back three ways (walker, record iteration, columnar
decode) and prints what it found, with the kernels in use.
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
from ..records.legacy import LegacyRecordBatchBuilder, assign_offsets_legacy, iter_legacy_records
from . import dump_log


def _demo(directory: str) -> int:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "00000000000000000000.log")
    now = int(time.time() * 1000)
    batches = []
    offset = 0
    for codec in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        values = [b"value %d compressed with %s" % (i, codecs.NAMES[codec].encode()) for i in range(1000)]
        keys = [b"key-%d" % (i % 10) for i in range(1000)]
        batch = records.build_batch(values, keys=keys, timestamps=now, compression_type=codec)
        records.assign_offsets(batch, offset)
        offset += len(values)
        batches.append(bytes(batch))
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic, codecs.GZIP)
        for i in range(100):
            builder.append(i, now, b"legacy-key", b"legacy v%d message %d" % (magic, i))
        legacy, _ = assign_offsets_legacy(builder.build(), offset)
        offset += 100
        batches.append(bytes(legacy))
    with open(path, "wb") as f:
        for b in batches:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())

    with open(path, "rb") as f:
        data = f.read()
    print("wrote %s: %d bytes, %d entries, offsets 0..%d" % (path, len(data), len(batches), offset - 1))
    print("kernels: %s; crc: %s" % (
        ", ".join("%s=%s" % (k, "compiled" if v else "pure") for k, v in sorted(_speedups.loaded.items())),
        crc.IMPLEMENTATION,
    ))
    result = records.scan(data)
    print("walker: %d whole entries, valid prefix %d of %d bytes" % (result.batches, result.valid_bytes, len(data)))
    count = 0
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
    columns = records.decode_columns(data)
    print("columnar: %d records, offsets %d..%d, %d null keys" % (
        len(columns), columns.offsets[0], columns.offsets[-1], int(columns.key_null.sum())))
    assert count == len(columns) == offset
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="pylogq", description="pylogq command-line tools")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write record batches in every format and read them back")
    demo.add_argument("directory", nargs="?", help="where to write the log file (default: a temp dir)")
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
