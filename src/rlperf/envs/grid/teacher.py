"""The scripted teacher: one action per agent row, vectorised over every row on the host.

Rule, per agent: take one step towards its goal (``goals.py``: the nearest ready extractor while
the inventory has room, else the hub if it carries something), along the env's distance fields
(walls block, other agents are ignored, so an agent may bump into another and wait): the first
of up, down, left, right that brings it one move closer. No goal (or no path): no-op.

Inputs: the observation rows (agent position from the ``ROW``/``COL`` planes, inventory from the
``INVENTORY`` plane: constant planes, each read at one cell) and the env's map-level tables
``dist``, ``ready``, ``num_agents``, ``map_size``, ``capacity``, ``obs_radius``,
``position_step`` and ``inventory_step``. The env updates those tables in place every step and
on every new map; the teacher reads them at call time, so call it on the observation the env
returned last. With the env's ``goal_plane`` on (the default), the student sees the same goal's
distance field around itself (the ``GOAL`` plane), so every decision of the teacher can be read
from the student's own observation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlperf.envs.grid.goals import nearest_goals
from rlperf.envs.grid.layout import COL, DOWN, INVENTORY, LEFT, MOVES, NOOP, RIGHT, ROW, UP

if TYPE_CHECKING:  # the env makes its teacher (GridVec.make_teacher): no import at run time
    from rlperf.envs.grid.env import GridVec


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
        num_sources = env.num_extractors + 1
        flat_obs = obs.reshape(env.num_envs, -1)
        inv = self._inventory_of[flat_obs[:, self._inventory_at]]
        cell = self._first_cell + self._row_offset_of[flat_obs[:, self._row_at]]
        cell += self._col_of[flat_obs[:, self._col_at]]
        target, distance, has_goal = nearest_goals(env.dist, env.ready, cell, inv, env.capacity)
        table = env.dist.reshape(-1, num_sources)
        closer = distance - 1
        cell *= num_sources
        cell += target
        step = (table.reshape(-1)[cell + self._neighbour] == closer).view(np.uint8)  # (4, rows)
        # Bits 0-3: which of up, down, left, right get one move closer; bit 4: a goal.
        bits = has_goal.view(np.uint8) << 4
        for k in range(4):
            bits |= step[k] << k
        return self._action_of[bits]
