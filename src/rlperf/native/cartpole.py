"""What both fused CartPole rollouts (the MLP's, ``ppo/_rollout_cpu.c``, and the LSTM's,
``policies/_lstm_cpu.c``) take: the env's arrays, the buffer's tensors, what they report, and
their common arguments as ``envs/_cartpole_cpu.h``'s ``parse_rollout`` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlperf.native._core import KernelArgumentError, SpanLog, _np_ptr, _ptr, _span_ptr

ROLLOUT_PHASES = 4  # policy, env step, buffer store, truncation bootstrap (_rollout_cpu.c)


@dataclass
class CartPoleArrays:
    """A CartPole env's state as the fused rollout reads and writes it (``envs/cartpole.py``):
    ``state`` (4, N) float64, ``episode_steps`` (N,) int64, ``episode_returns`` and
    ``episode_start_s`` (N,) float64 (perf_counter seconds), ``physics`` (9,) float64 (the
    constants in the kernel's order), ``observe_full`` (False: x and theta only) and the time
    limit ``max_episode_steps``."""

    state: np.ndarray
    episode_steps: np.ndarray
    episode_returns: np.ndarray
    episode_start_s: np.ndarray
    physics: np.ndarray
    observe_full: bool
    max_episode_steps: int


@dataclass
class RolloutTensors:
    """The rollout buffer's storage the fused rollout writes (``ppo/rollout.py``): ``obs``
    (T + 1, N, D) float32 slots, ``actions`` (T, N) int64, ``logprobs``, ``values``,
    ``bootstrap_values`` (T, N) float32 tensors; ``rewards``, ``terminations``,
    ``truncations`` (T, N) float32 host arrays."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    bootstrap_values: torch.Tensor
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


@dataclass
class FinishedEpisodes:
    """What a fused rollout reports (arrays sized for the worst case; the first ``count``
    entries are valid, in the order the numpy env would have reported them): each finished
    episode's ``env`` row, ``returns`` (float32), ``lengths``, ``seconds``; ``draws`` the reset
    pool entries it used and ``phase_ns`` (4, 4) per phase calls, total, min, max ns."""

    env: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    seconds: np.ndarray
    counts: np.ndarray
    phase_ns: np.ndarray

    @staticmethod
    def sized(capacity: int) -> FinishedEpisodes:
        return FinishedEpisodes(
            np.zeros(capacity, np.int64), np.zeros(capacity, np.float32),
            np.zeros(capacity, np.int64), np.zeros(capacity, np.float64),
            np.zeros(2, np.int64), np.zeros((ROLLOUT_PHASES, 4), np.int64),
        )  # fmt: skip

    @property
    def count(self) -> int:
        return int(self.counts[1])

    @property
    def draws(self) -> int:
        return int(self.counts[0])


def _rollout_args(
    d: int,
    a: int,
    buf: RolloutTensors,
    env: CartPoleArrays,
    noise: torch.Tensor,
    pool: np.ndarray,
    out: FinishedEpisodes,
    timing: bool,
    spans: SpanLog | None,
) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
    """The rollout's arguments as both fused rollouts take them (``envs/_cartpole_cpu.h``'s
    ``parse_rollout``), every array checked, for a policy of ``d`` features and ``a`` actions;
    and the scratch arrays they point into, which the caller keeps until the call returns.
    ``spans`` (with ``timing``) logs each phase's start and end."""
    t_len, n = buf.actions.shape
    want_d = 4 if env.observe_full else 2
    if d != want_d:
        raise KernelArgumentError(f"obs: CartPole observes {want_d} features, the policy takes {d}")
    if len(out.env) < t_len * n or pool.shape[0] < 4 * t_len * n:
        raise KernelArgumentError(
            f"the fused rollout needs room for {t_len * n} episodes and {4 * t_len * n} reset "
            f"draws, got {len(out.env)} and {pool.shape[0]}"
        )
    steps = (t_len, n)
    scratch = (np.empty((2, n), np.uint8), np.empty((n, d), np.float32),
               np.empty((n, d), np.float32))  # fmt: skip
    args = (
        t_len, n, d, a, int(env.max_episode_steps), int(env.observe_full), int(timing),
        pool.shape[0],
        _ptr("obs", buf.obs, (t_len + 1, n, d)), _ptr("noise", noise, (t_len, n, a)),
        _ptr("actions", buf.actions, steps, torch.int64), _ptr("logprobs", buf.logprobs, steps),
        _ptr("values", buf.values, steps), _ptr("bootstrap_values", buf.bootstrap_values, steps),
        _np_ptr("rewards", buf.rewards, steps, np.float32),
        _np_ptr("terminations", buf.terminations, steps, np.float32),
        _np_ptr("truncations", buf.truncations, steps, np.float32),
        _np_ptr("state", env.state, (4, n), np.float64),
        _np_ptr("episode_steps", env.episode_steps, (n,), np.int64),
        _np_ptr("episode_returns", env.episode_returns, (n,), np.float64),
        _np_ptr("episode_start_s", env.episode_start_s, (n,), np.float64),
        _np_ptr("pool", pool, (pool.shape[0],), np.float64),
        _np_ptr("env", out.env, out.env.shape, np.int64),
        _np_ptr("returns", out.returns, out.env.shape, np.float32),
        _np_ptr("lengths", out.lengths, out.env.shape, np.int64),
        _np_ptr("seconds", out.seconds, out.env.shape, np.float64),
        _np_ptr("counts", out.counts, (2,), np.int64),
        _np_ptr("phase_ns", out.phase_ns, (ROLLOUT_PHASES, 4), np.int64), _span_ptr(spans),
        _np_ptr("physics", env.physics, (9,), np.float64),
        *(int(x.__array_interface__["data"][0]) for x in scratch),
    )  # fmt: skip
    return args, scratch
