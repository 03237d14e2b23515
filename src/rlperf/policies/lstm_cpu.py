"""The LSTM recurrence compiled for the CPU (``_lstm_cpu.c``): a whole ``(T, B)`` sequence, forward
or backward, in one call.

Why: at the sizes recurrent PPO runs on CPUs (16-64 rows of 64 units per step) the torch
recurrence of ``policies/lstm.py`` (:class:`~rlperf.policies.lstm.TorchRecurrence`) spends its time
dispatching ~12 small ops per step, and with two threads every small matmul also pays a
fork/join (16 x 64 @ 64 x 256: 7.8 us on one thread, 14.8 us on two, here). The kernel runs all
T steps in C with the state in cache; rows are independent through the recurrence, so with two
threads each takes half of them for the whole sequence. What stays in torch is what is large:
the input projection and ``dW_hh`` are one matmul over all ``T * B`` rows each.

The analytic update and the rollout go one step further (``native.CompiledNet``,
``native.CompiledStep``): the whole actor-critic of ``policies/lstm.py``, tanh MLP
encoder, projection, recurrence and linear heads, in one call each, with its matmuls in the
same register tile (~105 GFLOPS on one core here at 512 x 64 x 256, where torch's matmul gave
~84) and no op between them. Each thread takes its environments through every layer; the
weight gradients, sums over all rows, are split by their rows after one barrier.

Every call goes through ``rlperf/native/``, which checks each tensor before C reads it and
owns the kernel's limits. The kernel takes float32 CPU tensors; :func:`usable` says whether a
call can use it, and ``LSTMCore`` falls back to the torch recurrence otherwise (CUDA, bf16/fp16
autocast, float64 in the tests, or an install without a C compiler: :func:`available`). Its
sigmoid and tanh are a polynomial ``exp`` (~1 ulp) and ``tanh(x) = 2 sigmoid(2x) - 1``
(absolute error ~1e-7), so it agrees with the torch recurrence to float32 rounding, not bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch

from rlperf import native


def available() -> bool:
    """Whether the compiled kernel was built and imported."""
    return native.lstm_available()


def network_fits(widths: list[int], hidden: int) -> bool:
    """Whether the whole-network calls take an encoder of these widths (input first) and an
    LSTM of ``hidden`` units (False without the kernel)."""
    return native.LSTM_LIMITS.network_fits(widths, hidden)


def usable(w_hh: torch.Tensor, *tensors: torch.Tensor) -> bool:
    """Whether an LSTM with recurrent weight ``w_hh`` (4H, H) and these other tensors can go
    through the kernel: kernel built, all float32 on the CPU, H within its limit."""
    return (
        native.lstm_available()
        and w_hh.shape[-1] <= native.LSTM_LIMITS.max_hidden
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (w_hh, *tensors))
    )


class CompiledRecurrence(torch.autograd.Function):
    """The recurrence as one autograd node through the kernel; the same inputs and output as
    :class:`~rlperf.policies.lstm.TorchRecurrence` (``keep`` here (T, B)): ``xproj``
    (T, B, 4H), ``keep`` (T, B), ``h0``, ``c0`` (B, H), ``w_hh`` (4H, H) -> h (T, B, H)."""

    @staticmethod
    def forward(
        ctx: Any,
        xproj: torch.Tensor,
        keep: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        w_hh: torch.Tensor,
    ) -> torch.Tensor:
        keep = keep.contiguous()
        acts, cs, tcs, hs, hprev = native.recurrence_forward(xproj, keep, h0, c0, w_hh)
        ctx.save_for_backward(acts, cs, tcs, hprev, keep, c0, w_hh)
        return hs

    @staticmethod
    def backward(ctx: Any, grad_hs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        acts, cs, tcs, hprev, keep, c0, w_hh = ctx.saved_tensors
        grad_z, dh0, dc0 = native.recurrence_backward(grad_hs, acts, keep, c0, w_hh, cs, tcs)
        t_len, b, four_h = acts.shape
        # dW_hh = sum_t dz_t^T (keep_t h_{t-1}): one matmul over all T * B rows.
        grad_w_hh = torch.mm(grad_z.view(-1, four_h).T, hprev.view(t_len * b, -1))
        return grad_z, None, dh0, dc0, grad_w_hh
