"""The MLP actor-critic's whole PPO update (``ppo/_mlp_update_cpu.c``): :class:`MLPUpdateKernel`."""

from __future__ import annotations

import torch

from rlperf.native._core import (
    EXTENSIONS,
    KernelArgumentError,
    SpanLog,
    _Bound,
    _load,
    _ptr,
    _span_ptr,
)
from rlperf.native.loss import MAX_ACTIONS

_update = _load(EXTENSIONS["update"])


def update_available() -> bool:
    """Whether the MLP update kernel was built and imported (and not disabled)."""
    return _update is not None


# A Box action's dimensions the MLP update's Gaussian head takes (_loss_rows.h).
MAX_GAUSSIAN = _update.MAX_GAUSSIAN if _update is not None else 0
# The MLP update kernel's widest layer (the observation's included) and most hidden layers.
MLP_MAX_WIDTH = _update.MAX_WIDTH if _update is not None else 0
MLP_MAX_LAYERS = _update.MAX_LAYERS if _update is not None else 0


# -- the MLP actor-critic's whole update ------------------------------------------------------
def mlp_param_count(widths: list[int], actions: int, gaussian: bool = False) -> int:
    """Parameters of ``policies/mlp.py``'s stacked actor-critic with these widths (observation
    first, then each hidden layer) and ``actions`` outputs, in its flat layout (a Box action's
    Gaussian head: ``actions`` means, then as many log-stds)."""
    hidden = sum(2 * (a + 1) * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return hidden + 2 * actions * (widths[-1] + 1) + (actions if gaussian else 0)


def mlp_update_fits(widths: list[int], actions: int, gaussian: bool = False) -> bool:
    """Whether the MLP update kernel is built and takes a network of these sizes (a Box
    action's Gaussian head: up to :data:`MAX_GAUSSIAN` dimensions)."""
    return (
        _update is not None
        and 0 <= len(widths) - 1 <= MLP_MAX_LAYERS
        and all(1 <= w <= MLP_MAX_WIDTH for w in widths)
        and 1 <= actions <= (MAX_GAUSSIAN if gaussian else MAX_ACTIONS)
    )


# Phases of MLPUpdateKernel's timing, in the kernel's order (the last only in `epochs`).
MLP_UPDATE_PHASES = ("loss", "backward", "optimizer_step", "minibatch_prep")


class MLPUpdateKernel:
    """The PPO update of ``policies/mlp.py``'s actor-critic (one categorical action, or with
    ``gaussian`` a Box action's diagonal Gaussian) on ``batch``-row minibatches, in two kernel
    calls (``ppo/_mlp_update_cpu.c``):
    :meth:`gradients` (forward, loss and head gradients, backward, clipping) and :meth:`adam`;
    or every minibatch of every epoch of a rollout in one (:meth:`epochs`).

    Bound to the flat parameters, their gradient and Adam's state (``ppo/optim.py``'s
    :class:`~rlperf.ppo.optim.FlatAdam` tensors), all checked once, then compared by pointer on
    every call (:class:`StorageMoved` if one moved); its scratch is allocated here.

    Args:
        widths: the observation's width, then each hidden layer's. actions: the logits (a
            Gaussian's: its dimensions).
        param, grad, exp_avg, exp_avg_sq: (P,) float32 CPU, contiguous, P =
            :func:`mlp_param_count`. step: Adam's step count, a float32 scalar tensor.
        gaussian: the actions are a Box's, sampled from a Gaussian whose log-std is the last
            ``actions`` parameters.
    """

    def __init__(
        self,
        widths: list[int],
        actions: int,
        batch: int,
        param: torch.Tensor,
        grad: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        step: torch.Tensor,
        gaussian: bool = False,
    ) -> None:
        if _update is None:
            raise RuntimeError(
                "the CPU MLP update kernel is not built (or RLPERF_NO_KERNELS is set)"
            )
        if not mlp_update_fits(widths, actions, gaussian) or batch < 1:
            most = MAX_GAUSSIAN if gaussian else MAX_ACTIONS
            raise KernelArgumentError(
                f"the CPU MLP update takes 0 to {MLP_MAX_LAYERS} hidden layers of 1 to "
                f"{MLP_MAX_WIDTH} units, 1 to {most} actions and batch >= 1, got widths "
                f"{widths}, {actions} actions, batch {batch}"
            )
        self.gaussian = gaussian
        count = mlp_param_count(widths, actions, gaussian)
        for name, t in (("param", param), ("grad", grad), ("exp_avg", exp_avg),
                        ("exp_avg_sq", exp_avg_sq)):  # fmt: skip
            _ptr(name, t, (count,))
        _ptr("step", step, ())
        self.widths, self.actions, self.batch, self.count = list(widths), actions, batch, count
        new = param.new_zeros
        hidden_rows = 2 * batch * sum(widths[1:])
        own = {
            "x0": new(batch, widths[0]), "hidden": new(max(hidden_rows, 1)),
            "dz": new(max(hidden_rows, 1)), "logits": new(batch, actions), "value": new(batch),
            "grad_logits": new(batch, actions), "grad_value": new(batch),
            "wt": new(max([a * b for a, b in zip(widths[1:-1], widths[2:], strict=True)] or [1])),
        }  # fmt: skip
        # epochs' gathered minibatch: actions, then old log-probs, advantages, returns, values.
        self._mb_actions = (
            new(batch, actions) if gaussian else torch.zeros(batch, dtype=torch.int64)
        )
        self._mb_columns = new(4, batch)
        # Per phase (MLP_UPDATE_PHASES): total ns, calls, shortest, longest; the kernel adds.
        self.times = torch.zeros(len(MLP_UPDATE_PHASES), 4, dtype=torch.int64)
        # Where each call also logs its phases' spans (a torch.profiler trace records), or None.
        self.spans: SpanLog | None = None
        self._grad_args = _Bound(
            "MLPUpdateKernel", [("param", param), ("grad", grad), *own.items()], frozenset(own)
        )
        self._adam_args = _Bound("MLPUpdateKernel", [
            ("param", param), ("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq),
            ("step", step),
        ])  # fmt: skip
        self._epoch_args = _Bound("MLPUpdateKernel", [
            ("param", param), ("grad", grad), *own.items(), ("exp_avg", exp_avg),
            ("exp_avg_sq", exp_avg_sq), ("step", step),
        ], frozenset(own))  # fmt: skip
        self._head = (len(widths) - 1, actions)
        self._tail = (*widths, count)

    def gradients(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        oldlogprob: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        oldvalues: torch.Tensor,
        clip_coef: float,
        clip_vloss: bool,
        ent_coef: float,
        vf_coef: float,
        max_grad_norm: float,
    ) -> torch.Tensor:
        """Write the PPO loss's gradient into the bound ``grad`` (overwritten), clipped to
        ``max_grad_norm`` if > 0; returns the stats (5,) (``ppo/loss.py``'s STAT_NAMES).

        Args:
            obs: (batch, widths[0]) float32, rows of any stride, columns contiguous (a view of
                the packed sample table serves); actions (batch,) int64 (a Gaussian's: (batch,
                actions) float32, rows of any stride, columns contiguous); the rest (batch,)
                float32, any stride. An action outside ``0..actions-1`` is a ``ValueError``.
        """
        b = self.batch
        vec = (b,)
        obs_ptr = _ptr("obs", obs, (b, self.widths[0]), contiguous=False)
        if obs.stride(1) != 1 and self.widths[0] > 1:
            raise KernelArgumentError("obs: the kernel takes rows of contiguous columns")
        if self.gaussian:
            actions_ptr = _ptr("actions", actions, (b, self.actions), contiguous=False)
            if actions.stride(1) != 1 and self.actions > 1:
                raise KernelArgumentError("actions: the kernel takes rows of contiguous columns")
        else:
            actions_ptr = _ptr("actions", actions, vec, torch.int64, contiguous=False)
        ptrs = (
            obs_ptr, actions_ptr, _ptr("oldlogprob", oldlogprob, vec, contiguous=False),
            _ptr("advantages", advantages, vec, contiguous=False),
            _ptr("returns", returns, vec, contiguous=False),
            _ptr("oldvalues", oldvalues, vec, contiguous=False),
        )  # fmt: skip
        stats = obs.new_empty(5)
        _update.gradients(  # type: ignore[union-attr]  # __init__ checked it is loaded
            b, *self._head, int(clip_vloss), obs.stride(0), actions.stride(0),
            oldlogprob.stride(0), advantages.stride(0), returns.stride(0), oldvalues.stride(0),
            int(self.gaussian), *self._tail, float(clip_coef), float(ent_coef), float(vf_coef),
            float(max_grad_norm), *ptrs, *self._grad_args.ptrs(), stats.data_ptr(),
            self.times.data_ptr(), _span_ptr(self.spans),
        )  # fmt: skip
        return stats

    def adam(
        self, lr: float, beta1: float, beta2: float, eps: float, max_grad_norm: float = 0.0
    ) -> None:
        """One Adam step of the bound parameters from the bound gradient, advancing ``step``:
        ``torch.optim.Adam(fused=True)``'s arithmetic (no weight decay, no amsgrad); with
        ``max_grad_norm > 0`` the gradient is clipped first (several ranks: after averaging)."""
        _update.adam(  # type: ignore[union-attr]  # __init__ checked it is loaded
            self.count, float(lr), float(beta1), float(beta2), float(eps), float(max_grad_norm),
            *self._adam_args.ptrs(), self.times.data_ptr(), _span_ptr(self.spans),
        )  # fmt: skip

    def epochs(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        logprobs: torch.Tensor,
        values: torch.Tensor,
        advantages: torch.Tensor,
        perms: torch.Tensor,
        minibatches: int,
        norm_adv: bool,
        clip_coef: float,
        clip_vloss: bool,
        ent_coef: float,
        vf_coef: float,
        max_grad_norm: float,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
    ) -> torch.Tensor:
        """A rollout's whole update in one call: for each permutation (epoch), ``minibatches``
        minibatches of ``batch`` rows in its order (rows past them left out), each gathered,
        its advantages normalized if ``norm_adv`` (``ppo/loss.py``'s ``normalize_advantages``),
        then :meth:`gradients` and :meth:`adam` as the two calls do them. The same arithmetic in
        the same order as the sampler's minibatches through those calls, so the same parameters
        bit for bit (the tests compare them). Returns the minibatches' stats summed (5,).

        Args:
            obs: (rows, widths[0]) float32, contiguous; actions (rows,) int64 (a Gaussian's:
                (rows, actions) float32, contiguous); logprobs,
                values, advantages (rows,) float32, contiguous; returns are advantages + values.
            perms: (epochs, rows) int64, contiguous, each row a permutation of ``0..rows-1``
                (an entry out of range, or an action out of range, is a ``ValueError`` and
                nothing is written).
        """
        rows = obs.shape[0] if obs.dim() == 2 else -1
        epochs = perms.shape[0] if perms.dim() == 2 else -1
        vec = (rows,)
        if self.gaussian:
            actions_ptr = _ptr("actions", actions, (rows, self.actions))
        else:
            actions_ptr = _ptr("actions", actions, vec, torch.int64)
        ptrs = (
            _ptr("obs", obs, (rows, self.widths[0])), actions_ptr,
            _ptr("logprobs", logprobs, vec), _ptr("values", values, vec),
            _ptr("advantages", advantages, vec), _ptr("perms", perms, (epochs, rows), torch.int64),
        )  # fmt: skip
        if minibatches < 1 or minibatches * self.batch > rows:
            raise KernelArgumentError(
                f"epochs: {rows} rows do not hold {minibatches} minibatches of {self.batch} rows"
            )
        cols = self._mb_columns
        stats = obs.new_zeros(5)
        _update.epochs(  # type: ignore[union-attr]  # __init__ checked it is loaded
            rows, self.batch, minibatches, epochs, *self._head, int(clip_vloss), int(norm_adv),
            int(self.gaussian), *self._tail, float(clip_coef), float(ent_coef), float(vf_coef),
            float(max_grad_norm), float(lr), float(beta1), float(beta2), float(eps), *ptrs,
            self._mb_actions.data_ptr(), *(cols[i].data_ptr() for i in range(4)),
            *self._epoch_args.ptrs(), stats.data_ptr(), self.times.data_ptr(),
            _span_ptr(self.spans),
        )  # fmt: skip
        return stats

    def take_times(self) -> dict[str, tuple[int, int, int, int]]:
        """Each phase's (total ns, calls, shortest ns, longest ns) since the last take, of the
        phases that ran; the counters restart at zero."""
        rows = self.times.tolist()
        self.times.zero_()
        return {name: tuple(r) for name, r in zip(MLP_UPDATE_PHASES, rows, strict=True) if r[1]}
