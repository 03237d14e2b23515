"""The registry covers every component of the issue, and every case runs once."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import rlperf.config
import rlperf.policies.registry
from rlperf import native
from rlperf.bench.commands import DEFAULT_CASES, split_cases
from rlperf.bench.registry import (
    COMPONENTS,
    Case,
    CaseSkipped,
    UnknownCaseError,
    all_cases,
    select,
)
from rlperf.envs import registered

CASES = all_cases()


@pytest.fixture(autouse=True)
def restore_torch_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_every_component_has_cases() -> None:
    assert {c.component for c in CASES} == set(COMPONENTS)


def test_sizes_the_issue_asks_for() -> None:
    def params(component: str) -> list[dict]:
        return [c.params for c in CASES if c.component == component]

    for env in registered():
        for component in ("env_step", "env_reset"):
            assert {p["num_envs"] for p in params(component) if p["env"] == env} == {64, 1024}
    assert {p["batch"] for p in params("policy_act")} == {64, 1024}
    assert {(p["num_steps"], p["num_envs"]) for p in params("gae")} == {(32, 64), (128, 1024)}
    transfers = {(p["direction"], p["memory"], p["non_blocking"]) for p in params("transfer")}
    assert transfers == {
        (d, m, nb) for d in ("d2h", "h2d") for m in ("pageable", "pinned") for nb in (False, True)
    }


def test_names_are_unique_and_selectable() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert select([names[0]]) == [CASES[0]]
    assert [c.component for c in select(["gae"])] == ["gae", "gae"]
    with pytest.raises(UnknownCaseError, match="unknown benchmark case 'nope'"):
        select(["nope"])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_runs_once(case: Case) -> None:
    try:
        ready = case.setup()
    except CaseSkipped as e:
        # Only the CUDA transfers may be skipped, only without CUDA, and the compiled LSTM
        # cases, only without the kernel; never silently.
        if case.params.get("impl") == "compiled" and not native.lstm_available():
            assert "not built" in str(e)
        else:
            assert case.component == "transfer" and not torch.cuda.is_available()
            assert "CUDA not available" in str(e)
        pytest.skip(str(e))
    assert ready.items_per_call > 0 and ready.items_unit
    ready.run()


# -- the cases time what the trainer runs ------------------------------------------------------
def _prepared(component: str) -> tuple[Case, Any]:
    case = next(c for c in CASES if c.component == component)
    return case, case.setup()


def test_optimizer_step_times_the_trainers_flat_adam() -> None:
    from rlperf.ppo.optim import FlatAdam

    case, ready = _prepared("optimizer_step")
    optimizer = ready.run.__self__  # a bound method: the timed call is FlatAdam.step itself
    assert isinstance(optimizer, FlatAdam)
    assert ready.run.__func__ is FlatAdam.step
    assert ready.items_per_call == optimizer.param.numel()
    before = optimizer.param.detach().clone()
    ready.run()
    assert int(optimizer.step_count) == 1 and not torch.equal(optimizer.param, before)


@pytest.mark.kernel("loss")
def test_ppo_loss_forward_writes_into_the_policys_gradient_buffers() -> None:
    _, ready = _prepared("ppo_loss_forward")
    # The policy and the statistics scratch are the case's own, captured by its closure.
    captured = inspect.getclosurevars(ready.run).nonlocals
    policy, stat_rows = captured["policy"], captured["stat_rows"]
    _, cache, grad_logits, grad_value = ready.run()
    views_logits, views_value = policy.output_grad_views(cache)
    assert grad_logits.data_ptr() == views_logits.data_ptr()
    assert grad_logits.stride() == views_logits.stride()
    assert grad_value.data_ptr() == views_value.data_ptr()
    # On the CPU in float32 the compiled loss keeps the per-sample statistics in registers: the
    # scratch the torch version fills is left alone, and the statistics come out finite.
    stat_rows.fill_(float("nan"))
    stats, _, _, _ = ready.run()
    assert torch.isnan(stat_rows).all() and torch.isfinite(stats).all()


def test_e2e_cases_train_more_steps_on_every_call():
    """The e2e cases move the same run on by env_steps each call (a timed call that returned at
    once, having nothing left to train, would time nothing)."""
    from rlperf.bench.registry import select

    for name in ("e2e_train[num_envs=64,env_steps=4096,threads=1]",
                 "grid_e2e[num_maps=16,threads=1,phase=supervised,env_steps=8192]"):  # fmt: skip
        prepared = select([name])[0].setup()
        first = prepared.run()["global_step"]
        second = prepared.run()["global_step"]
        assert second - first == prepared.items_per_call, name


# -- the gate's default case set ---------------------------------------------------------------
def test_the_gate_default_set_trains_every_workload_once() -> None:
    """One e2e case per workload rlperf trains, each a registry case; what each one trains is read
    off its trainer (env, policy, teacher), not off its name. Catch is the one env left out: a
    toy for the CNN policy, which the grid case trains."""
    names = split_cases(DEFAULT_CASES)
    cases = select(names)
    assert [c.name for c in cases] == names  # full names, each once
    workloads = set()
    for case in cases:
        ready = case.setup()
        trainer = inspect.getclosurevars(ready.run).nonlocals["trainer"]
        cfg = trainer.cfg
        workloads.add((cfg.env.env, cfg.env.options.get("observe"), cfg.policy.kind,
                       trainer.phase if trainer.teacher is not None else None))  # fmt: skip
        # A call trains whole iterations, so items_per_call is what it trained.
        assert ready.items_per_call % trainer.batch_size == 0, case.name
    assert workloads == {
        ("cartpole", None, "mlp", None),
        ("cartpole", "position", "lstm", None),
        ("petri", None, "mlp", None),
        ("robots", None, "convlstm", None),
        ("grid", None, "cnn", "supervised"),
    }
    assert {env for env, *_ in workloads} == set(registered()) - {"catch"}


def test_a_default_case_skips_on_commits_without_its_policy_or_preset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The robots env landed before the ConvLSTM policy, the grid env before its preset: on
    those commits the gate (and bisect) must skip the case, not fail on it."""
    by_component = {c.component + c.params.get("kind", ""): c
                    for c in select(split_cases(DEFAULT_CASES))}  # fmt: skip
    names = [n for n in rlperf.policies.registry.policy_names() if n != "convlstm"]
    monkeypatch.setattr(rlperf.policies.registry, "policy_names", lambda: names)
    presets = {k: v for k, v in rlperf.config.PRESETS.items() if k != "grid"}
    monkeypatch.setattr(rlperf.config, "PRESETS", presets)
    with pytest.raises(CaseSkipped, match="no convlstm policy in this commit"):
        by_component["e2e_trainconvlstm"].setup()
    with pytest.raises(CaseSkipped, match="no grid preset in this commit"):
        by_component["grid_e2e"].setup()
