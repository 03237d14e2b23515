"""``rlperf tune`` on CartPole with budgets of a second or two a trial: the preset file it writes
is one ``rlperf train`` reads, a crashing trial is recorded as failed, SIGTERM keeps every ended
trial and the same command resumes, and bad input is one line, exit 2, before any trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason="rlperf tune needs the tune extra: optuna")

from test_cli import expect_usage_error  # noqa: E402

from rlperf.cli import build_parser, main  # noqa: E402
from rlperf.config import preset  # noqa: E402
from rlperf.ppo.commands import config_from_args  # noqa: E402
from rlperf.tune import space, trial  # noqa: E402

WALL_S = "1.5"
# Trial 1 crashes before training; the others run rlperf train.
CRASHING_TRAIN = """
import sys
if any("trial-0001" in arg for arg in sys.argv):
    sys.exit("rlperf: error: a crash made by the test")
from rlperf.cli import main
sys.exit(main(sys.argv[1:]))
"""


def tune_args(folder: Path, trials: int = 3, wall_s: str = WALL_S) -> list[str]:
    return [
        "tune", "--env", "cartpole", "--trials", str(trials), "--trial-wall-s", wall_s,
        "--out", str(folder / "best.json"),
    ]  # fmt: skip


def load(folder: Path) -> optuna.Study:
    return optuna.load_study(
        study_name="rlperf-tune:default:cartpole", storage=f"sqlite:///{folder / 'best.db'}"
    )


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """Three trials in this process (trial 1's process crashes); the folder and exit status."""
    folder = tmp_path_factory.mktemp("tune")
    script = folder / "crashing_train.py"
    script.write_text(CRASHING_TRAIN)
    patch = pytest.MonkeyPatch()
    patch.setattr(trial, "TRAIN_COMMAND", [sys.executable, str(script), "train"])
    patch.chdir(folder)  # the stand-in script imports rlperf from the installed package
    try:
        status = main(tune_args(folder))
    finally:
        patch.undo()
    return folder, status


def test_three_trials_write_a_preset_file_that_train_reads(tuned: tuple[Path, int]) -> None:
    folder, status = tuned
    assert status == 0
    study = load(folder)
    states = [t.state for t in study.trials]
    assert len(states) == 3 and states[0] == optuna.trial.TrialState.COMPLETE
    first = study.trials[0]
    assert first.user_attrs["start"] and first.params == space.start_values(preset("default"))
    assert first.intermediate_values, "the learning curve reached the pruner"
    best = json.loads((folder / "best.json").read_text())
    assert best["about"]["trial"] == study.best_trial.number
    assert best["about"]["return"] == study.best_value
    assert best["about"]["start_return"] == first.value
    cfg = config_from_args(
        build_parser().parse_args(["train", "--preset-file", str(folder / "best.json")])
    )
    assert cfg.env.env == "cartpole" and cfg.run.max_wall_s == float(WALL_S)
    assert cfg.ppo.anneal_with_wall
    assert cfg.ppo.learning_rate == study.best_params["learning_rate"]
    assert cfg.env.num_envs == study.best_params["num_envs"]
    assert "x".join(map(str, cfg.policy.hidden_sizes)) == study.best_params["hidden_sizes"]
    run_dir = folder / "train"
    argv = ["train", "--preset-file", str(folder / "best.json"), "--max-wall-s", "0.5"]
    assert main([*argv, "--run-dir", str(run_dir), "--no-progress"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] > 0


def test_a_crashing_trial_is_recorded_failed_with_its_last_line(tuned: tuple[Path, int]) -> None:
    folder, _ = tuned
    crashed = load(folder).trials[1]
    assert crashed.state == optuna.trial.TrialState.FAIL
    assert crashed.user_attrs["error"] == "rlperf: error: a crash made by the test"
    assert "interrupted" not in crashed.user_attrs, "a crash counts towards --trials"


def test_the_same_command_runs_no_trial_once_all_have_ended(
    tuned: tuple[Path, int], capsys: pytest.CaptureFixture
) -> None:
    folder, _ = tuned
    before = (folder / "best.json").read_text()
    assert main(tune_args(folder)) == 0
    assert len(load(folder).trials) == 3
    assert (folder / "best.json").read_text() == before
    assert "best: trial" in capsys.readouterr().out


def test_sigterm_keeps_the_ended_trials_and_the_same_command_resumes(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "rlperf.cli", *tune_args(tmp_path)]
    tune = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = tmp_path / "best-trials" / "trial-0001" / trial.PRESET_NAME
    deadline = time.monotonic() + 240
    while not second.exists() and tune.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert second.exists(), tune.communicate()
    tune.send_signal(signal.SIGTERM)
    out, err = tune.communicate(timeout=120)
    assert tune.returncode == 130, (out, err)
    assert "tune interrupted: 1 ended trials kept" in out and "the same command resumes" in out
    study = load(tmp_path)
    first, stopped = study.trials[0], study.trials[1]
    assert first.state == optuna.trial.TrialState.COMPLETE
    assert stopped.state == optuna.trial.TrialState.FAIL and stopped.user_attrs["interrupted"]
    assert not any(str(tmp_path) in " ".join(p) for p in running_commands()), "trial stopped"

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    study = load(tmp_path)
    assert study.trials[0].value == first.value, "the finished trial is kept as it was"
    retry = [t for t in study.trials if t.user_attrs.get("retry_of") == 1]
    assert len(retry) == 1 and retry[0].params == stopped.params
    counted = [t for t in study.trials if not t.user_attrs.get("interrupted")]
    assert len(counted) == 3


def running_commands() -> list[list[str]]:
    """The command lines of this machine's processes (those readable)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        found.append(process.info["cmdline"] or [])
    return found


def test_a_curve_is_read_line_by_line_as_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    curve = trial.Curve(path)
    assert curve.new_rows() == []
    path.write_text('{"wall_s": 0.5}\n{"wall_s": 1.0')
    assert curve.new_rows() == [{"wall_s": 0.5}], "a line still being written waits"
    with open(path, "a") as f:
        f.write(', "mean_return": 9.0}\n')
    assert curve.new_rows() == [{"wall_s": 1.0, "mean_return": 9.0}]
    assert curve.new_rows() == []


BAD_TUNES = [
    (["--trials", "0"], "--trials must be at least 1, got 0"),
    (["--trial-wall-s", "0"], "--trial-wall-s must be a positive number of seconds"),
    (["--trial-wall-s", "nan"], "--trial-wall-s must be a positive number of seconds"),
    (["--env", "cartpol"], "unknown env 'cartpol'"),
    (["--preset", "mujoco"], "--preset mujoco fits gym:Ant-v5"),
    (["--preset", "fastest"], "invalid choice: 'fastest'"),
    (["--storage", "tune.db"], "--storage must be a database URL such as sqlite:///tune.db"),
    (["--seed", "-1"], "seed must be between 0 and"),
    (["--out", "no/such/dir/best.json"], "--out: directory no/such/dir does not exist"),
    (["--trials-dir", "/proc/rlperf-trials"], "--trials-dir /proc/rlperf-trials"),
]


@pytest.mark.parametrize("change, message", BAD_TUNES, ids=[m for _, m in BAD_TUNES])
def test_bad_input_is_one_line_exit_2_before_any_trial(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    change: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = tune_args(Path("."))
    for flag, value in zip(change[::2], change[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    expect_usage_error(capsys, argv, message)
    assert os.listdir(tmp_path) == [], "nothing written"


def test_resuming_with_other_settings_is_one_line(
    tuned: tuple[Path, int], capsys: pytest.CaptureFixture
) -> None:
    folder, _ = tuned
    expect_usage_error(capsys, tune_args(folder, wall_s="3"), "with trial_wall_s 1.5, not 3.0")


def test_without_optuna_tune_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlperf.tune import commands

    real = commands.importlib.util.find_spec
    monkeypatch.setattr(
        commands.importlib.util, "find_spec", lambda name: None if name == "optuna" else real(name)
    )
    with pytest.raises(SystemExit):
        main(tune_args(tmp_path))
    assert "rlperf tune needs optuna: pip install 'rlperf[tune]'" in capsys.readouterr().err
