"""Adam over one flat parameter tensor, calling the fused kernel directly.

``torch.optim.Adam(fused=True).step()`` spends ~80 us per call on this CPU in Python bookkeeping
(hooks, state checks, grad-scaler plumbing) around a ~9 us kernel; a PPO update at 512 samples
takes ~1 ms, so that wrapper alone was ~7% of it. With all parameters in one tensor there is one
parameter, one state and nothing to check, so :class:`FlatAdam` calls ``torch._fused_adam_``
itself: the same kernel, the same arithmetic as ``torch.optim.Adam(fused=True)`` (tested).
Where the fused kernel is missing it falls back to ``torch.optim.Adam``.

For a CUDA graph (``ppo/cuda_graphs.py``) the step must read everything that changes between
replays from device memory: the fused kernel already reads the step count from a device tensor,
and :meth:`FlatAdam.use_tensor_lr` makes it read the learning rate from one too, updated in
place by the ``lr`` setter. That is what ``torch.optim.Adam(capturable=True)`` with a tensor
``lr`` does (its fused path takes ``lr`` as a tensor through ``_fused_adam_``'s ``tensor_lr``
overload).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch

from rlperf.config import Config


def flatten_parameters(module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Move every trainable parameter of ``module`` into one flat tensor, and its gradient
    into another; the parameters become views of them. Returns ``(flat, flat_grad)``.

    Autograd accumulates into an existing ``.grad`` in place, so after ``backward`` the whole
    gradient is in ``flat_grad``: zeroing is one op, clipping one norm, Adam one fused kernel
    (:class:`FlatAdam`), instead of ``torch.optim``'s ~300 us of Python per step around it.
    A module whose only parameter is already flat (the MLP) is used as it is.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if len(params) == 1 and params[0].dim() == 1:
        flat: torch.Tensor = params[0]
        if flat.grad is None:
            flat.grad = torch.zeros_like(flat)
        return flat, flat.grad
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
    grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat[offset : offset + n].view_as(p)
        p.grad = grad[offset : offset + n].view_as(p)
        offset += n
    flat.grad = grad  # for FlatAdam's torch.optim fallback
    return flat, grad


class FlatAdam:
    """Adam (no weight decay, no amsgrad) for one parameter tensor with its ``.grad``
    (or the gradient tensor given as ``grad``).

    Attributes:
        lr: learning rate, read at every :meth:`step` (set it to anneal; after
            :meth:`use_tensor_lr` setting it writes the device tensor the kernel reads).
    """

    def __init__(
        self,
        param: torch.Tensor,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        grad: torch.Tensor | None = None,
    ) -> None:
        self.param = param
        self._grad = grad  # None: read param.grad at every step
        self._lr = lr
        # The learning rate on the device, for a captured step (use_tensor_lr); None: a float.
        self.lr_tensor: torch.Tensor | None = None
        self.betas = betas
        self.eps = eps
        self.exp_avg = torch.zeros_like(param, memory_format=torch.preserve_format)
        self.exp_avg_sq = torch.zeros_like(param, memory_format=torch.preserve_format)
        self.step_count = torch.zeros((), dtype=torch.float32, device=param.device)
        self._fused = hasattr(torch, "_fused_adam_") and param.device.type in ("cpu", "cuda")
        self._fallback: torch.optim.Adam | None = None
        if not self._fused:
            self._fallback = torch.optim.Adam([param], lr=lr, betas=betas, eps=eps)

    @property
    def lr(self) -> float:
        return self._lr

    @lr.setter
    def lr(self, value: float) -> None:
        self._lr = value
        if self.lr_tensor is not None:
            self.lr_tensor.fill_(value)  # in place: a captured step reads this memory

    def use_tensor_lr(self) -> None:
        """Read the learning rate from a float32 tensor on the parameter's device from now on
        (float32: the CUDA kernel reads a ``float*``), so that a CUDA graph of :meth:`step`
        follows the annealed rate."""
        if self._fallback is not None:
            raise ValueError("a tensor learning rate needs the fused Adam kernel")
        if self.lr_tensor is None:
            self.lr_tensor = torch.full((), self._lr, dtype=torch.float32, device=self.param.device)

    @torch.no_grad()
    def step(self, found_inf: torch.Tensor | None = None) -> None:
        """One Adam step from ``param.grad``.

        Args:
            found_inf: optional 0-dim float tensor (loss scaling): where non-zero the kernel
                leaves everything as it is, and the step count is not advanced, with no sync.
        """
        if self._fallback is not None:
            if found_inf is not None and bool(found_inf):
                return
            self._fallback.param_groups[0]["lr"] = self.lr
            self._fallback.step()
            return
        self.step_count += 1  # the kernel reads the step count; torch.optim bumps it outside too
        if found_inf is not None:
            self.step_count -= found_inf  # torch.optim's fused path undoes a skipped step so
        lr = self.lr_tensor if self.lr_tensor is not None else self._lr
        torch._fused_adam_(
            [self.param.detach()],
            # The gradient exists by now (backward or the analytic update wrote it).
            [self._grad if self._grad is not None else cast(torch.Tensor, self.param.grad)],
            [self.exp_avg],
            [self.exp_avg_sq],
            [],
            [self.step_count],
            lr=lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
            found_inf=found_inf,
        )

    def state_dict(self) -> dict[str, Any]:
        if self._fallback is not None:
            return {"fallback": self._fallback.state_dict(), "lr": self.lr}
        return {
            "lr": self.lr,
            "exp_avg": self.exp_avg,
            "exp_avg_sq": self.exp_avg_sq,
            "step": self.step_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr = float(state["lr"])
        if self._fallback is not None:
            self._fallback.load_state_dict(state["fallback"])
            return
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.step_count.copy_(state["step"])


def run_progress(cfg: Config, iteration: int, num_iterations: int, elapsed_s: float) -> float:
    """How much of the run is behind, in [0, 1]: ``iteration`` of ``num_iterations``
    iterations; with ``--anneal-with-wall`` and ``--max-wall-s``, the further of that and the
    ``elapsed_s`` seconds of the budget, so a schedule ends on whichever budget ends the run."""
    done = iteration / max(num_iterations, 1)
    budget_s = cfg.run.max_wall_s
    if cfg.ppo.anneal_with_wall and budget_s > 0:
        done = max(done, elapsed_s / budget_s)
    return min(max(done, 0.0), 1.0)


def annealed_lr(cfg: Config, iteration: int, num_iterations: int, elapsed_s: float) -> float:
    """The learning rate of iteration ``iteration`` (1-based) of ``num_iterations``: with
    ``--anneal-lr``, CleanRL's linear decay (the full rate at the first, rate/num_iterations at
    the last); with ``--anneal-with-wall`` and ``--max-wall-s``, progress is the further of the
    iterations and the ``elapsed_s`` seconds of the budget, so either budget ends near 0."""
    ppo = cfg.ppo
    if not ppo.anneal_lr:
        return ppo.learning_rate
    return (1.0 - run_progress(cfg, iteration - 1, num_iterations, elapsed_s)) * ppo.learning_rate


def log_std_ceiling(cfg: Config, done: float) -> float:
    """With ``--final-std``, the highest log-std the Gaussian may have once ``done`` (in
    [0, 1], :func:`run_progress`) of the run is behind: the starting log-std
    (``--init-log-std``) up to ``--final-std-from``, then linear in ``done`` to
    ``log(final_std)`` at 1. ``inf`` when off."""
    final_std = cfg.ppo.final_std
    if not final_std:
        return math.inf
    start, begin = cfg.policy.init_log_std, cfg.ppo.final_std_from
    falling = max(0.0, done - begin) / (1.0 - begin)
    return start + falling * (math.log(final_std) - start)


# rl_games' AdaptiveScheduler (rl_games/common/schedulers.py): its bounds and step.
KL_ADAPTIVE_MIN_LR, KL_ADAPTIVE_MAX_LR, KL_ADAPTIVE_STEP = 1e-6, 1e-2, 1.5


def kl_adapted_lr(lr: float, approx_kl: float, target: float) -> float:
    """The next learning rate under ``--lr-kl-target``: ``lr / 1.5`` when ``approx_kl`` is above
    twice ``target``, ``lr * 1.5`` when below half of it, else ``lr``, kept within [1e-6, 1e-2].

    rl_games adapts after every minibatch from that minibatch's KL; here once an iteration from
    the update's mean approx KL (the native update runs all minibatches in one call), which
    moves the rate as far in an iteration as rl_games' moves it in one minibatch."""
    if approx_kl > 2.0 * target:
        return max(lr / KL_ADAPTIVE_STEP, KL_ADAPTIVE_MIN_LR)
    if approx_kl < 0.5 * target:
        return min(lr * KL_ADAPTIVE_STEP, KL_ADAPTIVE_MAX_LR)
    return lr
