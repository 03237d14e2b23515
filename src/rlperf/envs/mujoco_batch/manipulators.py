"""The arms: Reacher (``reacher_v5.py``: a two-joint arm's fingertip to a goal) and Pusher
(``pusher_v5.py``: a seven-joint arm pushing a cylinder to a goal). Their bodies' positions are
``xpos`` (``get_body_com``), as the last substep's forward pass left them; their reset draws loop
until the goal (Reacher) or the cylinder (Pusher) lands where allowed, on each env's generator
as gymnasium's."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.task import StepResult, Task, norms


class Reacher(Task):
    """Reward ``-|fingertip - target| * dist_weight - sum(action^2) * control_weight`` (the
    control term in the action's dtype); never terminates."""

    outputs = ("xpos",)

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.dist_weight = env._reward_dist_weight
        self.control_weight = env._reward_control_weight
        self.fingertip, self.target = env.model.body("fingertip").id, env.model.body("target").id

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        qpos = rng.uniform(low=-0.1, high=0.1, size=len(self.init_qpos)) + self.init_qpos
        while True:  # a goal within the disc of radius 0.2
            goal = rng.uniform(low=-0.2, high=0.2, size=2)
            if np.linalg.norm(goal) < 0.2:
                break
        qpos[-2:] = goal
        qvel = self.init_qvel + rng.uniform(low=-0.005, high=0.005, size=len(self.init_qvel))
        qvel[-2:] = 0
        return qpos, qvel

    def _to_target(self, sim: BatchPhysics) -> np.ndarray:
        """(N, 3): the fingertip's position minus the target's."""
        xpos = sim.out["xpos"]
        return xpos[:, self.fingertip] - xpos[:, self.target]

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        reward_dist = -norms(self._to_target(sim)) * self.dist_weight
        reward_ctrl = -np.square(actions).sum(axis=1) * self.control_weight
        infos = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}
        return reward_dist + reward_ctrl, np.zeros(len(actions), dtype=np.bool_), infos

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        theta = sim.qpos[:, :2]
        return np.concatenate(
            (
                np.cos(theta),
                np.sin(theta),
                sim.qpos[:, 2:],
                sim.qvel[:, :2],
                self._to_target(sim)[:, :2],
            ),
            axis=1,
        )


class Pusher(Task):
    """Reward ``-|object - goal| * dist_weight - sum(action^2) * control_weight -
    |object - arm's tip| * near_weight``; never terminates."""

    outputs = ("xpos",)

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.near_weight, self.dist_weight = env._reward_near_weight, env._reward_dist_weight
        self.control_weight = env._reward_control_weight
        body = env.model.body
        self.tips_arm, self.object = body("tips_arm").id, body("object").id
        self.goal = body("goal").id

    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # gymnasium writes these into init_qpos itself; only its last four entries change.
        qpos = self.init_qpos.copy()
        goal_pos = np.asarray([0, 0])
        while True:  # the cylinder more than 0.17 from the goal
            cylinder_pos = np.concatenate(
                [rng.uniform(low=-0.3, high=0, size=1), rng.uniform(low=-0.2, high=0.2, size=1)]
            )
            if np.linalg.norm(cylinder_pos - goal_pos) > 0.17:
                break
        qpos[-4:-2] = cylinder_pos
        qpos[-2:] = goal_pos
        qvel = self.init_qvel + rng.uniform(low=-0.005, high=0.005, size=len(self.init_qvel))
        qvel[-4:] = 0
        return qpos, qvel

    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        xpos = sim.out["xpos"]
        obj = xpos[:, self.object]
        reward_near = -norms(obj - xpos[:, self.tips_arm]) * self.near_weight
        reward_dist = -norms(obj - xpos[:, self.goal]) * self.dist_weight
        reward_ctrl = -np.square(actions).sum(axis=1) * self.control_weight
        rewards = reward_dist + reward_ctrl + reward_near
        infos = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl, "reward_near": reward_near}
        return rewards, np.zeros(len(actions), dtype=np.bool_), infos

    def observe(self, sim: BatchPhysics) -> np.ndarray:
        xpos = sim.out["xpos"]
        return np.concatenate(
            (
                sim.qpos[:, :7],
                sim.qvel[:, :7],
                xpos[:, self.tips_arm],
                xpos[:, self.object],
                xpos[:, self.goal],
            ),
            axis=1,
        )
