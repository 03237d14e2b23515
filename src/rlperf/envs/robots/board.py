"""Ricochet Robots boards: walls on cell edges, generated for many boards at once.

A board is ``board_size x board_size`` cells; cell ``(row, col)`` has the flat index
``row * board_size + col`` (row 0 at the top). Walls lie on cell edges and are stored per cell
as a uint8 bitmask (:data:`WALL_BITS`), both sides of an edge agreeing: a wall on the south
side of ``(r, c)`` is also on the north side of ``(r + 1, c)``. Every board has its border
walled, plus random L-shaped corner pieces (two walls meeting at a cell corner, as on the
printed game's boards), :data:`CORNERS_PER_CELL` of them per cell on average.

Directions, in action order: 0 up (north, row - 1), 1 right (east, col + 1), 2 down (south,
row + 1), 3 left (west, col - 1).
"""

from __future__ import annotations

import numpy as np

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
DIRECTION_NAMES = ("up", "right", "down", "left")
ROW_STEP = np.array([-1, 0, 1, 0])  # per direction
COL_STEP = np.array([0, 1, 0, -1])
WALL_BITS = np.array([1, 2, 4, 8], dtype=np.uint8)  # N, E, S, W: bit of direction d
CORNERS_PER_CELL = 1 / 8  # random L-shaped pieces per cell (8 on an 8 x 8 board)


def random_walls(rng: np.random.Generator, count: int, board_size: int) -> np.ndarray:
    """``count`` random boards as ``(count, B, B)`` uint8 wall bitmasks (border walled)."""
    b = board_size
    pieces = max(1, round(b * b * CORNERS_PER_CELL))
    cells = rng.integers(0, b * b, (count, pieces))
    # A corner piece walls two adjacent sides of its cell: N+E, E+S, S+W or W+N.
    first = rng.integers(0, 4, (count, pieces))
    sides: np.ndarray = np.zeros((count, b * b, 4), dtype=bool)
    boards = np.repeat(np.arange(count), pieces)
    for side in (first, (first + 1) % 4):
        sides[boards, cells.ravel(), side.ravel()] = True
    sides = sides.reshape(count, b, b, 4)
    north, east, south, west = (sides[..., d] for d in range(4))
    # Mirror each wall onto the cell across its edge.
    north[:, 1:] |= south[:, :-1]
    south[:, :-1] = north[:, 1:]
    west[:, :, 1:] |= east[:, :, :-1]
    east[:, :, :-1] = west[:, :, 1:]
    north[:, 0] = south[:, -1] = True
    west[:, :, 0] = east[:, :, -1] = True
    return (sides.astype(np.uint8) * WALL_BITS).sum(-1, dtype=np.uint8)


def wall_planes(walls: np.ndarray) -> np.ndarray:
    """``(..., B, B)`` bitmasks -> ``(..., 4, B, B)`` bool, one plane per direction."""
    return (walls[..., None, :, :] & WALL_BITS[:, None, None]) != 0


def slide_lengths(walls: np.ndarray) -> np.ndarray:
    """How far a robot slides from each cell in each direction with walls only (no robots).

    Args:
        walls: ``(n, B, B)`` uint8 bitmasks.

    Returns:
        ``(n, B * B, 4)`` uint8: cells travelled before the first wall.
    """
    n, b, _ = walls.shape
    blocked = wall_planes(walls)  # (n, 4, B, B)
    out = np.zeros((n, 4, b, b), dtype=np.uint8)
    # Scan away from the border each direction runs into (0 there: the border is walled):
    # 0 at a wall, else one more than the neighbour's length.
    for i in range(1, b):
        out[:, UP, i] = np.where(blocked[:, UP, i], 0, out[:, UP, i - 1] + 1)
        out[:, LEFT, :, i] = np.where(blocked[:, LEFT, :, i], 0, out[:, LEFT, :, i - 1] + 1)
        j = b - 1 - i
        out[:, DOWN, j] = np.where(blocked[:, DOWN, j], 0, out[:, DOWN, j + 1] + 1)
        out[:, RIGHT, :, j] = np.where(blocked[:, RIGHT, :, j], 0, out[:, RIGHT, :, j + 1] + 1)
    return out.reshape(n, 4, b * b).transpose(0, 2, 1).copy()
