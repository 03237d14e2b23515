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

Each case's budget: its setup, one probe call (also its warm-up), then

- a call shorter than ``max_time / min_rounds`` (0.5 s / 5): pytest-benchmark's own rounds,
  about ``max_time`` of the timer in all (its calibration and its closing call add two short
  calls);
- a longer one: ``min_rounds`` rounds, or :data:`LONG_ROUNDS` for a call of
  :data:`LONG_CALL_S` or more (``benchmark.pedantic``: no calibration, no closing call).

So a case costs at most setup + probe + max(max_time, rounds x call): docs/benchmarks.md adds
it up over the registry.
"""

from __future__ import annotations

import time

import psutil
import pytest

from rlperf.bench.registry import QUICK, Case, CaseSkipped, all_cases

# A case whose probe call takes this long gets LONG_ROUNDS rounds: the fewest whose interquartile
# range the spread check (rlperf.bench.spread) still reads.
LONG_CALL_S = 1.0
LONG_ROUNDS = 3

CASES = [
    pytest.param(case, id=case.name, marks=[pytest.mark.quick] if QUICK in case.tags else [])
    for case in all_cases()
]


def descendants() -> set[int]:
    """This process's child processes, theirs included."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def rounds_for(call_s: float, max_time_s: float, min_rounds: int) -> int | None:
    """Rounds of a case whose probe call took ``call_s``, or None: pytest-benchmark's own
    calibration and ``max_time`` (module docstring)."""
    if call_s < max_time_s / min_rounds:
        return None
    return min(min_rounds, LONG_ROUNDS) if call_s >= LONG_CALL_S else min_rounds


@pytest.mark.parametrize("case", CASES)
def test_case(benchmark, case: Case, request: pytest.FixtureRequest) -> None:  # noqa: ANN001
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
    ready.run()  # the probe: sizes the rounds, and warms the case up
    probe_s = timer() - start
    benchmark.extra_info.update(setup_cpu_s=setup_cpu, probe_s=probe_s)
    config = request.config
    rounds = rounds_for(probe_s, float(config.getoption("benchmark_max_time")),
                        int(config.getoption("benchmark_min_rounds")))  # fmt: skip
    if rounds is None:
        benchmark(ready.run)
    else:
        benchmark.pedantic(ready.run, rounds=rounds)
    median_s = benchmark.stats.stats.median
    benchmark.extra_info[f"{ready.items_unit}_per_s"] = ready.items_per_call / median_s
