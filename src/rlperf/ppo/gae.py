"""Generalised advantage estimation, vectorised over environments.

Shapes: ``(T, N)`` for T steps of N environments. ``terminations`` stop bootstrapping (the value
after a terminal state is 0); ``truncations`` end a trajectory without making its last state
terminal, so the step bootstraps from the value of the final observation, given in
``bootstrap_values`` (non-zero only where truncated and not terminated). Either ends the
recursion: no advantage flows across an episode boundary.

Works on numpy arrays and torch tensors alike (only arithmetic and indexing are used): the
trainer passes numpy views on the CPU, where one small numpy op costs about a quarter of a torch
op, and tensors on CUDA.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch

from rlperf import native

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def _check_shapes(
    rewards: Array,
    values: Array,
    last_value: Array,
    terminations: Array,
    truncations: Array,
    bootstrap_values: Array,
    out: Array,
) -> None:
    shape = tuple(rewards.shape)
    if len(shape) != 2:
        raise ValueError(f"gae: rewards must be (T, N), got shape {shape}")
    named = {
        "values": values,
        "terminations": terminations,
        "truncations": truncations,
        "bootstrap_values": bootstrap_values,
        "out": out,
    }
    for name, array in named.items():
        if tuple(array.shape) != shape:
            raise ValueError(
                f"gae: {name} must have the rewards' shape {shape}, got {tuple(array.shape)}"
            )
    if tuple(last_value.shape) != shape[1:]:
        raise ValueError(
            f"gae: last_value must be (N,) = {shape[1:]}, got {tuple(last_value.shape)}"
        )


def gae(
    *,
    rewards: Array,
    values: Array,
    last_value: Array,
    terminations: Array,
    truncations: Array,
    bootstrap_values: Array,
    gamma: float,
    gae_lambda: float,
    out: Array,
) -> Array:
    """Write GAE advantages into ``out`` (T, N) and return it.

    Args:
        rewards: (T, N) reward of each step.
        values: (T, N) V(s_t) of the observation acted on at step t.
        last_value: (N,) V of the observation after the last step.
        terminations, truncations: (T, N) 0/1 floats: the episode ended at step t (terminal
            state / time limit).
        bootstrap_values: (T, N) V(final observation) where truncated and not terminated, else 0.
        gamma: discount; gae_lambda: GAE's lambda.
        out: (T, N) output buffer, same kind (numpy or torch) as the inputs.

    Raises:
        ValueError: naming the first argument whose shape does not fit.
    """
    _check_shapes(rewards, values, last_value, terminations, truncations, bootstrap_values, out)
    arrays: tuple[Any, ...] = (rewards, values, last_value, terminations, truncations,
                               bootstrap_values, out)  # fmt: skip
    if native.rollout_available() and all(
        isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous
        and a.flags.writeable for a in arrays
    ):  # fmt: skip
        # The trainer's CPU case: the arithmetic below, bit for bit, in one call (the loop's
        # dispatch was ~2 us a step).
        rew, val, last, term, trunc, boot, dest = arrays
        native.gae_advantages(rew, val, last, term, trunc, boot, gamma, gae_lambda, dest)
        return out
    num_steps = rewards.shape[0]
    not_done = 1.0 - (terminations + truncations - terminations * truncations)
    # V(s_{t+1}) within an episode, V(final obs) at a truncation, 0 at a termination.
    next_values = values * 0.0
    next_values[:-1] = values[1:]
    next_values[-1] = last_value
    next_values = next_values * not_done + bootstrap_values
    deltas = rewards + gamma * next_values - values
    coef = (gamma * gae_lambda) * not_done
    out[-1] = deltas[-1]
    for t in range(num_steps - 2, -1, -1):
        out[t] = deltas[t] + coef[t] * out[t + 1]
    return out


def gae_reference(
    rewards: list[list[float]],
    values: list[list[float]],
    last_value: list[float],
    terminations: list[list[bool]],
    truncations: list[list[bool]],
    final_values: list[list[float]],
    gamma: float,
    gae_lambda: float,
) -> list[list[float]]:
    """Plain per-environment, per-step loop; the obviously-right version :func:`gae` must match.

    ``final_values[t][i]`` is V(final observation) for a step that was truncated.
    """
    num_steps, num_envs = len(rewards), len(rewards[0])
    adv = [[0.0] * num_envs for _ in range(num_steps)]
    for i in range(num_envs):
        running = 0.0
        for t in reversed(range(num_steps)):
            if terminations[t][i]:
                next_value, running = 0.0, 0.0
            elif truncations[t][i]:
                next_value, running = final_values[t][i], 0.0
            else:
                next_value = values[t + 1][i] if t + 1 < num_steps else last_value[i]
            delta = rewards[t][i] + gamma * next_value - values[t][i]
            running = delta + gamma * gae_lambda * running
            adv[t][i] = running
    return adv
