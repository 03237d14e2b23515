"""Catch as batched torch code on any device: ``envs/catch.py``'s env, step for step.

Integer dynamics, so the same actions from the same state give the same boards, rewards and
terminations exactly, on any device. The ball's starting column is uniform over the columns
as the numpy env's, drawn from the env's torch generator (the same distribution, not the same
numbers). The board is built by comparing each cell's row and column with the ball's and the
paddle's, with no scatter: one expression for every row of the batch.
"""

from __future__ import annotations

import torch

from rlperf.envs.catch import ON, CatchVec
from rlperf.envs.device.base import DeviceVecEnv


class CatchTorch(DeviceVecEnv):
    """Batched Catch on ``device``; ``rows`` x ``columns`` as :class:`CatchVec`'s."""

    state_names = ("ball_row", "ball_col", "paddle_col")

    def __init__(
        self, num_envs: int, rows: int = 10, columns: int = 5, *,
        device: str | torch.device = "cpu",
    ) -> None:  # fmt: skip
        super().__init__(CatchVec(num_envs, rows, columns), device)
        self.rows, self.columns = rows, columns
        n, dev = self.num_envs, self.device
        self.ball_row = torch.zeros(n, dtype=torch.int64, device=dev)
        self.ball_col = torch.zeros(n, dtype=torch.int64, device=dev)
        self.paddle_col = torch.zeros(n, dtype=torch.int64, device=dev)
        self._cell_rows = torch.arange(rows, device=dev).view(1, rows, 1)
        self._cell_cols = torch.arange(columns, device=dev).view(1, 1, columns)

    def reset_noise_buffer(self, steps: int) -> torch.Tensor:
        """(steps, N) int64: each step's starting column of every row's next ball."""
        return torch.empty(steps, self.num_envs, dtype=torch.int64, device=self.device)

    def fill_reset_noise(self, noise: torch.Tensor) -> None:
        noise.random_(0, self.columns, generator=self.generator)

    def observe(self) -> torch.Tensor:
        rows, cols = self._cell_rows, self._cell_cols
        ball = (rows == self.ball_row.view(-1, 1, 1)) & (cols == self.ball_col.view(-1, 1, 1))
        paddle = (rows == self.rows - 1) & (cols == self.paddle_col.view(-1, 1, 1))
        return ((ball | paddle).to(torch.uint8) * ON).unsqueeze(1)

    def _reset_where(self, done: torch.Tensor, noise: torch.Tensor) -> None:
        self.ball_row.masked_fill_(done, 0)
        torch.where(done, noise, self.ball_col, out=self.ball_col)
        self.paddle_col.masked_fill_(done, self.columns // 2)

    def _move(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        moves = actions.to(torch.int64) - 1
        torch.clamp(self.paddle_col + moves, 0, self.columns - 1, out=self.paddle_col)
        self.ball_row.add_(1)
        terminated = self.ball_row == self.rows - 1
        caught = torch.where(self.ball_col == self.paddle_col, 1.0, -1.0)
        rewards = torch.where(terminated, caught, 0.0).to(torch.float32)
        return rewards, terminated
