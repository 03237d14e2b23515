"""benchmarks/mujoco_sps.py adapts CleanRL's own script to gymnasium 1.x with the fewest edits,
and refuses a version of it those edits were not written for."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "mujoco_sps.py"


def load():
    spec = importlib.util.spec_from_file_location("mujoco_sps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_edit_is_applied_and_nothing_else_changes() -> None:
    bench = load()
    original = "\n".join(f"line {i}\n{old}" for i, (old, _) in enumerate(bench.CLEANRL_EDITS))
    adapted = bench.adapted_cleanrl(original)
    for i, (old, new) in enumerate(bench.CLEANRL_EDITS):
        assert new in adapted and f"line {i}" in adapted
        assert old not in adapted or old in new


def test_another_version_of_the_script_is_refused_in_one_line() -> None:
    bench = load()
    with pytest.raises(bench.ScriptError, match="the CleanRL script lacks") as e:
        bench.adapted_cleanrl("import gymnasium as gym\n")
    assert "\n" not in str(e.value)
