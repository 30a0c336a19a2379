"""A small file system of its own for a test: a tmpfs mounted for the test's duration.

Disk-full behaviour is tested on a real file system that really fills, not on a
patched ``write``: :func:`small_tmpfs` mounts a tmpfs of a few megabytes (root
only) and :func:`fill` takes every free byte of it. Where the mount is not
possible the test is skipped with the reason (a failure under
``PYLOGQ_REQUIRE_ALL=1``, see ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

_CHUNK = 64 * 1024


@contextlib.contextmanager
def small_tmpfs(path: Path, size: int, inodes: int = 0) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes (and at most ``inodes`` files, when given) mounted at ``path``
    (created) while the block runs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (running as uid %d)" % os.geteuid())
    path.mkdir(parents=True, exist_ok=True)
    options = "size=%d,mode=0755" % size + (",nr_inodes=%d" % inodes if inodes else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs at %s: %s" % (path, (mounted.stderr or mounted.stdout).strip()))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


def fill(path: Path) -> int:
    """Write ``path`` until its file system has no byte left; -> bytes written. Remove it to free them."""
    written = 0
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"\xee" * _CHUNK
        while True:
            try:
                n = os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
            written += n
            if n < len(block):
                block = block[:max(n, 1)]  # the last pages: smaller writes until none fits
    finally:
        os.close(fd)
    return written


def fill_inodes(directory: Path) -> int:
    """Create empty files in ``directory`` until its file system can create no more; -> how many.
    Remove the directory's files to free them."""
    directory.mkdir(exist_ok=True)
    count = 0
    while True:
        try:
            os.close(os.open(str(directory / ("%d" % count)), os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            return count
        count += 1
