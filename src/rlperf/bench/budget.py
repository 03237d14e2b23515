"""The time budgets the tools' case sets are planned against, from each case's measured cost.

Each tool has a wall-clock budget on the slowest box it must hold on (CI's 2-core runner, about
:data:`SLOW_BOX` times slower than the box ``registry/costs.py`` was measured on), and plans its
case set against it from the cases' CPU seconds (a loaded machine moves CPU time far less than
wall time):

- ``pytest benchmarks --benchmark-only``: :data:`PYTEST_BUDGET_S`. Every case pays its setup
  and one probe call; the time left is shared out as each case's seconds of rounds
  (:func:`pytest_share_s`), and a case whose fewest rounds alone take more than
  :data:`LARGE_CASE_S` is left out of the default run where its component has a smaller case
  (:func:`large_cases`: ``-m large`` runs them).
- ``rlperf gate``: :data:`GATE_BUDGET_S`, beside two busy processes (:data:`BUSY`). A round
  costs its cases' setup, warm-up and samples on both sides (:func:`gate_round_s`); the rounds
  that fit cap ``--max-rounds`` (:func:`gate_plan`), and a case set that cannot fit the rounds
  a regression needs is refused before any work.

A case missing from the table (a new case) is planned at :data:`UNMEASURED`, which no budget
holds for long: ``tests/bench/test_budget.py`` fails until ``python benchmarks/case_costs.py
--cases NAME --write`` measures it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from rlperf.bench.registry.costs import COSTS, SKIPPED, CaseCost
from rlperf.bench.worker import WARMUP_CALLS  # the untimed calls a worker makes per case and round

# Wall seconds on the slowest box per second measured here (a 2-core AMD EPYC without AVX-512,
# against the costs' box with it: docs/benchmarks.md).
SLOW_BOX = 1.6
# Wall seconds per CPU second of one single-threaded process beside two busy processes on two
# cores (three runnable processes share two cores: each gets two thirds of one).
BUSY = 1.5
# A new, unmeasured case: planned at a cost that fails every budget until it is measured.
UNMEASURED = CaseCost(60.0, 60.0, 60.0, 60.0, 60.0, 60.0)

# -- pytest-benchmark ------------------------------------------------------------------------
PYTEST_BUDGET_S = 180.0  # the whole run, wall seconds on the slowest box
# Python's start, torch's import and the collection of ~120 cases (this box, CPU seconds).
PYTEST_START_S = 6.0
# The margin the plan keeps under the budget (the costs are medians of a few calls).
MARGIN = 0.85
# Fewest rounds of a case: the spread check (rlperf.bench.spread) reads no fewer.
MIN_ROUNDS = 3
# A round is at least this long (CPU s): calls a round are as many as it takes, so the timer's
# resolution and a call's fixed cost do not dominate a microsecond-long call.
MIN_ROUND_S = 0.002
# Most seconds of rounds a case gets, however much budget is left (pytest-benchmark's own
# --benchmark-max-time was 0.5 s here).
MAX_SHARE_S = 0.5
# A case whose MIN_ROUNDS rounds alone take longer than this (CPU s here) is left out of the
# default run where its component has another case.
LARGE_CASE_S = 4.0

# -- rlperf gate -------------------------------------------------------------------------------
GATE_BUDGET_S = 300.0  # one gate run, wall seconds on the slowest box, beside two busy processes
# The later rounds' wall time per round 1's, as the pace plans them (gate.Settings.fit_pace):
# beside two busy processes on 2026-12-03, runs whose horizon round 1's pace set at 20-21
# rounds took up to 324 s of their 300, the later rounds ~9% slower than the first.
LATER_ROUNDS = 1.1
# Before the first round: the base's worktree and build (a cached kernel copy), the worker's
# imports of torch, numpy and gymnasium (this box, CPU seconds).
GATE_START_S = 8.0
# Each round process: fork, random layout, importing the tree's rlperf and its trainer.
ROUND_START_S = 0.3


NOTHING = CaseCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def cost(name: str) -> CaseCost:
    """The case's measured cost: nothing for a case that skipped where the costs were measured
    (the CUDA transfers on a CPU box: milliseconds where they run), :data:`UNMEASURED` for
    a case never measured."""
    if name in SKIPPED:
        return NOTHING
    return COSTS.get(name, UNMEASURED)


def call_s(c: CaseCost) -> float:
    """CPU seconds of one steady call (the later calls' median; the first may be longer)."""
    return c.call_cpu_s


def fixed_s(c: CaseCost) -> float:
    """CPU seconds every tool pays for a case before timing it: setup and one first call."""
    return c.setup_cpu_s + c.first_cpu_s


# -- pytest-benchmark ------------------------------------------------------------------------
@dataclass(frozen=True)
class Sampling:
    """How a case is timed: ``rounds`` rounds of ``iterations`` calls each."""

    rounds: int
    iterations: int

    def seconds(self, call: float) -> float:
        return self.rounds * self.iterations * call


def sampling(call: float, share_s: float) -> Sampling:
    """Rounds and calls a round for a call of ``call`` seconds given ``share_s`` seconds of
    rounds: rounds of at least :data:`MIN_ROUND_S`, as many as fit in the share, at least
    :data:`MIN_ROUNDS`."""
    call = max(call, 1e-7)
    iterations = max(1, math.ceil(MIN_ROUND_S / call))
    rounds = max(MIN_ROUNDS, math.floor(share_s / (iterations * call)))
    return Sampling(rounds, iterations)


def large_cases(names: Iterable[str], components: dict[str, str]) -> set[str]:
    """The cases left out of the default pytest-benchmark run: those whose fewest rounds take
    over :data:`LARGE_CASE_S`, where their component (``components``: name -> component) has a
    case that is not large, so every component is still timed."""
    names = list(names)
    large = {n for n in names if MIN_ROUNDS * call_s(cost(n)) > LARGE_CASE_S}
    kept = {components[n] for n in names if n not in large}
    return {n for n in large if components[n] in kept}


def pytest_share_s(names: Iterable[str]) -> float:
    """Seconds of rounds each case of the default run gets: what the budget leaves after the
    start and every case's setup and probe, shared evenly, at most :data:`MAX_SHARE_S` (at
    least 0: the fewest rounds then, and the plan does not fit)."""
    names = list(names)
    budget = PYTEST_BUDGET_S / SLOW_BOX * MARGIN - PYTEST_START_S
    left = budget - sum(fixed_s(cost(n)) for n in names)
    # Cases whose fewest rounds exceed the share take them anyway: shared among the others.
    share = max(0.0, left / max(1, len(names)))
    for _ in range(len(names)):
        over = [n for n in names if MIN_ROUNDS * call_s(cost(n)) > share]
        rest = len(names) - len(over)
        new = (left - sum(MIN_ROUNDS * call_s(cost(n)) for n in over)) / max(1, rest)
        if abs(new - share) < 1e-9:
            break
        share = max(0.0, new)
    return min(MAX_SHARE_S, share)


def pytest_planned_s(names: Iterable[str], share_s: float) -> float:
    """The run's planned seconds on the slowest box: start, setups, probes and rounds."""
    total = PYTEST_START_S
    for name in names:
        c = cost(name)
        total += fixed_s(c) + sampling(call_s(c), share_s).seconds(call_s(c))
    return total * SLOW_BOX


# -- rlperf gate -------------------------------------------------------------------------------
def gate_sample_calls(call: float, sample_s: float) -> int:
    """Calls a sample takes: ``worker.calibrate_calls`` doubles them from 1 until they take
    ``sample_s`` (so a sample is 1-2x ``sample_s``)."""
    calls = 1
    while calls * call < sample_s and calls < 1_000_000:
        calls *= 2
    return calls


def gate_case_round_s(name: str, pairs: int, sample_s: float, warmup_s: float) -> float:
    """CPU seconds of one case in one round, both sides: setup, warm-up, ``pairs`` samples."""
    c = cost(name)
    call = call_s(c)
    warm = max(c.first_cpu_s + (WARMUP_CALLS - 1) * call, warmup_s)
    sample = gate_sample_calls(call, sample_s) * call
    return 2 * (c.setup_cpu_s + warm + pairs * sample)


def gate_round_s(names: Iterable[str], pairs: int, sample_s: float, warmup_s: float) -> float:
    """CPU seconds of a round of these cases, both sides' round processes included."""
    return 2 * ROUND_START_S + sum(gate_case_round_s(n, pairs, sample_s, warmup_s) for n in names)


@dataclass(frozen=True)
class GatePlan:
    """What a gate run of these cases is planned to cost within ``budget_s``."""

    cases: tuple[str, ...]
    calls: tuple[int, ...]  # calls a sample, per case (the run calibrates its own)
    round_s: float  # CPU seconds of a round of every case, this box
    fit_rounds: int  # rounds of every case the budget holds beside two busy processes
    budget_s: float

    def worst_s(self, rounds: int) -> float:
        """Wall seconds on the slowest box, beside two busy processes, for ``rounds`` rounds
        of every case."""
        return (GATE_START_S + rounds * self.round_s) * SLOW_BOX * BUSY


def gate_plan(
    names: list[str], pairs: int, sample_s: float, warmup_s: float, budget_s: float = GATE_BUDGET_S
) -> GatePlan:
    """The rounds of ``names`` that ``budget_s`` holds (wall seconds on the slowest box beside
    two busy processes), and what a round costs."""
    round_s = gate_round_s(names, pairs, sample_s, warmup_s)
    fit = math.floor((budget_s / (SLOW_BOX * BUSY) - GATE_START_S) / round_s)
    calls = tuple(gate_sample_calls(call_s(cost(n)), sample_s) for n in names)
    return GatePlan(tuple(names), calls, round_s, max(0, fit), budget_s)
