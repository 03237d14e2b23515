"""The trainer on env workers: the same run as the serial backend (gym ids, synchronous), exact
resume, asynchronous batches for feed-forward and recurrent policies, the teacher in workers,
and the sections and worker times the breakdown shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from rlperf.cli import main
from rlperf.config import Config
from rlperf.envs.backends import AUTO_SPIN_US
from rlperf.openmp import SPIN_VAR, WORKERS_SPIN_COUNT
from rlperf.ppo.trainer import Trainer
from rlperf.threads import PhaseThreads
from rlperf.timing import names
from rlperf.timing.sections import Profiler

NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}


@pytest.fixture(autouse=True)
def _no_orphans(no_orphans):
    """Every test here leaves exactly the child processes it found."""


def config(iterations: int, **overrides) -> Config:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = NUM_ENVS, NUM_STEPS, 2
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress, cfg.run.seed = (
        iterations * BATCH, 1, False, 3,
    )  # fmt: skip
    for dotted, value in overrides.items():
        section, name = dotted.split("__")
        setattr(getattr(cfg, section), name, value)
    return cfg.validate()


def workers(n: int = 2, batch: int = 0) -> dict:
    return {"env__backend": "multiprocess", "env__num_workers": n, "env__env_batch_size": batch}


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


def train(cfg: Config, run_dir: Path) -> tuple[Trainer, dict]:
    trainer = Trainer(cfg, profiler=Profiler())
    try:
        return trainer, trainer.train(run_dir)
    finally:
        trainer.env.close()


def test_sync_workers_train_exactly_as_the_serial_backend(tmp_path: Path) -> None:
    """gym ids seed each env alike on both backends: the same losses and returns, step for
    step; the rollout's env time is split into the send and the wait on the workers."""
    gym = {"env__env": "gym:CartPole-v1"}
    _, serial = train(config(3, **gym), tmp_path / "serial")
    _, multi = train(config(3, **gym, **workers(2)), tmp_path / "multi")
    assert metrics(tmp_path / "multi") == metrics(tmp_path / "serial")
    send, recv = (names.path(names.ROLLOUT, n) for n in (names.ENV_SEND, names.ENV_RECV))
    assert send in multi["sections"] and recv in multi["sections"]
    assert names.path(names.ROLLOUT, names.ENV_STEP) not in multi["sections"]
    assert serial["env_workers"] is None and serial["env_worker_spin_us"] is None
    times = multi["env_workers"]
    assert len(times) == 2 and all(t["busy_s"] > 0 and t["idle_s"] >= 0 for t in times)


def test_an_inline_worker_trains_exactly_as_the_serial_backend(tmp_path: Path) -> None:
    """Worker 0 in the trainer's process changes where a share steps, not what it computes."""
    gym = {"env__env": "gym:CartPole-v1"}
    train(config(3, **gym), tmp_path / "serial")
    trainer, multi = train(config(3, **gym, **workers(2), env__inline_worker=True,
                                  env__worker_spin_us=120.0), tmp_path / "inline")  # fmt: skip
    assert metrics(tmp_path / "inline") == metrics(tmp_path / "serial")
    assert len(multi["env_workers"]) == 2 and multi["env_workers"][0]["busy_s"] > 0
    assert multi["env_worker_spin_us"] == pytest.approx(120.0)


def test_a_run_with_an_inline_worker_resumes_exactly(tmp_path: Path) -> None:
    overrides = {**workers(2), "env__inline_worker": True, "run__checkpoint_every": 2}
    train(config(4, **overrides), tmp_path / "straight")
    interrupt_after_iteration_2(overrides, tmp_path / "resumed")
    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert metrics(tmp_path / "resumed") == metrics(tmp_path / "straight")


def interrupt_after_iteration_2(overrides: dict, run_dir: Path) -> None:
    interrupted = Trainer(config(4, **overrides), profiler=Profiler())

    def stop_after_checkpoint(trainer: Trainer, row: dict) -> None:
        if row["iteration"] == 2:
            raise KeyboardInterrupt

    interrupted.callbacks.append(stop_after_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        try:
            interrupted.train(run_dir)
        finally:
            interrupted.env.close()


def test_a_run_on_sync_workers_resumes_exactly(tmp_path: Path) -> None:
    overrides = {**workers(2), "run__checkpoint_every": 2}
    train(config(4, **overrides), tmp_path / "straight")
    interrupt_after_iteration_2(overrides, tmp_path / "resumed")
    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert metrics(tmp_path / "resumed") == metrics(tmp_path / "straight")


def test_a_run_on_async_workers_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Asynchronous batches arrive in whichever order the workers finish, so two runs differ
    from the first rollout on (docs/workers.md); a resume continues from the checkpoint: the
    first two rows kept, the envs' states restored, the run completed."""
    overrides = {**workers(2, NUM_ENVS // 2), "run__checkpoint_every": 2}
    interrupt_after_iteration_2(overrides, tmp_path / "resumed")
    before = metrics(tmp_path / "resumed")
    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    after = metrics(tmp_path / "resumed")
    assert after[:2] == before[:2]
    assert [r["global_step"] for r in after] == [BATCH * i for i in range(1, 5)]


@pytest.mark.parametrize(
    "policy",
    [
        {"policy__kind": "mlp"},
        {"policy__kind": "lstm", "env__options": {"observe": "position"}, "ppo__bptt_horizon": 4},
        {
            "policy__kind": "convlstm",
            "env__env": "catch",
            "policy__convlstm_channels": 4,
            "policy__cnn_features": 16,
        },
    ],  # fmt: skip
    ids=["mlp", "lstm-bptt", "convlstm"],
)
def test_async_batches_train_every_policy(tmp_path: Path, policy: dict) -> None:
    trainer, summary = train(config(3, **policy, **workers(2, NUM_ENVS // 2)), tmp_path / "r")
    assert summary["global_step"] == 3 * BATCH and summary["iterations"] == 3
    rows = metrics(tmp_path / "r")
    assert all(r["loss"] == r["loss"] for r in rows)  # finite, not NaN
    assert names.path(names.ROLLOUT, names.ENV_RECV) in summary["sections"]


def test_the_teacher_phase_runs_on_workers(tmp_path: Path) -> None:
    grid = {
        "env__env": "grid", "env__num_envs": 2, "env__options": {"mission": "extractor_hub_12"},
        "policy__kind": "cnn", "policy__cnn_channels": (8,), "policy__cnn_features": 32,
        "teacher__supervised_steps": 2 * BATCH,
    }  # fmt: skip
    _, summary = train(config(3, **grid, **workers(2)), tmp_path / "grid")
    assert summary["teacher_calls"] == {"supervised": 2 * NUM_STEPS, "ppo": 0}
    rows = metrics(tmp_path / "grid")
    assert [r["phase"] for r in rows] == ["supervised", "supervised", "ppo"]


@pytest.fixture
def restore_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("restore_torch_threads")
@pytest.mark.parametrize(("backend", "rollout"), [("multiprocess", 1), ("serial", 2)])
def test_with_workers_the_rollout_runs_on_one_thread_and_the_update_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, rollout: int
) -> None:
    seen: dict[str, set[int]] = {"rollout": set(), "update": set()}
    original = PhaseThreads.begin

    def spy(self: PhaseThreads) -> int:
        count = original(self)
        seen[self.name].add(torch.get_num_threads())
        return count

    monkeypatch.setattr(PhaseThreads, "begin", spy)
    # Two cores: the automatic spin needs the inline worker and the rollout's single thread.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setenv(SPIN_VAR, WORKERS_SPIN_COUNT)  # as the rlperf command sets it
    inline = {"env__inline_worker": True} if backend == "multiprocess" else {}
    cfg = config(2, env__backend=backend, run__threads=2, run__adapt_threads=False, **inline)
    trainer, summary = train(cfg, tmp_path / backend)
    assert seen == {"rollout": {rollout}, "update": {2}}
    assert summary["rollout_threads"] == rollout and summary["threads"] == 2
    if backend == "multiprocess":  # decided for the rollout's one thread, not the update's two
        assert summary["env_worker_spin_us"] == AUTO_SPIN_US


@pytest.mark.usefixtures("restore_torch_threads")
def test_at_two_threads_inline_workers_still_train_exactly_as_the_serial_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollout's one thread beside the workers and serial's two compute the same."""
    monkeypatch.setenv(SPIN_VAR, WORKERS_SPIN_COUNT)
    gym = {"env__env": "gym:CartPole-v1", "run__threads": 2, "run__adapt_threads": False}
    train(config(3, **gym), tmp_path / "serial")
    train(config(3, **gym, **workers(2), env__inline_worker=True), tmp_path / "inline")
    assert metrics(tmp_path / "inline") == metrics(tmp_path / "serial")


@pytest.mark.usefixtures("restore_torch_threads")
def test_without_a_short_openmp_spin_the_update_falls_back_to_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From Python, without the rlperf command's GOMP_SPINCOUNT, two update threads would spin
    into every rollout on the workers' core: the trainer says so and uses one."""
    monkeypatch.delenv(SPIN_VAR, raising=False)
    with pytest.warns(UserWarning, match="GOMP_SPINCOUNT is not set: with env workers"):
        _, summary = train(config(1, **workers(2), run__threads=2), tmp_path / "run")
    assert summary["threads"] == 1 and summary["rollout_threads"] == 1
    _, serial = train(config(1, run__threads=2), tmp_path / "serial")  # serial: no warning
    assert serial["threads"] == 2
