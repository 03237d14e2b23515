"""The registry covers every component of the issue, every case runs once, and the case sets
the tools use (gate, history, quick) are derived from the workload declarations."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import rlperf.config
import rlperf.envs
import rlperf.policies.registry
from rlperf import native
from rlperf.bench import registry
from rlperf.bench.registry import (
    TAGS,
    Case,
    CaseSkipped,
    UnknownCaseError,
    Workload,
    all_cases,
    gate_case_names,
    select,
    tagged,
)
from rlperf.bench.registry.training import e2e_train
from rlperf.envs import CartPoleVec, registered

CASES = all_cases()


@pytest.fixture(autouse=True)
def restore_torch_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_every_component_the_issue_asks_for_has_cases() -> None:
    asked = {"env_step", "env_reset", "policy_act", "transfer", "buffer_store",
             "minibatch_sampling", "gae", "ppo_loss_forward", "ppo_backward", "optimizer_step",
             "update_epoch", "e2e_train", "env_step_workers", "allreduce", "telemetry"}  # fmt: skip
    assert asked <= set(registry.component_names())


def test_sizes_the_issue_asks_for() -> None:
    def params(component: str) -> list[dict]:
        return [c.params for c in CASES if c.component == component]

    for env in registered():
        sizes = {"env_step": {4, 64, 1024}, "env_reset": {64, 1024}}
        for component, want in sizes.items():
            assert {p["num_envs"] for p in params(component) if p["env"] == env} == want
    assert {p["batch"] for p in params("policy_act")} == {64, 1024}
    assert {(p["num_steps"], p["num_envs"]) for p in params("gae")} == {(32, 64), (128, 1024)}
    transfers = {(p["direction"], p["memory"], p["non_blocking"]) for p in params("transfer")}
    assert transfers == {
        (d, m, nb) for d in ("d2h", "h2d") for m in ("pageable", "pinned") for nb in (False, True)
    }


def test_names_are_unique_and_selectable() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    # A name that is also a component selects every case of it (asv found the MuJoCo
    # update_epoch case, then named "update_epoch", ambiguous).
    assert [c.name for c in CASES if c.name in registry.component_names()] == []
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
        elif "pip install 'rlperf[" in str(e):  # an extra's case without the extra
            pass
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
    for name in ("e2e_train[num_envs=64,env_steps=4096,threads=1]",
                 "grid_e2e[num_maps=16,threads=1,phase=supervised,env_steps=8192]"):  # fmt: skip
        prepared = select([name])[0].setup()
        first = prepared.run()["global_step"]
        second = prepared.run()["global_step"]
        assert second - first == prepared.items_per_call, name


# -- the derived case sets --------------------------------------------------------------------
def e2e_trainer(case: Case) -> tuple[Any, Any]:
    """(prepared case, the trainer it trains): what an e2e case trains is read off its trainer."""
    ready = case.setup()
    return ready, inspect.getclosurevars(ready.run).nonlocals["trainer"]


def test_the_gate_default_set_trains_every_workload_once() -> None:
    """The gate's default set is one e2e case per workload; what each one trains is read off
    its trainer (env, policy, teacher), not off its name. Catch is the one env left out: a
    toy for the CNN policy, which the grid case trains."""
    names = gate_case_names()
    assert [c.name for c in select(names)] == names  # full names, each once
    trained = []
    skipped = []
    for case in select(names):
        try:
            ready, trainer = e2e_trainer(case)
        except CaseSkipped as e:  # an extra's workload without the extra (MuJoCo)
            skipped.append(str(e))
            continue
        cfg = trainer.cfg
        trained.append((cfg.env.env, cfg.env.options.get("observe"), cfg.policy.kind,
                        trainer.phase if trainer.teacher_phase is not None else None))  # fmt: skip
        # A call trains whole iterations, so items_per_call is what it trained.
        assert ready.items_per_call % trainer.batch_size == 0, case.name
        # A call is a stretch of one run: no once-a-run telemetry start and stop in every call.
        assert trainer.telemetry is None, case.name
    assert trained == [
        ("cartpole", None, "mlp", None),
        ("cartpole", "position", "lstm", None),
        ("petri", None, "mlp", None),
        ("robots", None, "convlstm", None),
        ("grid", None, "cnn", "supervised"),
        *[trains for extra, trains in (("mujoco", ("gym:HalfCheetah-v5", None, "mlp", None)),
                                       ("atari", ("gym:ale_py:ALE/Breakout-v5", None, "cnn", None)))
          if not any(f"pip install 'rlperf[{extra}]'" in why for why in skipped)],
    ]  # fmt: skip
    assert all("pip install 'rlperf[" in why for why in skipped)
    assert len(trained) + len(skipped) == len(registry.workloads())
    assert set(registry.NOT_WORKLOADS) == {"catch"}


@pytest.mark.parametrize("tag", TAGS)
def test_each_derived_set_holds_one_e2e_case_per_workload(tag: str) -> None:
    """Every workload's e2e case is in the gate, history and quick sets; the gate set is
    nothing else."""
    chosen = {c.name for c in tagged(tag)}
    for workload in registry.workloads():
        in_set = [c.name for c in workload.all_cases() if c.name in chosen]
        assert workload.e2e.name in in_set, (tag, workload.name)
    if tag == registry.GATE:
        assert gate_case_names() == [w.e2e.name for w in registry.workloads()]


def test_every_registered_env_is_a_workload_or_excused() -> None:
    assert registry.uncovered_envs() == []


@pytest.fixture
def toy_env() -> Iterator[str]:
    """A new env registered for the test (CartPole's dynamics under another name)."""
    rlperf.envs.register("toycart", CartPoleVec)
    yield "toycart"
    rlperf.envs.unregister("toycart")
    registry.unregister_workload("toycart")


def test_a_new_env_is_one_declaration_away_from_every_set(toy_env: str) -> None:
    assert registry.uncovered_envs() == [toy_env]  # registered, not yet a workload
    assert {c.params["env"] for c in select(["env_step"])} >= {toy_env}  # components follow
    params = {"env": toy_env, "num_envs": 8, "env_steps": 256, "threads": 1}
    registry.register_workload(Workload(toy_env, toy_env, e2e=Case("e2e_train", params, e2e_train)))
    name = f"e2e_train[env={toy_env},num_envs=8,env_steps=256,threads=1]"
    assert registry.uncovered_envs() == []
    for tag in TAGS:
        assert name in [c.name for c in tagged(tag)], tag
    assert gate_case_names()[-1] == name
    ready, trainer = e2e_trainer(select([name])[0])
    assert trainer.cfg.env.env == toy_env
    first = ready.run()["global_step"]
    assert ready.run()["global_step"] - first == 256
    with pytest.raises(ValueError, match="already registered"):
        registry.register_workload(registry.workloads()[-1])


def test_unknown_tags_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown tags"):
        Case("gae", {}, e2e_train, {"nightly"})
    with pytest.raises(ValueError, match="unknown tag"):
        tagged("nightly")


def test_a_default_case_skips_on_commits_without_its_policy_or_preset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The robots env landed before the ConvLSTM policy, the grid env before its preset: on
    those commits the gate (and bisect) must skip the case, not fail on it."""
    by_component = {c.component + c.params.get("kind", ""): c
                    for c in select(gate_case_names())}  # fmt: skip
    names = [n for n in rlperf.policies.registry.policy_names() if n != "convlstm"]
    monkeypatch.setattr(rlperf.policies.registry, "policy_names", lambda: names)
    presets = {k: v for k, v in rlperf.config.PRESETS.items() if k != "grid"}
    monkeypatch.setattr(rlperf.config, "PRESETS", presets)
    with pytest.raises(CaseSkipped, match="no convlstm policy in this commit"):
        by_component["e2e_trainconvlstm"].setup()
    with pytest.raises(CaseSkipped, match="no grid preset in this commit"):
        by_component["grid_e2e"].setup()
