"""Ant (``ant_v5.py``): forward velocity from the main body's ``xpos`` before and after the step,
a contact cost and (by default) the contact forces in the observation, both from ``cfrc_ext``
after ``mj_rnePostConstraint`` (the batch's ``contacts``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.mujoco_batch.locomotion import planar_position_infos
from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.task import StepResult, Task, control_cost, noisy_state


class Ant(Task):
    """Reward ``x_velocity * forward_weight + healthy_reward - (ctrl_cost + contact_cost)``;
    unhealthy (non-finite state, or the torso's z outside ``healthy_z_range``, inclusive)
    terminates where ``terminate_when_unhealthy``."""

    outputs = ("xpos",)  # the main body's position (the step's velocity)
    contacts = True

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.noise = env._reset_noise_scale
        self.forward_weight, self.ctrl_weight = env._forward_reward_weight, env._ctrl_cost_weight
        self.contact_weight, self.force_range = env._contact_cost_weight, env._contact_force_range
        self.healthy_reward, self.terminate = env._healthy_reward, env._terminate_when_unhealthy
        self.z_range = env._healthy_z_range
        self.main_body = env.model.body(env._main_body).id  # an id or a name
        self.first = 2 if env._exclude_current_positions_from_observation else 0
        self.observe_forces = env._include_cfrc_ext_in_observation

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, normal_qvel=True)

    def before_step(self, sim: BatchPhysics) -> np.ndarray:
        return sim.out["xpos"][:, self.main_body, :2].copy()

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        xy_velocity = (sim.out["xpos"][:, self.main_body, :2] - before) / self.dt
        x_velocity, y_velocity = xy_velocity[:, 0].copy(), xy_velocity[:, 1].copy()
        forward = x_velocity * self.forward_weight
        healthy = self._healthy(sim)
        survive = healthy * self.healthy_reward
        ctrl_cost = control_cost(self.ctrl_weight, actions)
        forces = self._contact_forces(sim).reshape(len(actions), -1)
        contact_cost = self.contact_weight * np.sum(np.square(forces), axis=1)
        rewards = (forward + survive) - (ctrl_cost + contact_cost)
        terminated = ~healthy if self.terminate else np.zeros(len(actions), dtype=np.bool_)
        infos = {
            **planar_position_infos(sim.qpos),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_forward": forward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
            "reward_survive": survive,
        }
        return rewards, terminated, infos

    def _healthy(self, sim: BatchPhysics) -> np.ndarray:
        """(N,) bool: ``is_healthy``."""
        finite = np.isfinite(sim.qpos).all(axis=1) & np.isfinite(sim.qvel).all(axis=1)
        min_z, max_z = self.z_range
        z = sim.qpos[:, 2]
        return finite & (min_z <= z) & (z <= max_z)

    def _contact_forces(self, sim: BatchPhysics) -> np.ndarray:
        """(N, nbody, 6) ``cfrc_ext`` clipped to ``contact_force_range``."""
        low, high = self.force_range
        return np.clip(sim.cfrc_ext, low, high)

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        parts = [sim.qpos[:, self.first :], sim.qvel]
        if self.observe_forces:
            parts.append(self._contact_forces(sim)[:, 1:].reshape(len(sim.qpos), -1))
        return np.concatenate(parts, axis=1)

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        return planar_position_infos(sim.qpos)
