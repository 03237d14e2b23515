"""Breadth-first distance fields for a batch of grid maps, bit-parallel over the sources.

``distance_fields(passable, sources)`` gives, for every map, cell and source, the number of moves
from the cell to the source: paths cross passable cells only and the last move enters the source
cell itself (a source may be impassable: an extractor or the hub is used by moving into it).
Distances are bytes: paths longer than :data:`MAX_DISTANCE` moves count as unreachable (a
30x30 map is ~60 moves across; map generation redraws any map with a path that long).

Why it is fast in numpy: the ``S`` sources of a map are the bits of one unsigned integer per
cell, so one BFS level for every source of every map is a handful of whole-array operations (OR
of the four shifted copies, AND with the passable mask). The level at which a cell is first
reached is recorded bit-sliced: ``planes[j]`` holds, per source bit, bit ``j`` of that level, and
level ``k`` costs one OR per set bit of ``k``. The 8 planes are unpacked into bytes once.
"""

from __future__ import annotations

import numpy as np

UNREACHABLE = 255  # the distance of a cell with no path to the source (within MAX_DISTANCE)
MAX_DISTANCE = 254
MAX_SOURCES = 64
_BIT_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)


def distance_fields(passable: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Moves from every cell to every source, for a batch of maps.

    Args:
        passable: ``(n, P, P)`` bool, cells a path may cross; the border must be impassable.
        sources: ``(n, S, 2)`` int (row, col) of the sources, distinct cells within a map,
            ``S <= 64``; a source cell need not be passable.

    Returns:
        ``(n, P, P, S)`` uint8: 0 at the source, :data:`UNREACHABLE` where no path of at most
        :data:`MAX_DISTANCE` moves exists (walls, other impassable cells, enclosed pockets).
    """
    n, size, _ = passable.shape
    num_sources = sources.shape[1]
    if num_sources > MAX_SOURCES:
        raise ValueError(f"at most {MAX_SOURCES} sources per map, got {num_sources}")
    dtype = next(np.dtype(t) for t in _BIT_DTYPES if np.dtype(t).itemsize * 8 >= num_sources)
    bits = np.left_shift(np.ones(num_sources, dtype), np.arange(num_sources, dtype=dtype))
    reached = np.zeros((n, size, size), dtype)
    maps = np.repeat(np.arange(n), num_sources)
    reached[maps, sources[..., 0].ravel(), sources[..., 1].ravel()] = np.tile(bits, n)
    mask = np.where(passable, np.invert(dtype.type(0)), dtype.type(0)).reshape(-1)
    # One flat array for the whole batch: the neighbours of a cell are +-1 and +-size away.
    # Shifting wraps a row's last cell onto the next row's first (or into the next map), but
    # border cells are impassable and never hold a bit, so nothing false crosses.
    flat = reached.reshape(-1)
    planes = [np.zeros_like(flat) for _ in range(8)]
    newly = np.empty_like(flat)
    for level in range(1, MAX_DISTANCE + 1):
        # newly = (flat dilated) & mask & ~flat; flat's passable cells are inside its dilation.
        np.copyto(newly, flat)
        newly[1:] |= flat[:-1]
        newly[:-1] |= flat[1:]
        newly[size:] |= flat[:-size]
        newly[:-size] |= flat[size:]
        newly ^= flat
        newly &= mask
        if not newly.view(np.uint8).any():
            break
        flat |= newly
        for j in range(level.bit_length()):
            if level >> j & 1:
                planes[j] |= newly
    # Unreached (cell, source) pairs get every level bit: distance 255, UNREACHABLE.
    unreached = np.invert(flat)
    for plane in planes:
        plane |= unreached
    return _levels_to_bytes(planes, num_sources).reshape(*reached.shape, num_sources)


def _levels_to_bytes(planes: list[np.ndarray], num_sources: int) -> np.ndarray:
    """8 bit planes ``(N,)`` (bit s of plane j: bit j of source s's level) -> ``(N, S)`` uint8.

    Per cell and group of 8 sources this is an 8 x 8 bit-matrix transpose: byte j of a uint64
    holds plane j's bits for the group, and three swap steps (Hacker's Delight, 7-8) move bit
    ``8 j + s`` to ``8 s + j``, so that byte ``s`` holds source ``s``'s level.
    """
    count, width = len(planes[0]), planes[0].dtype.itemsize
    stacked = np.empty((count, width, 8), np.uint8)
    for j, plane in enumerate(planes):
        little = plane.astype(plane.dtype.newbyteorder("<"), copy=False)
        stacked[:, :, j] = little.view(np.uint8).reshape(count, width)
    x = stacked.view("<u8").reshape(-1)
    for shift, mask in ((7, 0x00AA00AA00AA00AA), (14, 0x0000CCCC0000CCCC), (28, 0xF0F0F0F0)):
        t = x >> np.uint64(shift)
        t ^= x
        t &= np.uint64(mask)
        x ^= t
        t <<= np.uint64(shift)
        x ^= t
    return stacked.reshape(count, 8 * width)[:, :num_sources]
