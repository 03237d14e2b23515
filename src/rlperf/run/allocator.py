"""Keep the memory a training process frees, so its next iteration does not fault it in again.

An iteration of the CNN and ConvLSTM policies' updates allocates and frees the same large
temporaries every time (convolution buffers of several MB). With glibc's defaults each such
block is either its own ``mmap`` (above the dynamic mmap threshold) or returned to the OS when
the heap's top is trimmed, so the next iteration takes a fresh page fault for every 4 KiB of it:
4,300-9,000 faults per call of the grid and robots e2e benchmark cases, 14-26% of the grid
case's CPU time (docs/performance.md). ``mallopt`` with a high mmap threshold and no trimming
keeps the freed blocks in the heap for reuse: 0-13 faults a call, the peak resident size
unchanged (it is reached every iteration anyway). PyTorch's CUDA caching allocator keeps freed
GPU memory for the same reason.

Both settings go together: setting the trim threshold alone turns glibc's dynamic mmap threshold
off at its 128 KiB start, and every large block becomes an ``mmap`` (measured: 3-4x the faults).
"""

from __future__ import annotations

import ctypes
import os
import sys

# glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 30  # blocks above 1 GiB still get their own mapping
TRIM_THRESHOLD_BYTES = 2**31 - 1  # mallopt takes an int: never trim below 2 GiB of free top

_applied = False


def _glibc() -> bool:
    # confstr asks the C library itself; platform.libc_ver() would read the whole python
    # executable looking for a version string, on every trainer built where this is a no-op.
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):
        return False


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed memory in this process; True where it took effect
    (Linux with glibc; a no-op returning False elsewhere). Process-wide and not undone."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux") or not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # The mmap threshold first: if glibc refuses it, trimming stays as it was (see above).
    if not mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        return False
    _applied = bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return _applied
