"""Fixtures of the bench tests: a tiny git repository the gate's workers can time cheaply
(``tiny_repo.py`` says what it holds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_repo import TinyRepo, make_tiny_repo


@pytest.fixture
def tiny_repo(tmp_path: Path) -> TinyRepo:
    """An empty tiny repository (``commit`` adds history); its working tree is the last commit."""
    return make_tiny_repo(tmp_path)
