"""The scripted teacher: one action per agent row, vectorised over every row on the host.

Rule, per agent: while its inventory has room, walk to the nearest **ready** extractor and use
it; when the inventory is full, or no ready extractor can be reached and it carries something,
walk to the hub and deposit; otherwise no-op. Shortest paths follow the env's distance fields
(``GridVec.dist``, built per map when the map is drawn: walls block, other agents are ignored,
so an agent may bump into another and wait). Tie-breaks: the lowest extractor index among
equally near ones (extractors are numbered row-major), then the first of up, down, left, right
that brings the agent one move closer.

Inputs: the observation rows (agent position from the ``ROW``/``COL`` planes, inventory from the
``INVENTORY`` plane: constant planes, each read at one cell) and the env's map-level tables
``dist``, ``ready``, ``num_agents``, ``map_size``, ``capacity``, ``obs_radius``,
``position_step`` and ``inventory_step``. The env updates those tables in place every step and
on every new map; the teacher reads them at call time, so call it on the observation the env
returned last.
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.grid.distances import UNREACHABLE
from rlperf.envs.grid.env import (
    COL,
    DOWN,
    INVENTORY,
    LEFT,
    MOVES,
    NOOP,
    RIGHT,
    ROW,
    UP,
    GridVec,
)


class GridTeacher:
    """``GridTeacher(env)(obs)`` -> ``(num_envs,)`` int64 actions for ``obs`` ``(num_envs, C,
    H, W)`` uint8, the observation ``env`` returned last (rows in env order)."""

    def __init__(self, env: GridVec) -> None:
        self.env = env
        size, num_ext, side = env.map_size, env.num_extractors, 2 * env.obs_radius + 1
        map_of_row = np.repeat(np.arange(env.num_maps), env.num_agents)
        self._first_cell = map_of_row * size * size
        # The constant planes hold one value everywhere, so read each where two share a cache
        # line of the (freshly copied, cold) observation: the last inventory byte with the
        # first row byte, and the first column byte. Flat offsets into a row of obs:
        plane = side * side
        self._inventory_at = (INVENTORY + 1) * plane - 1
        self._row_at = ROW * plane
        self._col_at = COL * plane
        # Plane values back to counts, flat row offsets and columns (values are multiples).
        self._inventory_of = (np.arange(256) // env.inventory_step).astype(np.int16)
        self._row_offset_of = np.arange(256) // env.position_step * size
        self._col_of = np.arange(256) // env.position_step
        # Offsets into the flat (cells, sources) table of the neighbours: up, down, left, right.
        self._neighbour = ((MOVES[1:, 0] * size + MOVES[1:, 1]) * (num_ext + 1))[:, None]
        # Keys carry the extractor index in their low bits: the minimum is the nearest, then
        # the lowest index.
        self._index_bits = int(num_ext).bit_length()
        self._index = np.arange(num_ext, dtype=np.uint16)[:, None]
        # Action by bits (see __call__): the first closer move in action order, if a goal.
        first = [next((m for m in (UP, DOWN, LEFT, RIGHT) if b >> (m - 1) & 1), NOOP)
                 for b in range(16)]  # fmt: skip
        self._action_of = np.array([NOOP] * 16 + first, np.int64)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        env = self.env
        if obs.shape != (env.num_envs, *env.single_observation_space.shape):
            raise ValueError(
                f"obs must be the env's observation, shape "
                f"{(env.num_envs, *env.single_observation_space.shape)}, got {tuple(obs.shape)}"
            )
        num_ext, num_sources = env.num_extractors, env.num_extractors + 1
        flat_obs = obs.reshape(env.num_envs, -1)
        inv = self._inventory_of[flat_obs[:, self._inventory_at]]
        cell = self._first_cell + self._row_offset_of[flat_obs[:, self._row_at]]
        cell += self._col_of[flat_obs[:, self._col_at]]
        table = env.dist.reshape(-1, num_sources)
        # Source-major (E + 1, rows): the reductions below run across rows, not along them.
        here = np.take(table, cell, axis=0).T.copy()
        # Not ready: 0 - 1 wraps to 255 (UNREACHABLE), ready: 1 - 1 = 0; OR-ed into distances.
        key8 = np.repeat(env.ready.T.view(np.uint8) - np.uint8(1), env.num_agents, axis=1)
        key8 |= here[:num_ext]
        key = np.left_shift(key8, self._index_bits, dtype=np.uint16)
        key |= self._index
        best = key.min(0)
        ext_dist, hub_dist = best >> self._index_bits, here[num_ext]
        go_ext = (inv < env.capacity) & (ext_dist != UNREACHABLE)
        go_hub = ~go_ext & (inv > 0) & (hub_dist != UNREACHABLE)
        target = np.where(go_ext, best & ((1 << self._index_bits) - 1), num_ext)
        closer = np.where(go_ext, ext_dist, hub_dist).astype(np.int16) - 1
        cell *= num_sources
        cell += target
        step = (table.reshape(-1)[cell + self._neighbour] == closer).view(np.uint8)  # (4, rows)
        # Bits 0-3: which of up, down, left, right get one move closer; bit 4: a goal.
        bits = (go_ext | go_hub).view(np.uint8) << 4
        for k in range(4):
            bits |= step[k] << k
        return self._action_of[bits]
