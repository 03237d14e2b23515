"""The LSTM recurrence compiled for the CPU (``_lstm_cpu.c``): a whole ``(T, B)`` sequence, forward
or backward, in one call.

Why: at the sizes recurrent PPO runs on CPUs (16-64 rows of 64 units per step) the torch
recurrence of ``policies/lstm.py`` (:class:`~rlperf.policies.lstm.LSTMUnroll`) spends its time
dispatching ~12 small ops per step, and with two threads every small matmul also pays a
fork/join (16 x 64 @ 64 x 256: 7.8 us on one thread, 14.8 us on two, here). The kernel runs all
T steps in C with the state in cache; rows are independent through the recurrence, so with two
threads each takes half of them for the whole sequence. What stays in torch is what is large:
the input projection and ``dW_hh`` are one matmul over all ``T * B`` rows each.

The kernel takes float32 CPU tensors; :func:`usable` says whether a call can use it, and
``LSTMCore`` falls back to the torch recurrence otherwise (CUDA, bf16/fp16 autocast, float64 in
the tests, or an install without a C compiler: :func:`available`). Its sigmoid and tanh are a
polynomial ``exp`` (~1 ulp) and ``tanh(x) = 2 sigmoid(2x) - 1`` (absolute error ~1e-7), so it
agrees with the torch recurrence to float32 rounding, not bit for bit.
"""

from __future__ import annotations

import torch

try:
    from rlperf.policies import _lstm_cpu as _kernel
except ImportError:  # built without a C compiler: the torch recurrence serves
    _kernel = None

MAX_HIDDEN = 1024  # the kernel's per-thread scratch is sized for this many units
MAX_FEATURES = 4096  # and for this many input features in step()


def available() -> bool:
    """Whether the compiled kernel was built and imported."""
    return _kernel is not None


def usable(w_hh: torch.Tensor, *tensors: torch.Tensor) -> bool:
    """Whether an LSTM with recurrent weight ``w_hh`` (4H, H) and these other tensors can go
    through the kernel: kernel built, all float32 on the CPU, H at most :data:`MAX_HIDDEN`."""
    return (
        _kernel is not None
        and w_hh.shape[-1] <= MAX_HIDDEN
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (w_hh, *tensors))
    )


def _threads(batch: int) -> int:
    # Rows split in tiles of 4; fewer than 8 rows are not worth a second thread.
    return min(torch.get_num_threads(), max(1, batch // 8))


def forward(
    xproj: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, w_hh: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The recurrence over T steps.

    Args:
        xproj: (T, B, 4H) input part of the gates, ``x @ W_ih^T + b``.
        keep: (T, B) 1.0, or 0.0 where the state is zeroed before step t.
        h0, c0: (B, H) initial state. w_hh: (4H, H).

    Returns:
        acts (T, B, 4H): sigmoid(i), sigmoid(f), tanh(g), sigmoid(o); cs, tcs, hs, hprev
        (T, B, H): c_t, tanh(c_t), h_t, and keep_t h_{t-1} (the state step t starts from, what
        ``dW_hh`` needs).
    """
    t_len, b, four_h = xproj.shape
    hid = four_h // 4
    if hid > MAX_HIDDEN:
        raise ValueError(f"the CPU LSTM kernel takes at most {MAX_HIDDEN} units, got {hid}")
    xproj, keep, h0, c0 = (t.contiguous() for t in (xproj, keep, h0, c0))
    w_t = w_hh.t().contiguous()
    acts = torch.empty_like(xproj)
    cs = xproj.new_empty(t_len, b, hid)
    tcs, hs, hprev = torch.empty_like(cs), torch.empty_like(cs), torch.empty_like(cs)
    _kernel.forward(
        t_len, b, hid, _threads(b), xproj.data_ptr(), acts.data_ptr(), keep.data_ptr(),
        h0.data_ptr(), c0.data_ptr(), w_t.data_ptr(), cs.data_ptr(), tcs.data_ptr(),
        hs.data_ptr(), hprev.data_ptr(),
    )  # fmt: skip
    return acts, cs, tcs, hs, hprev


def backward(
    grad_hs: torch.Tensor,
    acts: torch.Tensor,
    keep: torch.Tensor,
    c0: torch.Tensor,
    w_hh: torch.Tensor,
    cs: torch.Tensor,
    tcs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backpropagation through the T steps of :func:`forward` (same arguments, its outputs).

    Args:
        grad_hs: (T, B, H) gradient of the loss with respect to every h_t.

    Returns:
        grad_z (T, B, 4H): gradient with respect to the gate pre-activations (and so to
        ``xproj``); dh0, dc0 (B, H): with respect to the initial state.
    """
    t_len, b, four_h = acts.shape
    hid = four_h // 4
    grad_hs, w_hh = grad_hs.contiguous(), w_hh.contiguous()
    grad_z = torch.empty_like(acts)
    dh0, dc0 = c0.new_empty(b, hid), c0.new_empty(b, hid)
    _kernel.backward(
        t_len, b, hid, _threads(b), acts.data_ptr(), keep.data_ptr(), c0.data_ptr(),
        w_hh.data_ptr(), cs.data_ptr(), tcs.data_ptr(), grad_hs.data_ptr(), grad_z.data_ptr(),
        dh0.data_ptr(), dc0.data_ptr(),
    )  # fmt: skip
    return grad_z, dh0, dc0


def step(
    x: torch.Tensor,
    keep: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    w_cat_t: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One rollout step with the input projection inside the kernel (no ``(B, 4H)`` gate
    tensor, no separate matmul): ``z = bias + [x, keep h] @ w_cat_t``, then the cell.

    Args:
        x: (B, F) encoder features; keep: (B,); h, c: (B, H).
        w_cat_t: (F + H, 4H), ``torch.cat((W_ih, W_hh), 1).T`` contiguous (see
            :meth:`~rlperf.policies.lstm.LSTMCore.step_weights`); bias: (4H,).

    Returns:
        h, c after the step, (B, H) each.
    """
    b, f_in = x.shape
    hid = h.shape[1]
    if f_in > MAX_FEATURES or hid > MAX_HIDDEN:
        raise ValueError(
            f"the CPU LSTM step takes at most {MAX_FEATURES} features and {MAX_HIDDEN} units, "
            f"got {f_in} and {hid}"
        )
    x, keep, h, c = x.contiguous(), keep.contiguous(), h.contiguous(), c.contiguous()
    h_out, c_out = torch.empty_like(h), torch.empty_like(c)
    _kernel.step(
        b, f_in, hid, _threads(b), x.data_ptr(), keep.data_ptr(), h.data_ptr(), c.data_ptr(),
        w_cat_t.data_ptr(), bias.data_ptr(), h_out.data_ptr(), c_out.data_ptr(),
    )  # fmt: skip
    return h_out, c_out


class LSTMUnrollCPU(torch.autograd.Function):
    """The recurrence as one autograd node through the kernel; the same inputs and output as
    :class:`~rlperf.policies.lstm.LSTMUnroll` (``keep`` here (T, B))."""

    @staticmethod
    def forward(ctx, xproj, keep, h0, c0, w_hh):  # type: ignore[no-untyped-def]
        keep = keep.contiguous()
        acts, cs, tcs, hs, hprev = forward(xproj, keep, h0, c0, w_hh)
        ctx.save_for_backward(acts, cs, tcs, hprev, keep, c0, w_hh)
        return hs

    @staticmethod
    def backward(ctx, grad_hs):  # type: ignore[no-untyped-def]
        acts, cs, tcs, hprev, keep, c0, w_hh = ctx.saved_tensors
        grad_z, dh0, dc0 = backward(grad_hs, acts, keep, c0, w_hh, cs, tcs)
        t_len, b, four_h = acts.shape
        # dW_hh = sum_t dz_t^T (keep_t h_{t-1}): one matmul over all T * B rows.
        grad_w_hh = torch.mm(grad_z.view(-1, four_h).T, hprev.view(t_len * b, -1))
        return grad_z, None, dh0, dc0, grad_w_hh
