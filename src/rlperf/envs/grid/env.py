"""The multi-agent resource grid as one batched vector env: every map and agent in numpy arrays.

Rules (``reference.py`` states them once more as a plain per-agent loop, and the tests hold
both to each other):

- Actions (``Discrete(5)``): 0 no-op, 1 up (row - 1), 2 down (row + 1), 3 left (col - 1),
  4 right (col + 1).
- Each action names a target cell (the agent's own for no-op), classified as it was at the
  start of the step: a **wall** or an **agent** (including the mover itself: no-op) blocks, so
  the agent stays; a **hub** takes the agent's whole inventory and pays reward = resources
  deposited, the agent staying in place; a **ready extractor** gives one resource if the
  inventory is below capacity, the agent staying in place, and then rests ``cooldown`` steps (a
  **cooling** extractor gives nothing); an **empty** cell is moved into.
- Conflicts: every step draws a priority, ``np_random.permutation(num_envs)`` (kept as
  ``priority``, lower first). Of the agents claiming one empty cell, or one ready extractor
  with room in their inventory, only the first by priority moves in (or takes the resource);
  the others stay. A move into a cell occupied at the start of the step fails even if its
  occupant leaves, so agents never overlap and there are no swaps or chains.
- Cooldowns: after the moves, every extractor resting ``k > 0`` more steps rests ``k - 1``, and
  each extractor used this step rests ``cooldown``; resting 0 is ready. So an extractor used on
  step ``t`` is cooling on steps ``t + 1 .. t + cooldown`` and ready on ``t + cooldown + 1``.
- Episodes: a map's episode is truncated after ``max_steps`` steps, all its agent rows at once;
  it is then replaced by a fresh random map (``missions.py``), SAME_STEP autoreset.

Observation of an agent row (``uint8``, ``(NUM_CHANNELS, 2r + 1, 2r + 1)``, ``r = obs_radius``):
an egocentric window centred on the agent (the agent at ``[r, r]``; window row ``i``, column
``j`` is the map cell ``(row - r + i, col - r + j)``):

==========  ===========  ====================================================================
channel     name         values
==========  ===========  ====================================================================
0           WALLS        255 wall, or outside the map; else 0
1           READY        255 ready extractor
2           COOLING      255 cooling extractor
3           HUB          255 hub
4           AGENTS       255 another agent (0 at the centre: the agent itself is not shown)
5           INVENTORY    constant plane: ``inventory * inventory_step``
6           ROW          constant plane: ``row * position_step`` (the agent's map row)
7           COL          constant plane: ``col * position_step``
8           GOAL         the distance field of the agent's goal (``goals.py``: the nearest
                         ready extractor while the inventory has room, else the hub), relative
                         to the agent: ``128 + 16 (d(cell) - d(agent))`` clipped to
                         ``[1, 254]`` (exact within 7 moves of the agent's distance), 255 where
                         no path leads to the goal (walls, other extractors, outside); 0
                         everywhere when the agent has no goal. Only with ``goal_plane``.
==========  ===========  ====================================================================

``inventory_step = 255 // capacity`` and ``position_step = 255 // (map_size - 1)`` (attributes),
so the planes span ``[0, 255]`` and divide back exactly.

Why the ``GOAL`` plane: the scripted teacher plans with the whole map (distance fields, every
extractor's readiness), which an 11x11 window does not show; a student imitating it from the
first eight planes alone agreed with it on 68-70% of actions (``docs/grid.md``). The plane
gives the student the teacher's information in the window, as a navigation field: the agent's
next move is a neighbour at 112. One move is 16 levels, not 1, because networks read the planes
scaled to [0, 1]: neighbours 1/255 apart were slow to tell apart in training.
``goal_plane=False`` keeps the eight planes.

Layout for speed: one ``uint8`` code grid per map, padded by ``r`` wall cells on each side,
holds the category of every cell (``EMPTY`` .. ``AGENT_CODE`` below); a move reads one code per
agent, and a window is one gather of ``(2r + 1)^2`` codes through ``sliding_window_view``. The
channels are built plane by plane in a channel-major scratch and transposed once.

Agent rows are map-major: row ``m * num_agents + a`` is agent ``a`` of map ``m``. ``step``
times its stages with ``rlperf.profile`` (``move``, ``observe``, ``reset``: new maps).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numpy.lib.stride_tricks import sliding_window_view

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos
from rlperf.envs.grid.distances import UNREACHABLE, distance_fields
from rlperf.envs.grid.goals import nearest_goals
from rlperf.envs.grid.layout import (
    AGENTS,
    COL,
    GOAL,
    INVENTORY,
    MOVES,
    NUM_ACTIONS,
    NUM_CHANNELS,
    ROW,
)
from rlperf.envs.grid.missions import Mission, generate_maps
from rlperf.timing import profile
from rlperf.timing.names import ENV_MOVE, ENV_OBSERVE, ENV_RESET

if TYPE_CHECKING:
    from rlperf.envs.grid.teacher import GridTeacher

ON = 255
GOAL_AT_AGENT = 128  # the GOAL plane's value at the agent's own cell (when it has a goal)
GOAL_PER_MOVE = 16  # GOAL plane levels per move of distance


def _goal_table() -> np.ndarray:
    """``GOAL`` value by ``agent_distance * 256 + cell_distance``, flat ``(65536,)`` uint8; the
    agent-distance row ``_NO_GOAL`` (never a real distance with a goal) is all 0."""
    agent, cell = np.arange(256)[:, None], np.arange(256)[None, :]
    table = np.clip(GOAL_AT_AGENT + GOAL_PER_MOVE * (cell - agent), 1, ON - 1).astype(np.uint8)
    table[:, UNREACHABLE] = ON
    table[_NO_GOAL] = 0
    return table.reshape(-1)


_NO_GOAL = UNREACHABLE  # a goal is only chosen when the agent can reach it
_GOAL_TABLE = _goal_table()

# Cell codes of the padded grid: channel c < INVENTORY is ``code == c + 1``.
EMPTY, WALL_CODE, READY_CODE, COOLING_CODE, HUB_CODE, AGENT_CODE = range(6)


class GridVec(VectorEnv):
    """``num_maps`` maps of ``mission``, each with ``mission.num_agents`` agents, as
    ``num_envs = num_maps * num_agents`` rows.

    State (numpy arrays, updated in place; ``get_state`` copies them):
        walls: ``(num_maps, P, P)`` bool.
        extractors: ``(num_maps, E, 2)`` int64 (row, col), row-major per map.
        hub: ``(num_maps, 2)`` int64 (row, col).
        cooldown_left: ``(num_maps, E)`` int64 steps each extractor still rests.
        ready: ``(num_maps, E)`` bool, ``cooldown_left == 0``.
        agent_row, agent_col, inventory: ``(num_envs,)`` int64.
        map_steps: ``(num_maps,)`` int64 steps of the current episode.
        dist: ``(num_maps, P, P, E + 1)`` uint8 distance fields of the current maps (moves
            from a cell into extractor ``e``, or into the hub at index ``E``; walls and other
            agents ignored; ``distances.UNREACHABLE`` where no path exists), built with the map.
        priority: ``(num_envs,)`` int64, the last step's priority permutation.

    The teacher's tables are ``dist`` and ``ready`` with ``capacity``, ``inventory_step``,
    ``position_step``, ``num_agents``, ``map_size`` and ``obs_radius`` (``teacher.py``).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    single_observation_space: spaces.Box  # (channels, side, side) uint8

    def __init__(
        self, num_maps: int, mission: Mission, obs_radius: int = 5, goal_plane: bool = True
    ) -> None:
        size, agents, num_ext = mission.map_size, mission.num_agents, mission.num_extractors
        rows = num_maps * agents
        self.mission = mission
        self.num_maps, self.num_agents, self.num_envs = num_maps, agents, rows
        self.map_size, self.num_extractors, self.obs_radius = size, num_ext, obs_radius
        self.capacity, self.cooldown = mission.capacity, mission.cooldown
        self.max_steps = mission.max_steps
        self.inventory_step = ON // mission.capacity
        self.position_step = ON // (size - 1)
        side = 2 * obs_radius + 1
        self.goal_plane = goal_plane
        self.num_channels = NUM_CHANNELS if goal_plane else GOAL
        self.single_observation_space = spaces.Box(
            0, ON, (self.num_channels, side, side), dtype=np.uint8
        )
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, rows)
        self.action_space = batch_space(self.single_action_space, rows)

        self.walls = np.zeros((num_maps, size, size), bool)
        self.extractors = np.zeros((num_maps, num_ext, 2), np.int64)
        self.hub = np.zeros((num_maps, 2), np.int64)
        self.cooldown_left = np.zeros((num_maps, num_ext), np.int64)
        self.ready = np.ones((num_maps, num_ext), bool)
        self.dist = np.zeros((num_maps, size, size, num_ext + 1), np.uint8)
        self.agent_row = np.zeros(rows, np.int64)
        self.agent_col = np.zeros(rows, np.int64)
        self.inventory = np.zeros(rows, np.int64)
        self.map_steps = np.zeros(num_maps, np.int64)
        self.priority = np.arange(rows, dtype=np.int64)
        self.episode_returns = np.zeros(rows, np.float64)
        self.episode_steps = np.zeros(rows, np.int64)
        self._episode_start_s = np.zeros(rows, np.float64)
        self._check_actions = ActionCheck(
            self.action_space, f"agent row ({num_maps} maps x {agents} agents)"
        )

        # Derived tables (rebuilt from the state by _build).
        padded = size + 2 * obs_radius
        self._padded = padded
        self._code = np.full((num_maps, padded, padded), WALL_CODE, np.uint8)
        self._code_flat = self._code.reshape(-1)
        self._windows = sliding_window_view(self._code, (side, side), axis=(1, 2))
        self._cell = np.zeros(rows, np.int64)  # agent's flat index into _code
        self._ext_cell = np.zeros(num_maps * num_ext, np.int64)  # extractor's flat index
        self._ext_at = np.full(self._code_flat.size, -1, np.int64)  # cell -> extractor id
        self._claims = np.full(self._code_flat.size, rows, np.int64)  # scratch: best priority
        self._cell_step = MOVES[:, 0] * padded + MOVES[:, 1]
        self._map_of_row = np.repeat(np.arange(num_maps), agents)
        self._planes = np.empty((self.num_channels, rows, side, side), np.uint8)
        # Where observations go (envs/spec.py, "Observations into a given array"): None, a new
        # array each step; an env worker's rows of shared memory, which saves it a copy.
        self.obs_out: np.ndarray | None = None
        self._map_cell = self._map_of_row * size * size  # a map's first cell in ``dist``
        # The distance fields padded like the code grid, source-major, so a goal's window is one
        # gather of contiguous rows (built only with the goal plane).
        dist_shape = (num_maps, num_ext + 1, padded, padded) if goal_plane else (0, 0, side, side)
        self._dist_padded = np.full(dist_shape, UNREACHABLE, np.uint8)
        self._dist_windows = sliding_window_view(self._dist_padded, (side, side), axis=(2, 3))

    # -- building maps ---------------------------------------------------------------------
    def _rows_of(self, maps: np.ndarray) -> np.ndarray:
        return (maps[:, None] * self.num_agents + np.arange(self.num_agents)).reshape(-1)

    def _new_maps(self, maps: np.ndarray) -> None:
        """Draw fresh maps at indices ``maps`` and start their episodes."""
        batch = generate_maps(self.np_random, len(maps), self.mission)
        rows = self._rows_of(maps)
        self.walls[maps] = batch.walls
        self.extractors[maps] = batch.extractors
        self.hub[maps] = batch.hub
        self.dist[maps] = batch.dist
        self.cooldown_left[maps] = 0
        self.map_steps[maps] = 0
        self.agent_row[rows] = batch.agents[..., 0].reshape(-1)
        self.agent_col[rows] = batch.agents[..., 1].reshape(-1)
        self.inventory[rows] = 0
        self.episode_returns[rows] = 0.0
        self.episode_steps[rows] = 0
        self._episode_start_s[rows] = time.perf_counter()
        self._build(maps)

    def _build(self, maps: np.ndarray) -> None:
        """Rebuild the code grid and lookup tables of ``maps`` from the state arrays."""
        r, size, num_ext = self.obs_radius, self.map_size, self.num_extractors
        old = (maps[:, None] * num_ext + np.arange(num_ext)).reshape(-1)
        self._ext_at[self._ext_cell[old]] = -1
        code = self._code[maps]
        code[:, r : r + size, r : r + size] = np.where(self.walls[maps], WALL_CODE, EMPTY)
        self._code[maps] = code
        base = maps * self._padded**2
        hub = self.hub[maps]
        self._code_flat[base + (hub[:, 0] + r) * self._padded + hub[:, 1] + r] = HUB_CODE
        ext = self.extractors[maps]
        ext_cell = base[:, None] + (ext[..., 0] + r) * self._padded + ext[..., 1] + r
        self._ext_cell[old] = ext_cell.reshape(-1)
        self._ext_at[ext_cell.reshape(-1)] = old
        self.ready[maps] = self.cooldown_left[maps] == 0
        self._code_flat[ext_cell] = np.where(self.ready[maps], READY_CODE, COOLING_CODE)
        rows = self._rows_of(maps)
        cell = self._map_of_row[rows] * self._padded**2 + (
            (self.agent_row[rows] + r) * self._padded + self.agent_col[rows] + r
        )
        self._cell[rows] = cell
        self._code_flat[cell] = AGENT_CODE
        if self.goal_plane:
            self._dist_padded[maps, :, r : r + size, r : r + size] = self.dist[maps].transpose(
                0, 3, 1, 2
            )

    # -- the dynamics ----------------------------------------------------------------------
    def _move(self, actions: np.ndarray) -> np.ndarray:
        """Apply one step's actions (module docstring); return float32 rewards per row."""
        code, cell, inv = self._code_flat, self._cell, self.inventory
        self.priority = self.np_random.permutation(self.num_envs)
        target = cell + self._cell_step[actions]
        kind = code[target]
        deposit = kind == HUB_CODE
        rewards = np.where(deposit, inv, 0).astype(np.float32)
        inv[deposit] = 0
        claim = np.flatnonzero((kind == EMPTY) | ((kind == READY_CODE) & (inv < self.capacity)))
        claimed, prio = target[claim], self.priority[claim]
        np.minimum.at(self._claims, claimed, prio)
        won = self._claims[claimed] == prio
        self._claims[claimed] = self.num_envs
        winners, into = claim[won], claimed[won]
        moving = kind[winners] == EMPTY
        movers, dest = winners[moving], into[moving]
        code[cell[movers]] = EMPTY
        code[dest] = AGENT_CODE
        cell[movers] = dest
        moves = MOVES[actions[movers]]
        self.agent_row[movers] += moves[:, 0]
        self.agent_col[movers] += moves[:, 1]
        takers = winners[~moving]
        inv[takers] += 1
        left = self.cooldown_left.reshape(-1)
        left -= left > 0
        left[self._ext_at[into[~moving]]] = self.cooldown
        np.equal(left, 0, out=self.ready.reshape(-1))
        code[self._ext_cell] = np.where(self.ready.reshape(-1), READY_CODE, COOLING_CODE)
        return rewards

    def _observe(self, rows: np.ndarray | None = None) -> np.ndarray:
        """``(n, C, 2r + 1, 2r + 1)`` uint8 observations of ``rows`` (default: all)."""
        sel = slice(None) if rows is None else rows
        r = self.obs_radius
        y, x = self.agent_row[sel], self.agent_col[sel]
        # Padded (y, x) is the window's top-left corner.
        codes = self._windows[self._map_of_row[sel], y, x]
        # Channel-major scratch, kept between steps: a fresh 4 MB block every step can cost a
        # page fault per 4 KB when the allocator hands memory back to the system.
        planes = self._planes if rows is None else np.empty_like(self._planes[:, : len(rows)])
        for c in range(INVENTORY):
            np.equal(codes, c + 1, out=planes[c].view(bool))
        np.negative(planes[:INVENTORY], out=planes[:INVENTORY])  # 1 -> 255
        planes[AGENTS, :, r, r] = 0
        planes[INVENTORY] = (self.inventory[sel] * self.inventory_step).astype(np.uint8)[
            :, None, None
        ]
        planes[ROW] = (y * self.position_step).astype(np.uint8)[:, None, None]
        planes[COL] = (x * self.position_step).astype(np.uint8)[:, None, None]
        if self.goal_plane:
            self._goal_plane(sel, y, x, planes[GOAL])
        if rows is None and self.obs_out is not None:
            np.copyto(self.obs_out, planes.transpose(1, 0, 2, 3))
            return self.obs_out
        return planes.transpose(1, 0, 2, 3).copy()

    def _goal_plane(self, sel: Any, y: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
        """Write the ``GOAL`` plane (module docstring) of rows ``sel`` into ``out`` (n, H, W)."""
        goals = nearest_goals(
            self.dist, self.ready, self._map_cell[sel] + y * self.map_size + x,
            self.inventory[sel], self.capacity,
        )  # fmt: skip
        window = self._dist_windows[self._map_of_row[sel], goals.source, y, x]
        # One table lookup per cell, index (agent's distance, cell's distance): clipping, the
        # unreachable cells and the rows without a goal in one pass (a third of the time of
        # the same in int16 arithmetic and masks).
        agent = np.where(goals.has_goal, goals.distance, _NO_GOAL).astype(np.uint16) << 8
        index = np.add(window, agent[:, None, None], dtype=np.uint16)
        np.take(_GOAL_TABLE, index, out=out, mode="clip")

    def make_teacher(self) -> GridTeacher:
        """The scripted teacher for this env (``teacher.py``), as the trainer asks for it."""
        from rlperf.envs.grid.teacher import GridTeacher

        return GridTeacher(self)

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """New random maps everywhere (from ``np_random``, reseeded with ``seed``)."""
        reseed(self, seed)
        self._new_maps(np.arange(self.num_maps))
        return self._observe(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every agent: ``actions`` ``(num_envs,)`` ints in ``[0, 5)``."""
        actions = self._check_actions(actions).astype(np.int64, copy=False)
        with profile(ENV_MOVE):
            rewards = self._move(actions)
        self.map_steps += 1
        self.episode_steps += 1
        self.episode_returns += rewards
        with profile(ENV_OBSERVE):
            obs = self._observe()
        terminated = np.zeros(self.num_envs, bool)
        ended = self.map_steps >= self.max_steps
        if not ended.any():
            return obs, rewards, terminated, np.zeros(self.num_envs, bool), {}
        truncated = np.repeat(ended, self.num_agents)
        infos = finished_infos(  # a copy: `truncated` is returned too
            obs, truncated.copy(), self.episode_returns, self.episode_steps,
            self._episode_start_s,
        )  # fmt: skip
        with profile(ENV_RESET):
            maps = np.flatnonzero(ended)
            self._new_maps(maps)
            rows = self._rows_of(maps)
        with profile(ENV_OBSERVE):
            obs[rows] = self._observe(rows)
        return obs, rewards, terminated, truncated, infos

    # -- checkpointing ---------------------------------------------------------------------
    _STATE = ("walls", "extractors", "hub", "cooldown_left", "agent_row", "agent_col",
              "inventory", "map_steps", "episode_returns", "episode_steps")  # fmt: skip

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (numpy values)."""
        state: dict[str, Any] = {name: getattr(self, name).copy() for name in self._STATE}
        state["rng"] = self.np_random.bit_generator.state
        return state

    def set_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s dict; distance fields and tables are rebuilt."""
        for name in self._STATE:
            getattr(self, name)[...] = np.asarray(saved[name])
        self.np_random.bit_generator.state = saved["rng"]
        self._episode_start_s[...] = time.perf_counter()
        maps = np.arange(self.num_maps)
        sources = np.concatenate([self.extractors, self.hub[:, None]], axis=1)
        passable = ~self.walls
        passable[maps[:, None], sources[..., 0], sources[..., 1]] = False
        self.dist[...] = distance_fields(passable, sources)
        self._build(maps)
