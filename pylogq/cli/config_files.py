"""``pylogq config-files [DIR]``: Kafka's ``config/`` files, as pylogq ships them, copied into DIR.

A checkout has them in ``config/``; an installed pylogq carries the same files as
package data (:data:`PACKAGED_DIR`), and this command writes them where the quick
start (docs/quickstart.md) expects them::

    pylogq config-files            # ./config/server.properties, ./config/zookeeper.properties, ...
    pylogq config-files /etc/pylogq
    pylogq config-files --path     # only print where the installed files are

``server.properties`` is Kafka's single-node file (``group.initial.rebalance.delay.ms=0``,
``offsets.topic.replication.factor=1``), ``zookeeper.properties`` Kafka's ZooKeeper file,
``server-0.properties`` to ``server-2.properties`` the quick start's cluster of three
brokers, and ``connect-mirror-maker.properties`` Kafka's sample MirrorMaker 2 file
(docs/mirroring.md). A file already in DIR with other contents is left alone and reported (exit
status 1) unless ``--force`` is given; one with the same contents is skipped quietly.
"""

from __future__ import annotations

import argparse
import os
from typing import List, TextIO, Tuple

from ._errors import report_error

__all__ = ["SUMMARY", "PACKAGED_DIR", "FILES", "add_arguments", "run"]

SUMMARY = "copy Kafka's config/ files (server.properties, zookeeper.properties, ...) as pylogq ships them"

#: Where the installed package keeps the files (the repository's config/, byte for byte).
PACKAGED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config_files")

#: The files, in the order the quick start uses them.
FILES: Tuple[str, ...] = ("server.properties", "zookeeper.properties", "server-0.properties",
                          "server-1.properties", "server-2.properties", "connect-mirror-maker.properties")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", default="config", metavar="DIR",
                        help="where to write the files (default: ./config, as the quick start names them)")
    parser.add_argument("--force", action="store_true", help="replace files in DIR that differ from pylogq's")
    parser.add_argument("--path", action="store_true", help="print the directory of the installed files and stop")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Copy the files (or print their directory); -> the exit status."""
    if args.path:
        out.write(PACKAGED_DIR + "\n")
        return 0
    kept: List[str] = []
    try:
        os.makedirs(args.directory, exist_ok=True)
        for name in FILES:
            data = _read(os.path.join(PACKAGED_DIR, name))
            target = os.path.join(args.directory, name)
            if os.path.exists(target):
                if _read(target) == data:
                    continue
                if not args.force:
                    kept.append(target)
                    continue
            with open(target, "wb") as f:
                f.write(data)
            out.write("%s\n" % target)
    except OSError as exc:
        return report_error(err, "cannot write the config files to %s: %s" % (args.directory, exc.strerror or exc))
    status = 0
    for target in kept:
        status = report_error(err, "%s exists with other contents: left as it is (--force replaces it)" % target)
    return status
