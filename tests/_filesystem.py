"""A small file system of its own for a test: a tmpfs mounted for the test's duration, or a
disk that fails on demand (an ext4 image on a loop device, shut down).

Disk-full behaviour is tested on a real file system that really fills, not on a
patched ``write``: :func:`small_tmpfs` mounts a tmpfs of a few megabytes (root
only) and :func:`fill` takes every free byte of it. Where the mount is not
possible the test is skipped with the reason (a failure under
``PYLOGQ_REQUIRE_ALL=1``, see ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import subprocess
from pathlib import Path
from typing import Iterator, List

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


#: ext4's (and XFS's) "going down" ioctl, ``_IOR('X', 125, __u32)``, and its flag to stop
#: without flushing the journal: the file system fails from then on, as on a dead disk.
_EXT4_IOC_SHUTDOWN = 0x8004587D
_EXT4_GOING_FLAGS_NOLOGFLUSH = 2


class FailingDisk:
    """An ext4 file system on a loop device (its image a file of the test's), mounted at ``path``,
    that :meth:`fail` shuts down: every later read, write or open there fails with EIO while the
    files open on it stay open, as when a disk dies under a running process (a read-only
    remount is refused while files are open for writing). :meth:`repair` mounts the image
    again on a new loop device: the journal is replayed, and what was synced before the
    failure reads back."""

    def __init__(self, path: Path, image: Path) -> None:
        self.path = path
        self.image = image
        self.devices: List[str] = []

    def mount(self) -> None:
        attached = subprocess.run(["losetup", "--find", "--show", str(self.image)], capture_output=True, text=True)
        if attached.returncode != 0:
            pytest.skip("cannot attach a loop device: %s" % (attached.stderr or attached.stdout).strip())
        device = attached.stdout.strip()
        self.devices.append(device)
        mounted = subprocess.run(["mount", device, str(self.path)], capture_output=True, text=True)
        if mounted.returncode != 0:
            pytest.skip("cannot mount %s at %s: %s" % (device, self.path, (mounted.stderr or mounted.stdout).strip()))

    def fail(self) -> None:
        fd = os.open(str(self.path), os.O_RDONLY)
        try:
            fcntl.ioctl(fd, _EXT4_IOC_SHUTDOWN, struct.pack("I", _EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)

    def repair(self) -> None:
        """Unmount the failed file system (lazily: something may still hold one of its files,
        which keeps it, failed, until let go) and mount the image again."""
        self.unmount()
        self.mount()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        for device in self.devices:  # detached once no mount uses it
            subprocess.run(["losetup", "-d", device], capture_output=True)
        self.devices.clear()


@contextlib.contextmanager
def failing_disk(path: Path, size: int) -> Iterator[FailingDisk]:
    """A :class:`FailingDisk` of ``size`` bytes at ``path`` (created) while the block runs (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system on a loop device needs root (running as uid %d)" % os.geteuid())
    path.mkdir(parents=True, exist_ok=True)
    image = path.parent / (path.name + ".ext4")
    with open(image, "wb") as f:
        f.truncate(size)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip("cannot make an ext4 file system: %s" % (made.stderr or made.stdout).strip())
    disk = FailingDisk(path, image)
    try:
        disk.mount()
        yield disk
    finally:
        disk.unmount()
        image.unlink()


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
