"""Training with observation/reward normalisation (envs/normalize.py): the logged returns are
the env's own, the statistics are checkpointed and a resume continues exactly, and bad
settings are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf.cli import main
from rlperf.config import Config, ConfigError, preset
from rlperf.ppo.checks import check_config
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler

NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}


def small_config(iterations: int, **overrides) -> Config:
    """A few-second CPU run: 8 envs x 16 steps, 4 minibatches x 2 epochs, one thread."""
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = NUM_ENVS, NUM_STEPS, 2
    cfg.run.total_steps = iterations * BATCH
    cfg.run.threads, cfg.run.progress, cfg.run.seed = 1, False, 3
    for dotted, value in overrides.items():
        section, name = dotted.split("__")
        setattr(getattr(cfg, section), name, value)
    return cfg


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


def normalized_config(iterations: int, **overrides) -> Config:
    cfg = small_config(iterations, **overrides)
    cfg.env.normalize_obs = cfg.env.normalize_reward = True
    return cfg.validate()


def test_logged_returns_are_the_envs_own_not_the_normalised_sum() -> None:
    """Pendulum's rewards are -16..0 a step: a 200-step episode's own return is hundreds
    below zero, the normalised and clipped rewards' sum something else."""
    cfg = normalized_config(
        1, env__env="gym:Pendulum-v1", env__num_envs=2, ppo__num_steps=400, run__total_steps=800
    )
    trainer = Trainer(cfg, profiler=Profiler())
    raw_returns: list[float] = []
    totals = np.zeros(2)
    step = trainer.env.step

    def recording_step(actions):
        obs, rewards, term, trunc, infos = step(actions)
        totals[:] += rewards
        for i in np.flatnonzero(term | trunc):
            raw_returns.append(float(totals[i]))
            totals[i] = 0.0
        return obs, rewards, term, trunc, infos

    trainer.env.step = recording_step
    trainer.train()
    assert trainer.normalizer is not None
    assert len(raw_returns) == 4 and trainer.episodes.count == 4
    np.testing.assert_allclose(sorted(trainer.episodes.returns), sorted(raw_returns), rtol=1e-6)
    assert max(raw_returns) < -100.0  # the env's own scale, not the normalised one


def test_observations_reaching_the_policy_are_normalised() -> None:
    cfg = normalized_config(
        2, env__env="gym:Pendulum-v1", env__num_envs=2, ppo__num_steps=64, run__total_steps=256
    )
    trainer = Trainer(cfg, profiler=Profiler())
    trainer.train()
    obs = trainer.buffer.obs[:-1].reshape(-1, 3)
    # Pendulum's angular velocity is in [-8, 8]: normalised it is about unit scale.
    assert obs.abs().max() <= 10.0
    assert abs(float(obs.mean())) < 1.0
    assert "rollout/normalize" in trainer.prof.totals_s()


def test_resume_restores_the_statistics_and_continues_exactly(tmp_path: Path) -> None:
    """rlperf's CartPole has a checkpointable state: a run stopped after iteration 3 and
    resumed ends where the uninterrupted run does, which needs the statistics and the running
    discounted returns restored exactly."""
    straight = Trainer(normalized_config(6, run__checkpoint_every=3), profiler=Profiler())
    straight.train(tmp_path / "straight")

    interrupted = Trainer(normalized_config(6, run__checkpoint_every=3), profiler=Profiler())

    def stop_after_checkpoint(trainer: Trainer, row: dict) -> None:
        if row["iteration"] == 3:
            raise KeyboardInterrupt

    interrupted.callbacks.append(stop_after_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        interrupted.train(tmp_path / "resumed")
    saved = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)
    assert saved["normalizer"]["obs"]["count"].item() > 3 * BATCH / 8

    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert without_timing(metrics(tmp_path / "resumed")) == without_timing(
        metrics(tmp_path / "straight")
    )
    resumed = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)
    assert torch.equal(resumed["policy"]["flat"], straight.policy.flat.detach())
    state = straight.normalizer.state_dict()
    np.testing.assert_array_equal(
        resumed["normalizer"]["obs"]["mean"].numpy(), state["obs"]["mean"]
    )


def test_mujoco_preset_is_cleanrls_continuous_settings() -> None:
    cfg = preset("mujoco")
    assert cfg.env.env == "gym:HalfCheetah-v5"
    # CleanRL's 2048 steps an iteration, as 8 envs x 256 on MuJoCo's batch threads.
    assert (cfg.env.num_envs, cfg.env.backend) == (8, "auto")
    assert (cfg.env.num_envs * cfg.ppo.num_steps, cfg.ppo.num_minibatches,
            cfg.ppo.update_epochs) == (2048, 32, 10)  # fmt: skip
    assert (cfg.ppo.learning_rate, cfg.ppo.ent_coef, cfg.ppo.gamma) == (3e-4, 0.0, 0.99)
    assert cfg.env.normalize_obs and cfg.env.normalize_reward and not cfg.env.norm_per_env
    assert (cfg.env.clip_obs, cfg.env.clip_reward) == (10.0, 10.0)
    assert cfg.run.total_steps == 1_000_000


def test_bad_normalisation_settings_are_one_line() -> None:
    cfg = small_config(1, env__env="catch")
    cfg.env.normalize_obs = True
    cfg.policy.kind = "cnn"
    with pytest.raises(ConfigError, match="--normalize-obs takes float observations"):
        check_config(cfg)
    done = subprocess.run(
        [sys.executable, "-m", "rlperf", "train", "--clip-obs", "-1", "--normalize-obs",
         "--total-steps", "4096"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and "clip_obs must be >= 0" in err[0]


def test_summary_reports_env_returns_with_normalisation(tmp_path: Path) -> None:
    code = main([
        "train", "--env", "gym:Pendulum-v1", "--num-envs", "2", "--num-steps", "200",
        "--total-steps", "800", "--normalize-obs", "--normalize-reward", "--no-progress",
        "--run-dir", str(tmp_path / "run"), "--threads", "1",
    ])  # fmt: skip
    assert code == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["mean_return_last_100"] < -100.0
