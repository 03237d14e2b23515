"""The LSTM recurrence compiled for the CPU (``_lstm_cpu.c``): a whole ``(T, B)`` sequence, forward
or backward, in one call.

Why: at the sizes recurrent PPO runs on CPUs (16-64 rows of 64 units per step) the torch
recurrence of ``policies/lstm.py`` (:class:`~rlperf.policies.lstm.LSTMUnroll`) spends its time
dispatching ~12 small ops per step, and with two threads every small matmul also pays a
fork/join (16 x 64 @ 64 x 256: 7.8 us on one thread, 14.8 us on two, here). The kernel runs all
T steps in C with the state in cache; rows are independent through the recurrence, so with two
threads each takes half of them for the whole sequence. What stays in torch is what is large:
the input projection and ``dW_hh`` are one matmul over all ``T * B`` rows each.

The analytic update and the rollout go one step further (:func:`net_forward`,
:func:`net_backward`, :func:`net_act`): the whole actor-critic of ``policies/lstm.py``, tanh MLP
encoder, projection, recurrence and linear heads, in one call each, with its matmuls in the
same register tile (~105 GFLOPS on one core here at 512 x 64 x 256, where torch's matmul gave
~84) and no op between them. Each thread takes its environments through every layer; the
weight gradients, sums over all rows, are split by their rows after one barrier.

The kernel takes float32 CPU tensors; :func:`usable` says whether a call can use it, and
``LSTMCore`` falls back to the torch recurrence otherwise (CUDA, bf16/fp16 autocast, float64 in
the tests, or an install without a C compiler: :func:`available`). Its sigmoid and tanh are a
polynomial ``exp`` (~1 ulp) and ``tanh(x) = 2 sigmoid(2x) - 1`` (absolute error ~1e-7), so it
agrees with the torch recurrence to float32 rounding, not bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass
class NetForward:
    """What :func:`net_forward` computed and :func:`net_backward` reads. ``N = T * B`` rows,
    time-major.

    Attributes:
        obs: (N, obs_dim) the encoder's input. layers: each encoder layer's tanh output
            (N, width). keep: (T, B). c0: (B, H).
        acts: (T, B, 4H) gate activations; cs, tcs, hs, hprev: (T, B, H), as :func:`forward`.
        out: (N, n_out) the heads' outputs (logits, then the value).
        grad_out: (N, n_out) d loss / d out, for the loss to write (empty until it does).
    """

    obs: torch.Tensor
    layers: list[torch.Tensor]
    keep: torch.Tensor
    c0: torch.Tensor
    acts: torch.Tensor
    cs: torch.Tensor
    tcs: torch.Tensor
    hs: torch.Tensor
    hprev: torch.Tensor
    out: torch.Tensor
    grad_out: torch.Tensor


def _check(*tensors: torch.Tensor) -> None:
    """The kernel reads raw float32 memory: refuse anything else rather than read it wrong."""
    for t in tensors:
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
            raise ValueError(
                f"the CPU LSTM network takes contiguous float32 CPU tensors, got {t.dtype} on "
                f"{t.device}{'' if t.is_contiguous() else ', not contiguous'}"
            )


def _widths(obs_dim: int, encoder: list[tuple[torch.Tensor, torch.Tensor]]) -> list[int]:
    widths = [obs_dim] + [w.shape[0] for w, _ in encoder]
    if max(widths) > MAX_FEATURES:
        raise ValueError(f"the CPU LSTM network takes layers of at most {MAX_FEATURES} units")
    return widths


def net_forward(
    obs: torch.Tensor,
    keep: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    encoder: list[tuple[torch.Tensor, torch.Tensor]],
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    bias: torch.Tensor,
    w_head: torch.Tensor,
    b_head: torch.Tensor,
) -> NetForward:
    """The whole recurrent actor-critic over ``(T, B)`` sequences in one kernel call: the tanh
    MLP encoder, the input projection, the recurrence and the linear heads.

    Args:
        obs: (T, B, obs_dim). keep: (T, B) as :func:`forward`. h0, c0: (B, H).
        encoder: (weight (out, in), bias (out,)) of each ``Linear + Tanh`` layer, may be empty.
        w_ih (4H, F), w_hh (4H, H), bias (4H,): the LSTM. w_head (n_out, H), b_head (n_out,).

    Returns:
        :class:`NetForward` (its ``out`` holds the heads' outputs).
    """
    t_len, b = obs.shape[:2]
    hid, n_out, n = w_hh.shape[1], w_head.shape[0], t_len * b
    widths = _widths(obs.shape[-1], encoder)
    obs2 = obs.reshape(n, -1).contiguous()
    keep, h0, c0 = keep.contiguous(), h0.contiguous(), c0.contiguous()
    _check(obs2, keep, h0, c0, w_ih, w_hh, bias, w_head, b_head, *(t for p in encoder for t in p))
    layers = [obs2.new_empty(n, w) for w in widths[1:]]
    wt = obs2.new_empty(sum(w.numel() for w, _ in encoder) + w_ih.numel() + w_hh.numel())
    acts = obs2.new_empty(t_len, b, 4 * hid)
    cs = obs2.new_empty(t_len, b, hid)
    tcs, hs, hprev = torch.empty_like(cs), torch.empty_like(cs), torch.empty_like(cs)
    out = obs2.new_empty(n, n_out)
    _kernel.net_forward(
        t_len, b, hid, len(encoder), n_out, _threads(b), *widths, obs2.data_ptr(),
        *(w.data_ptr() for w, _ in encoder), *(bb.data_ptr() for _, bb in encoder),
        *(y.data_ptr() for y in layers), w_ih.data_ptr(), w_hh.data_ptr(), bias.data_ptr(),
        w_head.data_ptr(), b_head.data_ptr(), wt.data_ptr(), acts.data_ptr(), keep.data_ptr(),
        h0.data_ptr(), c0.data_ptr(), cs.data_ptr(), tcs.data_ptr(), hs.data_ptr(),
        hprev.data_ptr(), out.data_ptr(),
    )  # fmt: skip
    return NetForward(obs2, layers, keep, c0, acts, cs, tcs, hs, hprev, out, torch.empty_like(out))


def net_backward(
    fw: NetForward,
    encoder: list[tuple[torch.Tensor, torch.Tensor]],
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    w_head: torch.Tensor,
    grads: list[torch.Tensor],
) -> None:
    """Backpropagate ``fw.grad_out`` through :func:`net_forward` (same weights) and write the
    gradient of every weight into ``grads`` (overwritten): each encoder layer's weight, then
    each one's bias, then W_ih, W_hh, the LSTM bias, the heads' weight and bias; each
    contiguous, float32, of its weight's shape."""
    t_len, b, four_h = fw.acts.shape
    hid, n_out, n = four_h // 4, w_head.shape[0], t_len * b
    widths = _widths(fw.obs.shape[1], encoder)
    if len(grads) != 2 * len(encoder) + 5 or not all(g.is_contiguous() for g in grads):
        raise ValueError("net_backward takes one contiguous gradient tensor per weight")
    grad_out = fw.grad_out.contiguous()
    _check(w_ih, w_hh, w_head, *(w for w, _ in encoder), *grads)
    grad_hs = fw.hs.new_empty(n, hid)
    grad_z = torch.empty_like(fw.acts)
    dz = [fw.obs.new_empty(n, w) for w in widths[1:]]
    dh0, dc0 = fw.c0.new_empty(b, hid), fw.c0.new_empty(b, hid)
    _kernel.net_backward(
        t_len, b, hid, len(encoder), n_out, _threads(b), *widths, fw.obs.data_ptr(),
        *(w.data_ptr() for w, _ in encoder), *(y.data_ptr() for y in fw.layers),
        *(d.data_ptr() for d in dz), w_ih.data_ptr(), w_hh.data_ptr(), w_head.data_ptr(),
        fw.acts.data_ptr(), fw.keep.data_ptr(), fw.c0.data_ptr(), fw.cs.data_ptr(),
        fw.tcs.data_ptr(), fw.hs.data_ptr(), fw.hprev.data_ptr(), grad_out.data_ptr(),
        grad_hs.data_ptr(), grad_z.data_ptr(), dh0.data_ptr(), dc0.data_ptr(),
        *(g.data_ptr() for g in grads),
    )  # fmt: skip


def act_weights(
    encoder: list[tuple[torch.Tensor, torch.Tensor]], w_ih: torch.Tensor, w_hh: torch.Tensor
) -> torch.Tensor:
    """The weights :func:`net_act` reads, laid out for its register tiles: each encoder
    weight transposed, then ``[W_ih W_hh]^T`` (F + H, 4H), flat. Made once per rollout."""
    parts = [w.T.reshape(-1) for w, _ in encoder]
    parts.append(torch.cat((w_ih, w_hh), 1).T.reshape(-1))
    return torch.cat(parts)


def net_act(
    obs: torch.Tensor,
    keep: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    encoder_biases: list[torch.Tensor],
    weights: torch.Tensor,
    bias: torch.Tensor,
    w_head: torch.Tensor,
    b_head: torch.Tensor,
    noise: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """One rollout step of the whole actor-critic in one kernel call: encoder, input projection
    and cell (as :func:`step`), heads, and, given ``noise``, a categorical sample.

    Args:
        obs: (B, obs_dim). keep: (B,) 0 where the state is reset first. h, c: (B, H).
        encoder_biases: each encoder layer's bias; weights: :func:`act_weights`.
        bias: the LSTM's (4H,). w_head (n_out, H), b_head (n_out,): logits then value.
        noise: None, or (B, n_out - 1) Exp(1) draws: the action is
            ``argmax(log_softmax(logits) - log(noise))`` (Gumbel-max, as
            ``distributions.sample``).

    Returns:
        h, c (B, H) after the step; out (B, n_out); actions (B,) int64 and their
        log-probabilities (B,), or None and None without ``noise``.
    """
    b, obs_dim = obs.shape
    hid, n_out = h.shape[1], w_head.shape[0]
    widths = [obs_dim] + [bb.shape[0] for bb in encoder_biases]
    if max(widths) > MAX_FEATURES or hid > MAX_HIDDEN:
        raise ValueError(
            f"the CPU LSTM step takes at most {MAX_FEATURES} features and {MAX_HIDDEN} units"
        )
    obs, keep, h, c = obs.contiguous(), keep.contiguous(), h.contiguous(), c.contiguous()
    _check(obs, keep, h, c, weights, bias, w_head, b_head, *encoder_biases)
    layers = [obs.new_empty(b, w) for w in widths[1:]]
    h_out, c_out, out = torch.empty_like(h), torch.empty_like(c), obs.new_empty(b, n_out)
    actions = logprob = None
    if noise is not None:
        noise = noise.contiguous()
        _check(noise)
        actions = torch.empty(b, dtype=torch.int64)
        logprob = obs.new_empty(b)
    _kernel.net_act(
        b, hid, len(encoder_biases), n_out, _threads(b), *widths, obs.data_ptr(),
        *(bb.data_ptr() for bb in encoder_biases), *(y.data_ptr() for y in layers),
        weights.data_ptr(), bias.data_ptr(), w_head.data_ptr(), b_head.data_ptr(),
        keep.data_ptr(), h.data_ptr(), c.data_ptr(), h_out.data_ptr(), c_out.data_ptr(),
        out.data_ptr(), 0 if noise is None else noise.data_ptr(),
        0 if actions is None else actions.data_ptr(), 0 if logprob is None else logprob.data_ptr(),
    )  # fmt: skip
    return h_out, c_out, out, actions, logprob
