"""Rollout storage, allocated once per run.

Per-step data lives in ``(T, N, ...)`` tensors on the training device, observations in their own
dtype and shape (``uint8`` images stay ``uint8``; see ``envs/spec.py``). Rewards, terminations
and truncations come from the environment on the host; they are kept in host arrays during the
rollout and moved to the device once per rollout (:meth:`RolloutBuffer.finish`) instead of once
per step: on CUDA that is one transfer instead of T. An env on the device writes them into
device tensors instead (:meth:`RolloutBuffer.env_outputs`, ``ppo/device_rollout.py``).

Slot ``T`` of the observation (and of the done flag and action mask) is ``next_obs``: the
observation after the last step, which the next rollout starts from.

For recurrent policies the buffer also keeps, per step, the flag ``dones[t]`` (1 where
``obs[t]`` starts a new episode, so the policy zeroes its state before it) and, every
``bptt_horizon`` steps, the policy's state as it was during collection: the initial states of the
truncated-BPTT segments (``ppo/samplers.py``).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from rlperf.envs.spec import EnvSpec

TORCH_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.float32): torch.float32}


class RolloutBuffer:
    """Storage for ``num_steps`` steps of ``num_envs`` environments.

    Args:
        spec: the environment's spec (observation shape/dtype, action space, mask).
        state_template: the policy's initial state (a tuple of (N, ...) tensors; ``()`` for a
            feed-forward policy): the segment states are stored in its shapes.
        bptt_horizon: steps per recurrent segment (0: the whole rollout).
        teacher: also store a scripted teacher's actions (``teacher_actions``, (T, N) int64).
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        spec: EnvSpec,
        device: torch.device,
        state_template: tuple[torch.Tensor, ...] = (),
        bptt_horizon: int = 0,
        teacher: bool = False,
    ) -> None:
        self.num_steps, self.num_envs = num_steps, num_envs
        self.spec, self.device = spec, device
        shape = (num_steps, num_envs)
        obs_dtype = TORCH_DTYPES[np.dtype(spec.obs_dtype)]
        # Slots 0..T in one tensor: ``next_obs`` is slot T, so a write at a per-env position
        # (the async collector, ``ppo/async_rollout.py``) is one indexed store whatever the step.
        slots = (num_steps + 1, num_envs)
        self.obs_slots = torch.zeros((*slots, *spec.obs_shape), dtype=obs_dtype, device=device)
        self.obs, self.next_obs = self.obs_slots[:num_steps], self.obs_slots[num_steps]
        action = spec.action
        if action.kind == "discrete":
            self.actions = torch.zeros(shape, dtype=torch.int64, device=device)
        elif action.kind == "multidiscrete":
            self.actions = torch.zeros((*shape, action.dim), dtype=torch.int64, device=device)
        else:
            self.actions = torch.zeros((*shape, action.dim), device=device)
        self.teacher_actions = (
            torch.zeros(shape, dtype=torch.int64, device=device) if teacher else None
        )
        self.logprobs = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)
        self.bootstrap_values = torch.zeros(shape, device=device)
        self.advantages = torch.zeros(shape, device=device)
        # Host-side per-step environment outputs, moved to the device once per rollout.
        self.rewards_host = np.zeros(shape, dtype=np.float32)
        self.terminations_host = np.zeros(shape, dtype=np.float32)
        self.truncations_host = np.zeros(shape, dtype=np.float32)
        self._env_outputs: tuple[torch.Tensor, ...] | None = None  # env_outputs()'s
        self.masks = self.next_mask = self.mask_slots = None
        if spec.has_mask:
            width = action.mask_width
            self.mask_slots = torch.ones((*slots, width), dtype=torch.bool, device=device)
            self.masks, self.next_mask = self.mask_slots[:num_steps], self.mask_slots[num_steps]
        self.recurrent = bool(state_template)
        self.dones = self.next_done = self.done_slots = None
        self.horizon = bptt_horizon or num_steps
        self.states: tuple[torch.Tensor, ...] = ()
        if self.recurrent:
            self.done_slots = torch.zeros(slots, device=device)
            self.dones, self.next_done = self.done_slots[:num_steps], self.done_slots[num_steps]
            segments = num_steps // self.horizon
            self.states = tuple(
                torch.zeros((segments, *s.shape), dtype=s.dtype, device=device)
                for s in state_template
            )
        self._on_cpu = device.type == "cpu"
        # On the CPU, numpy views of the tensors let the host copy observations in directly.
        self._obs_np = self.obs_slots.numpy() if self._on_cpu else np.empty(0)  # CPU only
        # Each slot's view made once: indexing a tensor each step is a trip through torch's
        # dispatcher, and between env steps that code evicts the env's (docs/continuous.md).
        self._obs_views = (*self.obs.unbind(0), self.next_obs)

    # -- collection ----------------------------------------------------------------------
    def obs_slot(self, t: int) -> torch.Tensor:
        """Where the observation acted on at step ``t`` lives (``t == num_steps``: next_obs)."""
        return self._obs_views[t]

    def done_slot(self, t: int) -> torch.Tensor | None:
        """Episode-start flags (N,) of the observation in slot ``t``; None for a policy without
        state (the buffer keeps none)."""
        return None if self.done_slots is None else self.done_slots[t]

    def mask_slot(self, t: int) -> torch.Tensor | None:
        """Action mask (N, mask_width) of the observation in slot ``t``; None without masks."""
        return None if self.mask_slots is None else self.mask_slots[t]

    def teacher_slot(self, t: int) -> torch.Tensor:
        """Where the teacher's actions (N,) of step ``t`` go."""
        if self.teacher_actions is None:
            raise RuntimeError("this rollout buffer keeps no teacher actions (teacher=False)")
        return self.teacher_actions[t]

    def write_obs(self, t: int, obs: np.ndarray) -> torch.Tensor:
        """Copy an environment observation (N, *obs_shape) into slot ``t``; returns the slot."""
        if self._on_cpu:
            target = self._obs_np[t]
            target[...] = obs.reshape(target.shape)
            return self.obs_slot(t)
        slot = self.obs_slot(t)
        host = np.ascontiguousarray(obs, dtype=self.spec.obs_dtype)
        slot.copy_(torch.from_numpy(host).view(slot.shape))
        return slot

    def write_done(self, t: int, done: np.ndarray) -> torch.Tensor:
        """Episode-start flags (N,) of the observation in slot ``t`` (recurrent policies)."""
        slot = cast(torch.Tensor, self.done_slots)[t]
        slot.copy_(torch.from_numpy(np.asarray(done, dtype=np.float32)))
        return slot

    def write_mask(self, t: int, mask: np.ndarray | None) -> torch.Tensor:
        """Action mask (N, mask_width) of the observation in slot ``t``."""
        if mask is None:
            raise ValueError("the env gave no action mask for a step after giving one at reset")
        slot = cast(torch.Tensor, self.mask_slots)[t]
        slot.copy_(torch.from_numpy(np.asarray(mask, dtype=bool)).view(slot.shape))
        return slot

    def start_rollout(self) -> None:
        """Move the last rollout's final slot (observation, done flag, mask) to step 0."""
        self.obs[0] = self.next_obs
        for slots in (self.done_slots, self.mask_slots):
            if slots is not None:
                slots[0] = slots[self.num_steps]

    def store_state(self, t: int, state: tuple[torch.Tensor, ...]) -> None:
        """Record the policy state entering step ``t`` when ``t`` starts a BPTT segment."""
        if t % self.horizon == 0:
            for stored, s in zip(self.states, state, strict=True):
                stored[t // self.horizon] = s

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
        """The whole transition of step ``t``: the policy's outputs and the environment's."""
        self.store_policy(t, actions, logprobs, values)
        self.store_env_step(t, rewards, terminations, truncations)

    def store_policy(
        self, t: int, actions: torch.Tensor, logprobs: torch.Tensor, values: torch.Tensor
    ) -> None:
        """The policy's outputs (N, ...) of step ``t``."""
        self.actions[t] = actions
        self.logprobs[t] = logprobs
        self.values[t] = values

    def store_env_step(
        self, t: int, rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray
    ) -> None:
        """The environment's outputs (N,) of step ``t`` (the policy's are the policy step's to
        write: :class:`PolicyStep`, or a fused step that writes them in place)."""
        self.rewards_host[t] = rewards
        self.terminations_host[t] = terminations
        self.truncations_host[t] = truncations

    # -- collection at a position per env (asynchronous batches of rows) -----------------
    def write_rows(
        self,
        slots: torch.Tensor,
        rows: torch.Tensor,
        obs: np.ndarray,
        done: np.ndarray | None = None,
        mask: np.ndarray | None = None,
    ) -> None:
        """Observations (R, *obs_shape) of ``rows`` (R,) at their own ``slots`` (R,) in
        ``0..num_steps`` (``num_steps``: next_obs); with the episode-start flags and masks."""
        if self._on_cpu:  # numpy's indexed store: ~10 us where torch's index_put took ~85
            self._obs_np[slots.numpy(), rows.numpy()] = obs.reshape(len(obs), *self.spec.obs_shape)
        else:
            host = np.ascontiguousarray(obs, dtype=self.spec.obs_dtype)
            self.obs_slots[slots, rows] = torch.from_numpy(host).to(self.device)
        if self.done_slots is not None and done is not None:
            flags = torch.from_numpy(np.asarray(done, dtype=np.float32))
            self.done_slots[slots, rows] = flags.to(self.device)
        if self.mask_slots is not None and mask is not None:
            self.mask_slots[slots, rows] = torch.from_numpy(np.asarray(mask, bool)).to(self.device)

    def obs_rows(self, steps: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        """Observations (R, *obs_shape) of ``rows`` (R,) at their own ``steps`` (R,) in
        ``0..num_steps``: a copy."""
        if self._on_cpu:  # numpy's gather: ~13 us for 4 Atari frames where torch's took ~137
            return torch.from_numpy(self._obs_np[steps, rows])
        index = (torch.from_numpy(steps).to(self.device), torch.from_numpy(rows).to(self.device))
        return self.obs_slots[index]

    def store_rows(
        self,
        steps: np.ndarray,
        rows: np.ndarray,
        actions: torch.Tensor,
        logprobs: torch.Tensor,
        values: torch.Tensor,
    ) -> None:
        """The policy's outputs for ``rows`` (R,) at their own ``steps`` (R,)."""
        index = (torch.from_numpy(steps).to(self.device), torch.from_numpy(rows).to(self.device))
        self.actions[index] = actions
        self.logprobs[index] = logprobs
        self.values[index] = values

    def store_env_rows(
        self,
        steps: np.ndarray,
        rows: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
    ) -> None:
        """The environment's outputs for ``rows`` (R,) at their own ``steps`` (R,)."""
        self.rewards_host[steps, rows] = rewards
        self.terminations_host[steps, rows] = terminations
        self.truncations_host[steps, rows] = truncations

    def store_state_rows(
        self, steps: np.ndarray, rows: np.ndarray, state: tuple[torch.Tensor, ...]
    ) -> None:
        """The policy state entering step ``steps[i]`` of row ``rows[i]`` (state rows in that
        order), kept where the step starts a BPTT segment."""
        starts = steps % self.horizon == 0
        if not self.recurrent or not starts.any():
            return
        pick = torch.from_numpy(np.flatnonzero(starts)).to(self.device)
        index = (torch.from_numpy(steps[starts] // self.horizon).to(self.device),
                 torch.from_numpy(rows[starts]).to(self.device))  # fmt: skip
        for stored, s in zip(self.states, state, strict=True):
            stored[index] = s[pick]

    def env_outputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rewards, terminations, truncations (T, N) float32 on the training device, for an
        env on the device to write each step: on the CPU views of the host arrays, elsewhere
        device tensors that :meth:`finish` returns from the first call on (no host copy)."""
        if self._env_outputs is None:
            arrays = (self.rewards_host, self.terminations_host, self.truncations_host)
            self._env_outputs = tuple(
                torch.from_numpy(a) if self._on_cpu else torch.zeros(a.shape, device=self.device)
                for a in arrays
            )
        return self._env_outputs  # type: ignore[return-value]

    def finish(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rewards, terminations, truncations (T, N) as device tensors (CPU: no copy)."""
        if self._env_outputs is not None:
            return self._env_outputs  # type: ignore[return-value]
        arrays = (self.rewards_host, self.terminations_host, self.truncations_host)
        tensors = tuple(torch.from_numpy(a) for a in arrays)
        if not self._on_cpu:
            tensors = tuple(t.to(self.device, non_blocking=True) for t in tensors)
        return tensors  # type: ignore[return-value]

    def gae_inputs(self, last_value: torch.Tensor) -> dict[str, Any]:
        """Keyword arguments of :func:`~rlperf.ppo.gae.gae` writing into ``advantages``.

        On the CPU they are numpy views of the same memory (the T-step recursion is ~4x cheaper
        per op in numpy); on CUDA device tensors, the host arrays copied once per rollout.
        """
        names = ("rewards", "terminations", "truncations", "values", "bootstrap_values",
                 "last_value", "out")  # fmt: skip
        # Contiguous: the LSTM's value is a column of its heads' output, and a strided array
        # kept GAE on the numpy loop (~0.3 ms a 128-step rollout) instead of the kernel.
        tensors = (self.values, self.bootstrap_values, last_value.contiguous(), self.advantages)
        if self._on_cpu:
            host = (self.rewards_host, self.terminations_host, self.truncations_host)
            return dict(zip(names, (*host, *(t.numpy() for t in tensors)), strict=True))
        return dict(zip(names, (*self.finish(), *tensors), strict=True))


def bootstrap_truncated(
    buf: RolloutBuffer,
    policy: Any,
    steps: int | np.ndarray,
    rows: np.ndarray | None,
    infos: dict[str, Any],
    terminations: np.ndarray,
    truncations: np.ndarray,
    state: tuple[torch.Tensor, ...],
) -> None:
    """V(final observation) of the entries truncated (not terminated) by a step into
    ``buf.bootstrap_values``: GAE bootstraps from it where a time limit, not the task, ended
    the episode.

    Args:
        policy: the policy protocol's ``value`` (``policies/base.py``).
        steps: the buffer step of the entries: one for all (a synchronous step), or (K,) each
            entry's own (an async batch of rows at their own positions).
        rows: the buffer rows of the K entries (None: all N rows, in order).
        infos: the step's infos, dense ``final_obs`` (K, *obs_shape).
        terminations, truncations: the step's flags (K,) bool.
        state: the policy state of every row after the step (N rows).
    """
    # V(final obs) of the truncated entries only: evaluating all N rows and masking cost
    # ~0.4 ms per step at 1024 envs (two tanh passes over 1024x64), for a handful of rows.
    # A recurrent policy sees the final observation with the state that followed the
    # step's own observation (not yet reset: the episode has not started over for it).
    picked = np.flatnonzero(truncations & ~terminations)
    if picked.size == 0:
        return
    final_obs = np.asarray(infos["final_obs"][picked], dtype=buf.spec.obs_dtype)
    row_index = torch.from_numpy(picked if rows is None else rows[picked]).to(buf.device)
    step_index: Any = steps if isinstance(steps, int) else torch.from_numpy(steps[picked])
    state_rows = tuple(s[row_index] for s in state)
    values = policy.value(torch.from_numpy(final_obs).to(buf.device), state_rows, None)
    buf.bootstrap_values[step_index, row_index] = values


class PolicyStep:
    """One rollout step's policy, the reference way: ``policy.act`` on the step's observations
    (the policy protocol, ``policies/base.py``), its outputs written into the buffer's slot
    ``t`` by :meth:`store`. The trainer's loop calls a step through this interface, so a fused
    step (``ppo/fused_rollout.py``'s :class:`~rlperf.ppo.fused_rollout.FusedStep`, chosen once
    in ``ppo/build.py``) replaces it without a branch in the loop.
    """

    def __init__(self, buffer: RolloutBuffer, policy: Any) -> None:
        self.buffer, self.policy = buffer, policy
        self.generator: torch.Generator | None = None
        self._logprobs: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def start_rollout(self, generator: torch.Generator) -> None:
        """Sample from ``generator`` for the rollout that starts (call before its first step)."""
        self.generator = generator

    def __call__(
        self,
        t: int,
        obs: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        done: torch.Tensor | None,
        mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Actions for step ``t``'s observations (slot ``t`` of the buffer) and the policy
        state after them."""
        actions, self._logprobs, self._values, state = self.policy.act(
            obs, state, done, mask, self.generator
        )
        return actions, state

    def store(self, t: int, actions: torch.Tensor) -> None:
        """Write step ``t``'s actions (those the env took: a teacher may have replaced the
        policy's) and the policy's log-probabilities and values into the buffer."""
        self.buffer.store_policy(t, actions, cast(torch.Tensor, self._logprobs),
                                 cast(torch.Tensor, self._values))  # fmt: skip
