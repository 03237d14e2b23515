"""The critic's targets normalised (``--normalize-value``): rl_games' ``normalize_value``.

The critic predicts the return in units of a running standard deviation of the returns, about
their running mean, so its target keeps a scale near 1 however large the returns grow. rl_games
runs its MuJoCo configs this way (``normalize_value: True``, the reward scaled by a constant),
where CleanRL and ``--normalize-reward`` divide the reward by a running spread of the discounted
return instead, so that the reward's own units drift as the policy improves.

It fits around the update without touching it. The buffer keeps what the critic outputs
(normalised values). Before GAE they are turned back into returns in place: the values, the
last value, and the truncation bootstraps where an episode was truncated. After GAE the
statistics take the batch's returns (advantages + values), and the buffer's values become
``(v - mean) / std`` and its advantages ``advantages / std``. The update's returns, which it
reads as advantages + values, are then the normalised returns. The policy loss normalises the
advantages per minibatch (``--norm-adv``, required), so dividing them by one number leaves it
unchanged.

The statistics are gymnasium's :class:`~rlperf.envs.normalize.RunningStats` (float64, Chan's
update over the batch), one set per rank as the observation statistics are. Unlike rl_games,
nothing is clipped to +-5 standard deviations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlperf.envs.normalize import RunningStats

EPSILON = 1e-5  # added to the variance before its square root (rl_games' RunningMeanStd)


def _host(array: Any) -> np.ndarray:
    return array.detach().cpu().numpy() if isinstance(array, torch.Tensor) else array


class ValueNormalizer:
    """Running mean and std of the returns; rewrites one rollout's GAE inputs and outputs."""

    def __init__(self) -> None:
        self.stats = RunningStats(())

    def scale(self) -> tuple[float, float]:
        """(mean, std) of the returns seen so far."""
        return float(self.stats.mean), float(np.sqrt(self.stats.var + EPSILON))

    def denormalize(self, inputs: dict[str, Any]) -> None:
        """The critic's outputs in ``inputs`` (:meth:`RolloutBuffer.gae_inputs`: numpy views or
        tensors, written in place) as returns: ``values`` (T, N), ``last_value`` (N,), and
        ``bootstrap_values`` (T, N) where truncated and not terminated (0 elsewhere)."""
        mean, std = self.scale()
        for key in ("values", "last_value"):
            inputs[key] *= std
            inputs[key] += mean
        truncated = inputs["truncations"] * (1.0 - inputs["terminations"])
        inputs["bootstrap_values"] *= std
        inputs["bootstrap_values"] += mean * truncated

    def normalize_targets(self, values: Any, advantages: Any) -> None:
        """After GAE: take the returns ``advantages + values`` (T, N) into the statistics, then
        write ``(values - mean) / std`` and ``advantages / std`` in place (module docstring)."""
        self.stats.update(_host(advantages + values).reshape(-1))
        mean, std = self.scale()
        values -= mean
        values /= std
        advantages /= std

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state)
