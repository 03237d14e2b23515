"""Every script in benchmarks/ keeps its command line: ``--help`` runs and exits 0."""

from __future__ import annotations

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
