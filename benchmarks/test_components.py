"""Every registry case as a pytest-benchmark test, grouped by component; the cases tagged
``quick`` (each workload's e2e case and one case per component) carry the ``quick`` mark, so
``pytest benchmarks --benchmark-only -m quick`` runs them alone.

``extra_info`` carries the component, the parameters, the work per call and the throughput
(items per second at the median time: env steps/s, samples/s), so a saved run holds SPS too,
the clock it was timed with (``timer``), and the CPU seconds of its setup (``setup_cpu_s``)
and of its probe call (``probe_s``, in ``timer``'s seconds).

The suite times CPU time (``benchmarks/conftest.py``), except a case whose setup started
processes (env workers, the all-reduce's partner rank): their work is not this process's CPU
time, so such a case is timed in wall time (``time.perf_counter``), as its ``timer`` says.

Each case is planned against the run's time budget (``rlperf.bench.budget``: 180 s on the
slowest box), from the costs measured in ``src/rlperf/bench/registry/costs.py``: its setup, one
probe call (also its warm-up), one sizing call when the probe was short (a first call can be
many times a later one), then ``rounds`` rounds of ``iterations`` calls (``benchmark.pedantic``)
filling the case's share of the budget: :func:`rlperf.bench.budget.sampling`. The cases whose
fewest rounds alone take seconds (the full-size CNN and ConvLSTM training cases) are marked
``large`` and left out of the default run where their component has a smaller case
(``-m large`` runs them); ``--benchmark-max-time S`` sets each case's share instead.
"""

from __future__ import annotations

import time

import psutil
import pytest

from rlperf.bench import budget
from rlperf.bench.registry import QUICK, Case, CaseSkipped, all_cases

# The large cases get their mark in conftest.py, which leaves them out of the default run.
CASES = [
    pytest.param(case, id=case.name, marks=[pytest.mark.quick] if QUICK in case.tags else [])
    for case in all_cases()
]


def descendants() -> set[int]:
    """This process's child processes, theirs included."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.parametrize("case", CASES)
def test_case(benchmark, case: Case, case_share_s: float) -> None:  # noqa: ANN001
    before, setup_cpu = descendants(), time.process_time()
    try:
        ready = case.setup()
    except CaseSkipped as e:
        pytest.skip(str(e))
    setup_cpu = time.process_time() - setup_cpu
    if descendants() - before and benchmark._timer is time.process_time:
        benchmark._timer = time.perf_counter  # the work runs in the processes it started
    benchmark.group = case.component
    benchmark.extra_info.update(
        component=case.component,
        params=case.params,
        items_per_call=ready.items_per_call,
        items_unit=ready.items_unit,
        timer=benchmark._timer.__name__,
    )
    timer = benchmark._timer
    start = timer()
    ready.run()  # the probe: warms the case up
    probe_s = call_s = timer() - start
    share = case_share_s
    if budget.MIN_ROUNDS * probe_s < share:  # short: a later call sizes the rounds
        start = timer()
        ready.run()
        call_s = timer() - start
    plan = budget.sampling(call_s, share)
    benchmark.extra_info.update(setup_cpu_s=setup_cpu, probe_s=probe_s, rounds=plan.rounds,
                                iterations=plan.iterations)  # fmt: skip
    benchmark.pedantic(ready.run, rounds=plan.rounds, iterations=plan.iterations)
    median_s = benchmark.stats.stats.median
    benchmark.extra_info[f"{ready.items_unit}_per_s"] = ready.items_per_call / median_s
