"""One PPO update step on a minibatch, two implementations of the same loss.

- :class:`AutogradUpdate`: any policy of the protocol (``policies/base.py``) through autograd:
  ``evaluate`` over the minibatch's ``(T, B)`` sequences, :func:`~rlperf.ppo.loss.ppo_loss`,
  ``backward``, gradient-norm clipping (``clip_grad_norm_``'s arithmetic) and fused Adam, the
  last two over all parameters gathered into one flat tensor (``ppo/optim.py``). Optional
  autocast (``--precision bf16``, or fp16 with a grad scaler on CUDA) and ``torch.compile`` of
  ``evaluate`` (``--compile``).
- :class:`AnalyticUpdate`: a policy of the analytic protocol
  (:class:`~rlperf.policies.base.AnalyticPolicy`: the MLP, the LSTM on flat observations). The
  loss's gradient with respect to the network's outputs in closed form (``ppo/loss.py``),
  written where the policy reads it, backpropagated and clipped by the policy itself without
  autograd's graph, and :class:`FlatAdam`. At CartPole's sizes that issues a fraction of the
  operations, which is what the time is. :func:`analytic_update_applies` says when it can run.
- :class:`NativeMLPUpdate`: the same update for the MLP (``policies/mlp.py``) in two calls of one
  C kernel per minibatch (``ppo/_mlp_update_cpu.c`` through ``rlperf/native/``): forward,
  loss, backward and clipping in one, Adam in the other. At 128 samples the analytic update's
  ~40 torch ops cost ~0.7 ms of fixed per-op cost around ~60 us of arithmetic; this is the
  arithmetic. :func:`native_update_applies` says when it can run. Where the rollout is flat
  (:meth:`NativeMLPUpdate.takes_rollout`), :meth:`NativeMLPUpdate.update_rollout` runs every
  epoch's minibatches in one call, the gather and the advantage normalization included: at
  4 x 128 the ~35 us of Python and torch around each ~125 us minibatch were a fifth of the
  update. The kernel times its phases itself; :meth:`NativeMLPUpdate.report_times` hands them to
  the profiler once per update, as the sections the others open (``minibatch_prep``, ``loss``,
  ``backward``, ``optimizer_step``), with each phase's start and end while a torch.profiler
  trace records, for the trace's ranges.

Both split a step into :meth:`gradients` (sections ``loss`` and ``backward``) and :meth:`apply`
(``optimizer_step``), so the tests can compare the gradients of the two on one minibatch.
Neither reads anything back to the host: the statistics vector stays on the device.

On several ranks (``distributed/group.py``) ``grad_allreduce`` is set: :meth:`gradients` leaves
the flat gradient unclipped and averages it over the ranks (section ``allreduce``), and
:meth:`apply` clips the average before Adam, so N ranks take the step one process over all
their environments would. A single process clips inside ``backward``, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, cast

import torch

from rlperf import native
from rlperf.config import PPOConfig
from rlperf.policies.base import ActorCritic, AnalyticPolicy, clip_grad_norm
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.loss import (
    STAT_NAMES,
    LossCoefs,
    discrete_ppo_loss_and_head_grads,
    gaussian_ppo_loss_and_head_grads,
    ppo_loss,
    supervised_loss,
)
from rlperf.ppo.optim import FlatAdam, flatten_parameters
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.samplers import Minibatch, PackedTableSampler
from rlperf.timing import names
from rlperf.timing.sections import Profiler

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def loss_coefs(ppo: PPOConfig) -> LossCoefs:
    return LossCoefs(ppo.clip_coef, ppo.clip_vloss, ppo.ent_coef, ppo.vf_coef)


class _FlatAdamUpdate:
    """What both updates share: a :class:`FlatAdam` whose learning rate the trainer anneals."""

    optimizer: FlatAdam
    grad: torch.Tensor
    ppo: PPOConfig
    # Several ranks: averages the flat gradient over them in place (module docstring).
    grad_allreduce: Callable[[torch.Tensor], None] | None = None

    def _allreduce(self, prof: Profiler) -> None:
        if self.grad_allreduce is not None:
            with prof.section(names.ALLREDUCE):
                self.grad_allreduce(self.grad)

    @property
    def lr(self) -> float:
        return self.optimizer.lr

    @lr.setter
    def lr(self, value: float) -> None:
        self.optimizer.lr = value

    def report_times(self, prof: Profiler) -> None:
        """Hand timings measured outside the profiler to ``prof`` (call once per update, inside
        its section); nothing here: these updates open their sections themselves."""


def analytic_update_applies(policy: ActorCritic, ppo: PPOConfig) -> bool:
    """Whether :class:`AnalyticUpdate` can train ``policy`` under these settings: the policy
    implements :class:`~rlperf.policies.base.AnalyticPolicy` and its ``analytic`` holds (as
    built, where its parameters are now), and the update runs in fp32 without
    ``torch.compile`` (it has no autocast and nothing to compile)."""
    return (
        isinstance(policy, AnalyticPolicy)
        and policy.analytic
        and ppo.precision == "fp32"
        and not ppo.compile
    )


class AnalyticUpdate(_FlatAdamUpdate):
    """The analytic update of an :class:`~rlperf.policies.base.AnalyticPolicy` (see the
    module docstring). The policy's ``backward`` writes each parameter's ``.grad``, which
    :func:`flatten_parameters` made views of one flat gradient, clipping included."""

    def __init__(self, policy: ActorCritic, ppo: PPOConfig, minibatch_size: int) -> None:
        if not (isinstance(policy, AnalyticPolicy) and policy.analytic):
            raise ValueError(f"{type(policy).__name__} has no analytic gradient")
        self.policy: AnalyticPolicy = policy
        self.ppo = ppo
        self.coefs = loss_coefs(ppo)
        self.flat, self.grad = flatten_parameters(policy)
        self.optimizer = FlatAdam(self.flat, ppo.learning_rate, eps=ppo.adam_eps, grad=self.grad)
        # Lives across calls: a fresh (5, B) scratch costs ~0.2 ms in page faults at B=8192.
        self._stat_rows = self.flat.new_empty(len(STAT_NAMES), minibatch_size)
        # A Box action's log-std and its gradient: the MLP's views of its flat parameter.
        self.gaussian: tuple[torch.Tensor, torch.Tensor] | None = None
        if isinstance(policy, MLPActorCritic) and policy.continuous:
            self.gaussian = (cast(torch.Tensor, policy.logstd()), policy.logstd_grad())

    def gradients(self, mb: Minibatch, advantages: torch.Tensor, prof: Profiler) -> torch.Tensor:
        """Write the gradient of the PPO loss into the flat gradient; returns the stats (5,).

        ``mb`` holds ``(T, B)`` sequences (``T = 1`` for a feed-forward policy; the packed
        table's rows come as ``mb.rows``); ``advantages`` has ``mb``'s shape.
        """
        policy, sec = self.policy, prof.section
        if mb.rows is None:
            obs, actions, logprobs = mb.obs, mb.actions.reshape(-1), mb.logprobs.reshape(-1)
            values, returns = mb.values.reshape(-1), mb.returns.reshape(-1)
        else:  # (B, ...) rows of the packed table: a T = 1 sequence
            obs, actions, logprobs, values, _, returns = mb.rows
            obs = obs.unsqueeze(0)
        with sec(names.LOSS):
            logits, newvalue, cache = policy.forward_train(obs, mb.state0, mb.dones)
            if self.gaussian is None:
                stats, _, _ = discrete_ppo_loss_and_head_grads(
                    logits, newvalue, actions, logprobs, advantages.reshape(-1), returns, values,
                    self.coefs, *policy.output_grad_views(cache), self._stat_rows,
                )  # fmt: skip
            else:  # a Box action: the Gaussian's mean, and its log-std's gradient in place
                logstd, logstd_grad = self.gaussian
                stats, _, _, _ = gaussian_ppo_loss_and_head_grads(
                    logits, logstd, newvalue, actions.view(logits.shape), logprobs,
                    advantages.reshape(-1), returns, values, self.coefs,
                    *policy.output_grad_views(cache), logstd_grad, self._stat_rows,
                )  # fmt: skip
        with sec(names.BACKWARD):
            # Clipping included, unless the gradient is averaged over ranks first.
            policy.backward(cache, 0.0 if self.grad_allreduce else self.ppo.max_grad_norm)
        self._allreduce(prof)
        return stats

    def apply(self, prof: Profiler) -> None:
        with prof.section(names.OPTIMIZER_STEP):
            if self.grad_allreduce is not None:
                clip_grad_norm(self.grad, self.ppo.max_grad_norm)
            self.optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


def native_update_applies(policy: ActorCritic, ppo: PPOConfig) -> bool:
    """Whether :class:`NativeMLPUpdate` can train ``policy``: :func:`analytic_update_applies`,
    the policy is the MLP with float32 parameters on the CPU, and the kernel is built (not
    ``RLPERF_NO_KERNELS``) and takes its sizes."""
    if not (isinstance(policy, MLPActorCritic) and analytic_update_applies(policy, ppo)):
        return False
    flat = policy.flat
    return (
        flat.dtype == torch.float32
        and flat.is_cpu
        and native.mlp_update_fits(
            [policy.obs_dim, *policy.hidden_sizes], policy.action_dim, policy.continuous
        )
    )


class NativeMLPUpdate(_FlatAdamUpdate):
    """The analytic update of :class:`~rlperf.policies.mlp.MLPActorCritic` in one C kernel (see
    the module docstring): the same gradients as :class:`AnalyticUpdate` within float32
    rounding, and :class:`FlatAdam`'s step (its state tensors, which the kernel updates in
    place, so checkpoints are the same as the other updates')."""

    def __init__(self, policy: ActorCritic, ppo: PPOConfig, minibatch_size: int) -> None:
        if not native_update_applies(policy, ppo):
            raise ValueError(f"{type(policy).__name__} cannot take the native MLP update here")
        assert isinstance(policy, MLPActorCritic)  # for the type checker: checked just above
        self.policy = policy
        self.ppo = ppo
        self.coefs = loss_coefs(ppo)
        self.flat, self.grad = flatten_parameters(policy)
        self.optimizer = FlatAdam(self.flat, ppo.learning_rate, eps=ppo.adam_eps, grad=self.grad)
        opt = self.optimizer
        self.kernel = native.MLPUpdateKernel(
            [policy.obs_dim, *policy.hidden_sizes], policy.action_dim, minibatch_size,
            # The parameter itself, not a detached view: `.data` reassigned is caught.
            self.flat, self.grad, opt.exp_avg, opt.exp_avg_sq, opt.step_count,
            gaussian=policy.continuous,
        )  # fmt: skip
        self._perms: torch.Tensor | None = None  # update_rollout's (epochs, rows), made once

    def gradients(self, mb: Minibatch, advantages: torch.Tensor, prof: Profiler) -> torch.Tensor:
        """As :meth:`AnalyticUpdate.gradients` (returns the stats (5,)); timed by the kernel
        (:meth:`report_times`), except the all-reduce of several ranks."""
        if mb.rows is None:
            # Flat observations stored in another dtype (uint8, float64) in float32, as the
            # policy's own passes take them (MLPActorCritic._as_float).
            obs = mb.obs.reshape(-1, mb.obs.shape[-1]).to(torch.float32)
            actions, logprobs = self._rows(mb.actions), mb.logprobs.reshape(-1)
            values, returns = mb.values.reshape(-1), mb.returns.reshape(-1)
        else:
            obs, actions, logprobs, values, _, returns = mb.rows
        c = self.coefs
        self._log_spans(prof)
        stats = self.kernel.gradients(
            obs, actions, logprobs, advantages.reshape(-1), returns, values, c.clip_coef,
            c.clip_vloss, c.ent_coef, c.vf_coef,
            # Several ranks: clipped in apply, after the average.
            0.0 if self.grad_allreduce else self.ppo.max_grad_norm,
        )  # fmt: skip
        self._allreduce(prof)
        return stats

    def _rows(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions (..., ) or a Box's (..., A) as the kernel's rows: (B,) or (B, A)."""
        return (
            actions.reshape(-1, self.kernel.actions)
            if self.kernel.gaussian
            else actions.reshape(-1)
        )

    def apply(self, prof: Profiler) -> None:
        opt = self.optimizer
        clip = self.ppo.max_grad_norm if self.grad_allreduce is not None else 0.0
        self.kernel.adam(opt.lr, opt.betas[0], opt.betas[1], opt.eps, clip)

    def takes_rollout(self, buf: RolloutBuffer) -> bool:
        """Whether :meth:`update_rollout` can update from ``buf``: one rank (no gradient to
        average between minibatches), and what the packed-table sampler takes
        (:meth:`~rlperf.ppo.samplers.PackedTableSampler.fits`: flat float32 observations of a
        feed-forward policy, no masks, no teacher) with one categorical or a Box action, on
        the CPU."""
        return (
            self.grad_allreduce is None
            and PackedTableSampler.fits(buf)
            and buf.spec.action.kind in ("discrete", "box")
            and buf.device.type == "cpu"
        )

    def update_rollout(
        self, buf: RolloutBuffer, num_minibatches: int, generator: torch.Generator | None,
        prof: Profiler,
    ) -> torch.Tensor:  # fmt: skip
        """``update_epochs`` passes over ``buf`` (after GAE) in one kernel call; returns the
        minibatches' stats summed (5,). The same parameters, bit for bit, as the sampler's
        minibatches through :meth:`gradients` and :meth:`apply`: the same permutations drawn
        from ``generator`` (one ``randperm`` an epoch, timed as ``minibatch_prep``), the same
        arithmetic in the same order. Timed by the kernel (:meth:`report_times`)."""
        ppo, opt, c = self.ppo, self.optimizer, self.coefs
        rows = buf.num_steps * buf.num_envs
        perms = self._perms
        if perms is None or perms.shape != (ppo.update_epochs, rows):
            perms = self._perms = torch.empty((ppo.update_epochs, rows), dtype=torch.int64)
        with prof.section(names.MINIBATCH_PREP):
            for epoch in perms:
                torch.randperm(rows, generator=generator, out=epoch)
        self._log_spans(prof)
        return self.kernel.epochs(
            buf.obs.view(rows, -1), self._rows(buf.actions), buf.logprobs.view(rows),
            buf.values.view(rows), buf.advantages.view(rows), perms, num_minibatches,
            ppo.norm_adv, c.clip_coef, c.clip_vloss, c.ent_coef, c.vf_coef, ppo.max_grad_norm,
            opt.lr, opt.betas[0], opt.betas[1], opt.eps,
        )  # fmt: skip

    def report_times(self, prof: Profiler) -> None:
        """The kernel's phases since the last report, as sections under the open one:
        ``loss`` (forward and loss), ``backward`` (with clipping), ``optimizer_step``, and from
        :meth:`update_rollout` ``minibatch_prep`` (the gather and the normalization), each
        with its spans if the kernel logged them (:meth:`_log_spans`)."""
        log = self.kernel.spans
        spans = {} if log is None else log.take(native.MLP_UPDATE_PHASES)
        for name, (total, calls, shortest, longest) in self.kernel.take_times().items():
            prof.record(name, total, calls, shortest, longest, spans.get(name, ()))

    def _log_spans(self, prof: Profiler) -> None:
        """Have the kernel log its phases' spans while ``prof`` wants them (a torch.profiler
        trace records): room for an update's four phases per minibatch (the log grows if a
        call logs more)."""
        if not prof.wants_spans:
            self.kernel.spans = None
        elif self.kernel.spans is None:
            ppo = self.ppo
            self.kernel.spans = native.SpanLog(4 * ppo.update_epochs * ppo.num_minibatches)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


class LossScaler:
    """Dynamic loss scaling for fp16, ``torch.amp.GradScaler``'s rule on one flat gradient:
    scale the loss by ``scale`` (2^16 at first); unscale the gradient and note inf/NaN in
    ``found_inf``; a step with inf/NaN is skipped (``FlatAdam.step(found_inf=...)``) and halves
    the scale, 2000 clean steps in a row double it. No host sync: all of it stays on the device
    (the same ``torch._amp_*`` kernels GradScaler calls)."""

    def __init__(self, device: torch.device, init_scale: float = 2.0**16) -> None:
        self.scale = torch.full((), init_scale, dtype=torch.float32, device=device)
        self.found_inf = torch.zeros((), dtype=torch.float32, device=device)
        self.growth_tracker = torch.zeros((), dtype=torch.int32, device=device)

    def unscale_(self, grad: torch.Tensor) -> None:
        self.found_inf.zero_()
        torch._amp_foreach_non_finite_check_and_unscale_(
            [grad], self.found_inf, self.scale.reciprocal()
        )

    def update(self) -> None:
        torch._amp_update_scale_(self.scale, self.growth_tracker, self.found_inf, 2.0, 0.5, 2000)

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "growth_tracker": self.growth_tracker}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale.copy_(state["scale"])
        self.growth_tracker.copy_(state["growth_tracker"])


def _full(x: torch.Tensor) -> torch.Tensor:
    """Flattened, and float32 if autocast made it half precision: the loss is taken in full."""
    x = x.reshape(-1)
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


class AutogradUpdate(_FlatAdamUpdate):
    """Any protocol policy through autograd.

    Args:
        precision: ``fp32``, ``bf16`` (autocast) or ``fp16`` (autocast + grad scaler, CUDA).
        compile: ``torch.compile`` the policy's ``evaluate``.
    """

    def __init__(
        self, policy: ActorCritic, ppo: PPOConfig, precision: str = "fp32", compile: bool = False
    ) -> None:
        self.policy, self.ppo = policy, ppo
        self.coefs = loss_coefs(ppo)
        self.flat, self.grad = flatten_parameters(policy)
        self.device = self.flat.device
        self.optimizer = FlatAdam(self.flat, ppo.learning_rate, eps=ppo.adam_eps, grad=self.grad)
        self.autocast_dtype = AUTOCAST_DTYPES.get(precision)
        self.scaler = LossScaler(self.device) if precision == "fp16" else None
        self.evaluate = torch.compile(policy.evaluate) if compile else policy.evaluate
        # Autocast's cache of cast weights; a CUDA graph's capture needs it off
        # (torch.cuda.graphs), which ppo/cuda_graphs.py sets.
        self.autocast_cache = True

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(
            self.device.type, dtype=self.autocast_dtype, cache_enabled=self.autocast_cache
        )

    def gradients(
        self, mb: Minibatch, advantages: torch.Tensor, prof: Profiler, supervised: bool = False
    ) -> torch.Tensor:
        """Gradients of the loss into each parameter's ``.grad``; returns the stats (5,).

        The PPO loss, or with ``supervised`` the action-supervised loss on ``mb.teacher_actions``
        (:func:`~rlperf.ppo.loss.supervised_loss`).
        """
        sec = prof.section
        with sec(names.LOSS):
            # The supervised phase's minibatches carry the teacher's actions.
            actions = cast(torch.Tensor, mb.teacher_actions) if supervised else mb.actions
            with self._autocast():
                newlogprob, entropy, newvalue = self.evaluate(
                    mb.obs, actions, mb.state0, mb.dones, mb.masks
                )
            if supervised:
                loss, stats = supervised_loss(
                    _full(newlogprob), _full(entropy), _full(newvalue), mb.returns.reshape(-1),
                    mb.values.reshape(-1), self.coefs,
                )  # fmt: skip
            else:
                loss, stats = ppo_loss(
                    _full(newlogprob), _full(entropy), _full(newvalue), mb.logprobs.reshape(-1),
                    advantages.reshape(-1), mb.returns.reshape(-1), mb.values.reshape(-1),
                    self.coefs,
                )  # fmt: skip
        with sec(names.BACKWARD):
            self.grad.zero_()
            if self.scaler is None:
                loss.backward()
            else:
                (loss * self.scaler.scale).backward()
            if self.grad_allreduce is None:
                self._unscale_and_clip()
        self._allreduce(prof)
        return stats

    def _unscale_and_clip(self) -> None:
        # Several ranks: after the all-reduce, so that an inf on one rank skips the step on all.
        if self.scaler is not None:
            self.scaler.unscale_(self.grad)
        clip_grad_norm(self.grad, self.ppo.max_grad_norm)

    def apply(self, prof: Profiler) -> None:
        with prof.section(names.OPTIMIZER_STEP):
            if self.grad_allreduce is not None:
                self._unscale_and_clip()
            if self.scaler is None:
                self.optimizer.step()
            else:
                self.optimizer.step(found_inf=self.scaler.found_inf)
                self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        state = {"adam": self.optimizer.state_dict()}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["adam"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
