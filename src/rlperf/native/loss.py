"""The categorical PPO loss's binding (``ppo/_loss_cpu.c``)."""

from __future__ import annotations

import torch

from rlperf.native._core import EXTENSIONS, KernelArgumentError, _load, _ptr

_loss = _load(EXTENSIONS["loss"])


def loss_available() -> bool:
    """Whether the PPO loss kernel was built and imported (and not disabled)."""
    return _loss is not None


MAX_ACTIONS = _loss.MAX_ACTIONS if _loss is not None else 0


# -- the categorical PPO loss -------------------------------------------------------------
def _loss_threads(n: int) -> int:
    # Below ~2048 rows a second thread's fork/join costs more than its half of the rows.
    return torch.get_num_threads() if n >= 2048 else 1


def ppo_loss_and_head_grads(
    logits: torch.Tensor,
    newvalue: torch.Tensor,
    actions: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    clip_coef: float,
    clip_vloss: bool,
    ent_coef: float,
    vf_coef: float,
    grad_logits: torch.Tensor,
    grad_value: torch.Tensor,
) -> torch.Tensor:
    """The compiled ``discrete_ppo_loss_and_head_grads`` (``ppo/loss.py``, where the arguments
    and the math are): writes ``grad_logits`` (N, A) and ``grad_value`` (N,), returns the
    stats (5,). Every tensor float32 on the CPU (``actions`` int64), any strides; an action
    outside ``0..A-1`` is a ``ValueError`` from the kernel."""
    if _loss is None:
        raise RuntimeError("the CPU PPO loss kernel is not built (or RLPERF_NO_KERNELS is set)")
    if logits.dim() != 2 or not 1 <= logits.shape[1] <= MAX_ACTIONS or logits.shape[0] < 1:
        raise KernelArgumentError(
            f"logits: the loss kernel takes (N >= 1, 1..{MAX_ACTIONS}) logits, "
            f"got shape {tuple(logits.shape)}"
        )
    n, num_actions = logits.shape
    rows, vec = (n, num_actions), (n,)
    ins = (logits, newvalue, actions, oldlogprob, advantages, returns, oldvalues)
    ptrs = (
        _ptr("logits", logits, rows, contiguous=False),
        _ptr("newvalue", newvalue, vec, contiguous=False),
        _ptr("actions", actions, vec, torch.int64, contiguous=False),
        _ptr("oldlogprob", oldlogprob, vec, contiguous=False),
        _ptr("advantages", advantages, vec, contiguous=False),
        _ptr("returns", returns, vec, contiguous=False),
        _ptr("oldvalues", oldvalues, vec, contiguous=False),
        _ptr("grad_logits", grad_logits, rows, contiguous=False),
        _ptr("grad_value", grad_value, vec, contiguous=False),
    )
    stats = logits.new_empty(5)
    _loss.loss(
        n, num_actions, int(clip_vloss), *logits.stride(), *(t.stride(0) for t in ins[1:]),
        *grad_logits.stride(), grad_value.stride(0), _loss_threads(n), float(clip_coef),
        float(ent_coef), float(vf_coef), *ptrs, stats.data_ptr(),
    )  # fmt: skip
    return stats
