"""The reference Petri-net environment: per env, per transition, plain Python loops over arcs.

Written to be obviously right, the way a Petri-net simulator is first written; the batched
:class:`~rlperf.envs.petri.turbo.TurboPetriVec` must agree with it step for step
(tests/envs/test_petri.py). It reads the net's arc lists (``inputs``/``outputs``), never the
incidence matrices the turbo version uses.
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.petri.base import (
    DEAD_PENALTY,
    GOAL_REWARD,
    INVALID_PENALTY,
    STEP_COST,
    PetriNetVec,
)


class ReferencePetriVec(PetriNetVec):
    """Petri-net vector env stepped one env and one transition at a time."""

    def _is_enabled(self, marking: list[int], t: int) -> bool:
        """Transition ``t`` may fire: every input place holds at least the arc's weight."""
        return all(marking[p] >= w for p, w in self.net.inputs[t])

    def _enabled_of(self, marking: np.ndarray) -> np.ndarray:
        enabled = np.zeros((len(marking), self.net.num_transitions), dtype=bool)
        for i, row in enumerate(marking):
            m = [int(x) for x in row]
            for t in range(self.net.num_transitions):
                enabled[i, t] = self._is_enabled(m, t)
        return enabled

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        net = self.net
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i in range(self.num_envs):
            m = [int(x) for x in self.marking[i]]
            t = int(actions[i])
            reward = -STEP_COST
            if self._is_enabled(m, t):
                for p, w in net.inputs[t]:
                    m[p] -= w
                for p, w in net.outputs[t]:
                    m[p] += w
            else:
                reward -= INVALID_PENALTY  # a disabled transition does nothing
            steps = int(self.episode_steps[i]) + 1
            enabled = [self._is_enabled(m, u) for u in range(net.num_transitions)]
            reached = all(m[p] >= count for p, count in net.goal_items)
            dead = not reached and not any(enabled)
            if reached:
                reward += GOAL_REWARD
            elif dead:
                reward -= DEAD_PENALTY
            self.marking[i] = m
            self.enabled[i] = enabled
            self.episode_steps[i] = steps
            rewards[i] = reward
            terminated[i] = reached or dead
            truncated[i] = not terminated[i] and steps >= self.max_steps
        return rewards, terminated, truncated
