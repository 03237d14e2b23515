"""Every registry case as a pytest-benchmark test, grouped by component; the cases tagged
``quick`` (each workload's e2e case and one case per component) carry the ``quick`` mark, so
``pytest benchmarks --benchmark-only -m quick`` runs them alone.

``extra_info`` carries the component, the parameters, the work per call and the throughput
(items per second at the median time: env steps/s, samples/s), so a saved run holds SPS too.
"""

from __future__ import annotations

import pytest

from rlperf.bench.registry import QUICK, Case, CaseSkipped, all_cases

CASES = [
    pytest.param(case, id=case.name, marks=[pytest.mark.quick] if QUICK in case.tags else [])
    for case in all_cases()
]


@pytest.mark.parametrize("case", CASES)
def test_case(benchmark, case: Case) -> None:  # noqa: ANN001 (pytest-benchmark fixture)
    try:
        ready = case.setup()
    except CaseSkipped as e:
        pytest.skip(str(e))
    benchmark.group = case.component
    benchmark.extra_info.update(
        component=case.component,
        params=case.params,
        items_per_call=ready.items_per_call,
        items_unit=ready.items_unit,
    )
    benchmark(ready.run)
    median_s = benchmark.stats.stats.median
    benchmark.extra_info[f"{ready.items_unit}_per_s"] = ready.items_per_call / median_s
