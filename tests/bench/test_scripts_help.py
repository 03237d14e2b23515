"""Every script in benchmarks/ keeps its command line: ``--help`` runs and exits 0."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rlperf

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py")
                 if p.name != "conftest.py" and not p.name.startswith("test_"))  # fmt: skip


def test_the_scripts_are_found() -> None:
    assert {"sps.py", "lstm_sps.py", "gate_experiment.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_help_runs(script: Path) -> None:
    src = str(Path(rlperf.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def starts_rlperf_from_path(script: Path) -> list[int]:
    """Lines of ``script`` that would run whatever ``rlperf`` is on PATH: a command list that
    begins with ``"rlperf"``, or ``shutil.which("rlperf")``."""
    lines = []
    for node in ast.walk(ast.parse(script.read_text())):
        first = None
        if isinstance(node, ast.List) and node.elts:
            first = node.elts[0]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "which":
            first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and first.value == "rlperf":
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_rlperf_is_started_with_the_scripts_interpreter(script: Path) -> None:
    # Outside an activated venv, PATH has no rlperf or another environment's.
    assert not starts_rlperf_from_path(script), "use [sys.executable, '-m', 'rlperf', ...]"


def test_learning_runs_without_rlperf_on_path(tmp_path: Path) -> None:
    src = str(Path(rlperf.__file__).parents[1])
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHONPATH": src}
    argv = ["--seeds", "1", "--total-steps", "1024", "--run-root", str(tmp_path), "--",
            "--num-envs", "4", "--num-steps", "128", "--no-telemetry"]  # fmt: skip
    cmd = [sys.executable, str(BENCHMARKS / "learning.py"), *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert "NOT all seeds solved" in done.stdout, done.stderr[-2000:]
    assert (tmp_path / "seed1" / "summary.json").is_file()
