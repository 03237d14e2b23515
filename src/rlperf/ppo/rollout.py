"""Rollout storage, allocated once per run, and its view as a shuffled sample table.

Per-step data lives in ``(T, N, ...)`` tensors on the training device. Rewards, terminations and
truncations come from the environment on the host; they are kept in host arrays during the
rollout and moved to the device once per rollout (:meth:`RolloutBuffer.finish`) instead of once
per step: on CUDA that is one transfer instead of T.

For the update every per-sample quantity is packed into one ``(T*N, C)`` float table (observation
columns, action column(s), old log-prob, old value, advantage, return), so shuffling a whole epoch
is one ``index_select`` and each minibatch a contiguous slice of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Minibatch:
    """Column views of one minibatch of the sample table, each with leading dimension B."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


class RolloutBuffer:
    """Storage for ``num_steps`` steps of ``num_envs`` environments.

    Args:
        action_dim: 0 for a discrete action (stored as int64), else the continuous action size.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device,
    ) -> None:
        self.num_steps, self.num_envs = num_steps, num_envs
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = device
        shape = (num_steps, num_envs)
        self.obs = torch.zeros((*shape, obs_dim), device=device)
        if action_dim == 0:
            self.actions = torch.zeros(shape, dtype=torch.int64, device=device)
        else:
            self.actions = torch.zeros((*shape, action_dim), device=device)
        self.logprobs = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)
        self.bootstrap_values = torch.zeros(shape, device=device)
        self.advantages = torch.zeros(shape, device=device)
        # Host-side per-step environment outputs, moved to the device once per rollout.
        self.rewards_host = np.zeros(shape, dtype=np.float32)
        self.terminations_host = np.zeros(shape, dtype=np.float32)
        self.truncations_host = np.zeros(shape, dtype=np.float32)
        self.next_obs = torch.zeros((num_envs, obs_dim), device=device)
        self._on_cpu = device.type == "cpu"
        # On the CPU, numpy views of the tensors let the host copy observations in directly.
        self._obs_np = self.obs.numpy() if self._on_cpu else None
        self._next_obs_np = self.next_obs.numpy() if self._on_cpu else None
        act_cols = max(action_dim, 1)
        self.num_columns = obs_dim + act_cols + 4
        self._table = torch.zeros((num_steps * num_envs, self.num_columns), device=device)
        self._shuffled = torch.zeros_like(self._table)
        c = obs_dim + act_cols
        self._cols = {
            "obs": slice(0, obs_dim),
            "actions": slice(obs_dim, c),
            "logprobs": c,
            "values": c + 1,
            "advantages": c + 2,
            "returns": c + 3,
        }

    # -- collection ----------------------------------------------------------------------
    def obs_slot(self, t: int) -> torch.Tensor:
        """Where the observation acted on at step ``t`` lives (``t == num_steps``: next_obs)."""
        return self.next_obs if t == self.num_steps else self.obs[t]

    def write_obs(self, t: int, obs: np.ndarray) -> torch.Tensor:
        """Copy an environment observation (N, obs_dim) into slot ``t``; returns the slot."""
        if self._on_cpu:
            target = self._next_obs_np if t == self.num_steps else self._obs_np[t]
            target[...] = obs.reshape(target.shape)
            return self.obs_slot(t)
        slot = self.obs_slot(t)
        slot.copy_(torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32)).view(slot.shape))
        return slot

    def store_step(
        self,
        t: int,
        actions: torch.Tensor,
        logprobs: torch.Tensor,
        values: torch.Tensor,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
    ) -> None:
        self.actions[t] = actions
        self.logprobs[t] = logprobs
        self.values[t] = values
        self.rewards_host[t] = rewards
        self.terminations_host[t] = terminations
        self.truncations_host[t] = truncations

    def finish(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rewards, terminations, truncations (T, N) as device tensors (CPU: no copy)."""
        arrays = (self.rewards_host, self.terminations_host, self.truncations_host)
        tensors = tuple(torch.from_numpy(a) for a in arrays)
        if not self._on_cpu:
            tensors = tuple(t.to(self.device, non_blocking=True) for t in tensors)
        return tensors  # type: ignore[return-value]

    # -- update --------------------------------------------------------------------------
    def build_table(self, returns: torch.Tensor) -> None:
        """Pack everything the update reads into the sample table (advantages already set)."""
        n = self.num_steps * self.num_envs
        table, cols = self._table, self._cols
        table[:, cols["obs"]] = self.obs.view(n, self.obs_dim)
        table[:, cols["actions"]] = self.actions.view(n, -1)
        table[:, cols["logprobs"]] = self.logprobs.view(n)
        table[:, cols["values"]] = self.values.view(n)
        table[:, cols["advantages"]] = self.advantages.view(n)
        table[:, cols["returns"]] = returns.view(n)

    def shuffle(self, generator: torch.Generator | None) -> None:
        """One random permutation of the samples for the next epoch."""
        perm = torch.randperm(self._table.shape[0], generator=generator, device="cpu")
        torch.index_select(self._table, 0, perm.to(self.device), out=self._shuffled)

    def minibatches(self, num_minibatches: int) -> Iterator[Minibatch]:
        """Contiguous slices of the shuffled table (call :meth:`shuffle` first)."""
        size = self._table.shape[0] // num_minibatches
        cols = self._cols
        for start in range(0, size * num_minibatches, size):
            mb = self._shuffled[start : start + size]
            actions = mb[:, cols["actions"]]
            yield Minibatch(
                obs=mb[:, cols["obs"]],
                actions=actions.squeeze(1).long() if self.action_dim == 0 else actions,
                logprobs=mb[:, cols["logprobs"]],
                values=mb[:, cols["values"]],
                advantages=mb[:, cols["advantages"]],
                returns=mb[:, cols["returns"]],
            )
