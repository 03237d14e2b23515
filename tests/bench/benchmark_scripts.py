"""A script of ``benchmarks/`` loaded as a module, for the tests that call its functions (the
scripts are files to run, not a package to import)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>`` (``"sps.py"``) as a module ``<stem>_script``, registered in
    ``sys.modules`` (a dataclass in it looks its module up there)."""
    spec = importlib.util.spec_from_file_location(f"{Path(name).stem}_script", BENCHMARKS / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
