"""mypy over src/rlperf, with the project's configuration (``[tool.mypy]`` in pyproject.toml).

The annotations are only worth what a checker makes of them: this keeps them true. mypy takes
~45 s cold on a 2-core machine and a few seconds with its ``.mypy_cache`` (in the repository
root, ignored by git); deselect it with ``-m "not typecheck"`` while iterating on other tests.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.typecheck
@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[dev]')",
)
def test_mypy_passes() -> None:
    # The files to check and every option come from pyproject.toml, read from the root.
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
