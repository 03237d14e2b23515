"""rlperf: a PPO training stack built to be measured."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlperf.timing import get_profiler, profile, profile_function

if TYPE_CHECKING:
    from rlperf.run.export import LoadedPolicy

__version__ = "0.1.0"

__all__ = ["__version__", "get_profiler", "load_policy", "profile", "profile_function"]


def load_policy(run_dir: str | Path) -> LoadedPolicy:
    """A trained run's policy as a torch module, its observation normalisation inside:
    ``rlperf.load_policy("runs/cp1").act(obs, deterministic=True)`` gives the actions
    ``rlperf eval --deterministic`` takes (``rlperf/run/export.py``; docs/evaluate.md)."""
    from rlperf.run.export import load_policy as load  # the envs and policies: on first use

    return load(run_dir)
