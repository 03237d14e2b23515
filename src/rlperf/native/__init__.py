"""The one door to rlperf's C kernels: the LSTM (``policies/_lstm_cpu.c``), the categorical
PPO loss (``ppo/_loss_cpu.c``), the MLP's whole update (``ppo/_mlp_update_cpu.c``), the
MLP's fused rollout (``ppo/_rollout_cpu.c``) and the normalisation step
(``envs/_normalize_cpu.c``). No other module imports them or passes a pointer.

One module per kernel, each loading its own extension and binding nothing else: ``lstm``,
``loss``, ``update``, ``rollout``, ``normalize``; ``cartpole`` holds what both fused CartPole
rollouts (the MLP's and the LSTM's) take, and ``_core`` what every binding shares (the loader,
the pointer checks, the bound pointers, the span log). Every public name is re-exported here:
callers write ``from rlperf import native`` and ``native.CompiledNet``.

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

from rlperf.native._core import (
    EXTENSIONS,
    NO_KERNELS_ENV,
    KernelArgumentError,
    SpanLog,
    StorageMoved,
    kernels_disabled,
)
from rlperf.native.cartpole import (
    ROLLOUT_PHASES,
    CartPoleArrays,
    FinishedEpisodes,
    RolloutTensors,
)
from rlperf.native.loss import (
    MAX_ACTIONS,
    loss_available,
    ppo_loss_and_head_grads,
)
from rlperf.native.lstm import (
    LSTM_LIMITS,
    CompiledNet,
    CompiledStep,
    LSTMLimits,
    NetForward,
    NetWeights,
    cat_weights_t,
    lstm_available,
    lstm_cartpole_rollout,
    recurrence_backward,
    recurrence_forward,
)
from rlperf.native.normalize import (
    NormalizeKernel,
    normalize_available,
)
from rlperf.native.rollout import (
    ROLLOUT_LIMITS,
    BoundSteps,
    FusedMLP,
    cartpole_rollout,
    gae_advantages,
    rollout_available,
)
from rlperf.native.update import (
    MAX_GAUSSIAN,
    MLP_MAX_LAYERS,
    MLP_MAX_WIDTH,
    MLP_UPDATE_PHASES,
    MLPUpdateKernel,
    mlp_param_count,
    mlp_update_fits,
    update_available,
)

__all__ = [
    "BoundSteps",
    "CartPoleArrays",
    "CompiledNet",
    "CompiledStep",
    "EXTENSIONS",
    "FinishedEpisodes",
    "FusedMLP",
    "KernelArgumentError",
    "LSTMLimits",
    "LSTM_LIMITS",
    "MAX_ACTIONS",
    "MAX_GAUSSIAN",
    "MLPUpdateKernel",
    "MLP_MAX_LAYERS",
    "MLP_MAX_WIDTH",
    "MLP_UPDATE_PHASES",
    "NO_KERNELS_ENV",
    "NetForward",
    "NetWeights",
    "NormalizeKernel",
    "ROLLOUT_LIMITS",
    "ROLLOUT_PHASES",
    "RolloutTensors",
    "SpanLog",
    "StorageMoved",
    "cartpole_rollout",
    "cat_weights_t",
    "gae_advantages",
    "kernels_disabled",
    "loss_available",
    "lstm_available",
    "lstm_cartpole_rollout",
    "mlp_param_count",
    "mlp_update_fits",
    "normalize_available",
    "ppo_loss_and_head_grads",
    "recurrence_backward",
    "recurrence_forward",
    "rollout_available",
    "status",
    "update_available",
]


def status() -> dict[str, bool]:
    """Each kernel of :data:`EXTENSIONS` and whether it is in use."""
    return {
        "lstm": lstm_available(),
        "loss": loss_available(),
        "update": update_available(),
        "rollout": rollout_available(),
    }
