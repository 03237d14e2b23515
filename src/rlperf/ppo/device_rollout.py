"""The rollout on the device: the env, the policy and the buffer in tensors on the training
device, with no host synchronisation in a step (``--vec-backend torch``, ``envs/device/``).

The trainer's loop (``Trainer.collect``) copies the actions to the host, steps a numpy env and
copies its results back, every step: on a GPU each copy is a synchronisation, and the GPU
waits on Python (docs/journal/gpu.md: busy 12% of the time at 4 envs). Here nothing leaves
the device during a rollout.

One rollout (:meth:`DeviceRollout.collect`):

1. Draws made ahead, outside the steps (a ``torch.Generator`` cannot be called inside a
   compiled graph): the rollout's (T, N, A) Exp(1) draws for the Gumbel-max samples from the
   run's sample generator (on the CPU the same numbers as T draws of (N, A), the trainer's
   loop's), and T steps of reset draws from the env's generator.
2. T calls of :meth:`DeviceRollout.step`, the function a CUDA graph captures
   (:attr:`DeviceRollout.step_fn` is what ``collect`` calls: ``step`` itself, or a compiled or
   captured version of it with the same inputs and outputs).
3. V(final observation) of every entry a time limit truncated, in one batched critic pass
   over the rollout's final observations, masked (no host read of which rows: the critic
   runs on all T x N, section ``truncation_bootstrap``; only for an env that can truncate).
4. The finished episodes' returns and lengths: copies to the host queued (pinned memory,
   non-blocking on CUDA), read by the :class:`~rlperf.run.episode_log.EpisodeLog` when the
   logging phase first asks, after the iteration's one synchronisation.

Where it applies (:func:`device_rollout_applies`): a torch env, a feed-forward policy with one
categorical action and no action mask (the MLP on cartpole, the CNN on catch), no teacher, no
observation or reward normalisation. Elsewhere the trainer's loop steps the torch env through
its host API (one copy a step), as it steps any env.
"""

from __future__ import annotations

import numpy as np
import torch

from rlperf.config import Config
from rlperf.envs.device import DeviceVecEnv
from rlperf.envs.spec import EnvSpec
from rlperf.policies.base import ActorCritic, FeedForwardActorCritic, State
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.run.episode_log import EpisodeLog
from rlperf.timing import names
from rlperf.timing.sections import Profiler


def device_rollout_applies(
    cfg: Config, env: object, spec: EnvSpec, policy: ActorCritic, teacher: bool
) -> bool:
    """Whether a run's rollouts are :class:`DeviceRollout`'s (see the module docstring)."""
    return (
        isinstance(env, DeviceVecEnv)
        and isinstance(policy, FeedForwardActorCritic)
        and spec.action.kind == "discrete"
        and not spec.has_mask
        and not teacher
        and not cfg.env.normalizes
    )


class DeviceRollout:
    """Fills a :class:`RolloutBuffer` from a :class:`~rlperf.envs.device.DeviceVecEnv` on the
    buffer's device (see the module docstring); a ``WholeRollout`` of ``ppo/build.py``.

    Every tensor :meth:`step` reads or writes is allocated here, once: the buffer's, the env's
    state, the draws (filled in place each rollout), the final observations and the episode
    statistics of each step, and the step index :attr:`t`.

    Args:
        episodes: where the finished episodes go (deferred to the first read, module docstring).

    Attributes:
        step_fn: what :meth:`collect` calls for each step: :meth:`step` itself, or a compiled
            or captured version of it that takes and returns the same tensors.
    """

    def __init__(
        self,
        buffer: RolloutBuffer,
        env: DeviceVecEnv,
        policy: FeedForwardActorCritic,
        prof: Profiler,
        episodes: EpisodeLog,
    ) -> None:
        self.buffer, self.env, self.policy = buffer, env, policy
        self.prof, self.episodes = prof, episodes
        steps, n, dev = buffer.num_steps, buffer.num_envs, buffer.device
        self.t = torch.zeros(1, dtype=torch.int64, device=dev)
        self.rewards, self.terminations, self.truncations = buffer.env_outputs()
        num_actions = int(buffer.spec.action.nvec[0])
        # log E, E ~ Exp(1): the Gumbel-max sample is argmax(log p - log E).
        self.log_noise = torch.zeros(steps, n, num_actions, device=dev)
        self.reset_noise = env.reset_noise_buffer(steps)
        self.final_obs = (
            torch.zeros_like(buffer.obs) if env.truncates else None
        )  # each step's observations before the resets, for V(final obs)
        self.episode_returns = torch.zeros(steps, n, dtype=torch.float64, device=dev)
        self.episode_lengths = torch.zeros(steps, n, dtype=torch.int64, device=dev)
        pinned = dev.type == "cuda"
        self._host_done = torch.zeros(steps, n, dtype=torch.bool, pin_memory=pinned)
        self._host_returns = torch.zeros(steps, n, dtype=torch.float64, pin_memory=pinned)
        self._host_lengths = torch.zeros(steps, n, dtype=torch.int64, pin_memory=pinned)
        self._copied = torch.cuda.Event() if pinned else None
        self.step_fn = self.step

    def applies(self, supervised: bool) -> bool:
        """Every rollout of its run (:func:`device_rollout_applies` refuses a teacher)."""
        return not supervised

    def collect(self, state: State, generator: torch.Generator) -> State:
        """One rollout into the buffer: ``num_steps`` steps of every env from ``next_obs``;
        returns ``state`` (a feed-forward policy has none)."""
        buf = self.buffer
        self.episodes.flush()  # the last rollout's, before its slots are written again
        with torch.inference_mode():
            buf.start_rollout()
            self.t.zero_()
            self.log_noise.exponential_(generator=generator).log_()
            self.env.fill_reset_noise(self.reset_noise)
            for _ in range(buf.num_steps):
                self.step_fn(self.t)
            if self.final_obs is not None:
                with self.prof.section(names.TRUNCATION_BOOTSTRAP):
                    self._bootstrap_truncated()
            self._publish_episodes()
        return state

    def step(self, t: torch.Tensor) -> torch.Tensor:
        """Step ``t`` of the rollout, all of it on the device: the policy acts on the
        observations in the buffer's slot ``t``, the env steps (resetting finished rows), and
        the transition goes into the buffer's slots ``t`` (actions, log-probabilities, values,
        rewards, terminations, truncations) and ``t + 1`` (observations), with this object's
        final observations and episode statistics of step ``t``.

        Args:
            t: (1,) int64 on the device, the step index; incremented in place, so one captured
                graph replays every step of a rollout.

        Returns:
            (N, *obs_shape) the observations after the step (slot ``t + 1``).

        No host synchronisation and no Python branch on a tensor's value, and whatever it
        writes lives in tensors allocated once (above): ``torch.compile(fullgraph=True)``
        takes it whole (tests/ppo/test_device_rollout.py), and so can a CUDA graph.
        """
        buf = self.buffer
        obs = buf.obs_slots.index_select(0, t)[0]
        logits, values = self.policy.heads(obs)
        logp = torch.log_softmax(logits.float(), dim=-1)
        actions = (logp - self.log_noise.index_select(0, t)[0]).argmax(-1)
        logprobs = logp.gather(1, actions.unsqueeze(1)).view(-1)
        out = self.env.step_tensors(
            actions, self.reset_noise.index_select(0, t)[0], self.final_obs is not None
        )
        for slots, value in (
            (buf.actions, actions), (buf.logprobs, logprobs), (buf.values, values),
            (self.rewards, out.rewards), (self.terminations, out.terminated),
            (self.truncations, out.truncated), (self.episode_returns, out.episode_return),
            (self.episode_lengths, out.episode_length),
        ):  # fmt: skip
            slots.index_copy_(0, t, value.unsqueeze(0).to(slots.dtype))
        if self.final_obs is not None and out.final_obs is not None:
            self.final_obs.index_copy_(0, t, out.final_obs.unsqueeze(0))
        buf.obs_slots.index_copy_(0, t + 1, out.obs.unsqueeze(0))
        t.add_(1)
        return out.obs

    def _bootstrap_truncated(self) -> None:
        """``bootstrap_values``: V(final obs) where a time limit (not the task) ended the
        episode, 0 elsewhere; one critic pass over every step's final observations."""
        buf, final_obs = self.buffer, self.final_obs
        assert final_obs is not None  # for the type checker: collect's condition
        values = self.policy.value(final_obs.flatten(0, 1), (), None).view_as(buf.values)
        truncated_only = (self.truncations > 0) & (self.terminations == 0)
        buf.bootstrap_values.copy_(torch.where(truncated_only, values, 0.0))

    def _publish_episodes(self) -> None:
        """Queue the copies of the rollout's finished episodes to the host and hand the
        :class:`EpisodeLog` their reader (no wait here)."""
        on_cuda = self._copied is not None
        done = (self.terminations > 0) | (self.truncations > 0)
        for host, device in ((self._host_done, done), (self._host_returns, self.episode_returns),
                             (self._host_lengths, self.episode_lengths)):  # fmt: skip
            host.copy_(device, non_blocking=on_cuda)
        if self._copied is not None:
            self._copied.record()
        self.episodes.defer(self._read_episodes)

    def _read_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """The rollout's finished episodes' returns and lengths (K,), step by step and env by
        env within a step: the order the numpy env reports them in."""
        if self._copied is not None:
            self._copied.synchronize()
        done = self._host_done.numpy()
        return self._host_returns.numpy()[done], self._host_lengths.numpy()[done]
