"""Batched sliding: many robots moved at once, each until the next wall or robot.

The walls are folded into a per-board table of slide lengths (``board.slide_lengths``); robots
are the only thing left to check, and there are few of them (a loop over robots, never over
boards). ``envs/robots/reference.py`` has the plain one-cell-at-a-time mover the tests compare
against.
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.robots.board import COL_STEP, ROW_STEP


def slide(
    positions: np.ndarray,
    robot: np.ndarray,
    direction: np.ndarray,
    lengths: np.ndarray,
    board_size: int,
    boards: np.ndarray | None = None,
) -> np.ndarray:
    """Where every robot stands after moving ``robot`` in ``direction``, row by row.

    Args:
        positions: ``(n, R)`` int flat cells of the robots (distinct within a row).
        robot, direction: ``(n,)`` ints, the robot that moves and where to (board.UP...).
        lengths: ``(m, B * B, 4)`` slide lengths with walls only (``board.slide_lengths``).
        board_size: ``B``.
        boards: ``(n,)`` row of ``lengths`` each row plays on; None: row i uses ``lengths[i]``.

    Returns:
        New ``(n, R)`` positions (a new array, same dtype). A move that goes nowhere leaves the
        row unchanged.
    """
    n = positions.shape[0]
    rows = np.arange(n)
    start = positions[rows, robot].astype(np.int64)
    table = rows if boards is None else boards
    dist = lengths[table, start, direction].astype(np.int64)
    vertical = ROW_STEP[direction] != 0
    sign = ROW_STEP[direction] + COL_STEP[direction]  # +1 down/right, -1 up/left
    row0, col0 = start // board_size, start % board_size
    along0 = np.where(vertical, row0, col0)
    across0 = np.where(vertical, col0, row0)
    for j in range(positions.shape[1]):
        other = positions[:, j].astype(np.int64)
        row_j, col_j = other // board_size, other % board_size
        ahead = sign * (np.where(vertical, row_j, col_j) - along0)  # 0 for the mover itself
        blocks = (np.where(vertical, col_j, row_j) == across0) & (ahead > 0)
        dist = np.where(blocks, np.minimum(dist, ahead - 1), dist)
    out = positions.copy()
    out[rows, robot] = start + dist * sign * np.where(vertical, board_size, 1)
    return out
