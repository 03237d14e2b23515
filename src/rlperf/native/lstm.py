"""The LSTM's bindings (``policies/_lstm_cpu.c``): the recurrence alone, the whole
actor-critic's forward and backward (:class:`CompiledNet`), its rollout step
(:class:`CompiledStep`) and its fused CartPole rollout (:func:`lstm_cartpole_rollout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from rlperf.native._core import EXTENSIONS, KernelArgumentError, SpanLog, _Bound, _load, _ptr
from rlperf.native.cartpole import CartPoleArrays, FinishedEpisodes, RolloutTensors, _rollout_args

_lstm = _load(EXTENSIONS["lstm"])


def lstm_available() -> bool:
    """Whether the LSTM kernel was built and imported (and not disabled)."""
    return _lstm is not None


@dataclass(frozen=True)
class LSTMLimits:
    """What the LSTM kernel's per-thread scratch is sized for (all 0 without the kernel).

    Attributes:
        max_hidden: LSTM units. max_features: width of the encoder's input and of each of its
            layers. max_layers: encoder layers of the whole-network calls.
    """

    max_hidden: int
    max_features: int
    max_layers: int

    def network_fits(self, widths: list[int], hidden: int) -> bool:
        """Whether the whole-network calls take an encoder of these widths (input first) and
        an LSTM of ``hidden`` units."""
        return (
            len(widths) - 1 <= self.max_layers
            and max(widths) <= self.max_features
            and hidden <= self.max_hidden
        )


LSTM_LIMITS = (
    LSTMLimits(_lstm.MAX_HIDDEN, _lstm.MAX_FEATURES, _lstm.MAX_LAYERS)
    if _lstm is not None
    else LSTMLimits(0, 0, 0)
)


def _threads(batch: int) -> int:
    # Rows split in tiles of 4; fewer than 8 rows are not worth a second thread.
    return min(torch.get_num_threads(), max(1, batch // 8))


def _require_lstm() -> ModuleType:
    if _lstm is None:
        raise RuntimeError("the CPU LSTM kernel is not built (or RLPERF_NO_KERNELS is set)")
    return _lstm


def _check_hidden(hid: int) -> None:
    if not 1 <= hid <= LSTM_LIMITS.max_hidden:
        raise KernelArgumentError(
            f"the CPU LSTM kernel takes 1 to {LSTM_LIMITS.max_hidden} units, got {hid}"
        )


# -- the LSTM recurrence alone -------------------------------------------------------------
def recurrence_forward(
    xproj: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, w_hh: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The LSTM recurrence over T steps.

    Args:
        xproj: (T, B, 4H) input part of the gates, ``x @ W_ih^T + b``.
        keep: (T, B) 1.0, or 0.0 where the state is zeroed before step t.
        h0, c0: (B, H) initial state. w_hh: (4H, H).

    Returns:
        acts (T, B, 4H): sigmoid(i), sigmoid(f), tanh(g), sigmoid(o); cs, tcs, hs, hprev
        (T, B, H): c_t, tanh(c_t), h_t, and keep_t h_{t-1} (the state step t starts from, what
        ``dW_hh`` needs).
    """
    kernel = _require_lstm()
    t_len, b, four_h = xproj.shape
    hid = four_h // 4
    _check_hidden(hid)
    xproj, keep, h0, c0 = (t.contiguous() for t in (xproj, keep, h0, c0))
    w_t = w_hh.t().contiguous()
    acts = torch.empty_like(xproj)
    cs = xproj.new_empty(t_len, b, hid)
    tcs, hs, hprev = torch.empty_like(cs), torch.empty_like(cs), torch.empty_like(cs)
    kernel.forward(
        t_len, b, hid, _threads(b), _ptr("xproj", xproj, (t_len, b, 4 * hid)),
        acts.data_ptr(), _ptr("keep", keep, (t_len, b)), _ptr("h0", h0, (b, hid)),
        _ptr("c0", c0, (b, hid)), _ptr("w_hh", w_t, (hid, 4 * hid)), cs.data_ptr(),
        tcs.data_ptr(), hs.data_ptr(), hprev.data_ptr(),
    )  # fmt: skip
    return acts, cs, tcs, hs, hprev


def recurrence_backward(
    grad_hs: torch.Tensor,
    acts: torch.Tensor,
    keep: torch.Tensor,
    c0: torch.Tensor,
    w_hh: torch.Tensor,
    cs: torch.Tensor,
    tcs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backpropagation through the T steps of :func:`recurrence_forward` (its arguments and
    outputs).

    Args:
        grad_hs: (T, B, H) gradient of the loss with respect to every h_t.

    Returns:
        grad_z (T, B, 4H): gradient with respect to the gate pre-activations (and so to
        ``xproj``); dh0, dc0 (B, H): with respect to the initial state.
    """
    kernel = _require_lstm()
    t_len, b, four_h = acts.shape
    hid = four_h // 4
    _check_hidden(hid)
    grad_hs, w_hh = grad_hs.contiguous(), w_hh.contiguous()
    grad_z = torch.empty_like(acts)
    dh0, dc0 = c0.new_empty(b, hid), c0.new_empty(b, hid)
    seq = (t_len, b, hid)
    kernel.backward(
        t_len, b, hid, _threads(b), _ptr("acts", acts, (t_len, b, four_h)),
        _ptr("keep", keep, (t_len, b)), _ptr("c0", c0, (b, hid)),
        _ptr("w_hh", w_hh, (four_h, hid)), _ptr("cs", cs, seq), _ptr("tcs", tcs, seq),
        _ptr("grad_hs", grad_hs, seq), grad_z.data_ptr(), dh0.data_ptr(), dc0.data_ptr(),
    )  # fmt: skip
    return grad_z, dh0, dc0


# -- the whole LSTM actor-critic -------------------------------------------------------------
def cat_weights_t(w_ih: torch.Tensor, w_hh: torch.Tensor) -> torch.Tensor:
    """``[W_ih W_hh]^T``, (F + H, 4H) contiguous: the layout the fused rollout step reads, so
    ``z = b + [x, keep h] @ it`` is one matmul."""
    return torch.cat((w_ih, w_hh), 1).T.contiguous()


@dataclass(frozen=True)
class NetWeights:
    """The weights of the whole actor-critic as the kernel reads them (each contiguous
    float32 on the CPU).

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

    def named(self) -> list[tuple[str, torch.Tensor]]:
        """Every weight with its name: the encoder's weights, its biases, then the LSTM's and
        the heads' (the order of :class:`CompiledNet`'s gradients)."""
        enc = self.encoder
        return [
            *((f"encoder.{i}.weight", w) for i, (w, _) in enumerate(enc)),
            *((f"encoder.{i}.bias", b) for i, (_, b) in enumerate(enc)),
            ("w_ih", self.w_ih), ("w_hh", self.w_hh), ("bias", self.bias),
            ("w_head", self.w_head), ("b_head", self.b_head),
        ]  # fmt: skip

    def checked_widths(self, obs_dim: int) -> list[int]:
        """The input width, then each encoder layer's, once every weight is checked: float32,
        CPU, contiguous, shapes that chain, sizes within :data:`LSTM_LIMITS`."""
        _require_lstm()
        widths = [obs_dim] + [w.shape[0] for w, _ in self.encoder]
        hid, n_out = self.w_hh.shape[-1], self.w_head.shape[0]
        if not LSTM_LIMITS.network_fits(widths, hid) or min(widths) < 1 or hid < 1:
            lim = LSTM_LIMITS
            raise KernelArgumentError(
                f"the CPU LSTM network takes at most {lim.max_layers} encoder layers of 1 to "
                f"{lim.max_features} units and an LSTM of 1 to {lim.max_hidden}, got widths "
                f"{widths} and {hid}"
            )
        for name, t in self.named():
            _ptr(name, t, self._shape(name, widths, hid, n_out))
        return widths

    @staticmethod
    def _shape(name: str, widths: list[int], hid: int, n_out: int) -> tuple[int, ...]:
        if name.startswith("encoder."):
            i = int(name.split(".")[1])
            return (widths[i + 1], widths[i]) if name.endswith("weight") else (widths[i + 1],)
        return {
            "w_ih": (4 * hid, widths[-1]), "w_hh": (4 * hid, hid), "bias": (4 * hid,),
            "w_head": (n_out, hid), "b_head": (n_out,),
        }[name]  # fmt: skip


@dataclass
class NetForward:
    """What :meth:`CompiledNet.forward` computed and :meth:`CompiledNet.backward` reads: views
    of the net's buffers (valid until its next forward) and the inputs it read. ``N = T * B``
    rows, time-major.

    Attributes:
        obs: (N, obs_dim) the encoder's input. layers: each encoder layer's tanh output
            (N, width). keep: (T, B). c0: (B, H).
        acts: (T, B, 4H) gate activations; cs, tcs, hs, hprev: (T, B, H), as
            :func:`recurrence_forward`.
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


class CompiledNet:
    """The whole recurrent actor-critic of ``policies/lstm.py`` for ``(T, B)`` sequences, one
    kernel call forward and one backward: the tanh MLP encoder, the input projection, the
    recurrence and the linear heads.

    Bound to its weights (and gradients) and one shape: every buffer is allocated once and
    every tensor checked once, because building the ~40 arguments and a dozen tensors per call
    cost ~80 us here, a fifth of the forward's work at CartPole's sizes. The weights' values may
    change between calls (an optimizer step in place); if their storage moves (or the net's own
    buffers', in a deep copy) the next call raises :class:`StorageMoved`: make a new net.

    Args:
        t_len, batch, obs_dim: the shape of the observations, (T, B, obs_dim).
        weights: the network's :class:`NetWeights`.
        grads: None, or where :meth:`backward` writes the gradients: one tensor per weight in
            :meth:`NetWeights.named`'s order, each contiguous float32 of its weight's shape.
    """

    def __init__(
        self,
        t_len: int,
        batch: int,
        obs_dim: int,
        weights: NetWeights,
        grads: list[torch.Tensor] | None = None,
    ) -> None:
        self.widths = weights.checked_widths(obs_dim)
        self.weights = weights
        encoder, w_ih, w_hh = weights.encoder, weights.w_ih, weights.w_hh
        hid, n_out, n = w_hh.shape[1], weights.w_head.shape[0], t_len * batch
        self.shape = (t_len, batch, obs_dim)
        self.hid = hid
        self._dims = (t_len, batch, hid, len(encoder), n_out)
        new = w_hh.new_empty
        self.layers = [new(n, w) for w in self.widths[1:]]
        wt = new(sum(w.numel() for w, _ in encoder) + w_ih.numel() + w_hh.numel())
        self.acts = new(t_len, batch, 4 * hid)
        self.cs, self.tcs, self.hs, self.hprev = (new(t_len, batch, hid) for _ in range(4))
        self.out, self.grad_out = new(n, n_out), new(n, n_out)
        grad_hs, grad_z = new(n, hid), torch.empty_like(self.acts)
        dz = [torch.empty_like(y) for y in self.layers]
        dh0, dc0 = new(batch, hid), new(batch, hid)
        # The net's own buffers (everything but the weights and the gradients).
        OWN = frozenset(  # noqa: N806
            ["wt", "acts", "cs", "tcs", "hs", "hprev", "out", "grad_out", "grad_hs", "grad_z",
             "dh0", "dc0", *(f"layers.{i}" for i in range(len(encoder))),
             *(f"dz.{i}" for i in range(len(encoder)))]
        )  # fmt: skip
        w = dict(weights.named())
        enc_w = [(f"encoder.{i}.weight", w[f"encoder.{i}.weight"]) for i in range(len(encoder))]
        enc_b = [(f"encoder.{i}.bias", w[f"encoder.{i}.bias"]) for i in range(len(encoder))]
        layers = [(f"layers.{i}", y) for i, y in enumerate(self.layers)]
        own = [("cs", self.cs), ("tcs", self.tcs), ("hs", self.hs), ("hprev", self.hprev)]
        # net_forward(dims, threads, widths, obs, *enc_w, *enc_b, *layers, w_ih, w_hh, bias,
        #             w_head, b_head, wt, acts, keep, h0, c0, cs, tcs, hs, hprev, out)
        self._fwd_mid = _Bound("CompiledNet", [
            *enc_w, *enc_b, *layers, *(
                (k, w[k]) for k in ("w_ih", "w_hh", "bias", "w_head", "b_head")
            ), ("wt", wt), ("acts", self.acts),
        ], OWN)  # fmt: skip
        self._fwd_end = _Bound("CompiledNet", [*own, ("out", self.out)], OWN)
        # net_backward(dims, threads, widths, obs, *enc_w, *layers, *dz, w_ih, w_hh, w_head,
        #              acts, keep, c0, cs, tcs, hs, hprev, grad_out, grad_hs, grad_z, dh0, dc0,
        #              *grads, max_grad_norm)
        self._bwd_mid = _Bound("CompiledNet", [
            *enc_w, *layers, *((f"dz.{i}", d) for i, d in enumerate(dz)),
            *((k, w[k]) for k in ("w_ih", "w_hh", "w_head")), ("acts", self.acts),
        ], OWN)  # fmt: skip
        self._bwd_end = _Bound("CompiledNet", [
            *own, ("grad_out", self.grad_out), ("grad_hs", grad_hs), ("grad_z", grad_z),
            ("dh0", dh0), ("dc0", dc0),
        ], OWN)  # fmt: skip
        self._grads = self._bind_grads(grads) if grads is not None else None

    @property
    def has_grads(self) -> bool:
        """Whether gradients were bound at construction."""
        return self._grads is not None

    def _bind_grads(self, grads: list[torch.Tensor]) -> _Bound:
        named = self.weights.named()
        if len(grads) != len(named):
            raise KernelArgumentError(
                f"the CPU LSTM network takes one gradient per weight ({len(named)}), "
                f"got {len(grads)}"
            )
        for (name, w), g in zip(named, grads, strict=True):
            _ptr(f"grad of {name}", g, tuple(w.shape))
        return _Bound("CompiledNet gradients", [(f"grad of {n}", g) for (n, _), g in
                                                zip(named, grads, strict=True)])  # fmt: skip

    def forward(
        self, obs: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor
    ) -> NetForward:
        """Args: obs (T, B, obs_dim); keep (T, B) as :func:`recurrence_forward`; h0, c0 (B, H).
        Returns the :class:`NetForward` whose ``out`` holds the heads' outputs."""
        t_len, b, obs_dim = self.shape
        hid = self.hid
        if obs.shape != self.shape:
            raise KernelArgumentError(
                f"obs: the network was made for shape {self.shape}, got {tuple(obs.shape)}"
            )
        obs = obs.reshape(t_len * b, obs_dim).contiguous()
        keep, h0, c0 = keep.contiguous(), h0.contiguous(), c0.contiguous()
        _require_lstm().net_forward(
            *self._dims, _threads(b), *self.widths, _ptr("obs", obs, (t_len * b, obs_dim)),
            *self._fwd_mid.ptrs(), _ptr("keep", keep, (t_len, b)), _ptr("h0", h0, (b, hid)),
            _ptr("c0", c0, (b, hid)), *self._fwd_end.ptrs(),
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
        if fw.net is not self:
            raise KernelArgumentError("backward of a forward made by another CompiledNet")
        bound = self._grads if grads is None else self._bind_grads(grads)
        if bound is None:
            raise KernelArgumentError("no gradients to write: bind them or pass grads")
        t_len, b, obs_dim = self.shape
        _require_lstm().net_backward(
            *self._dims, _threads(b), *self.widths, _ptr("obs", fw.obs, (t_len * b, obs_dim)),
            *self._bwd_mid.ptrs(), _ptr("keep", fw.keep, (t_len, b)),
            _ptr("c0", fw.c0, (b, self.hid)), *self._bwd_end.ptrs(), *bound.ptrs(),
            float(max_grad_norm),
        )  # fmt: skip


class CompiledStep:
    """One rollout step of the whole actor-critic in one kernel call: encoder, input
    projection and cell, heads, and given Exp(1) draws a categorical sample.

    Bound to a snapshot of the weights (laid out for the register tiles once: each encoder
    weight transposed, then ``[W_ih W_hh]^T``; copies it owns, so nothing outside can move
    them) and one batch size: make one per rollout (the policy's ``acting()``), while the
    weights stay as they are.
    """

    def __init__(self, batch: int, obs_dim: int, weights: NetWeights) -> None:
        widths = weights.checked_widths(obs_dim)
        encoder, w_ih, w_hh = weights.encoder, weights.w_ih, weights.w_hh
        hid, n_out = w_hh.shape[1], weights.w_head.shape[0]
        parts = [w.T.reshape(-1) for w, _ in encoder] + [cat_weights_t(w_ih, w_hh).view(-1)]
        wt = torch.cat(parts)  # a copy: later weight updates do not show here
        biases = [b.clone() for _, b in encoder]
        layers = [w_hh.new_empty(batch, w) for w in widths[1:]]  # scratch
        self.batch, self.obs_dim, self.hid, self.n_out = batch, obs_dim, hid, n_out
        # net_act(T = 1, B, H, L, n_out, threads, widths, obs, *enc_b, *layers, wt, bias,
        #         w_head, b_head, keep, h, c, h_out, c_out, out, noise, actions, logprob)
        self._dims, self._widths = (1, batch, hid, len(encoder), n_out), widths
        named = [
            *((f"encoder.{i}.bias", b) for i, b in enumerate(biases)),
            *((f"layers.{i}", y) for i, y in enumerate(layers)), ("wt", wt),
            ("bias", weights.bias.clone()), ("w_head", weights.w_head.clone()),
            ("b_head", weights.b_head.clone()),
        ]  # fmt: skip
        self._mid = _Bound("CompiledStep", named, frozenset(n for n, _ in named))  # all copies

    def rollout_args(self) -> tuple[int, ...]:
        """The sizes and weights as the LSTM's fused CartPole rollout takes them (its
        ``cartpole_rollout``), as ``net_act`` does on one thread: (1, B, H, L, n_out, 1), the
        widths, then the encoder biases, the batch's encoder scratch, ``wt``, bias and heads."""
        return (*self._dims, 1, *self._widths, *self._mid.ptrs())

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
        b, hid = self.batch, self.hid
        obs, keep, h, c = obs.contiguous(), keep.contiguous(), h.contiguous(), c.contiguous()
        args = (
            _ptr("obs", obs, (b, self.obs_dim)), *self._mid.ptrs(), _ptr("keep", keep, (b,)),
            _ptr("h", h, (b, hid)), _ptr("c", c, (b, hid)),
        )  # fmt: skip
        h_out, c_out, out = torch.empty_like(h), torch.empty_like(c), obs.new_empty(b, self.n_out)
        actions = logprob = None
        noise_ptr = actions_ptr = logprob_ptr = 0
        if noise is not None:
            noise = noise.contiguous()
            noise_ptr = _ptr("noise", noise, (b, self.n_out - 1))
            actions, logprob = torch.empty(b, dtype=torch.int64), obs.new_empty(b)
            actions_ptr, logprob_ptr = actions.data_ptr(), logprob.data_ptr()
        _require_lstm().net_act(
            *self._dims, _threads(b), *self._widths, *args, h_out.data_ptr(), c_out.data_ptr(),
            out.data_ptr(), noise_ptr, actions_ptr, logprob_ptr,
        )  # fmt: skip
        return h_out, c_out, out, actions, logprob


def lstm_cartpole_rollout(
    step: CompiledStep,
    state: tuple[torch.Tensor, torch.Tensor],
    done: torch.Tensor,
    states: tuple[torch.Tensor, torch.Tensor],
    horizon: int,
    buf: RolloutTensors,
    env: CartPoleArrays,
    noise: torch.Tensor,
    pool: np.ndarray,
    out: FinishedEpisodes,
    timing: bool,
    spans: SpanLog | None = None,
) -> None:
    """A whole rollout of T steps of N CartPoles acted on by the LSTM actor-critic whose
    weights ``step`` holds (its batch N), in one kernel call: :func:`cartpole_rollout`'s loop
    and env, with per step the state saved into ``states`` where a segment of ``horizon``
    steps starts, ``step``'s arithmetic (the same outputs and states bit for bit), and the
    episode-start flags into ``done``.

    Args:
        state: h, c (N, H) float32, the state entering step 0; they hold the state after the
            last step when the call returns.
        done: (T + 1, N) float32, the buffer's episode-start flags: slot 0 read, 1..T written.
        states: (T / horizon, N, H) float32 each, the buffer's states at segment starts.
    """
    t_len, n = buf.actions.shape
    hid = step.hid
    if step.batch != n or horizon < 1 or t_len % horizon:
        raise KernelArgumentError(
            f"the LSTM's fused rollout needs a step of batch {n} (got {step.batch}) and a "
            f"horizon dividing {t_len} (got {horizon})"
        )
    args, _scratch = _rollout_args(step.obs_dim, step.n_out - 1, buf, env, noise, pool, out,
                                   timing, spans)  # fmt: skip
    segments = (t_len // horizon, n, hid)
    own = 2 * n * hid + n + n * step.n_out + sum(step._widths[1:]) + 2 * hid + step.n_out
    scratch = torch.empty(own)
    ptrs = (
        _ptr("h", state[0], (n, hid)), _ptr("c", state[1], (n, hid)),
        _ptr("done", done, (t_len + 1, n)), _ptr("states_h", states[0], segments),
        _ptr("states_c", states[1], segments), scratch.data_ptr(),
    )  # fmt: skip
    _require_lstm().cartpole_rollout(*args, *step.rollout_args(), *ptrs, horizon)
