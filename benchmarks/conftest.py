"""pytest-benchmark suite over the registry (``pytest benchmarks --benchmark-only``).

Kept out of the normal test run (pyproject's testpaths is ``tests``); tests/bench runs every
case once instead, so a broken case still fails CI.

Defaults of this suite (a flag on the command line wins):

- the timer is ``time.process_time``, this process's CPU time (all its threads), as the gate
  and asv time: on a shared machine another process adds wall time, not CPU time
  (docs/benchmarks.md says why not the thread's CPU time);
- each case is planned against the run's time budget (``rlperf.bench.budget``): its share of
  seconds of rounds (``case_share_s``; ``--benchmark-max-time`` overrides it), and the cases
  whose fewest rounds take seconds are marked ``large`` and left out of a run without ``-m``
  where their component has a smaller case (``test_components.py`` says how);
- after the run, and beside ``--benchmark-compare``'s table, the cases whose rounds spread too
  widely for a comparison to mean anything are listed, with why (``rlperf.bench.spread``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from rlperf.bench import budget
from rlperf.bench.registry import all_cases
from rlperf.bench.spread import case_warnings, warning_lines

TIMER = "time.process_time"
LARGE = budget.large_cases([c.name for c in all_cases()],
                           {c.name: c.component for c in all_cases()})  # fmt: skip
# Each case's seconds of rounds in the default run (the large cases left out).
SHARE_S = budget.pytest_share_s([c.name for c in all_cases() if c.name not in LARGE])


def given(config: pytest.Config, flag: str) -> bool:
    """Whether ``flag`` is on the command line (or in ``PYTEST_ADDOPTS``)."""
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    return any(a == flag or a.startswith(f"{flag}=") for a in args)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "large: cases whose fewest rounds take seconds, left out without -m"
    )
    # Before pytest-benchmark's own pytest_configure (trylast), which reads its options.
    if not hasattr(config.option, "benchmark_timer"):
        return
    if not given(config, "--benchmark-timer"):
        config.option.benchmark_timer = TIMER


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the large cases; without ``-m``, leave them out (they are listed at the end)."""
    for item in items:
        case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
        if case is not None and case.name in LARGE:
            item.add_marker(pytest.mark.large)
    if config.option.markexpr:
        return
    left_out = [item for item in items if item.get_closest_marker("large")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("large")]


@pytest.fixture
def case_share_s(request: pytest.FixtureRequest) -> float:
    """Seconds of rounds a case gets: the budget's share, or ``--benchmark-max-time``'s."""
    if given(request.config, "--benchmark-max-time"):
        return float(request.config.getoption("benchmark_max_time"))
    return SHARE_S


def timer_name(timer: Any) -> str:
    """The clock's name, from the function or from its name as a saved run stores it."""
    return str(getattr(timer, "__name__", timer)).rpartition(".")[2]


@pytest.hookimpl(hookwrapper=True)
def pytest_terminal_summary(terminalreporter: Any) -> Iterator[None]:
    """After pytest-benchmark's table (and also when ``--benchmark-compare-fail`` raised from
    it): the cases whose spread makes a comparison meaningless."""
    yield
    session = getattr(terminalreporter.config, "_benchmarksession", None)
    if session is None:
        return
    stored: dict[str, dict[str, Any]] = {}
    for mapping in (session.compared_mapping or {}).values():
        stored.update(mapping)
    flagged = {}
    for bench in session.benchmarks:
        if bench.has_error or not bench.stats.rounds:
            continue
        before = stored.get(bench.fullname)
        timers = None
        if before is not None:
            timers = (timer_name(bench.options["timer"]), timer_name(before["options"]["timer"]))
        reasons = case_warnings(bench.stats.as_dict(), before and before["stats"], timers)
        if reasons:
            flagged[bench.name] = reasons
    lines = warning_lines(flagged, compared=bool(stored))
    if LARGE and not terminalreporter.config.option.markexpr:
        terminalreporter.write_line(
            f"{len(LARGE)} large case(s) left out of the default run (-m large runs them): "
            + ", ".join(sorted(LARGE))
        )
    if lines:
        terminalreporter.write_sep("-", "benchmark spread", yellow=True)
        for line in lines:
            terminalreporter.write_line(line, yellow=True)


@pytest.fixture(autouse=True)
def restore_torch_threads() -> Iterator[None]:
    """Trainer cases set torch's thread count for the process; later cases must not inherit it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
