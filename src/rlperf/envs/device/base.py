"""What every batched torch env shares: state as tensors on any device, masked autoreset,
episode statistics on the device, and gymnasium's vector API on top for everyone else.

Why: on a GPU a host env costs, every step, a copy of the actions to the host, a numpy step
and a copy of the results back, each a synchronisation (docs/journal/gpu.md: CartPole at 4
envs kept the GPU busy 12% of the time). An env whose state is a few small tensors steps where
the policy acts, and the trainer's rollout never waits for the host (``ppo/device_rollout.py``).

Two ways in:

- **The device API**, for the device rollout: :meth:`DeviceVecEnv.step_tensors` takes the
  actions as a tensor and returns a :class:`DeviceStep` of tensors on the env's device. It
  makes no host synchronisation and takes no Python branch on a tensor's value, so
  ``torch.compile(fullgraph=True)`` or a CUDA graph can take it whole. The reset states come
  from draws made ahead (:meth:`~DeviceVecEnv.reset_noise_buffer`,
  :meth:`~DeviceVecEnv.fill_reset_noise`: the env's ``torch.Generator``, on its device), one
  row's worth per row and step, since a generator cannot be called inside a compiled graph.
- **gymnasium's vector API** (``reset``/``step`` with numpy arrays and the reference env's
  infos: ``final_obs``, ``final_info``, ``episode``), the contract of ``envs/cartpole.py``, for
  every other consumer: the trainer's host loop where the device rollout does not apply
  (normalisation, recurrent policies), ``rlperf`` checks before a run, the tests. Each step is
  one device step and one copy of its results to the host.

Autoreset is ``SAME_STEP`` and masked: every step computes a reset state for every row and
keeps it where the row finished (``torch.where``), so the work does not depend on how many
rows finished. Episode returns (float64) and lengths (int64) run per row on the device; a step
reports each row's values including that step, valid where the row finished.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos


class DeviceStep(NamedTuple):
    """One step of a batch of ``N`` envs, every field a tensor on the env's device.

    Attributes:
        obs: (N, *obs_shape) observations after the step; a finished row's is already the
            first of its next episode (SAME_STEP).
        rewards: (N,) float32.
        terminated, truncated: (N,) bool.
        final_obs: (N, *obs_shape) the step's observations before any reset (a finished
            episode's last; equal to ``obs`` where the row did not finish); None where the
            caller did not ask for them (``keep_final_obs=False``).
        episode_return: (N,) float64 return of each row's episode including this step.
        episode_length: (N,) int64 length of each row's episode including this step.
    """

    obs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor | None
    episode_return: torch.Tensor
    episode_length: torch.Tensor


class DeviceVecEnv(VectorEnv):
    """A batch of envs as tensors on ``device`` (see the module docstring).

    A subclass gives the dynamics (:meth:`_move`, :meth:`_truncated`), the observation
    (:meth:`observe`), its reset (:meth:`_reset_where`) and the draws that reset takes
    (:meth:`reset_noise_buffer`, :meth:`fill_reset_noise`), and names its state tensors in
    :attr:`state_names` (checkpoints).

    Args:
        reference: the numpy env of the same options, read for ``num_envs`` and the spaces
            (which it has validated): one definition of both.
        device: where the state lives and the steps run.

    Attributes:
        generator: the ``torch.Generator`` on ``device`` that every reset state is drawn from
            (seeded by ``reset(seed=...)``; randomly until then).
        episode_returns, episode_steps: (N,) float64 and int64 running statistics.
        truncates: whether a step can truncate an episode (a time limit), so that a rollout
            keeps final observations for bootstrapping only where it can.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    state_names: tuple[str, ...] = ()
    truncates = False

    def __init__(self, reference: VectorEnv, device: str | torch.device) -> None:
        self.num_envs = n = int(reference.num_envs)
        self.single_observation_space = reference.single_observation_space
        self.single_action_space = reference.single_action_space
        self.observation_space = reference.observation_space
        self.action_space = reference.action_space
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.seed()  # as an unseeded numpy env: random until reset(seed=...)
        self.episode_returns = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.episode_steps = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._episode_start_s = np.zeros(n, dtype=np.float64)  # the host API's only
        self._check_actions = ActionCheck(self.action_space)

    # -- what a subclass defines -----------------------------------------------------------
    def reset_noise_buffer(self, steps: int) -> torch.Tensor:
        """An uninitialised tensor (steps, ...) on the device for ``steps`` steps' reset draws
        (each step's, ``[t]``, is what :meth:`step_tensors` takes)."""
        raise NotImplementedError

    def fill_reset_noise(self, noise: torch.Tensor) -> None:
        """Fill ``noise`` (from :meth:`reset_noise_buffer`) in place from :attr:`generator`."""
        raise NotImplementedError

    def observe(self) -> torch.Tensor:
        """(N, *obs_shape) observations of the current state, in the observation space's
        dtype (a new tensor)."""
        raise NotImplementedError

    def _reset_where(self, done: torch.Tensor, noise: torch.Tensor) -> None:
        """Give the rows where ``done`` (N,) bool their first state, from one step's draws."""
        raise NotImplementedError

    def _move(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance the state in place by ``actions`` (N,); returns rewards (N,) float32 and
        terminations (N,) bool."""
        raise NotImplementedError

    def _truncated(self, episode_length: torch.Tensor) -> torch.Tensor:
        """(N,) bool: where an episode of ``episode_length`` (N,) steps hits a time limit."""
        return torch.zeros_like(episode_length, dtype=torch.bool)

    # -- the device API --------------------------------------------------------------------
    def step_tensors(
        self,
        actions: torch.Tensor,
        reset_noise: torch.Tensor | None = None,
        keep_final_obs: bool = True,
    ) -> DeviceStep:
        """Step every env by ``actions`` (N,) on the device, resetting the finished rows.

        Args:
            reset_noise: one step's draws (``reset_noise_buffer(steps)[t]``); None draws them
                here from :attr:`generator` (not inside a compiled graph).
            keep_final_obs: build ``final_obs``, a second observation of the whole batch; a
                rollout that bootstraps nothing (no time limit) skips it.
        """
        if reset_noise is None:
            reset_noise = self.reset_noise_buffer(1)[0]
            self.fill_reset_noise(reset_noise)
        rewards, terminated = self._move(actions)
        episode_length = self.episode_steps + 1
        episode_return = self.episode_returns + rewards
        truncated = self._truncated(episode_length)
        done = terminated | truncated
        final_obs = self.observe() if keep_final_obs else None
        self._reset_where(done, reset_noise)
        self.episode_steps.copy_(torch.where(done, 0, episode_length))
        self.episode_returns.copy_(torch.where(done, 0.0, episode_return))
        return DeviceStep(self.observe(), rewards, terminated, truncated, final_obs,
                          episode_return, episode_length)  # fmt: skip

    def reset_tensors(self) -> torch.Tensor:
        """Every row's first state, from :attr:`generator`; returns the observations."""
        noise = self.reset_noise_buffer(1)[0]
        self.fill_reset_noise(noise)
        self._reset_where(torch.ones(self.num_envs, dtype=torch.bool, device=self.device), noise)
        self.episode_returns.zero_()
        self.episode_steps.zero_()
        return self.observe()

    # -- gymnasium's vector API (one copy to the host a call) ------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        reseed(self, seed)
        if seed is not None:
            self.generator.manual_seed(seed)
        obs = self.reset_tensors()
        self._episode_start_s[...] = time.perf_counter()
        return obs.cpu().numpy(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        batch = torch.as_tensor(self._check_actions(actions), device=self.device)
        out = self.step_tensors(batch)
        obs, rewards, terminated, truncated = (
            x.cpu().numpy() for x in (out.obs, out.rewards, out.terminated, out.truncated)
        )
        done = terminated | truncated
        if not done.any():
            return obs, rewards, terminated, truncated, {}
        assert out.final_obs is not None  # kept: step_tensors' default
        infos = finished_infos(
            out.final_obs.cpu().numpy(), done, out.episode_return.cpu().numpy(),
            out.episode_length.cpu().numpy(), self._episode_start_s,
        )  # fmt: skip
        self._episode_start_s[done] = time.perf_counter()
        return obs, rewards, terminated, truncated, infos

    # -- checkpointing -----------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically: the state tensors, the episode
        statistics and the generator's state, on the CPU."""
        names = (*self.state_names, "episode_steps", "episode_returns")
        saved: dict[str, Any] = {name: getattr(self, name).cpu().clone() for name in names}
        saved["rng"] = self.generator.get_state()
        return saved

    def set_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s values (tensors or numpy arrays)."""
        for name in (*self.state_names, "episode_steps", "episode_returns"):
            getattr(self, name).copy_(torch.as_tensor(np.asarray(saved[name])))
        self.generator.set_state(torch.as_tensor(np.asarray(saved["rng"]), dtype=torch.uint8))
        self._episode_start_s[...] = time.perf_counter()
