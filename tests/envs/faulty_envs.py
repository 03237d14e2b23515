"""Envs for the worker fault tests, importable by worker processes (registered by the tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.cartpole import CartPoleVec


class FailingCartPole(CartPoleVec):
    """CartPole whose ``step`` raises at step ``fail_at`` after a reset with seed ``fail_seed``
    (each worker resets with its own seed, so exactly one worker fails)."""

    def __init__(self, num_envs: int, fail_at: int = 3, fail_seed: int = -1) -> None:
        super().__init__(num_envs)
        self.fail_at, self.fail_seed = fail_at, fail_seed
        self.steps, self.seed_used = 0, None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
        self.steps, self.seed_used = 0, seed
        return super().reset(seed=seed, options=options)

    def step(self, actions: np.ndarray):  # type: ignore[no-untyped-def]
        self.steps += 1
        if self.seed_used == self.fail_seed and self.steps == self.fail_at:
            raise RuntimeError(f"boom at step {self.steps}")
        return super().step(actions)
