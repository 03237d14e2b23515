"""The batched Petri-net environment: the whole batch in a few numpy operations per step.

Enabled sets are one comparison over ``(num_envs, T, K)``: each transition's input arcs, padded
to the most any transition has (``K``, 2 in ``jobshop``) with weight-0 arcs that always hold.
That is the textbook ``(marking[:, :, None] >= pre[None]).all(1)`` over ``(num_envs, P, T)``
with the zeros of ``pre`` left out: on ``jobshop`` at 256 envs it takes ~20 us where the dense
comparison takes ~500 us (the whole step ~0.6 ms), because ``pre`` is mostly zeros and a
reduction over a middle axis is slow in numpy. Firing is one gather of the incidence rows
``(post - pre).T[actions]``, zeroed where the chosen transition is disabled. No Python loop runs
per env or per transition in :meth:`step`. It must agree step for step with
:class:`~rlperf.envs.petri.reference.ReferencePetriVec` (tests/envs/test_petri.py).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from rlperf.envs.petri.base import (
    DEAD_PENALTY,
    GOAL_REWARD,
    INVALID_PENALTY,
    STEP_COST,
    PetriNetVec,
)
from rlperf.envs.petri.net import Net


class TurboPetriVec(PetriNetVec):
    """Petri-net vector env stepped as one batch (incidence matrices, no per-env loop)."""

    def __init__(
        self, num_envs: int, net: Net, *, mask: bool, max_steps: int, max_tokens: int
    ) -> None:
        # (T, K) input places and weights per transition, padded with (place 0, weight 0).
        width = max(1, int((net.pre > 0).sum(axis=0).max()))
        self._in_place = np.zeros((net.num_transitions, width), dtype=np.intp)
        self._in_weight = np.zeros((net.num_transitions, width), dtype=np.int64)
        for t in range(net.num_transitions):  # setup only: the step never loops
            places = np.flatnonzero(net.pre[:, t])
            self._in_place[t, : len(places)] = places
            self._in_weight[t, : len(places)] = net.pre[places, t]
        # (T + 1, P): row t is the marking change of firing t, the last row (no change) is what
        # a disabled choice gathers.
        self._delta = np.zeros((net.num_transitions + 1, net.num_places), dtype=np.int64)
        self._delta[:-1] = (net.post - net.pre).T
        self._goal_places = np.flatnonzero(net.goal)
        self._goal_counts = net.goal[self._goal_places]
        self._rows = np.arange(num_envs)
        super().__init__(num_envs, net, mask=mask, max_steps=max_steps, max_tokens=max_tokens)

    def _enabled_of(self, marking: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, (marking[:, self._in_place] >= self._in_weight).all(axis=2))

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        actions = actions.astype(np.intp, copy=False)
        valid = self.enabled[self._rows, actions]
        # np.take: a row gather ~3x faster than fancy indexing at this size.
        self.marking += np.take(self._delta, np.where(valid, actions, len(self._delta) - 1), 0)
        self.episode_steps += 1
        self.enabled = self._enabled_of(self.marking)
        reached = (self.marking[:, self._goal_places] >= self._goal_counts).all(axis=1)
        dead = cast(np.ndarray, ~reached & ~self.enabled.any(axis=1))
        # Same operations in the same order as the reference, so rewards agree to the bit.
        rewards = np.full(self.num_envs, -STEP_COST)
        rewards -= np.where(valid, 0.0, INVALID_PENALTY)
        rewards += np.where(reached, GOAL_REWARD, 0.0)
        rewards -= np.where(dead, DEAD_PENALTY, 0.0)
        terminated = reached | dead
        truncated = ~terminated & (self.episode_steps >= self.max_steps)
        return rewards.astype(np.float32), terminated, truncated
