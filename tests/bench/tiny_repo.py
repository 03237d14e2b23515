"""Tiny git repositories for the gate and bisect tests: cheap work the workers can time.

A tiny tree holds ``src/rlperf`` with a copy of ``rlperf.timing`` (the process-wide profiler,
which the worker reads the sections from) and ``rlperf/work.py``: busy-waits inside trainer-like
sections (``rollout``, ``update/loss``, ``update/backward``). Commits change the length of one
wait (a planted slowdown of one phase) or make ``step`` raise.

Each wait spins until the process has used a given number of microseconds of *CPU time*, the
clock the gate decides on: the work a call does may take more or less CPU under load (caches,
a neighbour on the other core), but the CPU time a call uses is the planted amount to within a
loop iteration, whatever the load. So a planted 5% is 5% in every sample, and an unchanged
commit is unchanged in every sample: the gate tests check the gate's pipeline and decision, and
cannot flake on the machine's noise (a loop of fixed work planted 5% once measured 1.104, and
once left the gate undecided at 30 rounds on a loaded box). The statistics under noise are
tested on synthetic samples in test_stats.py. The registry the workers load
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

WORK = '''"""Cheap work for the gate's tests: busy-waits on the CPU clock in trainer sections."""

import time

from rlperf.timing.sections import get_profiler

ROLLOUT, LOSS, BACKWARD = 1000, 1000, {backward}  # microseconds of CPU time
CRASH = {crash}
VERSION = {version}


def spin(microseconds):
    """Use ``microseconds`` of this process's CPU time (whatever the load), then return."""
    deadline = time.process_time() + microseconds * 1e-6
    while time.process_time() < deadline:
        pass


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

BACKWARD = 1000  # microseconds of CPU, as each of the other two sections: 3 ms a step
# Fast rounds: 20 ms samples, 2 pairs, a 50% threshold against the planted 3x phase slowdown.
# Up to 20 rounds: an unchanged commit is called ok after the first 6, a 3x slowdown flagged
# after 7, every round slower.
FAST = Settings(threshold=0.5, pairs_per_round=2, sample_s=0.02, max_rounds=20, warmup_s=0.02)
# For a 5% slowdown (the backward wait 15% longer): 20 ms samples, 3 pairs, up to 30 rounds, a
# 2% threshold, as the gate's defaults.
FIVE_PERCENT = Settings(threshold=0.02, pairs_per_round=3, sample_s=0.02, max_rounds=30,
                        warmup_s=0.02)  # fmt: skip
SLOWER_BY_5_PERCENT = BACKWARD + int(0.05 * 3 * BACKWARD)  # the step is 3 waits of BACKWARD


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
        """Commit ``work.py`` with this backward wait in CPU microseconds (and crash flag);
        returns the sha."""
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
