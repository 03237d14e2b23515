"""The search space of ``rlperf tune``: which settings a trial draws, and how a draw becomes
config overrides (``{"ppo": {"learning_rate": ...}}``, a preset file's sections).

The parameters and ranges follow the RL Zoo's PPO sampler (``rl_zoo3/hyperparams_opt.py``:
gamma, GAE lambda and the gradient steps as categorical lists, the learning rate on a log scale),
with rlperf's names. Every space also holds the starting preset's own values (a categorical gains
the value, a range widens to it), so that the first trial can be the preset itself and the search
is measured against it at the same budget and seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlperf.config import Config, field_index


@dataclass(frozen=True)
class Param:
    """One searched setting: config field ``name``, drawn from ``choices`` or from the range
    ``low``..``high`` (on a log scale with ``log``)."""

    name: str
    choices: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0
    log: bool = False


# The widths of the MLP as text ("256x128x64"): Optuna's categorical choices are scalars.
SPACE: tuple[Param, ...] = (
    Param("learning_rate", low=1e-5, high=1e-2, log=True),
    Param("ent_coef", low=0.0, high=0.01),
    Param("num_envs", choices=(8, 16, 32, 64, 128)),
    Param("num_steps", choices=(16, 32, 64, 128, 256, 512)),
    Param("num_minibatches", choices=(1, 2, 4, 8, 16, 32)),
    Param("update_epochs", choices=(1, 2, 4, 5, 8, 10)),
    Param("gamma", choices=(0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)),
    Param("gae_lambda", choices=(0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0)),
    Param("init_log_std", low=-4.0, high=1.0),
    Param("lr_kl_target", choices=(0.0, 0.004, 0.008, 0.016)),  # 0: the anneal
    Param(
        "hidden_sizes",
        choices=("64x64", "128x128", "256x256", "128x64x32", "256x128x64", "512x256x128"),
    ),
)


def widths_text(sizes: tuple[int, ...]) -> str:
    """``(256, 128, 64)`` -> ``"256x128x64"``."""
    return "x".join(str(s) for s in sizes)


def start_values(cfg: Config) -> dict[str, Any]:
    """The values of the searched settings in ``cfg`` (the starting preset's)."""
    index = field_index()
    values = {}
    for param in SPACE:
        section, _ = index[param.name]
        value = getattr(getattr(cfg, section), param.name)
        values[param.name] = widths_text(value) if param.name == "hidden_sizes" else value
    return values


def distributions(start: dict[str, Any]) -> dict[str, Any]:
    """Optuna distributions of :data:`SPACE`, each widened to hold ``start``'s value."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    found: dict[str, Any] = {}
    for param in SPACE:
        value = start[param.name]
        if param.choices:
            choices = param.choices if value in param.choices else (*param.choices, value)
            found[param.name] = CategoricalDistribution(choices)
        else:
            low, high = min(param.low, value), max(param.high, value)
            found[param.name] = FloatDistribution(low, high, log=param.log)
    return found


def overrides(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A trial's ``params`` as config overrides by section (a preset file's sections)."""
    index = field_index()
    by_section: dict[str, dict[str, Any]] = {}
    for name, value in params.items():
        if name == "hidden_sizes":
            value = tuple(int(w) for w in str(value).split("x"))
        by_section.setdefault(index[name][0], {})[name] = value
    return by_section


def describe(params: dict[str, Any]) -> str:
    """``learning_rate 3.2e-04, num_envs 64, ...`` for a trial's line."""
    return ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in params.items()
    )
