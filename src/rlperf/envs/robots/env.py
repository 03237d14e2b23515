"""Ricochet Robots for a whole batch at once: the vector environment.

Each sub-environment holds one puzzle (walls, robot cells, target robot and cell) drawn from a
:class:`~rlperf.envs.robots.puzzles.PuzzlePool`. Every step moves one robot of every env
(``action = robot * 4 + direction``, directions 0 up, 1 right, 2 down, 3 left) with one batched
slide; finished envs draw their next puzzle from the pool (``reset`` section) and, in
``rgb_image`` mode, get their background (grid and walls) drawn once for the episode.

Sections (process-wide profiler, nested under ``rollout/env_step`` in training):

- ``move``: the slide, rewards, ends.
- ``render`` (rgb; its own time is the copy of the cached backgrounds) with
  ``render/draw_target`` and ``render/draw_robots``; or ``observe`` (symbolic planes). On a
  step where envs finish it runs twice: the whole batch, then the finished envs' first
  observations.
- ``reset``: its own time is puzzle draws and, when the pool runs dry, the batched search
  refilling it; in rgb mode ``reset/render/draw_grid`` and ``reset/render/draw_walls`` build the
  new episodes' backgrounds (grid and walls are drawn per episode, not per step).

No ``resize`` stage: images are drawn at their final size.

Contract (as ``envs/catch.py``): gymnasium ``VectorEnv``, ``AutoresetMode.SAME_STEP``,
``final_obs`` and ``episode`` statistics from :func:`~rlperf.envs.episodes.finished_infos`,
``get_state``/``set_state`` for a bit-identical resume (puzzle pool and generator included).
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos
from rlperf.envs.robots.board import slide_lengths, wall_planes
from rlperf.envs.robots.moves import slide
from rlperf.envs.robots.puzzles import PuzzlePool
from rlperf.envs.robots.render import BoardRenderer
from rlperf.timing import names
from rlperf.timing.sections import profile

GOAL_REWARD = 1.0  # the target robot stops on the target (terminated)
STEP_COST = 0.01  # every step, the goal step included
ON = 255  # symbolic planes: 255 where set, 0 elsewhere
OBS_MODES = ("rgb_image", "symbolic")


class RobotsVec(VectorEnv):
    """``num_envs`` Ricochet Robots puzzles stepped together.

    Observations: ``rgb_image`` ``(3, image_size, image_size)`` uint8; ``symbolic``
    ``(4 + R + 2, B, B)`` uint8 planes, 0 or 255: walls on the north, east, south, west side
    of each cell (4 planes), robot j's cell (R planes), the target cell, the target robot's
    cell.

    Attributes:
        positions: ``(num_envs, R)`` int64 robot cells (flat ``row * B + col``).
        target_robot, target_cell: ``(num_envs,)`` int64.
        optimal: ``(num_envs,)`` int64 optimal solution length of each current puzzle.
        walls: ``(num_envs, B, B)`` uint8 wall bitmasks (``board.WALL_BITS``).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        num_envs: int,
        *,
        board_size: int,
        num_robots: int,
        max_depth: int,
        max_steps: int,
        obs_mode: str,
        image_size: int,
        batch_boards: int,
    ) -> None:
        self.num_envs, self.board_size, self.num_robots = num_envs, board_size, num_robots
        self.max_depth, self.max_steps = max_depth, max_steps
        self.obs_mode, self.image_size = obs_mode, image_size
        self.render_mode = "rgb_array"
        b, r = board_size, num_robots
        if obs_mode == "rgb_image":
            shape: tuple[int, ...] = (3, image_size, image_size)
        else:
            shape = (4 + r + 2, b, b)
        self.single_observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        self.single_action_space = spaces.Discrete(4 * r)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._check_actions = ActionCheck(self.action_space)
        # The property draws a random seed and keeps it (np_random_seed reports it).
        self.pool = PuzzlePool(b, r, max_depth, batch_boards, self.np_random)
        self.walls = np.zeros((num_envs, b, b), dtype=np.uint8)
        self.lengths = np.zeros((num_envs, b * b, 4), dtype=np.uint8)
        self.positions = np.zeros((num_envs, r), dtype=np.int64)
        self.target_robot = np.zeros(num_envs, dtype=np.int64)
        self.target_cell = np.zeros(num_envs, dtype=np.int64)
        self.optimal = np.zeros(num_envs, dtype=np.int64)
        self.episode_returns = np.zeros(num_envs, dtype=np.float64)
        self.episode_steps = np.zeros(num_envs, dtype=np.int64)
        self._episode_start_s = np.zeros(num_envs, dtype=np.float64)
        self._rows = np.arange(num_envs)
        self._rgb = obs_mode == "rgb_image"
        # Made on first use in symbolic mode (render() only).
        self._renderer: BoardRenderer | None = None
        if self._rgb:
            self._renderer = BoardRenderer(b, r, image_size)
            self._backgrounds = np.zeros((num_envs, *shape), dtype=np.uint8)
        else:
            self._planes = np.zeros((num_envs, 4, b, b), dtype=np.uint8)
        # Where observations go (envs/spec.py, "Observations into a given array"): None, a new
        # array each step; an env worker's rows of shared memory, which saves it a copy.
        self.obs_out: np.ndarray | None = None

    # -- episodes -------------------------------------------------------------------------
    def _reset_rows(self, rows: np.ndarray) -> None:
        """Next puzzle from the pool for envs ``rows`` (int indices)."""
        with profile(names.ENV_RESET):
            puzzles = self.pool.draw(len(rows))
            self._load(rows, puzzles.walls, puzzles.robots, puzzles.target_robot,
                       puzzles.target_cell, puzzles.depth)  # fmt: skip
            self.episode_returns[rows] = 0.0
            self.episode_steps[rows] = 0
            self._episode_start_s[rows] = time.perf_counter()

    def _load(
        self,
        rows: np.ndarray,
        walls: np.ndarray,
        robots: np.ndarray,
        target_robot: np.ndarray,
        target_cell: np.ndarray,
        optimal: np.ndarray,
    ) -> None:
        self.walls[rows] = walls
        self.lengths[rows] = slide_lengths(walls)
        self.positions[rows] = robots
        self.target_robot[rows] = target_robot
        self.target_cell[rows] = target_cell
        self.optimal[rows] = optimal
        if self._rgb:
            with profile(names.RENDER):
                backgrounds = np.empty((len(rows), *self._backgrounds.shape[1:]), np.uint8)
                renderer = cast(BoardRenderer, self._renderer)  # made in __init__ in RGB mode
                with profile(names.RENDER_DRAW_GRID):
                    renderer.grid_into(backgrounds)
                with profile(names.RENDER_DRAW_WALLS):
                    renderer.draw_walls(backgrounds, walls)
                self._backgrounds[rows] = backgrounds
        else:
            self._planes[rows] = wall_planes(walls) * np.uint8(ON)

    # -- observations ---------------------------------------------------------------------
    def _observe(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Observations of envs ``rows`` (None: all): a new array, or for all rows
        :attr:`obs_out` when it is set."""
        sel = self._rows if rows is None else rows
        out = self.obs_out if rows is None else None
        positions = self.positions[sel]
        target_robot, target_cell = self.target_robot[sel], self.target_cell[sel]
        if self._rgb:
            with profile(names.RENDER):
                if out is not None:
                    images = out
                    np.copyto(images, self._backgrounds)
                else:
                    images = self._backgrounds.copy() if rows is None else self._backgrounds[rows]
                renderer = cast(BoardRenderer, self._renderer)  # made in __init__ in RGB mode
                with profile(names.RENDER_DRAW_TARGET):
                    renderer.draw_target(images, target_robot, target_cell)
                with profile(names.RENDER_DRAW_ROBOTS):
                    renderer.draw_robots(images, positions, target_robot, target_cell)
                return images
        with profile(names.ENV_OBSERVE):
            n, b, r = len(positions), self.board_size, self.num_robots
            if out is not None:
                obs = out.reshape(n, 4 + r + 2, b * b)  # a view: out is contiguous
                obs[:, 4:] = 0
            else:
                obs = np.zeros((n, 4 + r + 2, b * b), dtype=np.uint8)
            obs[:, :4] = (self._planes if rows is None else self._planes[rows]).reshape(n, 4, -1)
            at = np.arange(n)
            for j in range(r):
                obs[at, 4 + j, positions[:, j]] = ON
            obs[at, 4 + r, target_cell] = ON
            obs[at, 5 + r, positions[at, target_robot]] = ON
            return out if out is not None else obs.reshape(n, 4 + r + 2, b, b)

    # -- gymnasium API --------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """New puzzles everywhere; ``seed`` reseeds the puzzle generator (and drops the
        puzzles made with the old one) and the action space."""
        if seed is not None:
            reseed(self, seed)
            self.pool.reseed(self.np_random)
        self._reset_rows(self._rows)
        return self._observe(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Move one robot per env: ``actions`` ``(num_envs,)`` ints ``robot * 4 + direction``."""
        with profile(names.ENV_MOVE):
            actions = self._check_actions(actions).astype(np.int64, copy=False)
            self.positions = slide(
                self.positions, actions // 4, actions % 4, self.lengths, self.board_size
            )
            self.episode_steps += 1
            arrived = self.positions[self._rows, self.target_robot] == self.target_cell
            terminated = arrived
            truncated = ~arrived & (self.episode_steps >= self.max_steps)
            rewards = np.where(arrived, GOAL_REWARD - STEP_COST, -STEP_COST).astype(np.float32)
            self.episode_returns += rewards
        obs = self._observe()
        done = terminated | truncated
        if not done.any():
            return obs, rewards, terminated, truncated, {}
        infos = finished_infos(
            obs, done, self.episode_returns, self.episode_steps, self._episode_start_s
        )
        rows = np.flatnonzero(done)
        self._reset_rows(rows)
        obs[rows] = self._observe(rows)
        return obs, rewards, terminated, truncated, infos

    def render(self) -> tuple[np.ndarray, ...]:
        """Every env's board, as gymnasium's ``VectorEnv.render`` gives frames: a tuple of
        ``num_envs`` ``(image_size, image_size, 3)`` uint8 RGB arrays, drawn in one batch
        whatever the observation mode."""
        return tuple(self._draw(slice(None)))

    def render_board(self, index: int) -> np.ndarray:
        """Env ``index``'s board alone, as one frame of :meth:`render` (one board drawn)."""
        if not 0 <= index < self.num_envs:
            raise IndexError(f"env index {index} out of range for {self.num_envs} envs")
        return self._draw(slice(index, index + 1))[0]

    def _draw(self, rows: slice) -> np.ndarray:
        """The boards of ``rows`` as ``(n, image_size, image_size, 3)`` uint8, a new array."""
        if self._renderer is None:  # symbolic mode: made on first use
            self._renderer = BoardRenderer(self.board_size, self.num_robots, self.image_size)
        renderer = self._renderer
        images = renderer.backgrounds(self.walls[rows])
        renderer.draw_target(images, self.target_robot[rows], self.target_cell[rows])
        renderer.draw_robots(images, self.positions[rows], self.target_robot[rows],
                             self.target_cell[rows])  # fmt: skip
        return np.ascontiguousarray(images.transpose(0, 2, 3, 1))

    # -- checkpointing --------------------------------------------------------------------
    _ARRAYS = ("walls", "positions", "target_robot", "target_cell", "optimal",
               "episode_returns", "episode_steps")  # fmt: skip

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (numpy values): the current puzzles,
        episode statistics, the unused pooled puzzles and the generator."""
        state: dict[str, Any] = {name: getattr(self, name).copy() for name in self._ARRAYS}
        state["pool"] = self.pool.get_state()
        return state

    def set_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s dict; backgrounds and slide tables are rebuilt."""
        for name in self._ARRAYS:
            getattr(self, name)[...] = np.asarray(saved[name])
        self.pool.set_state(saved["pool"])
        self._load(self._rows, self.walls.copy(), self.positions.copy(),
                   self.target_robot.copy(), self.target_cell.copy(),
                   self.optimal.copy())  # fmt: skip
        self._episode_start_s[...] = time.perf_counter()
