"""Tiny git repositories for the gate and bisect tests: cheap work the workers can time.

A tiny tree holds ``src/rlperf`` with a copy of ``rlperf.timing`` (the process-wide profiler,
which the worker reads the sections from) and ``rlperf/work.py``: busy loops inside trainer-like
sections (``rollout``, ``update/loss``, ``update/backward``). Commits change the size of one
loop (a planted slowdown of one phase) or make ``step`` raise. The registry the workers load
is a few lines written beside the repository, and nothing is preloaded, so a worker starts in
tens of milliseconds instead of the seconds importing torch takes.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import rlperf.timing
from rlperf.bench.gate import Settings

WORK = '''"""Cheap work for the gate's tests: busy loops in trainer-like sections."""

from rlperf.timing.sections import get_profiler

ROLLOUT, LOSS, BACKWARD = 3000, 3000, {backward}
CRASH = {crash}
VERSION = {version}


def spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def step():
    if CRASH:
        raise RuntimeError("planted crash")
    sec = get_profiler().section
    with sec("rollout"):
        spin(ROLLOUT)
    with sec("update"):
        with sec("loss"):
            spin(LOSS)
        with sec("backward"):
            spin(BACKWARD)
'''

REGISTRY = '''"""The tests' registry: case ``step`` times ``rlperf.work.step`` of the tree."""

from dataclasses import dataclass
from typing import Any, Callable


class CaseSkipped(Exception):
    pass


@dataclass
class Prepared:
    run: Callable[[], Any]
    items_per_call: int
    items_unit: str


@dataclass
class Case:
    name: str

    def setup(self):
        from rlperf import work

        return Prepared(getattr(work, self.name), 1, "steps")


def select(names):
    return [Case(name) for name in names]
'''

BACKWARD = 3000
# Fast rounds: 20 ms samples, 2 pairs, a 50% threshold against the planted 3x phase slowdown.
# Up to 20 rounds: from the 9th the interval drops the most extreme round on each side, so an
# unchanged commit is still called ok when a burst of load hit one of its first rounds; a
# 3x slowdown is flagged after a handful of rounds, every one slower. With 5 ms samples and 12
# rounds an unchanged commit was left undecided in 2-4 of the bisect tests in each of three
# runs on an idle box on 2026-11-23.
FAST = Settings(threshold=0.5, pairs_per_round=2, sample_s=0.02, max_rounds=20, warmup_s=0.02)
# For a 5% slowdown (the backward loop 15% longer): 20 ms samples, 3 pairs, up to 30 rounds, a
# 2% threshold. The round noise of this case is about 1% (sd of a round's log-ratio), which the
# sample-size table in docs/benchmarks.md resolves in 7-8 rounds; the rest is for a loaded box.
FIVE_PERCENT = Settings(threshold=0.02, pairs_per_round=3, sample_s=0.02, max_rounds=30,
                        warmup_s=0.02)  # fmt: skip
SLOWER_BY_5_PERCENT = BACKWARD + int(0.05 * 3 * BACKWARD)  # the step is 3 loops of 3000


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


@dataclass
class TinyRepo:
    """A git repository of a tiny ``rlperf``; ``registry`` lies outside it."""

    root: Path
    registry: Path
    version: int = 0

    def commit(self, message: str, backward: int = BACKWARD, crash: bool = False) -> str:
        """Commit ``work.py`` with this backward loop size (and crash flag); returns the sha."""
        self.version += 1
        work = WORK.format(backward=backward, crash=crash, version=self.version)
        (self.root / "src" / "rlperf" / "work.py").write_text(work)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", message)
        return git(self.root, "rev-parse", "HEAD")


def make_tiny_repo(where: Path) -> TinyRepo:
    """An empty tiny repository under ``where`` (``commit`` adds history)."""
    root = where / "repo"
    package = root / "src" / "rlperf"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A tiny rlperf for the gate tests."""\n')
    timing = Path(rlperf.timing.__file__).parent
    shutil.copytree(timing, package / "timing", ignore=shutil.ignore_patterns("__pycache__"))
    registry = where / "registry.py"
    registry.write_text(REGISTRY)
    git(root, "init", "-q")
    return TinyRepo(root, registry)
