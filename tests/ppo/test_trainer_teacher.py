"""Supervised-then-PPO with the grid's scripted teacher, and the rollout timing block."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf.cli import main
from rlperf.config import Config, ConfigError
from rlperf.ppo.trainer import Trainer
from rlperf.run.rollout_timing import OTHER, TOTAL
from rlperf.timing import names
from rlperf.timing.sections import Profiler

MAPS, AGENTS, NUM_STEPS = 2, 4, 16
ROWS = MAPS * AGENTS
BATCH = ROWS * NUM_STEPS
GRID = ["--env", "grid", "--env-option", "mission=extractor_hub_12", "--num-envs", str(MAPS),
        "--policy", "cnn", "--cnn-channels", "8", "--cnn-features", "32",
        "--num-steps", str(NUM_STEPS), "--threads", "1", "--no-progress"]  # fmt: skip


def config(iterations: int, supervised_iterations: int, **run) -> Config:
    cfg = Config()
    cfg.env.env, cfg.env.num_envs = "grid", MAPS
    cfg.env.options = {"mission": "extractor_hub_12"}
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "cnn", (8,), 32
    cfg.ppo.num_steps, cfg.ppo.update_epochs = NUM_STEPS, 2
    cfg.teacher.supervised_steps = supervised_iterations * BATCH
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = iterations * BATCH, 1, False
    for key, value in run.items():
        setattr(cfg.run, key, value)
    return cfg.validate()


def test_the_teacher_runs_only_in_the_supervised_phase(tmp_path: Path) -> None:
    trainer = Trainer(config(4, 2, summary_every=1), profiler=Profiler())
    assert trainer.rows == ROWS and trainer.buffer.obs.shape[1] == ROWS
    calls = []
    teacher = trainer.teacher_phase.teacher

    def counting_teacher(obs: np.ndarray) -> np.ndarray:
        calls.append(trainer.iteration)
        assert obs.shape == (ROWS, *trainer.spec.obs_shape) and obs.dtype == np.uint8
        return teacher(obs)

    trainer.teacher_phase.teacher = counting_teacher
    summary = trainer.train(tmp_path / "run")
    assert calls == [1] * NUM_STEPS + [2] * NUM_STEPS, "called every step of iterations 1-2 only"
    assert summary["teacher_calls"] == {"supervised": 2 * NUM_STEPS, "ppo": 0}
    assert summary["phase"] == "ppo"
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["phase"] for r in rows] == ["supervised", "supervised", "ppo", "ppo"]
    for r in rows[:2]:
        assert 0.0 <= r["teacher_agreement"] <= 1.0 and "cross_entropy" in r
        assert "pg_loss" not in r
    for r in rows[2:]:
        assert "teacher_agreement" not in r and "pg_loss" in r
        assert r["teacher_calls"]["ppo"] == 0
        # Not called, not timed: no teacher section in the PPO phase's timing block.
        assert not any(k.startswith(names.TEACHER) for k in r["rollout_timing_ms"])
    # The lead is annealed linearly from 0.5 to 0 over the supervised phase.
    assert rows[0]["teacher_lead"] == pytest.approx(0.5)
    assert rows[1]["teacher_lead"] == pytest.approx(0.25)


def test_timing_block_rows_add_up_to_the_rollout_total(tmp_path: Path, capsys) -> None:
    trainer = Trainer(config(2, 2, summary_every=1, progress=False), profiler=Profiler())
    trainer.train(tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    for r in rows:
        timing = r["rollout_timing_ms"]
        top = [v for k, v in timing.items() if k not in (TOTAL,) and "/" not in k]
        assert sum(top) == pytest.approx(timing[TOTAL], rel=1e-9)
        assert timing[OTHER] >= 0
        parts = [v for k, v in timing.items() if k.startswith(names.TEACHER + "/")]
        assert len(parts) == 4 and sum(parts) <= timing[names.TEACHER] * (1 + 1e-9)
    out = capsys.readouterr().out
    assert out.count("Rollout Timing Profile") == 2
    for label in ("student forward", "teacher total", "reshape", "device->host",
                  "teacher call", "to device", "env step", "replay store", "other",
                  "<-- largest"):  # fmt: skip
        assert label in out


def test_the_supervised_update_moves_the_student_towards_the_teacher() -> None:
    trainer = Trainer(config(1, 1), profiler=Profiler())
    trainer.collect(supervised=trainer.teacher_phase.begin_rollout(trainer.global_step))
    trainer.compute_advantages()
    buf = trainer.buffer
    target = buf.teacher_actions.clone()

    def cross_entropy() -> float:
        with torch.no_grad():
            logprob, _, _ = trainer.policy.evaluate(buf.obs, target, (), None)
        return float(-logprob.mean())

    before = cross_entropy()
    for _ in range(3):
        trainer.update(supervised=True)
    assert cross_entropy() < before


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--supervised-steps", "999999"], "--supervised-steps 999999 is longer than the run"),
        (["--supervised-steps", "-1"], "supervised_steps must be >= 0"),
        (["--teacher-lead", "1.5"], "teacher_lead must be in [0, 1]"),
        (["--policy", "mlp"], "policy 'mlp' takes flat observations"),
        (["--env-option", "num_agents=500"], "env 'grid'"),
        (["--env-option", "mission=nowhere"], "mission"),
    ],
)
def test_bad_teacher_input_is_one_line_exit_2(tmp_path, capsys, extra, message) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", *GRID, "--total-steps", str(4 * BATCH), "--supervised-steps", "128",
              "--run-dir", str(tmp_path / "run"), *extra])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf: error: ") and message in err[0]
    assert not (tmp_path / "run").exists()


def test_a_supervised_phase_needs_an_env_with_a_teacher() -> None:
    cfg = Config()
    cfg.teacher.supervised_steps = 1024
    with pytest.raises(ConfigError, match="scripted teacher"):
        Trainer(cfg.validate(), profiler=Profiler())
