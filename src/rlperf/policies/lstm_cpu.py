"""The LSTM recurrence compiled for the CPU (``_lstm_cpu.c``): a whole ``(T, B)`` sequence, forward
or backward, in one call.

Why: at the sizes recurrent PPO runs on CPUs (16-64 rows of 64 units per step) the torch
recurrence of ``policies/lstm.py`` (:class:`~rlperf.policies.lstm.LSTMUnroll`) spends its time
dispatching ~12 small ops per step, and with two threads every small matmul also pays a
fork/join (16 x 64 @ 64 x 256: 7.8 us on one thread, 14.8 us on two, here). The kernel runs all
T steps in C with the state in cache; rows are independent through the recurrence, so with two
threads each takes half of them for the whole sequence. What stays in torch is what is large:
the input projection and ``dW_hh`` are one matmul over all ``T * B`` rows each.

The analytic update and the rollout go one step further (:class:`CompiledNet`,
:class:`CompiledStep`): the whole actor-critic of ``policies/lstm.py``, tanh MLP
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
MAX_LAYERS = 8  # encoder layers the whole-network calls take


def network_fits(widths: list[int], hidden: int) -> bool:
    """Whether the whole-network calls take an encoder of these widths (input first) and an
    LSTM of ``hidden`` units."""
    return len(widths) - 1 <= MAX_LAYERS and max(widths) <= MAX_FEATURES and hidden <= MAX_HIDDEN


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


def cat_weights_t(w_ih: torch.Tensor, w_hh: torch.Tensor) -> torch.Tensor:
    """``[W_ih W_hh]^T``, (F + H, 4H) contiguous: the layout the fused rollout step reads
    (:func:`step`, :class:`CompiledStep`), so ``z = b + [x, keep h] @ it`` is one matmul."""
    return torch.cat((w_ih, w_hh), 1).T.contiguous()


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
        w_cat_t: (F + H, 4H), :func:`cat_weights_t`; bias: (4H,).

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
    """What :meth:`CompiledNet.forward` computed and :meth:`CompiledNet.backward` reads: views
    of the net's buffers (valid until its next forward) and the inputs it read. ``N = T * B``
    rows, time-major.

    Attributes:
        obs: (N, obs_dim) the encoder's input. layers: each encoder layer's tanh output
            (N, width). keep: (T, B). c0: (B, H).
        acts: (T, B, 4H) gate activations; cs, tcs, hs, hprev: (T, B, H), as :func:`forward`.
        out: (N, n_out) the heads' outputs (logits, then the value).
        grad_out: (N, n_out) d loss / d out, for the loss to write before the backward.
    """

    net: CompiledNet
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


def _ptrs(tensors: list[torch.Tensor]) -> tuple[int, ...]:
    return tuple(t.data_ptr() for t in tensors)


@dataclass(frozen=True)
class NetWeights:
    """The weights of the whole actor-critic as the kernel reads them (each contiguous
    float32 on the CPU; the kernel keeps raw pointers, so the storage must outlive its users).

    Attributes:
        encoder: (weight (out, in), bias (out,)) of each ``Linear + Tanh`` layer, may be empty.
        w_ih (4H, F), w_hh (4H, H), bias (4H,): the LSTM. w_head (n_out, H), b_head (n_out,):
            the actor's logits, then the value.
    """

    encoder: list[tuple[torch.Tensor, torch.Tensor]]
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    bias: torch.Tensor
    w_head: torch.Tensor
    b_head: torch.Tensor

    def tensors(self) -> list[torch.Tensor]:
        return [self.w_ih, self.w_hh, self.bias, self.w_head, self.b_head,
                *(t for pair in self.encoder for t in pair)]  # fmt: skip

    def widths(self, obs_dim: int) -> list[int]:
        """Checked: the input width, then each encoder layer's; refuses what the kernel
        cannot take (dtype, device, layout, sizes past its scratch)."""
        _check(*self.tensors())
        widths = [obs_dim] + [w.shape[0] for w, _ in self.encoder]
        if not network_fits(widths, self.w_hh.shape[1]):
            raise ValueError(
                f"the CPU LSTM network takes at most {MAX_LAYERS} encoder layers of at most "
                f"{MAX_FEATURES} units and an LSTM of at most {MAX_HIDDEN}, got widths {widths} "
                f"and {self.w_hh.shape[1]}"
            )
        return widths


class CompiledNet:
    """The whole recurrent actor-critic of ``policies/lstm.py`` for ``(T, B)`` sequences, one
    kernel call forward and one backward: the tanh MLP encoder, the input projection, the
    recurrence and the linear heads.

    Bound to its weights (and gradients) and one shape: every buffer is allocated once and
    every pointer argument computed once, because building the ~40 arguments and a dozen
    tensors per call cost ~80 us here, a fifth of the forward's work at CartPole's sizes.
    The weights' values may change between calls (an optimizer step in place), their storage
    may not.

    Args:
        t_len, batch, obs_dim: the shape of the observations, (T, B, obs_dim).
        weights: the network's :class:`NetWeights`.
        grads: None, or where :meth:`backward` writes the gradients: each encoder layer's
            weight, then each one's bias, then W_ih, W_hh, the LSTM bias, the heads' weight and
            bias; each contiguous float32 of its weight's shape.
    """

    def __init__(
        self,
        t_len: int,
        batch: int,
        obs_dim: int,
        weights: NetWeights,
        grads: list[torch.Tensor] | None = None,
    ) -> None:
        self.widths = weights.widths(obs_dim)
        encoder, w_ih, w_hh = weights.encoder, weights.w_ih, weights.w_hh
        bias, w_head, b_head = weights.bias, weights.w_head, weights.b_head
        hid, n_out, n = w_hh.shape[1], w_head.shape[0], t_len * batch
        self.shape = (t_len, batch, obs_dim)
        self._dims = (t_len, batch, hid, len(encoder), n_out)
        self._weights = weights  # kept alive: the kernel reads them through raw pointers
        new = w_hh.new_empty
        self.layers = [new(n, w) for w in self.widths[1:]]
        wt = new(sum(w.numel() for w, _ in encoder) + w_ih.numel() + w_hh.numel())
        self.acts = new(t_len, batch, 4 * hid)
        self.cs, self.tcs, self.hs, self.hprev = (new(t_len, batch, hid) for _ in range(4))
        self.out, self.grad_out = new(n, n_out), new(n, n_out)
        grad_hs, grad_z = new(n, hid), torch.empty_like(self.acts)
        dz = [torch.empty_like(y) for y in self.layers]
        dh0, dc0 = new(batch, hid), new(batch, hid)
        self._scratch = [wt, grad_hs, grad_z, *dz, dh0, dc0]
        enc_w, enc_b = [w for w, _ in encoder], [b for _, b in encoder]
        # net_forward(dims, threads, widths, obs, *enc_w, *enc_b, *layers, w_ih, w_hh, bias,
        #             w_head, b_head, wt, acts, keep, h0, c0, cs, tcs, hs, hprev, out)
        self._fwd_mid = _ptrs([*enc_w, *enc_b, *self.layers, w_ih, w_hh, bias, w_head, b_head])
        self._fwd_mid += _ptrs([wt, self.acts])
        self._fwd_end = _ptrs([self.cs, self.tcs, self.hs, self.hprev, self.out])
        # net_backward(dims, threads, widths, obs, *enc_w, *layers, *dz, w_ih, w_hh, w_head,
        #              acts, keep, c0, cs, tcs, hs, hprev, grad_out, grad_hs, grad_z, dh0, dc0,
        #              *grads, max_grad_norm)
        self._bwd_mid = _ptrs([*enc_w, *self.layers, *dz, w_ih, w_hh, w_head, self.acts])
        self._bwd_end = _ptrs([self.cs, self.tcs, self.hs, self.hprev, self.grad_out, grad_hs])
        self._bwd_end += _ptrs([grad_z, dh0, dc0])
        self._grads = self._grad_ptrs(grads) if grads is not None else None

    def intact(self) -> bool:
        """Whether the pointers computed at construction still point at this net's buffers
        (a deep copy copies the buffers but not what the pointers say)."""
        return self._fwd_end[0] == self.cs.data_ptr()

    @property
    def has_grads(self) -> bool:
        """Whether gradients were bound at construction."""
        return self._grads is not None

    def _grad_ptrs(self, grads: list[torch.Tensor]) -> tuple[int, ...]:
        if len(grads) != 2 * self._dims[3] + 5:
            raise ValueError("the CPU LSTM network takes one gradient tensor per weight")
        _check(*grads)
        self._grad_tensors = grads  # kept alive
        return _ptrs(grads)

    def forward(
        self, obs: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor
    ) -> NetForward:
        """Args: obs (T, B, obs_dim); keep (T, B) as :func:`forward`; h0, c0 (B, H).
        Returns the :class:`NetForward` whose ``out`` holds the heads' outputs."""
        t_len, b, obs_dim = self.shape
        obs = obs.reshape(t_len * b, obs_dim).contiguous()
        keep, h0, c0 = keep.contiguous(), h0.contiguous(), c0.contiguous()
        _check(obs, keep, h0, c0)
        if keep.shape != (t_len, b) or h0.shape != c0.shape or h0.shape[0] != b:
            raise ValueError(f"inputs do not match the network's shape {self.shape}")
        _kernel.net_forward(
            *self._dims, _threads(b), *self.widths, obs.data_ptr(), *self._fwd_mid,
            keep.data_ptr(), h0.data_ptr(), c0.data_ptr(), *self._fwd_end,
        )  # fmt: skip
        return NetForward(
            self, obs, self.layers, keep, c0, self.acts, self.cs, self.tcs, self.hs,
            self.hprev, self.out, self.grad_out,
        )  # fmt: skip

    def backward(
        self,
        fw: NetForward,
        max_grad_norm: float = 0.0,
        grads: list[torch.Tensor] | None = None,
    ) -> None:
        """Backpropagate ``fw.grad_out`` through the forward ``fw`` (this net's latest) and
        write every weight's gradient (overwritten) into the bound gradients, or ``grads``;
        with ``max_grad_norm > 0`` then clip them all together to that norm
        (``clip_grad_norm_``'s arithmetic, the norm summed in double)."""
        grad_ptrs = self._grads if grads is None else self._grad_ptrs(grads)
        if grad_ptrs is None:
            raise ValueError("no gradients to write: bind them or pass grads")
        b = self.shape[1]
        _kernel.net_backward(
            *self._dims, _threads(b), *self.widths, fw.obs.data_ptr(), *self._bwd_mid,
            fw.keep.data_ptr(), fw.c0.data_ptr(), *self._bwd_end, *grad_ptrs,
            float(max_grad_norm),
        )  # fmt: skip


def net_forward(
    obs: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: NetWeights
) -> NetForward:
    """:meth:`CompiledNet.forward` of a net made for this one call (arguments as there)."""
    t_len, b, obs_dim = obs.shape
    return CompiledNet(t_len, b, obs_dim, weights).forward(obs, keep, h0, c0)


def net_backward(fw: NetForward, grads: list[torch.Tensor], max_grad_norm: float = 0.0) -> None:
    """:meth:`CompiledNet.backward` of the net that computed ``fw``, into ``grads``."""
    fw.net.backward(fw, max_grad_norm, grads)


class CompiledStep:
    """One rollout step of the whole actor-critic in one kernel call: encoder, input
    projection and cell (as :func:`step`), heads, and given Exp(1) draws a categorical sample.

    Bound to a snapshot of the weights (laid out for the register tiles once: each encoder
    weight transposed, then ``[W_ih W_hh]^T``) and one batch size, with every pointer argument
    computed once: make one per rollout (the policy's ``acting()``), while the weights stay as
    they are.
    """

    def __init__(self, batch: int, obs_dim: int, weights: NetWeights) -> None:
        widths = weights.widths(obs_dim)
        encoder, w_ih, w_hh = weights.encoder, weights.w_ih, weights.w_hh
        bias, w_head, b_head = weights.bias, weights.w_head, weights.b_head
        hid, n_out = w_hh.shape[1], w_head.shape[0]
        parts = [w.T.reshape(-1) for w, _ in encoder] + [cat_weights_t(w_ih, w_hh).view(-1)]
        self.weights = torch.cat(parts)  # a copy: later weight updates do not show here
        self.biases = [b.clone() for _, b in encoder] + [bias.clone(), b_head.clone()]
        self.w_head = w_head.clone()
        self.layers = [w_hh.new_empty(batch, w) for w in widths[1:]]  # scratch
        self.batch, self.obs_dim, self.hid, self.n_out = batch, obs_dim, hid, n_out
        # net_act(T = 1, B, H, L, n_out, threads, widths, obs, *enc_b, *layers, wt, bias,
        #         w_head, b_head, keep, h, c, h_out, c_out, out, noise, actions, logprob)
        self._dims, self._widths = (1, batch, hid, len(encoder), n_out), widths
        enc_b, (lstm_b, head_b) = self.biases[:-2], self.biases[-2:]
        self._mid = _ptrs([*enc_b, *self.layers, self.weights, lstm_b, self.w_head, head_b])

    def __call__(
        self,
        obs: torch.Tensor,
        keep: torch.Tensor,
        h: torch.Tensor,
        c: torch.Tensor,
        noise: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Args: obs (B, obs_dim); keep (B,) 0 where the state is reset first; h, c (B, H);
        noise None, or (B, n_out - 1) Exp(1) draws: the action is
        ``argmax(log_softmax(logits) - log(noise))`` (Gumbel-max, as ``distributions.sample``).

        Returns: h, c (B, H) after the step; out (B, n_out) (logits, then the value); actions
        (B,) int64 and their log-probabilities (B,), or None and None without ``noise``.
        """
        obs, keep, h, c = obs.contiguous(), keep.contiguous(), h.contiguous(), c.contiguous()
        _check(obs, keep, h, c)
        b = self.batch
        if obs.shape != (b, self.obs_dim) or h.shape != (b, self.hid) or c.shape != h.shape:
            raise ValueError(f"a step of {b} environments x {self.obs_dim} features expected")
        h_out, c_out, out = torch.empty_like(h), torch.empty_like(c), obs.new_empty(b, self.n_out)
        actions = logprob = None
        noise_ptr = actions_ptr = logprob_ptr = 0
        if noise is not None:
            noise = noise.contiguous()
            _check(noise)
            actions, logprob = torch.empty(b, dtype=torch.int64), obs.new_empty(b)
            noise_ptr, actions_ptr = noise.data_ptr(), actions.data_ptr()
            logprob_ptr = logprob.data_ptr()
        _kernel.net_act(
            *self._dims, _threads(b), *self._widths, obs.data_ptr(), *self._mid,
            keep.data_ptr(), h.data_ptr(), c.data_ptr(), h_out.data_ptr(), c_out.data_ptr(),
            out.data_ptr(), noise_ptr, actions_ptr, logprob_ptr,
        )  # fmt: skip
        return h_out, c_out, out, actions, logprob
