"""Catch (bsuite's ``catch``) for a whole batch at once: the smallest pixel environment.

A ball starts in a random column of the top row of a ``rows`` x ``columns`` board and falls one
row per step; a paddle in the bottom row moves left, stays or moves right (actions 0, 1, 2). When
the ball reaches the bottom row the episode ends: +1 if the paddle is under it, -1 otherwise
(``rows - 1`` steps an episode). The observation is the board as a ``(1, rows, columns)`` uint8
image, 255 where the ball or the paddle is, 0 elsewhere: a CNN's smoke test and benchmark until
the RGB robots board exists, and a useful one, since the policy must read positions from pixels.

Same contract as ``envs/cartpole.py``: gymnasium's vector API, ``AutoresetMode.SAME_STEP``,
``final_obs`` and ``episode`` statistics in ``infos``, ``get_state``/``set_state`` for resume.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos
from rlperf.envs.registry import int_option

ON = 255


class CatchVec(VectorEnv):
    """Batched Catch; ``rows`` and ``columns`` are the board size (bsuite: 10 x 5)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, num_envs: int, rows: int = 10, columns: int = 5) -> None:
        int_option("num_envs", num_envs, 1)
        int_option("rows", rows, 2)
        int_option("columns", columns, 1)
        self.num_envs, self.rows, self.columns = num_envs, rows, columns
        self.single_observation_space = spaces.Box(0, ON, (1, rows, columns), dtype=np.uint8)
        self.single_action_space = spaces.Discrete(3)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.ball_row = np.zeros(num_envs, dtype=np.int64)
        self.ball_col = np.zeros(num_envs, dtype=np.int64)
        self.paddle_col = np.zeros(num_envs, dtype=np.int64)
        self.episode_returns = np.zeros(num_envs, dtype=np.float64)
        self.episode_steps = np.zeros(num_envs, dtype=np.int64)
        self._episode_start_s = np.zeros(num_envs, dtype=np.float64)
        self._rows = np.arange(num_envs)
        self._check_actions = ActionCheck(self.action_space)

    def _reset_rows(self, mask: np.ndarray) -> None:
        n = int(mask.sum())
        self.ball_row[mask] = 0
        self.ball_col[mask] = self.np_random.integers(0, self.columns, n)
        self.paddle_col[mask] = self.columns // 2
        self.episode_returns[mask] = 0.0
        self.episode_steps[mask] = 0
        self._episode_start_s[mask] = time.perf_counter()

    def _observation(self) -> np.ndarray:
        obs = np.zeros((self.num_envs, 1, self.rows, self.columns), dtype=np.uint8)
        obs[self._rows, 0, self.ball_row, self.ball_col] = ON
        obs[self._rows, 0, self.rows - 1, self.paddle_col] = ON
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        reseed(self, seed)
        self._reset_rows(np.ones(self.num_envs, dtype=bool))
        return self._observation(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        moves = self._check_actions(actions).astype(np.int64, copy=False) - 1
        self.paddle_col = np.clip(self.paddle_col + moves, 0, self.columns - 1)
        self.ball_row += 1
        terminated = self.ball_row == self.rows - 1
        rewards = np.where(
            terminated, np.where(self.ball_col == self.paddle_col, 1.0, -1.0), 0.0
        ).astype(np.float32)
        truncated = np.zeros(self.num_envs, dtype=bool)
        self.episode_returns += rewards
        self.episode_steps += 1
        obs = self._observation()
        if not terminated.any():
            return obs, rewards, terminated, truncated, {}
        infos = finished_infos(  # a copy: `terminated` is returned too
            obs, terminated.copy(), self.episode_returns, self.episode_steps,
            self._episode_start_s,
        )  # fmt: skip
        self._reset_rows(terminated)
        obs[terminated] = self._observation()[terminated]
        return obs, rewards, terminated, truncated, infos

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (numpy values)."""
        return {
            "ball_row": self.ball_row.copy(),
            "ball_col": self.ball_col.copy(),
            "paddle_col": self.paddle_col.copy(),
            "episode_returns": self.episode_returns.copy(),
            "episode_steps": self.episode_steps.copy(),
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, saved: dict[str, Any]) -> None:
        for name in ("ball_row", "ball_col", "paddle_col", "episode_returns", "episode_steps"):
            getattr(self, name)[...] = np.asarray(saved[name])
        self.np_random.bit_generator.state = saved["rng"]
        self._episode_start_s[...] = time.perf_counter()
