"""The one door to rlperf's C kernels: the LSTM (``policies/_lstm_cpu.c``), the categorical
PPO loss (``ppo/_loss_cpu.c``), the MLP's whole update (``ppo/_mlp_update_cpu.c``) and the
MLP's fused rollout (``ppo/_rollout_cpu.c``). No other
module imports them or passes a pointer.

The kernels read raw float32 memory through pointers. Everything that could make a pointer
wrong is refused here with :class:`KernelArgumentError` (a ``ValueError``) before any C runs:
a tensor of the wrong dtype, on another device, not contiguous where the kernel assumes it, of
the wrong shape, or, for the bindings that keep their arguments between calls
(:class:`CompiledNet`), a tensor whose storage moved since it was bound (``.data`` reassigned,
``flatten_parameters``, ``.to()``, a deep copy of the owner): every call compares each pointer
it passes with the one bound, so a stale pointer is an exception, never a write into freed
memory. The kernels' size limits are the C ``#define`` s, exported by the modules and read
here (:data:`LSTM_LIMITS`, :data:`MAX_ACTIONS`), so they are written once.

Why a checked boundary in Python rather than torch operators (``TORCH_LIBRARY`` with
``TORCH_CHECK`` in C++): the extensions stay plain C against CPython's API, so they build in a
few seconds with gcc or clang, need no libtorch headers, and do not have to be rebuilt for
each torch release (a C++ operator links torch's C++ ABI); and the calls stay cheap where the
time is per call: a whole LSTM minibatch forward is ~100 us at CartPole's sizes, a dispatcher
round trip with ~40 boxed tensor arguments would be a visible part of that, while the checks
here are one ``data_ptr`` comparison per bound tensor (~0.1 us each).

The kernels are optional (see ``setup.py``). :func:`lstm_available`, :func:`loss_available`,
:func:`update_available` and :func:`rollout_available` say whether each was built and imported;
callers fall back to torch where not. One switch, ``RLPERF_NO_KERNELS=1`` in the environment,
gives the configuration without them: ``setup.py`` builds none, and here they stay unimported
even where they are built (to run, and test, an install without a compiler on a machine that
has one).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

NO_KERNELS_ENV = "RLPERF_NO_KERNELS"
# The compiled modules, by what they compute; setup.py builds them.
EXTENSIONS = {
    "lstm": "rlperf.policies._lstm_cpu",
    "loss": "rlperf.ppo._loss_cpu",
    "update": "rlperf.ppo._mlp_update_cpu",
    "rollout": "rlperf.ppo._rollout_cpu",
    "normalize": "rlperf.envs._normalize_cpu",
}


def kernels_disabled() -> bool:
    """Whether ``RLPERF_NO_KERNELS`` is set (to anything but empty or ``0``)."""
    return os.environ.get(NO_KERNELS_ENV, "") not in ("", "0")


def _load(name: str) -> ModuleType | None:
    if kernels_disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError as e:
        # Not built (no C compiler) or not loadable here: the torch implementations serve. Any
        # other import error (a cycle through a package this loads) is a bug, not "not built".
        if e.name != name:
            raise
        return None


_lstm = _load(EXTENSIONS["lstm"])
_loss = _load(EXTENSIONS["loss"])
_update = _load(EXTENSIONS["update"])
_rollout = _load(EXTENSIONS["rollout"])
_normalize = _load(EXTENSIONS["normalize"])


def lstm_available() -> bool:
    """Whether the LSTM kernel was built and imported (and not disabled)."""
    return _lstm is not None


def loss_available() -> bool:
    """Whether the PPO loss kernel was built and imported (and not disabled)."""
    return _loss is not None


def update_available() -> bool:
    """Whether the MLP update kernel was built and imported (and not disabled)."""
    return _update is not None


def rollout_available() -> bool:
    """Whether the fused MLP rollout kernel was built and imported (and not disabled)."""
    return _rollout is not None


def normalize_available() -> bool:
    """Whether the normalisation kernel was built and imported (and not disabled)."""
    return _normalize is not None


def status() -> dict[str, bool]:
    """Each kernel of :data:`EXTENSIONS` and whether it is in use."""
    return {
        "lstm": lstm_available(),
        "loss": loss_available(),
        "update": update_available(),
        "rollout": rollout_available(),
    }


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
MAX_ACTIONS = _loss.MAX_ACTIONS if _loss is not None else 0
# A Box action's dimensions the MLP update's Gaussian head takes (_loss_rows.h).
MAX_GAUSSIAN = _update.MAX_GAUSSIAN if _update is not None else 0
# The MLP update kernel's widest layer (the observation's included) and most hidden layers.
MLP_MAX_WIDTH = _update.MAX_WIDTH if _update is not None else 0
MLP_MAX_LAYERS = _update.MAX_LAYERS if _update is not None else 0


class KernelArgumentError(ValueError):
    """A tensor the kernel cannot read (dtype, device, layout, shape, or moved storage)."""


class StorageMoved(KernelArgumentError):
    """A tensor bound to a :class:`CompiledNet` no longer has the storage it was bound to:
    rebind (make a new net); the old pointers are never passed."""


_F32 = torch.float32


def _ptr(
    name: str,
    t: torch.Tensor,
    shape: tuple[int, ...],
    dtype: torch.dtype = _F32,
    contiguous: bool = True,
) -> int:
    """``t.data_ptr()`` once ``t`` is checked: ``dtype`` on the CPU, ``shape``, contiguous if
    asked; else :class:`KernelArgumentError` naming ``name`` and what is wrong."""
    if (
        t.dtype != dtype
        or not t.is_cpu
        or t.shape != shape
        or (contiguous and not t.is_contiguous())
    ):
        raise KernelArgumentError(
            f"{name}: the kernel takes a {'contiguous ' if contiguous else ''}{dtype} CPU tensor "
            f"of shape {tuple(shape)}, got {t.dtype} on {t.device}, shape {tuple(t.shape)}"
            f"{'' if t.is_contiguous() else ', not contiguous'}"
        )
    return t.data_ptr()


class _Bound:
    """Tensors whose pointers a kernel call passes every time: checked once when bound, and
    before each call compared with the bound pointers (:meth:`ptrs`).

    Tensors from outside (weights, gradients) are each compared on every call: their storage
    can move under the binding (``.data`` reassigned, ``flatten_parameters``, ``.to()``). The
    binding's ``own`` buffers, allocated by it and moved only all together (a deep copy of the
    binding or its owner), are checked through one of them: ~0.1 us per tensor saved where a
    rollout step is ~25 us.
    """

    def __init__(
        self, what: str, named: list[tuple[str, torch.Tensor]], own: frozenset[str] = frozenset()
    ) -> None:
        self._what = what
        self._alive = [t for _, t in named]  # the binding owns what it passes: never freed early
        self._ptrs = tuple(t.data_ptr() for t in self._alive)
        watched = [(n, t) for n, t in named if n not in own]
        watched += [(n, t) for n, t in named if n in own][:1]
        self._names = [n for n, _ in watched]
        self._tensors = [t for _, t in watched]
        self._watched = tuple(t.data_ptr() for t in self._tensors)

    def ptrs(self) -> tuple[int, ...]:
        """The pointers, once every tensor is found where it was bound; else
        :class:`StorageMoved`."""
        now = tuple(map(torch.Tensor.data_ptr, self._tensors))
        if now != self._watched:
            moved = [n for n, a, b in zip(self._names, now, self._watched, strict=True) if a != b]
            raise StorageMoved(
                f"{self._what}: the storage of {', '.join(moved)} moved since it was bound"
            )
        return self._ptrs


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


# -- the MLP's fused rollout ---------------------------------------------------------------
ROLLOUT_LIMITS = (
    (_rollout.MAX_LAYERS, _rollout.MAX_WIDTH, _rollout.MAX_ACTIONS)
    if _rollout is not None
    else (0, 0, 0)
)  # hidden layers, width of the observation and of each hidden layer, actions
ROLLOUT_PHASES = 4  # policy, env step, buffer store, truncation bootstrap (_rollout_cpu.c)


def _require_rollout() -> ModuleType:
    if _rollout is None:
        raise RuntimeError("the fused rollout kernel is not built (or RLPERF_NO_KERNELS is set)")
    return _rollout


def _np_ptr(name: str, a: np.ndarray, shape: tuple[int, ...], dtype: type) -> int:
    """The address of a numpy array once it is checked: ``dtype``, ``shape``, C-contiguous and
    writeable; else :class:`KernelArgumentError`."""
    if (
        not isinstance(a, np.ndarray)
        or a.dtype != np.dtype(dtype)
        or a.shape != shape
        or not a.flags.c_contiguous
        or not a.flags.writeable
    ):
        got = f"{a.dtype}, shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise KernelArgumentError(
            f"{name}: the kernel takes a writeable C-contiguous {np.dtype(dtype)} array of "
            f"shape {shape}, got {got}"
        )
    return int(a.__array_interface__["data"][0])


# -- observation/reward normalisation (envs/_normalize_cpu.c) -----------------------------
class SpanLog:
    """Where a kernel logs each timed phase's start and end while a torch.profiler trace
    records (``_span_log.h``): (phase, start ns, end ns) on CLOCK_MONOTONIC, Python's
    ``perf_counter_ns`` clock. Room for ``capacity`` spans; a call that logs more counts them
    all and :meth:`take` grows the log to fit that many next time."""

    def __init__(self, capacity: int) -> None:
        self._buffer = self._sized(capacity)

    @staticmethod
    def _sized(capacity: int) -> np.ndarray:
        buffer = np.zeros(2 + 3 * max(capacity, 1), np.int64)
        buffer[1] = max(capacity, 1)
        return buffer

    @property
    def ptr(self) -> int:
        """The log's address, as the kernels take it (valid until the next :meth:`take`)."""
        return int(self._buffer.__array_interface__["data"][0])

    def take(self, phases: tuple[str, ...]) -> dict[str, list[tuple[int, int]]]:
        """The spans logged since the last take, (start ns, end ns) by the name of their phase
        (``phases`` in the kernel's order); the log restarts empty."""
        logged, capacity = (int(x) for x in self._buffer[:2])
        kept = min(logged, capacity)
        out: dict[str, list[tuple[int, int]]] = {}
        for phase, start, end in self._buffer[2 : 2 + 3 * kept].reshape(kept, 3).tolist():
            out.setdefault(phases[phase], []).append((start, end))
        if logged > capacity:
            self._buffer = self._sized(logged)  # the next call's spans all fit
        self._buffer[0] = 0
        return out


def _span_ptr(spans: SpanLog | None) -> int:
    return 0 if spans is None else spans.ptr


class NormalizeKernel:
    """:class:`~rlperf.envs.normalize.Normalizer`'s step in one kernel call
    (``envs/_normalize_cpu.c``): its numpy arithmetic on the statistics and running returns
    it is bound to, checked once here and updated in place by every :meth:`step`.

    Args:
        n, features: envs a step and features of one (flattened) observation.
        obs_stats, return_stats: (mean, var, count) float64 arrays as
            :class:`~rlperf.envs.normalize.RunningStats` holds them (per env: (N, F), (N, F),
            (N, 1), the returns' (N,) each; shared: (F,), (F,), (1,), the returns' 0-d), or
            None for the part not normalised.
        returns: (N,) float64, the running discounted returns.
    """

    def __init__(
        self,
        n: int,
        features: int,
        per_env: bool,
        obs_stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        return_stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        returns: np.ndarray,
    ) -> None:
        if _normalize is None:
            raise RuntimeError(
                "the normalisation kernel is not built (or RLPERF_NO_KERNELS is set)"
            )
        if n < 1 or not 1 <= features <= _normalize.MAX_DIM:
            raise KernelArgumentError(
                f"the normalisation kernel takes n >= 1 and 1 to {_normalize.MAX_DIM} "
                f"features, got {n} and {features}"
            )
        lead = (n,) if per_env else ()
        stat_ptrs: list[int] = []
        for name, stats, feature in (("obs", obs_stats, (features,)),
                                     ("return", return_stats, ())):  # fmt: skip
            if stats is None:
                stat_ptrs += [0, 0, 0]
                continue
            shape, count_shape = lead + feature, lead + (1,) * len(feature)
            for part, array, want in zip(("mean", "var", "count"), stats,
                                         (shape, shape, count_shape), strict=True):  # fmt: skip
                stat_ptrs.append(_np_ptr(f"{name} {part}", array, want, np.float64))
        # The step's inputs are copied into these (any real dtype cast to float64, ~1 us
        # each), so their addresses are taken once: reading an array's address costs ~3 us.
        self._obs = np.zeros((n, features))
        self._rewards = np.zeros(n)
        self._flags = np.zeros((2, n), dtype=np.bool_)
        self._obs_out = np.zeros((n, features), dtype=np.float32)
        self._rewards_out = np.zeros(n)
        self._alive = (obs_stats, return_stats, returns)  # the addresses stay valid
        self._head = (n, features, int(per_env))
        self._ptrs = (
            _np_ptr("obs", self._obs, (n, features), np.float64),
            _np_ptr("rewards", self._rewards, (n,), np.float64),
            self._flags.ctypes.data, self._flags.ctypes.data + n, *stat_ptrs,
            _np_ptr("returns", returns, (n,), np.float64),
            self._obs_out.ctypes.data, self._rewards_out.ctypes.data,
        )  # fmt: skip

    def step(
        self,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
        training: bool,
        gamma: float,
        eps: float,
        clip_obs: float,
        clip_reward: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One step: ``obs`` (N, ...) with N x F values, ``rewards``, ``terminations`` and
        ``truncations`` (N,). Returns the observations normalised and clipped, (N, F) float32,
        and the rewards (N,) float64: this object's buffers, overwritten by the next step."""
        n, features, _ = self._head
        np.copyto(self._obs, obs.reshape(n, features))
        np.copyto(self._rewards, rewards)
        np.copyto(self._flags[0], terminations)
        np.copyto(self._flags[1], truncations)
        _normalize.step(  # type: ignore[union-attr]  # __init__ checked it is loaded
            *self._head, int(training), gamma, eps, clip_obs, clip_reward, *self._ptrs
        )
        return self._obs_out, self._rewards_out


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


@dataclass
class CartPoleArrays:
    """A CartPole env's state as the fused rollout reads and writes it (``envs/cartpole.py``):
    ``state`` (4, N) float64, ``episode_steps`` (N,) int64, ``episode_returns`` and
    ``episode_start_s`` (N,) float64 (perf_counter seconds), ``physics`` (9,) float64 (the
    constants in the kernel's order), ``observe_full`` (False: x and theta only) and the time
    limit ``max_episode_steps``."""

    state: np.ndarray
    episode_steps: np.ndarray
    episode_returns: np.ndarray
    episode_start_s: np.ndarray
    physics: np.ndarray
    observe_full: bool
    max_episode_steps: int


@dataclass
class RolloutTensors:
    """The rollout buffer's storage the fused rollout writes (``ppo/rollout.py``): ``obs``
    (T + 1, N, D) float32 slots, ``actions`` (T, N) int64, ``logprobs``, ``values``,
    ``bootstrap_values`` (T, N) float32 tensors; ``rewards``, ``terminations``,
    ``truncations`` (T, N) float32 host arrays."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    bootstrap_values: torch.Tensor
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


@dataclass
class FinishedEpisodes:
    """What a fused rollout reports (arrays sized for the worst case; the first ``count``
    entries are valid, in the order the numpy env would have reported them): each finished
    episode's ``env`` row, ``returns`` (float32), ``lengths``, ``seconds``; ``draws`` the reset
    pool entries it used and ``phase_ns`` (4, 4) per phase calls, total, min, max ns."""

    env: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    seconds: np.ndarray
    counts: np.ndarray
    phase_ns: np.ndarray

    @staticmethod
    def sized(capacity: int) -> FinishedEpisodes:
        return FinishedEpisodes(
            np.zeros(capacity, np.int64), np.zeros(capacity, np.float32),
            np.zeros(capacity, np.int64), np.zeros(capacity, np.float64),
            np.zeros(2, np.int64), np.zeros((ROLLOUT_PHASES, 4), np.int64),
        )  # fmt: skip

    @property
    def count(self) -> int:
        return int(self.counts[1])

    @property
    def draws(self) -> int:
        return int(self.counts[0])


def _rollout_args(
    d: int,
    a: int,
    buf: RolloutTensors,
    env: CartPoleArrays,
    noise: torch.Tensor,
    pool: np.ndarray,
    out: FinishedEpisodes,
    timing: bool,
    spans: SpanLog | None,
) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
    """The rollout's arguments as both fused rollouts take them (``envs/_cartpole_cpu.h``'s
    ``parse_rollout``), every array checked, for a policy of ``d`` features and ``a`` actions;
    and the scratch arrays they point into, which the caller keeps until the call returns.
    ``spans`` (with ``timing``) logs each phase's start and end."""
    t_len, n = buf.actions.shape
    want_d = 4 if env.observe_full else 2
    if d != want_d:
        raise KernelArgumentError(f"obs: CartPole observes {want_d} features, the policy takes {d}")
    if len(out.env) < t_len * n or pool.shape[0] < 4 * t_len * n:
        raise KernelArgumentError(
            f"the fused rollout needs room for {t_len * n} episodes and {4 * t_len * n} reset "
            f"draws, got {len(out.env)} and {pool.shape[0]}"
        )
    steps = (t_len, n)
    scratch = (np.empty((2, n), np.uint8), np.empty((n, d), np.float32),
               np.empty((n, d), np.float32))  # fmt: skip
    args = (
        t_len, n, d, a, int(env.max_episode_steps), int(env.observe_full), int(timing),
        pool.shape[0],
        _ptr("obs", buf.obs, (t_len + 1, n, d)), _ptr("noise", noise, (t_len, n, a)),
        _ptr("actions", buf.actions, steps, torch.int64), _ptr("logprobs", buf.logprobs, steps),
        _ptr("values", buf.values, steps), _ptr("bootstrap_values", buf.bootstrap_values, steps),
        _np_ptr("rewards", buf.rewards, steps, np.float32),
        _np_ptr("terminations", buf.terminations, steps, np.float32),
        _np_ptr("truncations", buf.truncations, steps, np.float32),
        _np_ptr("state", env.state, (4, n), np.float64),
        _np_ptr("episode_steps", env.episode_steps, (n,), np.int64),
        _np_ptr("episode_returns", env.episode_returns, (n,), np.float64),
        _np_ptr("episode_start_s", env.episode_start_s, (n,), np.float64),
        _np_ptr("pool", pool, (pool.shape[0],), np.float64),
        _np_ptr("env", out.env, out.env.shape, np.int64),
        _np_ptr("returns", out.returns, out.env.shape, np.float32),
        _np_ptr("lengths", out.lengths, out.env.shape, np.int64),
        _np_ptr("seconds", out.seconds, out.env.shape, np.float64),
        _np_ptr("counts", out.counts, (2,), np.int64),
        _np_ptr("phase_ns", out.phase_ns, (ROLLOUT_PHASES, 4), np.int64), _span_ptr(spans),
        _np_ptr("physics", env.physics, (9,), np.float64),
        *(int(x.__array_interface__["data"][0]) for x in scratch),
    )  # fmt: skip
    return args, scratch


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
