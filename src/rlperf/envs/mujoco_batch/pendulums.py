"""The carts with poles: InvertedPendulum (``inverted_pendulum_v5.py``) and
InvertedDoublePendulum (``inverted_double_pendulum_v5.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.task import StepResult, Task, noisy_state


class InvertedPendulum(Task):
    """Reward 1 while the pole stands (``|angle| <= 0.2`` and a finite observation), which ends
    the episode when it falls; an int, as gymnasium's (its ``reward_survive`` info stays int)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.noise = env._reset_noise_scale

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, normal_qvel=False)

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        obs = self.observe(sim)
        terminated = ~np.isfinite(obs).all(axis=1) | (np.abs(obs[:, 1]) > 0.2)
        survive = (~terminated).astype(np.int64)
        return survive.astype(np.float64), terminated, {"reward_survive": survive}

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        return np.concatenate((sim.qpos, sim.qvel), axis=1)


class InvertedDoublePendulum(Task):
    """Reward ``alive_bonus - dist_penalty - vel_penalty`` from the tip's site (``site_xpos[0]``)
    and the poles' velocities; the episode ends when the tip's height is <= 1."""

    outputs = ("site_xpos", "qfrc_constraint")

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.noise, self.healthy_reward = env._reset_noise_scale, env._healthy_reward

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, normal_qvel=True)

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        tip = sim.out["site_xpos"][:, 0]
        x, y = tip[:, 0], tip[:, 2]
        terminated = y <= 1
        v1, v2 = sim.qvel[:, 1], sim.qvel[:, 2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 0.001 * v1**2 + 0.005 * v2**2
        # healthy_reward * int(not terminated): an int times an int stays an int, as there.
        alive_bonus = self.healthy_reward * (~terminated).astype(np.int64)
        rewards = alive_bonus - dist_penalty - vel_penalty
        infos = {
            "reward_survive": alive_bonus,
            "distance_penalty": -dist_penalty,
            "velocity_penalty": -vel_penalty,
        }
        return rewards, terminated, infos

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        qpos = sim.qpos
        return np.concatenate(
            (
                qpos[:, :1],
                np.sin(qpos[:, 1:]),
                np.cos(qpos[:, 1:]),
                np.clip(sim.qvel, -10, 10),
                np.clip(sim.out["qfrc_constraint"], -10, 10)[:, :1],
            ),
            axis=1,
        )
