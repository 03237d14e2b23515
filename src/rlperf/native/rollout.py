"""The MLP's fused rollout (``ppo/_rollout_cpu.c``): one step's policy (:class:`FusedMLP`,
:class:`BoundSteps`), a whole CartPole rollout (:func:`cartpole_rollout`) and GAE's
advantages (:func:`gae_advantages`).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from rlperf.native._core import EXTENSIONS, KernelArgumentError, SpanLog, _load, _np_ptr, _ptr
from rlperf.native.cartpole import CartPoleArrays, FinishedEpisodes, RolloutTensors, _rollout_args

_rollout = _load(EXTENSIONS["rollout"])


def rollout_available() -> bool:
    """Whether the fused MLP rollout kernel was built and imported (and not disabled)."""
    return _rollout is not None


ROLLOUT_LIMITS = (
    (_rollout.MAX_LAYERS, _rollout.MAX_WIDTH, _rollout.MAX_ACTIONS)
    if _rollout is not None
    else (0, 0, 0)
)  # hidden layers, width of the observation and of each hidden layer, actions


def _require_rollout() -> ModuleType:
    if _rollout is None:
        raise RuntimeError("the fused rollout kernel is not built (or RLPERF_NO_KERNELS is set)")
    return _rollout


def gae_advantages(
    rewards: np.ndarray,
    values: np.ndarray,
    last_value: np.ndarray,
    terminations: np.ndarray,
    truncations: np.ndarray,
    bootstrap_values: np.ndarray,
    gamma: float,
    gae_lambda: float,
    out: np.ndarray,
) -> None:
    """``ppo/gae.py``'s advantages in one call, into ``out``: every array float32 and
    C-contiguous, (T, N) with T >= 1 and ``last_value`` (N,) (else :class:`KernelArgumentError`).
    Bit for bit the numpy arithmetic of :func:`rlperf.ppo.gae.gae` (tested)."""
    shape = out.shape
    if len(shape) != 2 or shape[0] < 1:
        raise KernelArgumentError(f"out: the kernel takes (T, N) with T >= 1, got shape {shape}")
    rows = [("rewards", rewards), ("values", values), ("terminations", terminations),
            ("truncations", truncations), ("bootstrap_values", bootstrap_values)]  # fmt: skip
    ptrs = {name: _np_ptr(name, a, shape, np.float32) for name, a in rows}
    _require_rollout().gae_advantages(
        shape[0], shape[1], float(gamma), float(gamma * gae_lambda), ptrs["rewards"],
        ptrs["values"], _np_ptr("last_value", last_value, shape[1:], np.float32),
        ptrs["terminations"], ptrs["truncations"], ptrs["bootstrap_values"],
        _np_ptr("out", out, shape, np.float32),
    )  # fmt: skip


class FusedMLP:
    """The stacked MLP's weights as the rollout kernel reads them, checked once: make one per
    rollout (while the weights stay as they are; their pointers are taken here).

    Args:
        weights: per layer (2, in, out) for the hidden layers, (2, A, last) for the output
            layer (``policies/mlp.py``'s stacked layout, index 0 the actor, 1 the critic).
        biases: per layer (2, 1, out), and (2, A, 1) for the output layer.
    """

    def __init__(
        self,
        weights: list[torch.Tensor],
        biases: list[torch.Tensor],
        logstd: torch.Tensor | None = None,
    ) -> None:
        max_layers, max_width, max_actions = ROLLOUT_LIMITS
        hidden = len(weights) - 1
        if not 0 <= hidden <= max_layers or len(biases) != len(weights):
            raise KernelArgumentError(
                f"the fused rollout takes 0 to {max_layers} hidden layers and one bias per "
                f"weight, got {len(weights)} weights and {len(biases)} biases"
            )
        widths = [int(w.shape[1]) for w in weights[:-1]] + [int(weights[-1].shape[2])]
        widths.append(int(weights[-1].shape[1]))  # A
        if max(widths[:-1]) > max_width or not 1 <= widths[-1] <= max_actions:
            raise KernelArgumentError(
                f"the fused rollout takes widths up to {max_width} and 1 to {max_actions} "
                f"actions, got widths {widths[:-1]} and {widths[-1]} actions"
            )
        w_ptrs, b_ptrs = [], []
        for i in range(hidden):
            w_ptrs.append(_ptr(f"w{i}", weights[i], (2, widths[i], widths[i + 1])))
            b_ptrs.append(_ptr(f"b{i}", biases[i], (2, 1, widths[i + 1])))
        a = widths[-1]
        w_ptrs.append(_ptr(f"w{hidden}", weights[-1], (2, a, widths[-2])))
        b_ptrs.append(_ptr(f"b{hidden}", biases[-1], (2, a, 1)))
        # A Box action's Gaussian head: its log-std (A,), read in place.
        self.logstd_ptr = None if logstd is None else _ptr("logstd", logstd, (a,))
        self._alive = (weights, biases, logstd)  # the pointers stay valid while this lives
        self.obs_dim, self.num_actions = widths[0], a
        self.args = (hidden, *widths, *w_ptrs, *b_ptrs)

    def act(
        self,
        obs: torch.Tensor,
        noise: torch.Tensor,
        actions: torch.Tensor,
        logprob: torch.Tensor,
        value: torch.Tensor,
    ) -> None:
        """One step's policy for ``obs`` (N, obs_dim): ``actions`` (N,) int64 =
        ``argmax(log_softmax(logits) - log(noise))`` for ``noise`` (N, A) Exp(1) draws (as
        ``distributions.sample``), their log-probabilities and the values (N,), written in
        place (the rollout buffer's slots). With a log-std (a Box action): ``actions`` (N, A)
        float32 = ``mean + exp(logstd) * noise`` for N(0, 1) draws."""
        n = int(obs.shape[0])
        obs_ptr = _ptr("obs", obs, (n, self.obs_dim))
        noise_ptr = _ptr("noise", noise, (n, self.num_actions))
        tail = (_ptr("logprob", logprob, (n,)), _ptr("value", value, (n,)))
        if self.logstd_ptr is None:
            actions_ptr = _ptr("actions", actions, (n,), torch.int64)
            _require_rollout().act(n, *self.args, obs_ptr, noise_ptr, actions_ptr, *tail)
        else:
            actions_ptr = _ptr("actions", actions, (n, self.num_actions))
            _require_rollout().act_gaussian(
                n, *self.args, obs_ptr, noise_ptr, self.logstd_ptr, actions_ptr, *tail
            )

    def bind_rollout(
        self,
        obs: torch.Tensor,
        noise: torch.Tensor,
        actions: torch.Tensor,
        logprobs: torch.Tensor,
        values: torch.Tensor,
    ) -> BoundSteps:
        """:meth:`act` for every step of one rollout, checked once: ``obs`` (T, N, obs_dim),
        ``noise`` (T, N, A), ``actions`` (T, N) int64 (a Box action: (T, N, A) float32),
        ``logprobs`` and ``values`` (T, N), all contiguous; :meth:`BoundSteps.act` then acts
        on step t with no check but t's range (~1 us a call, where five checked tensors and
        their views were ~7 us)."""
        gaussian = self.logstd_ptr is not None
        if actions.dim() != (3 if gaussian else 2):
            want = "(T, N, A) float32" if gaussian else "(T, N) int64"
            raise KernelArgumentError(f"actions: {want}, got shape {tuple(actions.shape)}")
        t_len, n = (int(x) for x in actions.shape[:2])
        steps = (t_len, n)
        if gaussian:
            actions_ptr = _ptr("actions", actions, (t_len, n, self.num_actions))
        else:
            actions_ptr = _ptr("actions", actions, steps, torch.int64)
        ptrs = (
            _ptr("obs", obs, (t_len, n, self.obs_dim)),
            _ptr("noise", noise, (t_len, n, self.num_actions)),
            actions_ptr, _ptr("logprobs", logprobs, steps), _ptr("values", values, steps),
        )  # fmt: skip
        action_bytes = self.num_actions * 4 if gaussian else 8
        row_bytes = (self.obs_dim * 4, self.num_actions * 4, action_bytes, 4, 4)
        return BoundSteps(self, t_len, n, ptrs, row_bytes, (obs, noise, actions, logprobs, values))


class BoundSteps:
    """One rollout's steps of a :class:`FusedMLP`, bound by :meth:`FusedMLP.bind_rollout`."""

    def __init__(
        self,
        mlp: FusedMLP,
        t_len: int,
        n: int,
        ptrs: tuple[int, ...],
        row_bytes: tuple[int, ...],
        alive: tuple[torch.Tensor, ...],
    ) -> None:
        self._mlp, self.t_len, self.n = mlp, t_len, n
        self._alive = alive  # the pointers stay valid while this object lives
        # Every step's whole argument list, made once per rollout: at one env a step's
        # kernel call is ~2 us, and building its pointers each step cost as much again.
        kernel = _require_rollout()
        self._call = kernel.act if mlp.logstd_ptr is None else kernel.act_gaussian
        step_bytes = [n * b for b in row_bytes]
        self._args = [
            (n, *mlp.args, *self._step_ptrs(ptrs, step_bytes, t, mlp.logstd_ptr))
            for t in range(t_len)
        ]

    @staticmethod
    def _step_ptrs(
        ptrs: tuple[int, ...], step_bytes: list[int], t: int, logstd_ptr: int | None
    ) -> tuple[int, ...]:
        obs, noise, *out = [p + t * b for p, b in zip(ptrs, step_bytes, strict=True)]
        return (obs, noise, *out) if logstd_ptr is None else (obs, noise, logstd_ptr, *out)

    def act(self, t: int) -> None:
        """:meth:`FusedMLP.act` on step ``t``'s slots (``0 <= t < T``)."""
        if not 0 <= t < self.t_len:
            raise KernelArgumentError(f"step {t} outside the bound rollout's 0..{self.t_len - 1}")
        self._call(*self._args[t])


def cartpole_rollout(
    mlp: FusedMLP,
    buf: RolloutTensors,
    env: CartPoleArrays,
    noise: torch.Tensor,
    pool: np.ndarray,
    out: FinishedEpisodes,
    timing: bool,
    spans: SpanLog | None = None,
) -> None:
    """A whole rollout of T steps of N CartPoles acted on by ``mlp``, in one kernel call.

    Reads ``buf.obs[0]``; per step acts (as :meth:`FusedMLP.act`, ``noise`` (T, N, A)), steps
    the env (``envs/cartpole.py``'s physics, truncation and same-step autoreset; reset states
    from ``pool``, numpy's uniform(-0.05, 0.05) draws in the env generator's order, at least
    4 T N of them), writes the transition into ``buf`` (observation into slot t + 1) and the
    critic's value of the final observation of each truncated episode into
    ``buf.bootstrap_values``. The finished episodes, the draws used and (with ``timing``) the
    phases' times go to ``out``, and their spans to ``spans`` if given; the env's arrays are
    updated in place.
    """
    args, _scratch = _rollout_args(
        mlp.obs_dim, mlp.num_actions, buf, env, noise, pool, out, timing, spans
    )
    _require_rollout().cartpole_rollout(*args, *mlp.args)
