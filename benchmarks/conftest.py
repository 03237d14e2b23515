"""pytest-benchmark suite over the registry (``pytest benchmarks --benchmark-only``).

Kept out of the normal test run (pyproject's testpaths is ``tests``); tests/bench runs every
case once instead, so a broken case still fails CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def restore_torch_threads() -> Iterator[None]:
    """Trainer cases set torch's thread count for the process; later cases must not inherit it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
