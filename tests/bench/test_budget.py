"""The tools' case sets fit their time budgets, planned from the cases' measured costs
(``rlperf.bench.budget``, ``registry/costs.py``): nothing here is timed, so a new case that
breaks a budget fails these tests on any machine, under any load."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rlperf.bench import budget
from rlperf.bench.gate import GateError, Settings
from rlperf.bench.registry import all_cases, component_names, gate_case_names
from rlperf.bench.registry.costs import COSTS, SKIPPED, CaseCost
from rlperf.bench.stats import fewest_rounds_to_flag

NAMES = [c.name for c in all_cases()]
COMPONENTS = {c.name: c.component for c in all_cases()}
REMEASURE = "python benchmarks/case_costs.py --cases NAME --write"


def default_pytest_cases() -> list[str]:
    large = budget.large_cases(NAMES, COMPONENTS)
    return [n for n in NAMES if n not in large]


def test_every_case_has_a_measured_cost() -> None:
    unmeasured = [n for n in NAMES if n not in COSTS and n not in SKIPPED]
    assert not unmeasured, f"cases without a measured cost: {unmeasured}; run {REMEASURE}"
    stale = sorted((set(COSTS) | set(SKIPPED)) - set(NAMES))
    assert not stale, f"costs of cases no longer in the registry: {stale}; run {REMEASURE}"


def test_pytest_benchmark_fits_its_budget_with_every_component() -> None:
    cases = default_pytest_cases()
    share = budget.pytest_share_s(cases)
    planned = budget.pytest_planned_s(cases, share)
    assert planned <= budget.PYTEST_BUDGET_S * budget.MARGIN + 1e-6, (planned, share)
    assert share >= 0.1, f"each case gets {share:.3f} s of rounds: too few to time anything"
    assert {COMPONENTS[n] for n in cases} == set(component_names())


def test_the_gates_default_set_fits_the_rounds_a_regression_needs() -> None:
    cases = gate_case_names()
    settings = Settings()
    plan = settings.plan(cases)
    assert plan is not None
    need = fewest_rounds_to_flag(settings.confidence, settings.min_rounds,
                                 min(plan.fit_rounds, settings.max_rounds))  # fmt: skip
    assert need is not None and plan.fit_rounds >= need, (plan, need)
    capped = replace(settings)
    capped.fit_budget(cases)
    assert plan.worst_s(capped.max_rounds) <= settings.budget_s


# -- the planning, on made-up costs ------------------------------------------------------------
def test_sampling_fills_the_share_with_rounds_of_at_least_a_minimum_length() -> None:
    tiny = budget.sampling(1e-5, 0.5)  # 10 us a call: 200 calls a round
    assert tiny.iterations == 200 and tiny.seconds(1e-5) == pytest.approx(0.5, rel=0.01)
    assert budget.sampling(0.1, 0.5) == budget.Sampling(5, 1)
    assert budget.sampling(2.0, 0.5) == budget.Sampling(budget.MIN_ROUNDS, 1)  # fewest rounds


def fake_costs(monkeypatch: pytest.MonkeyPatch, costs: dict[str, float]) -> None:
    """Cases costing nothing to set up and ``call`` CPU seconds a call."""
    table = {n: CaseCost(0, 0, call, call, call, call) for n, call in costs.items()}
    monkeypatch.setattr(budget, "COSTS", table)
    monkeypatch.setattr(budget, "SKIPPED", {})


def test_a_large_case_is_left_out_only_where_its_component_has_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_costs(monkeypatch, {"a[n=1]": 0.01, "a[n=9]": 5.0, "b[n=9]": 5.0})
    components = {"a[n=1]": "a", "a[n=9]": "a", "b[n=9]": "b"}
    assert budget.large_cases(components, components) == {"a[n=9]"}


def test_an_unmeasured_case_is_planned_over_any_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_costs(monkeypatch, {"a": 0.01})
    assert budget.pytest_planned_s(["a", "new"], 0.5) > budget.PYTEST_BUDGET_S


def test_the_gate_caps_its_rounds_at_the_budget_and_refuses_too_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_costs(monkeypatch, {"a": 0.05, "b": 0.05})
    roomy = Settings(budget_s=1e6)
    roomy.fit_budget(["a", "b"])
    assert roomy.max_rounds == Settings().max_rounds  # nothing to cap
    plan = Settings().plan(["a", "b"])
    assert plan is not None
    tight = Settings(budget_s=plan.worst_s(12) + 1.0)
    tight.fit_budget(["a", "b"])
    assert tight.max_rounds == 12
    with pytest.raises(GateError, match="too few to flag a regression"):
        Settings(budget_s=plan.worst_s(5)).fit_budget(["a", "b"])
    unplanned = Settings(budget_s=1.0)
    unplanned.fit_budget(["a", "not measured"])  # outside the table: not planned, not capped
    assert unplanned.max_rounds == Settings().max_rounds
