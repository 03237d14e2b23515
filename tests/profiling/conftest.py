"""Hand-made reports for analyzer, schema and compare tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlperf.profiling.report import SCHEMA


def _entry(name: str, total_s: float, calls: int, wall_s: float, cpu=None, gpu=None) -> dict:
    parent = name.rsplit("/", 1)[0] if "/" in name else None
    mean_ms = total_s * 1e3 / calls
    return {
        "name": name, "parent": parent, "calls": calls, "total_s": total_s,
        "mean_ms": mean_ms, "min_ms": mean_ms / 2, "max_ms": mean_ms * 2,
        "pct": 100.0 * total_s / wall_s, "cpu_peak_mb": cpu, "gpu_peak_mb": gpu,
    }  # fmt: skip


def make_report(
    sections: list[tuple], wall_s: float = 10.0, steps: int = 100_000, sps: float | None = None
) -> dict[str, Any]:
    """A schema-valid report; ``sections``: (name, total_s, calls[, cpu_mb[, gpu_mb]])."""
    entries = [_entry(s[0], s[1], s[2], wall_s, *s[3:]) for s in sections]
    top = sum(e["total_s"] for e in entries if e["parent"] is None)
    return {
        "schema": SCHEMA,
        "interrupted": False,
        "run": {
            "env": "cartpole",
            "device": "cpu",
            "threads": 2,
            "config": {
                "env": {"num_envs": 64},
                "policy": {"hidden_sizes": [64, 64]},
                "ppo": {"num_minibatches": 4, "update_epochs": 4},
            },
        },  # fmt: skip
        "totals": {
            "steps": steps,
            "iterations": 10,
            "wall_s": wall_s,
            "sps": sps if sps is not None else steps / wall_s,
            "sps_windowed": 0.0,
            "untimed_s": max(wall_s - top, 0.0),
        },  # fmt: skip
        "memory": None,
        "sections": entries,
        "artifacts": {"torch_traces": [], "cprofile": None},
    }


@pytest.fixture
def report_factory() -> Callable[..., dict[str, Any]]:
    return make_report
