"""PPO: rollout storage and samplers, GAE, the loss, the update, the trainer.

The names below load on first use: the C kernels live in this package
(``rlperf.ppo._loss_cpu``, ...), and ``rlperf/native/`` imports them while it is itself
being imported, so importing this package must not import the trainer (which needs native).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlperf.ppo.loss import LossCoefs, ppo_loss
    from rlperf.ppo.rollout import RolloutBuffer
    from rlperf.ppo.trainer import NonFiniteLossError, Trainer

_WHERE = {
    "LossCoefs": "rlperf.ppo.loss",
    "NonFiniteLossError": "rlperf.ppo.trainer",
    "RolloutBuffer": "rlperf.ppo.rollout",
    "Trainer": "rlperf.ppo.trainer",
    "ppo_loss": "rlperf.ppo.loss",
}

__all__ = ["LossCoefs", "NonFiniteLossError", "RolloutBuffer", "Trainer", "ppo_loss"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
