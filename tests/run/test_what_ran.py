"""What a run resolved is visible: one line at the start (steps rounded to whole iterations,
the env backend ``auto`` chose, the device, the threads), the same in ``config.json``'s
``resolved`` block; the progress line's return is the summary's (the mean of the last 100
episodes) and its last line is the run's end."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.config import read_preset_file
from rlperf.run.progress import ProgressBar

# 8 envs x 16 steps = 128 a rollout: 1,000 steps are 7 whole iterations, 896 steps.
TINY = ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs",
        "1", "--threads", "1", "--seed", "3", "--total-steps", "1000"]  # fmt: skip
PROGRESS = re.compile(r"(\d+)%\s+([\d,]+)/([\d,]+) steps \|.*\| mean return \(last 100\)\s+(\S+)")


def test_train_says_what_it_resolved_and_ends_where_the_summary_does(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["train", *TINY, "--vec-backend", "auto", "--run-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0] == (
        "run: 7 iterations of 128 steps = 896 steps (--total-steps 1,000 rounded down to "
        "whole iterations: each updates on a whole rollout, --num-steps 16 of every env) | "
        "env backend serial (--vec-backend auto) | device cpu | torch threads 1"
    )
    progress = [m for m in map(PROGRESS.search, err) if m]
    pct, step, total, ret = progress[-1].groups()
    assert (pct, step, total) == ("100", "896", "896")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["global_step"] == 896
    assert f"mean return (last 100) {summary['mean_return_last_100']:.1f} over" in captured.out
    assert ret == f"{summary['mean_return_last_100']:.1f}"
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["env"]["backend"] == "auto"  # as given, beside what it resolved to
    assert config["resolved"] == {
        "vec_backend": "serial", "device": "cpu", "threads": 1, "rollout_threads": 1,
        "ranks": 1, "steps_per_iteration": 128, "iterations": 7, "total_steps": 896,
    }  # fmt: skip
    # A run's config.json still reads as a preset file.
    assert read_preset_file(tmp_path / "config.json").overrides["env"]["backend"] == "auto"


def test_no_progress_prints_no_start_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *TINY, "--no-progress"]) == 0
    assert "iterations of" not in capsys.readouterr().err


def test_the_bar_prints_its_last_state_when_a_decile_did_not() -> None:
    stream = io.StringIO()  # not a terminal: a line per 10%
    bar = ProgressBar(1000, stream=stream)
    for step, ret in ((100, 1.0), (150, 2.0), (170, 3.5)):  # a run stopped at 17%
        bar.update(step, 10.0, ret)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert [PROGRESS.search(x).group(4) for x in lines] == ["1.0", "3.5"]  # type: ignore[union-attr]
    bar.close()  # nothing new to say
    assert stream.getvalue().splitlines() == lines
