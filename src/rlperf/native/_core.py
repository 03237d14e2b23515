"""What every kernel's bindings share: the switch that keeps the kernels unimported
(``RLPERF_NO_KERNELS``), the loader that tells "not built" from a real import error, the
checks that turn a tensor or array into a pointer (:func:`_ptr`, :func:`_np_ptr`) or refuse
it (:class:`KernelArgumentError`), the bound pointers compared on every call
(:class:`_Bound`, :class:`StorageMoved`) and the span log the timed kernels write while a
torch.profiler trace records (:class:`SpanLog`). No kernel is loaded here.
"""

from __future__ import annotations

import importlib
import os
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
