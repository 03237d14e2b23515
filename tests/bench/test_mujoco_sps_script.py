"""benchmarks/mujoco_sps.py and atari_sps.py adapt CleanRL's own scripts to gymnasium 1.x with
the fewest edits, and refuse a version of a script those edits were not written for."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = ["mujoco_sps.py", "atari_sps.py"]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), BENCHMARKS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_edit_is_applied_and_nothing_else_changes(name: str) -> None:
    bench = load(name)
    original = "\n".join(f"line {i}\n{old}" for i, (old, _) in enumerate(bench.CLEANRL_EDITS))
    adapted = bench.adapted_cleanrl(original)
    for i, (old, new) in enumerate(bench.CLEANRL_EDITS):
        assert new in adapted and f"line {i}" in adapted
        assert old not in adapted or old in new


@pytest.mark.parametrize("name", SCRIPTS)
def test_another_version_of_the_script_is_refused_in_one_line(name: str) -> None:
    bench = load(name)
    with pytest.raises(bench.ScriptError, match="the CleanRL script lacks") as e:
        bench.adapted_cleanrl("import numpy as np\n")
    assert "\n" not in str(e.value)
