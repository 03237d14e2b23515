"""--tensorboard: the metrics rows as TensorBoard scalars, read back from the event file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rlperf.cli import main
from rlperf.commandline import EXIT_INTERRUPTED
from rlperf.envs import CartPoleVec

TINY = ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--update-epochs",
        "1", "--threads", "1", "--seed", "4", "--no-progress"]  # fmt: skip
BATCH = 8 * 16
# Every test but the one of the missing package writes or reads TensorBoard files.
needs_tensorboard = pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None,
    reason="needs the tensorboard extra: pip install 'rlperf[tensorboard]'",
)
CHARTS = {"charts/sps", "charts/sps_cumulative", "charts/learning_rate"}
LOSSES = {f"losses/{k}" for k in ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")}


def scalars(log_dir: Path) -> Any:
    """TensorBoard's reader (an ``EventAccumulator``) over ``log_dir``, loaded."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return acc


def steps(acc: Any, tag: str) -> list[int]:
    return [e.step for e in acc.Scalars(tag)]


@needs_tensorboard
def test_train_writes_every_metric_per_iteration(tmp_path: Path) -> None:
    argv = ["train", *TINY, "--total-steps", str(3 * BATCH), "--run-dir", str(tmp_path)]
    assert main([*argv, "--tensorboard"]) == 0
    acc = scalars(tmp_path / "tensorboard")
    tags = set(acc.Tags()["scalars"])
    assert CHARTS | LOSSES <= tags
    assert {"sections/rollout", "sections/rollout/env_step", "sections/update/backward"} <= tags
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    expected_steps = [row["global_step"] for row in rows]
    assert expected_steps == [BATCH, 2 * BATCH, 3 * BATCH]
    for tag in CHARTS | LOSSES | {"sections/update"}:
        assert steps(acc, tag) == expected_steps, tag
    # The values are the metrics.jsonl figures (float32 in the event file).
    for key in ("sps_cumulative", "pg_loss", "entropy"):
        tag = ("charts/" if key.startswith("sps") else "losses/") + key
        got = [e.value for e in acc.Scalars(tag)]
        assert got == pytest.approx([row[key] for row in rows], rel=1e-6)
    # The writer's own time is measurement, not training.
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["sections"]["measurement/tensorboard"] > 0


@needs_tensorboard
def test_tensorboard_needs_a_run_dir(usage_error, capsys: pytest.CaptureFixture) -> None:
    line = usage_error(["train", *TINY, "--tensorboard"])
    assert "--tensorboard needs --run-dir" in line


@needs_tensorboard
def test_profile_tensorboard_needs_run_dir_or_out(
    usage_error, capsys: pytest.CaptureFixture
) -> None:
    line = usage_error(["profile", *TINY, "--tensorboard"])
    assert "--tensorboard needs --run-dir or --out" in line


def test_missing_package_is_one_line_naming_the_extra(
    usage_error, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes `import` raise ImportError, as if the package were absent.
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    for command in ("train", "profile"):
        argv = [command, *TINY, "--run-dir", str(tmp_path / "r"), "--tensorboard"]
        line = usage_error(argv)
        assert "pip install 'rlperf[tensorboard]'" in line
    assert not (tmp_path / "r").exists()


def interrupt_at_env_step(monkeypatch: pytest.MonkeyPatch, call: int) -> dict[str, bool]:
    """CartPole raises KeyboardInterrupt (as Ctrl-C) on its ``call``-th step while armed."""
    original = CartPoleVec.step
    state = {"n": 0, "armed": True}

    def step(self, actions):
        state["n"] += 1
        if state["armed"] and state["n"] == call:
            raise KeyboardInterrupt
        return original(self, actions)

    monkeypatch.setattr(CartPoleVec, "step", step)
    return state


@needs_tensorboard
def test_resume_replaces_what_the_stopped_run_logged_after_its_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpoint at iteration 2, Ctrl-C inside iteration 4: step 3 was logged, not saved.
    state = interrupt_at_env_step(monkeypatch, 3 * 16 + 2)
    argv = ["train", *TINY, "--run-dir", str(tmp_path), "--tensorboard", "--checkpoint-every",
            "2", "--total-steps", str(5 * BATCH)]  # fmt: skip
    assert main(argv) == EXIT_INTERRUPTED
    assert steps(scalars(tmp_path / "tensorboard"), "losses/loss") == [BATCH, 2 * BATCH, 3 * BATCH]
    state["armed"] = False
    resume = ["train", "--resume", str(tmp_path), "--total-steps", str(4 * BATCH)]
    assert main([*resume, "--tensorboard", "--no-progress"]) == 0
    acc = scalars(tmp_path / "tensorboard")
    assert steps(acc, "losses/loss") == [BATCH, 2 * BATCH, 3 * BATCH, 4 * BATCH]
    # Step 3 is the resumed run's value (the same, as resume is exact), logged once.
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [e.value for e in acc.Scalars("losses/loss")] == pytest.approx(
        [row["loss"] for row in rows], rel=1e-6
    )


@needs_tensorboard
def test_ctrl_c_still_flushes_the_scalars(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupt_at_env_step(monkeypatch, 2 * 16 + 3)  # inside iteration 3
    argv = ["train", *TINY, "--total-steps", str(5 * BATCH), "--run-dir", str(tmp_path)]
    assert main([*argv, "--tensorboard"]) == EXIT_INTERRUPTED
    assert steps(scalars(tmp_path / "tensorboard"), "charts/sps") == [BATCH, 2 * BATCH]


@needs_tensorboard
def test_profile_traces_sit_where_the_profiler_plugin_looks(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p"
    argv = ["profile", *TINY, "--total-steps", str(3 * BATCH), "--out", str(out), "--tensorboard",
            "--torch-profiler", "--wait", "0", "--warmup", "1", "--active", "1"]  # fmt: skip
    assert main(argv) == 0
    log_dir = out / "tensorboard"
    (trace,) = log_dir.glob("plugins/profile/*/*.pt.trace.json")
    assert trace.name.endswith(".pt.trace.json")
    assert f"tensorboard --logdir {log_dir}" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["artifacts"]["torch_traces"] == [str(trace)]
    assert "tensorboard" in report["run"]["instrumentation"]
    assert steps(scalars(log_dir), "losses/loss") == [BATCH, 2 * BATCH, 3 * BATCH]
