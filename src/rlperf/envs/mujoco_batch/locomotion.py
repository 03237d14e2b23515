"""The planar walkers and the swimmer, whose reward reads positions only: HalfCheetah, Hopper
and Walker2d (``half_cheetah_v5.py``, ``hopper_v5.py``, ``walker2d_v5.py``: forward velocity
from ``qpos[0]``), Swimmer (``swimmer_v5.py``: from ``qpos[0:2]``).

Nothing derived from the physics is read, so the batch runs no forward pass at a reset.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.task import StepResult, Task, control_cost, noisy_state, norms


class Planar(Task):
    """HalfCheetah, Hopper, Walker2d: reward ``forward_weight * x_velocity`` (+ the healthy
    reward) ``- ctrl_cost``, observation the positions but x and the velocities."""

    healthy: ClassVar[str] = ""  # "", "hopper" (state, z and angle ranges) or "walker" (z, angle)
    clip_qvel: ClassVar[bool] = False  # the observation's velocities clipped to +-10
    normal_qvel_noise: ClassVar[bool] = False  # reset velocity noise scale * N(0, 1)

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.noise = env._reset_noise_scale
        self.forward_weight, self.ctrl_weight = env._forward_reward_weight, env._ctrl_cost_weight
        self.first = 1 if env._exclude_current_positions_from_observation else 0
        if self.healthy:
            self.healthy_reward = env._healthy_reward
            self.terminate = env._terminate_when_unhealthy
            self.z_range, self.angle_range = env._healthy_z_range, env._healthy_angle_range
            # Walker2d has no state range: every state is within (-inf, inf).
            self.state_range: tuple[float, float] = getattr(
                env, "_healthy_state_range", (-np.inf, np.inf)
            )

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, self.normal_qvel_noise)

    def before_step(self, sim: BatchPhysics) -> np.ndarray:
        return sim.qpos[:, 0].copy()

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        qpos = sim.qpos
        x_after = qpos[:, 0].copy()
        x_velocity = (x_after - before) / self.dt
        forward = self.forward_weight * x_velocity
        ctrl_cost = control_cost(self.ctrl_weight, actions)
        infos: dict[str, np.ndarray] = {"x_position": x_after}
        if self.healthy:
            healthy = self._healthy(qpos, sim.qvel)
            survive = healthy * self.healthy_reward
            rewards = (forward + survive) - ctrl_cost
            terminated = ~healthy if self.terminate else np.zeros(len(qpos), np.bool_)
            infos["z_distance_from_origin"] = qpos[:, 1] - self.init_qpos[1]
        else:
            rewards = forward - ctrl_cost
            terminated = np.zeros(len(qpos), dtype=np.bool_)
        infos["x_velocity"], infos["reward_forward"] = x_velocity, forward
        infos["reward_ctrl"] = -ctrl_cost
        if self.healthy:
            infos["reward_survive"] = survive
        return rewards, terminated, infos

    def _healthy(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """(N,) bool: ``is_healthy`` after the step."""
        z, angle = qpos[:, 1], qpos[:, 2]
        (min_z, max_z), (min_angle, max_angle) = self.z_range, self.angle_range
        healthy = (min_z < z) & (z < max_z) & (min_angle < angle) & (angle < max_angle)
        if self.healthy == "hopper":
            lo, hi = self.state_range
            state = np.concatenate((qpos[:, 2:], qvel), axis=1)  # state_vector()[2:]
            healthy &= ((lo < state) & (state < hi)).all(axis=1)
        return healthy

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        qvel = np.clip(sim.qvel, -10, 10) if self.clip_qvel else sim.qvel
        return np.concatenate((sim.qpos[:, self.first :], qvel), axis=1)

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        out = {"x_position": sim.qpos[:, 0].copy()}
        if self.healthy:
            out["z_distance_from_origin"] = sim.qpos[:, 1] - self.init_qpos[1]
        return out


class HalfCheetah(Planar):
    normal_qvel_noise = True


class Hopper(Planar):
    healthy, clip_qvel = "hopper", True


class Walker2d(Planar):
    healthy, clip_qvel = "walker", True


class Swimmer(Task):
    """Reward ``forward_weight * x_velocity - ctrl_cost``, the velocities from ``qpos[0:2]``
    before and after; never terminates."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.noise = env._reset_noise_scale
        self.forward_weight, self.ctrl_weight = env._forward_reward_weight, env._ctrl_cost_weight
        self.first = 2 if env._exclude_current_positions_from_observation else 0

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, normal_qvel=False)

    def before_step(self, sim: BatchPhysics) -> np.ndarray:
        return sim.qpos[:, 0:2].copy()

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        xy_after = sim.qpos[:, 0:2].copy()
        xy_velocity = (xy_after - before) / self.dt
        forward = self.forward_weight * xy_velocity[:, 0]
        ctrl_cost = control_cost(self.ctrl_weight, actions)
        infos = {
            **planar_position_infos(sim.qpos),
            "x_velocity": xy_velocity[:, 0].copy(),
            "y_velocity": xy_velocity[:, 1].copy(),
            "reward_forward": forward,
            "reward_ctrl": -ctrl_cost,
        }
        return forward - ctrl_cost, np.zeros(len(xy_after), dtype=np.bool_), infos

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        return np.concatenate((sim.qpos[:, self.first :], sim.qvel), axis=1)

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        return planar_position_infos(sim.qpos)


def planar_position_infos(qpos: np.ndarray) -> dict[str, np.ndarray]:
    """``x_position``, ``y_position`` and ``distance_from_origin`` of ``qpos[0:2]`` (Swimmer's
    and Ant's reset infos, and part of their steps')."""
    return {
        "x_position": qpos[:, 0].copy(),
        "y_position": qpos[:, 1].copy(),
        "distance_from_origin": norms(qpos[:, 0:2]),
    }
