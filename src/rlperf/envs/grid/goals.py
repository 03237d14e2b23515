"""Each agent's goal, vectorised over agent rows: the teacher walks to it, and the observation's
``GOAL`` plane shows its distance field around the agent.

Rule, per agent: while its inventory has room, the nearest **ready** extractor it can reach
(ties: the lowest extractor index; extractors are numbered row-major); when the inventory is
full, or no ready extractor can be reached and it carries something, the hub; otherwise no
goal. Distances are the env's BFS fields (``GridVec.dist``: walls block, other agents are
ignored).

One function serves the teacher and the observation, so the plane a student sees and the
teacher's choice cannot drift apart.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rlperf.envs.grid.distances import UNREACHABLE


class Goals(NamedTuple):
    """Per agent row: ``source`` ``(rows,)`` int64, the goal's index in the distance table
    (extractor ``e``, or ``E`` for the hub; ``E`` too when there is none), ``distance``
    ``(rows,)`` int16 moves from the agent into it, ``has_goal`` ``(rows,)`` bool."""

    source: np.ndarray
    distance: np.ndarray
    has_goal: np.ndarray


def nearest_goals(
    dist: np.ndarray, ready: np.ndarray, cell: np.ndarray, inventory: np.ndarray, capacity: int
) -> Goals:
    """The goal of every agent row (module docstring).

    Args:
        dist: ``(num_maps, S, S, E + 1)`` uint8 distance fields (``GridVec.dist``).
        ready: ``(num_maps, E)`` bool, which extractors are ready now.
        cell: ``(rows,)`` int, each agent's flat cell index ``(map * S + row) * S + col``;
            rows are map-major with the same number of agents per map.
        inventory: ``(rows,)`` int, resources each agent carries.
        capacity: the inventory's capacity.
    """
    num_maps, num_ext = ready.shape
    agents = len(cell) // num_maps
    table = dist.reshape(-1, num_ext + 1)
    # Source-major (E + 1, rows): the reductions below run across rows, not along them.
    here = np.take(table, cell, axis=0).T.copy()
    # Not ready: 0 - 1 wraps to 255 (UNREACHABLE), ready: 1 - 1 = 0; OR-ed into distances.
    key8 = np.repeat(ready.T.view(np.uint8) - np.uint8(1), agents, axis=1)
    key8 |= here[:num_ext]
    # Keys carry the extractor index in their low bits: the minimum is the nearest, then the
    # lowest index.
    index_bits = int(num_ext).bit_length()
    key = np.left_shift(key8, index_bits, dtype=np.uint16)
    key |= np.arange(num_ext, dtype=np.uint16)[:, None]
    best = key.min(0)
    ext_dist, hub_dist = best >> index_bits, here[num_ext]
    go_ext = (inventory < capacity) & (ext_dist != UNREACHABLE)
    go_hub = ~go_ext & (inventory > 0) & (hub_dist != UNREACHABLE)
    source = np.where(go_ext, best & ((1 << index_bits) - 1), num_ext).astype(np.int64)
    distance = np.where(go_ext, ext_dist, hub_dist).astype(np.int16)
    return Goals(source, distance, go_ext | go_hub)
