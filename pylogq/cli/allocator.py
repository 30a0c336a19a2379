"""glibc malloc settings for a process that is a broker.

A broker copies every request body a few times (the socket's buffer, the request,
the batch that gets its offsets patched in) and frees the copies right after; a
produce request is about 1 MB. With glibc's defaults those buffers are served by a
fresh ``mmap`` (above the adaptive mmap threshold) or from the top of the heap that
``free`` gives back to the kernel as soon as two of them sit there (the trim threshold
follows the mmap threshold at twice its value). Either way every page of every copy is
a page fault on the next request: measured on the produce load of
``benchmarks/test_server.py``, about 130,000 faults and 40% more broker CPU per
2.5 million records than with the settings below, under which the same load faults
almost never.

:func:`tune` raises both thresholds once, for the whole process: allocations up to
:data:`MMAP_THRESHOLD` come from the heap, and up to :data:`TRIM_THRESHOLD` of free
heap is kept for reuse instead of returned to the kernel. Memory still follows what
the broker uses: what is kept is what was in use at a peak, at most the trim threshold
more than what is in use now, per malloc arena. It changes malloc for everything in
the process, so only ``pylogq-broker`` calls it, never the library; a program that
embeds a broker can call it, or set glibc's own environment variables. When any of
those are set (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``GLIBC_TUNABLES``), or the C library is not glibc, it changes nothing.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["tune", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Above a produce request (max.request.size 1 MB) and the fetch responses a client asks
# for by default (fetch.max.bytes 50 MB is rare; a partition's 1 MB is the usual), and
# the largest value glibc accepts on 64-bit systems (half its 64 MB heap size).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20

_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def _glibc() -> bool:
    """Whether the C library is glibc: its confstr names it (platform.libc_ver would read
    the whole interpreter binary for the answer)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a glibc name, or no confstr at all
        return False


def tune() -> bool:
    """Set the thresholds; -> whether they were set (False: not glibc, or the
    environment chose its own). Safe to call more than once."""
    if any(name in os.environ for name in _ENVIRONMENT):
        return False
    if not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success. The mmap threshold first: setting it fixes both
    # thresholds (no more adapting), and the trim threshold is then set explicitly.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
