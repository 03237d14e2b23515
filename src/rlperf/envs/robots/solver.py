"""Breadth-first search over robot configurations, for many boards at once.

From each board's start configuration the search expands every move of every robot, layer by
layer, dropping configurations seen before (keys ``board * cells**R + sum(pos_j * cells**j)``,
deduplicated with one sort per layer for the whole batch). It records, for every robot and
cell, the first layer at which that robot stands there: the optimal solution length of the
puzzle "bring robot t to cell c" from that start, since a robot only changes cell when it is
the one moved (so the first configuration with robot t on c is reached by a move of t, i.e.
t stops there). Depth 0 marks the start cells (not a puzzle).
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.robots.board import COL_STEP, ROW_STEP

UNREACHED = -1


class SearchTooLargeError(ValueError):
    """A search layer would hold more configurations than the caller allows."""


def moved_cells(
    frontier: np.ndarray, boards: np.ndarray, lengths: np.ndarray, board_size: int
) -> np.ndarray:
    """Where each move sends the robot it moves: ``(F, R)`` configurations on boards
    ``boards`` ``(F,)`` -> ``(R, 4, F)`` cells (``[i, d, f]``: robot i moved in direction d
    from configuration f; the other robots stay). The rule of ``moves.slide``, one (robot,
    direction) at a time so that every operation is plain arithmetic on a column."""
    f, num_robots = frontier.shape
    rows, cols = frontier // board_size, frontier % board_size
    flat_lengths = lengths.reshape(-1)
    out = np.empty((num_robots, 4, f), dtype=frontier.dtype)
    for i in range(num_robots):
        start = frontier[:, i]
        base = (boards * board_size * board_size + start) * 4
        for d in range(4):
            vertical = ROW_STEP[d] != 0
            along, across = (rows, cols) if vertical else (cols, rows)
            sign = int(ROW_STEP[d] + COL_STEP[d])
            dist = flat_lengths.take(base + d).astype(frontier.dtype)
            for j in range(num_robots):
                if j == i:
                    continue
                ahead = (along[:, j] - along[:, i]) * sign
                blocks = (across[:, j] == across[:, i]) & (ahead > 0)
                np.minimum(dist, ahead - 1, out=dist, where=blocks)
            out[i, d] = start + dist * (sign * (board_size if vertical else 1))
    return out


def first_depths(
    lengths: np.ndarray,
    start: np.ndarray,
    board_size: int,
    max_depth: int,
    state_limit: int | None = None,
) -> tuple[np.ndarray, int]:
    """The first depth (number of moves) at which each robot can stand on each cell.

    Args:
        lengths: ``(K, B * B, 4)`` slide lengths of K boards (``board.slide_lengths``).
        start: ``(K, R)`` start cells of the robots on each board.
        max_depth: deepest layer searched.
        state_limit: raise :class:`SearchTooLargeError` before expanding a layer into more
            configurations than this (None: no limit).

    Returns:
        ``(K, R, B * B)`` int8 depths (``UNREACHED`` beyond ``max_depth``; 0 at the start
        cells), and the largest number of configurations expanded in one layer.
    """
    k, num_robots = start.shape
    cells = board_size * board_size
    if k * float(cells) ** num_robots >= 2**62:
        raise ValueError(f"{k} boards of {cells} cells and {num_robots} robots overflow the keys")
    powers = cells ** np.arange(num_robots, dtype=np.int64)
    robot_rows = np.arange(num_robots)
    depth = np.full(k * num_robots * cells, UNREACHED, dtype=np.int8)
    frontier = start.astype(np.int64)
    frontier_board = np.arange(k)
    frontier_keys = frontier_board * cells**num_robots + frontier @ powers
    depth[((frontier_board[:, None] * num_robots + robot_rows) * cells + frontier).ravel()] = 0
    visited = np.sort(frontier_keys)
    peak = 0
    for d in range(1, max_depth + 1):
        f = len(frontier)
        if state_limit is not None and f * 4 * num_robots > state_limit:
            raise SearchTooLargeError(
                f"depth {d} expands {f * 4 * num_robots} configurations (limit {state_limit})"
            )
        peak = max(peak, f * 4 * num_robots)
        moved = moved_cells(frontier, frontier_board, lengths, board_size)  # (R, 4, F)
        slot = (frontier_board * num_robots + robot_rows[:, None, None]) * cells
        hit = np.zeros_like(depth, dtype=bool)
        hit[(slot + moved).ravel()] = True
        depth[hit & (depth == UNREACHED)] = d
        if d == max_depth or f == 0:
            break
        # Keys of the new configurations from their parents' keys: only robot i changed.
        change = (moved - frontier.T[:, None, :]) * powers[:, None, None]
        keys, first = np.unique((frontier_keys + change).ravel(), return_index=True)
        at = np.minimum(np.searchsorted(visited, keys), len(visited) - 1)
        fresh = visited[at] != keys
        first, keys = first[fresh], keys[fresh]
        parent, robot = first % f, first // (4 * f)
        frontier = frontier[parent]
        frontier[np.arange(len(first)), robot] = moved.reshape(-1)[first]
        frontier_board, frontier_keys = frontier_board[parent], keys
        visited = np.sort(np.concatenate([visited, keys]))
    return depth.reshape(k, num_robots, cells), peak


def solution_lengths(
    lengths: np.ndarray,
    start: np.ndarray,
    target_robot: np.ndarray,
    target_cell: np.ndarray,
    board_size: int,
    max_depth: int,
) -> np.ndarray:
    """Optimal number of moves of each puzzle, ``(K,)`` int (``UNREACHED`` if more than
    ``max_depth``; 0 if the target robot already stands on the target)."""
    depth, _ = first_depths(lengths, start, board_size, max_depth)
    return depth[np.arange(len(start)), target_robot, target_cell].astype(np.int64)
