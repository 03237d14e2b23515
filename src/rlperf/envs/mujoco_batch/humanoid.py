"""Humanoid and HumanoidStandup (``humanoid_v5.py``, ``humanoidstandup_v5.py``): observations of
the bodies' inertia, velocity, actuator forces and contact forces (each optional, all on by
default), a contact cost from ``cfrc_ext`` after ``mj_rnePostConstraint`` (the batch's
``contacts``), and the tendons in the infos."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.task import StepResult, Task, control_cost, noisy_state, norms


class Body(Task):
    """What the two classes share: ``_get_obs``, the uniform reset noise, the control cost of
    ``data.ctrl`` (float64, where the other classes square the action) and the contact cost."""

    outputs: ClassVar[tuple[str, ...]] = (
        "cinert", "cvel", "qfrc_actuator", "ten_length", "ten_velocity")  # fmt: skip
    contacts = True

    def __init__(self, env: Any, contact_cost: str) -> None:
        super().__init__(env)
        self.noise, self.ctrl_weight = env._reset_noise_scale, env._ctrl_cost_weight
        self.contact_weight = getattr(env, f"_{contact_cost}_cost_weight")
        self.contact_range = getattr(env, f"_{contact_cost}_cost_range")
        self.first = 2 if env._exclude_current_positions_from_observation else 0
        self.parts = [
            name
            for name in ("cinert", "cvel", "qfrc_actuator", "cfrc_ext")
            if getattr(env, f"_include_{name}_in_observation") is True  # as _get_obs tests
        ]

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return noisy_state(rng, self.init_qpos, self.init_qvel, self.noise, normal_qvel=False)

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        n = len(sim.qpos)
        parts = [sim.qpos[:, self.first :], sim.qvel]
        for name in self.parts:
            if name == "qfrc_actuator":
                parts.append(sim.out[name][:, 6:])
            else:  # per body, the world's row left out
                rows = sim.cfrc_ext if name == "cfrc_ext" else sim.out[name]
                parts.append(rows[:, 1:].reshape(n, -1))
        return np.concatenate(parts, axis=1)

    def costs(self, sim: BatchPhysics) -> tuple[np.ndarray, np.ndarray]:
        """(N,) control and contact costs, the contact cost clipped to its range."""
        ctrl_cost = control_cost(self.ctrl_weight, sim.ctrl)
        squares = np.square(sim.cfrc_ext).reshape(len(sim.qpos), -1)
        contact_cost = self.contact_weight * np.sum(squares, axis=1)
        return ctrl_cost, np.clip(contact_cost, *self.contact_range)

    def positions(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        """The infos both classes start with: x and y, the tendons' lengths and velocities."""
        return {
            "x_position": sim.qpos[:, 0].copy(),
            "y_position": sim.qpos[:, 1].copy(),
            "tendon_length": sim.out["ten_length"].copy(),
            "tendon_velocity": sim.out["ten_velocity"].copy(),
        }


class Humanoid(Body):
    """Reward ``forward_weight * x_velocity + healthy_reward - (ctrl_cost + contact_cost)``, the
    velocity of the mass center (``xipos`` weighted by the bodies' masses); unhealthy (z outside
    ``healthy_z_range``, exclusive) terminates where ``terminate_when_unhealthy``."""

    outputs = (*Body.outputs, "xipos")

    def __init__(self, env: Any) -> None:
        super().__init__(env, "contact")
        self.forward_weight = env._forward_reward_weight
        self.healthy_reward, self.terminate = env._healthy_reward, env._terminate_when_unhealthy
        self.z_range = env._healthy_z_range
        self.body_mass = env.model.body_mass.copy()

    def before_step(self, sim: BatchPhysics) -> np.ndarray:
        return self._mass_center(sim)

    def _mass_center(self, sim: BatchPhysics) -> np.ndarray:
        """(N, 2): ``mass_center`` (its einsum, with the batch's rows added)."""
        total = np.einsum("b,nbj->nj", self.body_mass, sim.out["xipos"])
        return (total / self.body_mass.sum())[:, 0:2].copy()

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        xy_velocity = (self._mass_center(sim) - before) / self.dt
        x_velocity, y_velocity = xy_velocity[:, 0].copy(), xy_velocity[:, 1].copy()
        forward = self.forward_weight * x_velocity
        min_z, max_z = self.z_range
        healthy = (min_z < sim.qpos[:, 2]) & (sim.qpos[:, 2] < max_z)
        survive = healthy * self.healthy_reward
        ctrl_cost, contact_cost = self.costs(sim)
        rewards = (forward + survive) - (ctrl_cost + contact_cost)
        terminated = ~healthy if self.terminate else np.zeros(len(actions), dtype=np.bool_)
        infos = {
            **self.positions(sim),
            "distance_from_origin": norms(sim.qpos[:, 0:2]),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_survive": survive,
            "reward_forward": forward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
        }
        return rewards, terminated, infos

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        return {**self.positions(sim), "distance_from_origin": norms(sim.qpos[:, 0:2])}


class HumanoidStandup(Body):
    """Reward ``z / timestep - ctrl_cost - impact_cost + 1`` (z the torso's height after the
    step); never terminates."""

    def __init__(self, env: Any) -> None:
        super().__init__(env, "impact")
        self.timestep = env.model.opt.timestep

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        uph_cost = (sim.qpos[:, 2] - 0) / self.timestep
        ctrl_cost, impact_cost = self.costs(sim)
        rewards = uph_cost - ctrl_cost - impact_cost + 1
        infos = {
            **self.reset_infos(sim),
            "reward_linup": uph_cost,
            "reward_quadctrl": -ctrl_cost,
            "reward_impact": -impact_cost,
        }
        return rewards, np.zeros(len(actions), dtype=np.bool_), infos

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        z = sim.qpos[:, 2] - self.init_qpos[2]
        return {**self.positions(sim), "z_distance_from_origin": z}
