"""Trainer behaviour on short CPU runs: determinism, resume, SPS accounting, non-finite loss,
checkpoints, and the analytic update against the autograd update end to end."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf.cli import main
from rlperf.config import Config
from rlperf.envs import CartPoleVec, register
from rlperf.ppo.gae import gae_reference
from rlperf.ppo.optim import kl_adapted_lr, log_std_ceiling
from rlperf.ppo.trainer import NonFiniteLossError, Trainer
from rlperf.timing.sections import Profiler

NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}
ISSUE_SECTIONS = {
    "rollout",
    "rollout/env_step",
    "rollout/policy_forward",
    "rollout/device_to_host",
    "rollout/buffer_store",
    "gae",
    "update",
    "update/minibatch_prep",
    "update/loss",
    "update/backward",
    "update/optimizer_step",
    "logging",
}


def small_config(iterations: int, **overrides) -> Config:
    """A few-second CPU run: 8 envs x 16 steps, 4 minibatches x 2 epochs, one thread."""
    cfg = Config()
    cfg.env.num_envs = NUM_ENVS
    cfg.ppo.num_steps = NUM_STEPS
    cfg.ppo.update_epochs = 2
    cfg.run.total_steps = iterations * BATCH
    cfg.run.threads = 1
    cfg.run.progress = False
    cfg.run.seed = 3
    for dotted, value in overrides.items():
        section, name = dotted.split("__")
        setattr(getattr(cfg, section), name, value)
    return cfg.validate()


def train(cfg: Config, run_dir: Path | None = None) -> tuple[Trainer, dict]:
    trainer = Trainer(cfg, profiler=Profiler())
    return trainer, trainer.train(run_dir)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


def load_weights_only(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def ctrl_c_after(cfg: Config, iteration: int, run_dir: Path) -> None:
    """Train ``cfg`` into ``run_dir`` and press Ctrl-C once ``iteration`` is logged (and
    checkpointed, where it is a checkpoint's)."""
    trainer = Trainer(cfg, profiler=Profiler())

    def stop(trainer: Trainer, row: dict) -> None:
        if row["iteration"] == iteration:
            raise KeyboardInterrupt

    trainer.callbacks.append(stop)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(run_dir)


def resume_and_compare(resumed_dir: Path, straight_dir: Path, straight: Trainer) -> None:
    """``rlperf train --resume resumed_dir`` ends with the metrics and parameters of the run in
    ``straight_dir`` that never stopped (``straight``, its trainer)."""
    assert main(["train", "--resume", str(resumed_dir)]) == 0
    assert without_timing(metrics(resumed_dir)) == without_timing(metrics(straight_dir))
    resumed = load_weights_only(resumed_dir / "checkpoint.pt")
    assert torch.equal(resumed["policy"]["flat"], straight.policy.flat.detach())


def test_same_seed_gives_identical_losses_returns_and_parameters(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        trainer, summary = train(small_config(4), tmp_path / name)
        runs.append((trainer, summary, metrics(tmp_path / name)))
    (ta, sa, ma), (tb, sb, mb) = runs
    assert len(ma) == 4
    assert without_timing(ma) == without_timing(mb)
    assert any(row["mean_return"] is not None for row in ma), "episodes finished"
    assert sa["final_stats"] == sb["final_stats"]
    assert sa["episodes"] == sb["episodes"] > 0
    assert torch.equal(ta.policy.flat, tb.policy.flat)

    _, other = train(small_config(4, run__seed=4))
    assert other["final_stats"] != sa["final_stats"], "the seed matters"


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    """Ctrl-C after the iteration-3 checkpoint of a 6-iteration run, then ``--resume``."""
    straight, _ = train(small_config(6, run__checkpoint_every=3), tmp_path / "straight")

    ctrl_c_after(small_config(6, run__checkpoint_every=3), 3, tmp_path / "resumed")
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["global_step"] == 3 * BATCH
    assert len(metrics(tmp_path / "resumed")) == 3

    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert without_timing(metrics(tmp_path / "resumed")) == without_timing(
        metrics(tmp_path / "straight")
    )
    resumed = load_weights_only(tmp_path / "resumed" / "checkpoint.pt")
    assert resumed["iteration"] == 6
    assert torch.equal(resumed["policy"]["flat"], straight.policy.flat.detach())
    final = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert final["interrupted"] is False and final["global_step"] == 6 * BATCH


def sigint_at_env_calls(monkeypatch: pytest.MonkeyPatch, *calls: int) -> None:
    """CartPole's ``step`` sends this process SIGINT (a Ctrl-C) at each of its ``calls``-th
    calls (1-based): in the middle of a rollout."""
    original, count = CartPoleVec.step, {"n": 0}

    def step(self, actions):
        count["n"] += 1
        if count["n"] in calls:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, actions)

    monkeypatch.setattr(CartPoleVec, "step", step)


def test_ctrl_c_checkpoints_the_iteration_it_lands_in_and_resume_repeats_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT in iteration 3's rollout, no periodic checkpoint due: iteration 3 completes and is
    checkpointed, and ``--resume`` gives the run that was never interrupted."""
    straight, _ = train(small_config(6, run__checkpoint_every=100), tmp_path / "straight")
    sigint_at_env_calls(monkeypatch, 2 * NUM_STEPS + 5)
    interrupted = Trainer(small_config(6, run__checkpoint_every=100), profiler=Profiler())
    with pytest.raises(KeyboardInterrupt):
        interrupted.train(tmp_path / "resumed")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "handler restored"
    assert interrupted.checkpointed_iteration == interrupted.iteration == 3
    assert load_weights_only(tmp_path / "resumed" / "checkpoint.pt")["iteration"] == 3
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["global_step"] == 3 * BATCH
    monkeypatch.undo()
    resume_and_compare(tmp_path / "resumed", tmp_path / "straight", straight)


def test_a_second_ctrl_c_stops_at_once_keeping_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sigint_at_env_calls(monkeypatch, 2 * NUM_STEPS + 5, 2 * NUM_STEPS + 6)
    trainer = Trainer(small_config(6, run__checkpoint_every=1), profiler=Profiler())
    with pytest.raises(KeyboardInterrupt):
        trainer.train(tmp_path)
    assert trainer.iteration == 3 and trainer.checkpointed_iteration == 2
    assert load_weights_only(tmp_path / "checkpoint.pt")["iteration"] == 2
    assert len(metrics(tmp_path)) == 2
    assert json.loads((tmp_path / "summary.json").read_text())["interrupted"] is True


def test_resume_with_more_total_steps_continues_the_run(tmp_path: Path) -> None:
    """Without LR annealing, N iterations then ``--resume --total-steps 2N`` equals 2N."""
    straight, straight_summary = train(
        small_config(6, ppo__anneal_lr=False, run__warmup_iters=1), tmp_path / "straight"
    )
    train(small_config(3, ppo__anneal_lr=False, run__warmup_iters=1), tmp_path / "resumed")
    code = main(["train", "--resume", str(tmp_path / "resumed"), "--total-steps", str(6 * BATCH)])
    assert code == 0
    assert without_timing(metrics(tmp_path / "resumed")) == without_timing(
        metrics(tmp_path / "straight")
    )
    resumed = load_weights_only(tmp_path / "resumed" / "checkpoint.pt")
    assert torch.equal(resumed["policy"]["flat"], straight.policy.flat.detach())
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["episodes"] == straight_summary["episodes"]
    assert summary["mean_return_last_100"] == straight_summary["mean_return_last_100"]


def test_cumulative_sps_after_resume_counts_only_measured_steps(tmp_path: Path) -> None:
    """Each process leaves out its warm-up iterations; the resumed one is not credited with the
    global steps it did not run."""
    warmup = 2
    train(small_config(4, run__warmup_iters=warmup), tmp_path)
    first = json.loads((tmp_path / "summary.json").read_text())
    assert first["sps_counted_steps"] == (4 - warmup) * BATCH
    assert main(["train", "--resume", str(tmp_path), "--total-steps", str(8 * BATCH)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["global_step"] == 8 * BATCH
    assert summary["sps_counted_steps"] == 2 * (4 - warmup) * BATCH
    assert summary["sps_counted_s"] > first["sps_counted_s"] > 0
    expected = summary["sps_counted_steps"] / summary["sps_counted_s"]
    assert summary["sps_cumulative"] == pytest.approx(expected, rel=1e-9)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, nan_rewards_from
) -> None:
    nan_rewards_from(2 * NUM_STEPS + 1)  # first step of iteration 3
    with pytest.raises(NonFiniteLossError, match="iteration 3"):
        train(small_config(6, run__checkpoint_every=1), tmp_path)
    checkpoint = load_weights_only(tmp_path / "checkpoint.pt")
    assert checkpoint["iteration"] == 2
    assert torch.isfinite(checkpoint["policy"]["flat"]).all()
    assert [row["iteration"] for row in metrics(tmp_path)] == [1, 2]
    assert json.loads((tmp_path / "summary.json").read_text())["global_step"] == 3 * BATCH
    assert not list(tmp_path.glob("*.tmp"))


def test_non_finite_loss_from_the_cli_names_the_iteration(
    tmp_path: Path, nan_rewards_from, capsys: pytest.CaptureFixture
) -> None:
    nan_rewards_from(2 * NUM_STEPS + 1)
    argv = ["train", "--num-envs", str(NUM_ENVS), "--num-steps", str(NUM_STEPS)]
    argv += ["--total-steps", str(6 * BATCH), "--threads", "1", "--no-progress"]
    argv += ["--checkpoint-every", "1", "--run-dir", str(tmp_path)]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf: error:")
    assert "iteration 3" in err[0] and f"last good checkpoint kept in {tmp_path}" in err[0]
    assert load_weights_only(tmp_path / "checkpoint.pt")["iteration"] == 2


def test_checkpoint_is_atomic_and_loads_with_weights_only(tmp_path: Path) -> None:
    trainer, _ = train(small_config(2, run__checkpoint_every=1), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.pt",
        "config.json",
        "metrics.jsonl",
        "summary.json",
    ]
    payload = load_weights_only(tmp_path / "checkpoint.pt")
    assert payload["iteration"] == 2 and payload["global_step"] == 2 * BATCH
    assert torch.equal(payload["policy"]["flat"], trainer.policy.flat.detach())
    assert Config.from_dict(payload["config"]).to_dict() == trainer.cfg.to_dict()


def test_every_named_section_is_timed() -> None:
    # The torch path (the fused rollout has no device_to_host: tests/ppo/test_fused_rollout.py).
    _, summary = train(small_config(2, policy__fused_rollout=False))
    assert ISSUE_SECTIONS <= set(summary["sections"])
    assert all(summary["sections"][name] > 0 for name in ISSUE_SECTIONS)
    assert summary["sections"]["rollout"] >= summary["sections"]["rollout/env_step"]


def test_the_analytic_update_matches_the_autograd_update_end_to_end() -> None:
    fast, fast_summary = train(small_config(2, policy__analytic=True))
    slow, slow_summary = train(small_config(2, policy__analytic=False))
    torch.testing.assert_close(fast.policy.flat, slow.policy.flat, rtol=1e-4, atol=1e-5)
    for name, value in slow_summary["final_stats"].items():
        assert fast_summary["final_stats"][name] == pytest.approx(value, rel=1e-4, abs=1e-6), name


@pytest.mark.kernel("update")
def test_the_native_update_trains_as_the_analytic_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three iterations with the MLP's native update against the torch analytic update: the
    same run within float32 rounding, and the kernel's own timings in the update's sections
    (one call per minibatch in each)."""
    native_trainer, native_summary = train(small_config(3))
    monkeypatch.setattr("rlperf.ppo.build.native_update_applies", lambda *_: False)
    torch_trainer, torch_summary = train(small_config(3))
    assert (native_summary["update"], torch_summary["update"]) == (
        "NativeMLPUpdate", "AnalyticUpdate",
    )  # fmt: skip
    torch.testing.assert_close(
        native_trainer.policy.flat, torch_trainer.policy.flat, rtol=1e-4, atol=1e-5
    )
    for name, value in torch_summary["final_stats"].items():
        assert native_summary["final_stats"][name] == pytest.approx(value, rel=1e-3, abs=1e-5)
    assert native_summary["mean_return_last_100"] == torch_summary["mean_return_last_100"]
    minibatches = 3 * 2 * 4  # iterations x epochs x minibatches
    for name in ("update/loss", "update/backward", "update/optimizer_step"):
        stats = next(s for s in native_trainer.prof.stats() if s.name == name)
        assert stats.calls == minibatches and 0 < stats.min_ns <= stats.max_ns, name


def test_callbacks_see_every_iteration_row() -> None:
    trainer = Trainer(small_config(3), profiler=Profiler())
    seen = []
    trainer.callbacks.append(lambda t, row: seen.append((t is trainer, row["iteration"])))
    trainer.train()
    assert seen == [(True, 1), (True, 2), (True, 3)]


@pytest.mark.usefixtures("isolated_env_registry")
def test_rollout_advantages_bootstrap_truncated_episodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """collect() + compute_advantages() on a CartPole truncated every 5 steps equal the reference
    GAE loop fed with what the env returned and V(final observation) at each truncation."""
    register("test_trainer_cartpole_5_steps", lambda n: CartPoleVec(n, max_episode_steps=5))
    trainer = Trainer(small_config(2, env__env="test_trainer_cartpole_5_steps"), Profiler())
    steps = []
    original_step = trainer.env.step

    def recording_step(actions):
        out = original_step(actions)
        steps.append(out)
        return out

    monkeypatch.setattr(trainer.env, "step", recording_step)
    trainer.collect()
    trainer.compute_advantages()
    assert len(steps) == NUM_STEPS
    policy, buf = trainer.policy, trainer.buffer
    terms = [s[2].tolist() for s in steps]
    truncs = [s[3].tolist() for s in steps]
    assert sum(map(sum, truncs)) >= NUM_ENVS * 3, "every env truncates three times"
    final_values = []
    for _, _, _, trunc, infos in steps:
        if trunc.any():
            final_obs = torch.from_numpy(np.asarray(infos["final_obs"], dtype=np.float32))
            final_values.append(policy.value(final_obs).tolist())
        else:
            final_values.append([0.0] * NUM_ENVS)
    expected = gae_reference(
        [s[1].tolist() for s in steps],
        buf.values.tolist(),
        policy.value(buf.next_obs).tolist(),
        terms,
        truncs,
        final_values,
        trainer.cfg.ppo.gamma,
        trainer.cfg.ppo.gae_lambda,
    )
    torch.testing.assert_close(buf.advantages, torch.tensor(expected))


def test_minibatch_size_equal_to_num_envs_trains() -> None:
    """act() (inference mode) and the update then share one workspace batch size; its buffers
    must stay writable outside inference mode."""
    from rlperf.config import Config
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 16, 4, 4
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 16 * 4 * 2, 1, False
    summary = Trainer(cfg, profiler=Profiler()).train()
    assert summary["iterations"] == 2


def test_summary_sections_cover_this_run_only_with_a_shared_profiler() -> None:
    from rlperf.config import Config
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    shared = Profiler()
    with shared.section("earlier_work"):
        pass

    def run() -> dict:
        cfg = Config()
        cfg.env.num_envs, cfg.ppo.num_steps = 8, 16
        cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 8 * 16 * 2, 1, False
        return Trainer(cfg, profiler=shared).train()["sections"]

    first, second = run(), run()
    assert "earlier_work" not in first
    assert second["rollout"] < shared.totals_s()["rollout"]  # not the cumulative total
    assert second["rollout"] == pytest.approx(
        shared.totals_s()["rollout"] - first["rollout"], rel=1e-9
    )


class FakeClock:
    """The training log's clock, moved on by hand (a test of the budget must not depend on how
    fast this machine runs)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


def test_anneal_with_wall_takes_the_learning_rate_to_0_over_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 s an iteration against a 40 s budget and 8 iterations: the seconds run out first, so
    iteration k's rate is 1 - (k - 1) / 4 of the start (steps alone: 1 - (k - 1) / 8)."""
    from rlperf.ppo import trainer as trainer_module
    from rlperf.run import training_log

    clock = FakeClock()
    monkeypatch.setattr(training_log, "time", clock)
    monkeypatch.setattr(trainer_module, "time", clock)
    cfg = small_config(8, run__max_wall_s=40.0, ppo__anneal_with_wall=True)
    trainer = Trainer(cfg, profiler=Profiler())
    trainer.callbacks.append(lambda trainer, row: setattr(clock, "now", clock.now + 10.0))
    trainer.train(tmp_path / "run")
    rates = [row["learning_rate"] / cfg.ppo.learning_rate for row in metrics(tmp_path / "run")]
    assert rates == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0])


def test_the_kl_target_moves_the_rate_by_each_iteration_s_kl_and_resumes_with_it(
    tmp_path: Path,
) -> None:
    """``--lr-kl-target``: each iteration's logged rate is the last one's, moved by rl_games'
    rule from the last one's logged approx KL (no anneal); Ctrl-C after iteration 3 and
    ``--resume`` give the run that never stopped, rates and parameters."""
    cfg = small_config(6, run__checkpoint_every=3, ppo__lr_kl_target=0.004)
    straight, _ = train(cfg, tmp_path / "straight")
    rows = metrics(tmp_path / "straight")
    rate = cfg.ppo.learning_rate
    for row in rows:
        assert row["learning_rate"] == rate
        rate = kl_adapted_lr(rate, row["approx_kl"], 0.004)
    assert len({row["learning_rate"] for row in rows}) > 1, "the rate moved"

    ctrl_c_after(
        small_config(6, run__checkpoint_every=3, ppo__lr_kl_target=0.004), 3, tmp_path / "resumed"
    )
    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert without_timing(metrics(tmp_path / "resumed")) == without_timing(rows)
    resumed = load_weights_only(tmp_path / "resumed" / "checkpoint.pt")
    assert torch.equal(resumed["policy"]["flat"], straight.policy.flat.detach())


def test_the_final_std_caps_the_log_std_as_a_clamp_after_each_update_would() -> None:
    """``--final-std`` on Pendulum: the parameters equal those of a run without it whose
    callback clamps the log-std to the ceiling after each iteration (the obvious version),
    bit for bit, and the std ends at the final std."""
    box = {"env__env": "gym:Pendulum-v1", "ppo__learning_rate": 1e-2}
    capped = Trainer(small_config(4, ppo__final_std=0.2, **box), profiler=Profiler())
    capped.train()

    reference_cfg = small_config(4, **box)
    reference = Trainer(reference_cfg, profiler=Profiler())
    ceiling_cfg = small_config(4, ppo__final_std=0.2, **box)

    def clamp(trainer: Trainer, row: dict) -> None:
        done = trainer.iteration / trainer.num_iterations
        with torch.no_grad():
            trainer.policy.logstd().clamp_(max=log_std_ceiling(ceiling_cfg, done))

    reference.callbacks.append(clamp)
    reference.train()
    assert torch.equal(capped.policy.flat, reference.policy.flat)
    final = capped.policy.logstd().detach()
    assert torch.allclose(final, torch.full_like(final, np.log(0.2)), atol=1e-6)


def test_wall_budget_stops_after_the_iteration_it_ran_out_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 s an iteration against a 25 s budget: rows at 0, 10, 20 and 30 s, so the run stops
    after iteration 4 of 8, with its checkpoint and summary written as at the end; its rows are
    the unbudgeted run's first four."""
    from rlperf.run import training_log

    clock = FakeClock()
    monkeypatch.setattr(training_log, "time", clock)
    trainer = Trainer(small_config(8, run__max_wall_s=25.0), profiler=Profiler())

    def tick(trainer: Trainer, row: dict) -> None:
        clock.now += 10.0

    trainer.callbacks.append(tick)
    summary = trainer.train(tmp_path / "budget")
    rows = metrics(tmp_path / "budget")
    assert [row["wall_s"] for row in rows] == [0.0, 10.0, 20.0, 30.0]
    assert summary["iterations"] == 4 and summary["global_step"] == 4 * BATCH
    assert summary["budget_spent"] is True and summary["max_wall_s"] == 25.0
    saved = json.loads((tmp_path / "budget" / "summary.json").read_text())
    assert saved["iterations"] == 4 and saved["budget_spent"] is True
    assert load_weights_only(tmp_path / "budget" / "checkpoint.pt")["iteration"] == 4

    _, full = train(small_config(8), tmp_path / "full")
    assert full["iterations"] == 8 and full["budget_spent"] is False
    assert without_timing(rows) == without_timing(metrics(tmp_path / "full"))[:4]


def test_wall_s_counts_seconds_since_the_run_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row's wall_s is the clock at the row less the clock when training started."""
    from rlperf.run import training_log

    clock = FakeClock()
    monkeypatch.setattr(training_log, "time", clock)
    trainer = Trainer(small_config(3), profiler=Profiler())
    trainer.callbacks.append(lambda trainer, row: setattr(clock, "now", clock.now + 2.5))
    trainer.train(tmp_path)
    assert [row["wall_s"] for row in metrics(tmp_path)] == [0.0, 2.5, 5.0]
