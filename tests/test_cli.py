"""``rlperf train`` from the command line: what a run leaves behind, and every bad input
rejected with one line on stderr and exit status 2 before any work, losing nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlperf.cli import main
from rlperf.commandline import EXIT_FAILED, EXIT_USAGE
from rlperf.cores import usable_cores
from rlperf.envs import CartPoleVec

SMALL = [
    "--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--update-epochs", "2",
    "--threads", "1", "--seed", "5",
]  # fmt: skip
BATCH = 8 * 16
METRIC_KEYS = {"global_step", "sps", "sps_cumulative", "mean_return", "sections_s"}
LOSS_KEYS = {"loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
SUMMARY_KEYS = {
    "sps", "sps_cumulative", "global_step", "wall_s", "mean_return_last_100", "episodes",
    "sections",
}  # fmt: skip
RUN_FILES = ["checkpoint.pt", "config.json", "metrics.jsonl", "summary.json"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlperf.cli", *args], capture_output=True, text=True, timeout=120
    )


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 3-iteration run directory (read-only for the tests that use it)."""
    run_dir = tmp_path_factory.mktemp("run") / "done"
    args = ["train", *SMALL, "--total-steps", str(3 * BATCH), "--no-progress"]
    assert main([*args, "--run-dir", str(run_dir)]) == 0
    return run_dir


def test_smoke_run_writes_the_run_directory(finished_run: Path) -> None:
    assert sorted(p.name for p in finished_run.iterdir()) == RUN_FILES

    config = json.loads((finished_run / "config.json").read_text())
    assert config["env"] == {
        "env": "cartpole",
        "num_envs": 8,
        "options": {},
        "backend": "serial",
        "num_workers": 2,
        "env_batch_size": 0,
        "oversubscribe": False,
        "inline_worker": False,
        "worker_spin_us": -1.0,
        "pin_workers": False,
        "normalize_obs": False,
        "normalize_reward": False,
        "clip_obs": 10.0,
        "clip_reward": 10.0,
        "norm_per_env": False,
    }
    assert config["policy"]["kind"] == "mlp"
    assert config["ppo"]["num_steps"] == 16 and config["run"]["seed"] == 5
    assert config["run"]["run_dir"] == str(finished_run)

    rows = [json.loads(x) for x in (finished_run / "metrics.jsonl").read_text().splitlines()]
    assert [row["global_step"] for row in rows] == [BATCH, 2 * BATCH, 3 * BATCH]
    for row in rows:
        assert METRIC_KEYS | LOSS_KEYS <= set(row)
        assert row["sps"] > 0 and row["sps_cumulative"] > 0
        assert {"rollout", "update", "gae"} <= set(row["sections_s"])

    summary = json.loads((finished_run / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["global_step"] == 3 * BATCH and summary["episodes"] > 0
    assert summary["sps"] > 0 and summary["sps_cumulative"] > 0 and summary["wall_s"] > 0
    assert summary["mean_return_last_100"] > 0
    assert {"rollout/env_step", "update/backward"} <= set(summary["sections"])

    checkpoint = torch.load(finished_run / "checkpoint.pt", weights_only=True)
    assert checkpoint["iteration"] == 3


def test_subprocess_smoke_run_prints_progress_sps_and_breakdown(tmp_path: Path) -> None:
    result = run_cli("train", *SMALL, "--total-steps", str(3 * BATCH), "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "SPS" in result.stdout and "Where the time went" in result.stdout
    for section in ("rollout", "env_step", "policy_forward", "update", "backward"):
        assert section in result.stdout
    assert "SPS" in result.stderr and "return" in result.stderr, "progress bar on stderr"
    assert sorted(p.name for p in tmp_path.iterdir()) == RUN_FILES


def expect_usage_error(capsys: pytest.CaptureFixture, argv: list[str], message: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, f"exactly one line on stderr, got {captured.err!r}"
    assert lines[0].startswith("rlperf: error: ")
    assert not lines[0].startswith("rlperf: error: rlperf"), "the prefix is said once"
    assert message in lines[0], lines[0]
    return lines[0]


BAD_TRAIN_ARGS = [
    (["--env", "cartpol"], "unknown env 'cartpol'"),
    (["--env", "gym:NoSuchEnv-v0"], "NoSuchEnv-v0"),
    (
        ["--env", "gym:Cartpole-v1"],
        "unknown gymnasium id 'Cartpole-v1' in env "
        "'gym:Cartpole-v1': did you mean gym:CartPole-v1?",
    ),  # fmt: skip
    (["--num-envs", "0"], "num_envs must be positive"),
    (["--num-envs", "-8"], "num_envs must be positive"),
    (["--num-steps", "0"], "num_steps must be positive"),
    (["--num-minibatches", "0"], "num_minibatches must be positive"),
    (["--update-epochs", "0"], "update_epochs must be positive"),
    (["--total-steps", "-1"], "total_steps must be positive"),
    (["--num-minibatches", "3"], "must be divisible by num_minibatches 3"),
    (["--learning-rate", "0"], "learning_rate must be positive"),
    (["--gamma", "2"], "gamma must be in [0, 1]"),
    (["--hidden-sizes", "64", "0"], "hidden_sizes"),
    (["--device", "tpu"], "device must be cpu or cuda"),
    (["--num-envs", "abc"], "--num-envs"),
    (["--learning-rate", "fast"], "--learning-rate"),
    (["--hidden-sizes", "64", "x"], "--hidden-sizes"),
    (["--preset", "nope"], "--preset"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--adam-eps", "-1"], "adam_eps must be positive"),
    (["--clip-coef", "nan"], "clip_coef must be a finite number"),
    (["--learning-rate", "inf"], "learning_rate must be a finite number"),
    # Policies, observations, recurrent sizes, precision, env options.
    (
        ["--policy", "transformer"],
        "unknown policy 'transformer': choose one of cnn, convlstm, lstm, mlp",
    ),
    (["--env", "catch", "--policy", "mlp"], "policy 'mlp' takes flat observations"),
    (["--policy", "cnn"], "policy 'cnn' takes (C, H, W) image observations"),
    (
        ["--policy", "lstm", "--num-envs", "6", "--num-minibatches", "4"],
        "its 6 segments (6 rows x 1 of 16 steps) must be divisible by num_minibatches 4",
    ),
    (
        ["--policy", "lstm", "--bptt-horizon", "5"],
        "num_steps 16 must be divisible by bptt_horizon 5",
    ),
    (["--bptt-horizon", "-1"], "bptt_horizon must be >= 0"),
    (["--max-wall-s", "-1"], "max_wall_s must be >= 0"),
    # numpy seeds 0 .. 2**32 - 1; a traceback from its seeding otherwise.
    (["--seed", "-1"], "seed must be between 0 and 4294967295, got -1"),
    (["--seed", str(2**32)], "seed must be between 0 and 4294967295, got 4294967296"),
    (["--precision", "fp16"], "--precision fp16 needs --device cuda"),
    (["--precision", "fp8"], "--precision"),
    (["--env-option", "observe"], "--env-option takes KEY=VALUE, got 'observe'"),
    (["--env-option", "colour=red"], "env 'cartpole' has no option 'colour'"),
    (["--env-option", "observe=velocity"], "env 'cartpole': observe must be one of full, position"),
    (["--env-option", "max_episode_steps=0"], "max_episode_steps must be positive"),
    # The env workers (envs/workers/): sizes that do not split, more workers than cores.
    (["--vec-backend", "threads"], "--vec-backend must be one of serial, multiprocess"),
    (["--env-batch-size", "4"], "--env-batch-size needs --vec-backend multiprocess"),
    (["--num-workers", "3"], "--num-workers needs --vec-backend multiprocess"),
    # No abbreviations: --num-env would otherwise be taken as --num-envs, silently.
    (["--num-env", "32"], "unrecognized arguments: --num-env 32"),
    (["--pin-workers"], "--pin-workers needs --vec-backend multiprocess"),
    (["--inline-worker"], "--inline-worker needs --vec-backend multiprocess"),
    (["--worker-spin-us", "300"], "--worker-spin-us needs --vec-backend multiprocess"),
    (
        ["--vec-backend", "multiprocess", "--worker-spin-us", "-2"],
        "--worker-spin-us must be >= 0, or -1 for automatic, got -2",
    ),
    (
        [
            "--vec-backend",
            "multiprocess",
            "--num-envs",
            "6",
            "--num-workers",
            "4",
            "--oversubscribe",
        ],
        "--num-envs 6 must be divisible by --num-workers 4",
    ),
    (["--vec-backend", "multiprocess", "--num-workers", "0"], "--num-workers must be >= 1"),
    (
        ["--vec-backend", "multiprocess", "--num-workers", str(usable_cores() + 1)],
        "may use: use fewer workers, or --oversubscribe",
    ),
    (
        ["--vec-backend", "multiprocess", "--num-workers", "2", "--env-batch-size", "3"],
        "--env-batch-size 3 must be a multiple of the envs per worker",
    ),
    (
        [
            "--vec-backend",
            "multiprocess",
            "--num-envs",
            "8",
            "--num-workers",
            "4",
            "--oversubscribe",
            "--env-batch-size",
            "6",
        ],
        "that divides --num-envs 8",
    ),  # fmt: skip
    (
        [
            "--vec-backend",
            "multiprocess",
            "--env-batch-size",
            "4",
            "--env",
            "grid",
            "--supervised-steps",
            "10",
        ],
        "--supervised-steps needs every env in each step",
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    "extra, message",
    BAD_TRAIN_ARGS,
    ids=[" ".join(b[0]) for b in BAD_TRAIN_ARGS],
)
def test_bad_input_is_one_line_exit_2_and_touches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str
) -> None:
    run_dir = tmp_path / "new_run"
    argv = ["train", *SMALL, "--total-steps", str(2 * BATCH), "--run-dir", str(run_dir), *extra]
    expect_usage_error(capsys, argv, message)
    assert not run_dir.exists(), "no work was started"


@pytest.mark.parametrize(
    "argv",
    [["analyze", "report.json", "--outp", "x.txt"], ["gate", "--round", "3"],
     ["profile", "--num-env", "8"]],
    ids=["analyze", "gate", "profile"],
)  # fmt: skip
def test_no_subcommand_takes_an_abbreviated_flag(
    capsys: pytest.CaptureFixture, argv: list[str]
) -> None:
    expect_usage_error(capsys, argv, f"unrecognized arguments: {argv[-2]}")


def test_seed_must_fit_every_rank(capsys: pytest.CaptureFixture) -> None:
    # Rank 1 of --nproc 2 seeds with seed + RANK_SEED_STRIDE: the checks before the launch.
    argv = ["train", *SMALL, "--nproc", "2", "--oversubscribe", "--seed", str(2**32 - 1)]
    expect_usage_error(capsys, argv, "seed must be between 0 and 4294867292 on 2 ranks")


def unwritable_run_dirs(tmp_path: Path) -> list[tuple[Path, str]]:
    """Run directories that cannot be created, with what the error says."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    cases = [(a_file, "is a file, not a directory"), (a_file / "run", "is a file, not a directory")]
    if Path("/proc/self").is_dir():  # procfs takes no new folders, even from root
        cases.append((Path("/proc/nope"), "cannot create anything in /proc"))
    return cases


@pytest.mark.parametrize("command", ["train", "profile"])
def test_a_run_dir_that_cannot_be_created_is_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: str
) -> None:
    for run_dir, message in unwritable_run_dirs(tmp_path):
        argv = [command, *SMALL, "--total-steps", str(2 * BATCH), "--run-dir", str(run_dir)]
        line = expect_usage_error(capsys, argv, f"--run-dir {run_dir}: ")
        assert message in line, line
    assert (tmp_path / "a_file").read_text() == "not a folder"
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"], "nothing was created"


def test_bad_input_does_not_clobber_an_existing_run_dir(
    finished_run: Path, capsys: pytest.CaptureFixture
) -> None:
    before = snapshot(finished_run)
    for extra in (["--num-envs", "0"], ["--env", "nope"], ["--num-minibatches", "3"],
                  ["--policy", "cnn"], ["--env-option", "colour=red"]):  # fmt: skip
        argv = ["train", *SMALL, "--total-steps", str(2 * BATCH), "--run-dir", str(finished_run)]
        expect_usage_error(capsys, [*argv, *extra], "")
    assert snapshot(finished_run) == before


def test_cuda_without_cuda_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:0"):
        argv = ["train", *SMALL, "--device", device, "--run-dir", str(tmp_path / "r")]
        expect_usage_error(capsys, argv, "CUDA is not available")
    assert not (tmp_path / "r").exists()


def test_resume_of_a_missing_dir(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    expect_usage_error(capsys, ["train", "--resume", str(tmp_path / "nowhere")], "cannot resume")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not a checkpoint at all", b"PK\x03\x04 torn zip"],
    ids=["empty", "garbage", "torn"],
)
def test_resume_of_a_corrupt_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture, finished_run: Path, content: bytes
) -> None:
    run_dir = shutil.copytree(finished_run, tmp_path / "copy")
    (run_dir / "checkpoint.pt").write_bytes(content)
    before = snapshot(run_dir)
    line = expect_usage_error(capsys, ["train", "--resume", str(run_dir)], "")
    assert line == (
        f"rlperf: error: cannot resume: {run_dir / 'checkpoint.pt'} is corrupt or truncated "
        "(torch cannot read it as a checkpoint): restore it from a copy, or start the run "
        "afresh with --overwrite"
    )
    assert "weights_only" not in line, "not torch's advice to run the file's pickle"
    assert snapshot(run_dir) == before


def test_resume_of_a_foreign_torch_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    torch.save({"weights": torch.zeros(3)}, tmp_path / "checkpoint.pt")
    expect_usage_error(capsys, ["train", "--resume", str(tmp_path)], "checkpoint")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--num-envs", "16"], "checkpoint has --num-envs 8"),
        (["--seed", "6"], "checkpoint has --seed 5"),
        (["--hidden-sizes", "32", "32"], "--hidden-sizes"),
        (["--env", "gym:CartPole-v1"], "checkpoint has --env cartpole"),
        (["--policy", "lstm"], "checkpoint has --policy mlp, command line gives lstm"),
        (["--env-option", "observe=position"], "checkpoint has --env-option {}"),
        (["--run-dir", "/tmp/elsewhere"], "--run-dir"),
        (["--total-steps", str(BATCH)], "below the checkpoint's global step"),
        (["--num-envs", "0"], "--num-envs"),
    ],
    ids=[
        "num-envs",
        "seed",
        "hidden-sizes",
        "env",
        "policy",
        "env-option",
        "run-dir",
        "total-steps-below",
        "bad-value",
    ],  # fmt: skip
)
def test_mismatched_resume_is_rejected_without_touching_the_run(
    finished_run: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str
) -> None:
    before = snapshot(finished_run)
    expect_usage_error(capsys, ["train", "--resume", str(finished_run), *extra], message)
    assert snapshot(finished_run) == before


@pytest.mark.parametrize("extra", [[], ["--total-steps", str(3 * BATCH + BATCH - 1)]],
                         ids=["as-saved", "short-of-one-iteration"])  # fmt: skip
def test_resume_of_a_finished_run_names_the_total_and_changes_nothing(
    finished_run: Path, capsys: pytest.CaptureFixture, extra: list[str]
) -> None:
    before = snapshot(finished_run)
    line = expect_usage_error(capsys, ["train", "--resume", str(finished_run), *extra], "")
    assert f"has reached its total_steps {3 * BATCH + (BATCH - 1 if extra else 0)}" in line
    assert f"--total-steps N larger than {3 * BATCH}, at least {4 * BATCH}" in line
    assert snapshot(finished_run) == before, "every file of the run byte-identical"


def test_resume_accepts_matching_explicit_flags(tmp_path: Path, finished_run: Path) -> None:
    run_dir = shutil.copytree(finished_run, tmp_path / "copy")
    argv = ["train", "--resume", str(run_dir), *SMALL, "--total-steps", str(4 * BATCH)]
    # How the process allocates is no part of the run: it may change on resume.
    assert main([*argv, "--no-progress", "--no-keep-freed-memory"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 4 * BATCH


def test_a_resumed_run_counts_the_steps_this_process_ran(
    tmp_path: Path, finished_run: Path, capsys: pytest.CaptureFixture
) -> None:
    """The summary line divides this process's steps by this process's time, not the global
    step (the issue's "999,424 steps in 3.23s" after a resume)."""
    run_dir = shutil.copytree(finished_run, tmp_path / "copy")
    capsys.readouterr()
    argv = ["train", "--resume", str(run_dir), "--total-steps", str(5 * BATCH), "--no-progress"]
    assert main(argv) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 5 * BATCH and summary["steps_this_run"] == 2 * BATCH
    expected = f"\n{2 * BATCH:,} steps this run (global step {5 * BATCH:,}) in "
    assert expected in capsys.readouterr().out


def test_a_fresh_run_counts_every_step_as_this_runs(finished_run: Path) -> None:
    summary = json.loads((finished_run / "summary.json").read_text())
    assert summary["steps_this_run"] == summary["global_step"] == 3 * BATCH


def test_env_options_add_to_the_presets_and_override_only_the_keys_they_name() -> None:
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args

    def options(*flags: str) -> dict:
        return config_from_args(build_parser().parse_args(["train", *flags])).env.options

    assert options("--preset", "robots") == {"obs_mode": "symbolic"}
    assert options("--preset", "robots", "--env-option", "max_depth=2") == {
        "obs_mode": "symbolic",
        "max_depth": 2,
    }
    assert options("--preset", "robots", "--env-option", "obs_mode=rgb_image") == {
        "obs_mode": "rgb_image"
    }
    assert options("--env-option", "observe=position") == {"observe": "position"}


def test_no_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    expect_usage_error(capsys, [], "rlperf")


def test_subprocess_usage_error_exits_2(tmp_path: Path) -> None:
    bad = run_cli("train", "--num-envs", "0", "--run-dir", str(tmp_path / "r"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["rlperf: error: num_envs must be positive, got 0"]
    assert not (tmp_path / "r").exists()


def test_diverging_first_iteration_exits_1_without_claiming_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture, nan_rewards_from
) -> None:
    nan_rewards_from(1)
    argv = ["train", *SMALL, "--total-steps", str(2 * BATCH), "--no-progress"]
    assert main([*argv, "--run-dir", str(tmp_path)]) == EXIT_FAILED
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlperf: error: non-finite loss at iteration 1")
    assert not (tmp_path / "checkpoint.pt").exists(), "iteration 1 failed: nothing to keep"
    assert "checkpoint kept" not in lines[0]


def test_ctrl_c_writes_the_summary_and_exits_130(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = CartPoleVec.step
    calls = {"n": 0}

    def step(self, actions):
        calls["n"] += 1
        if calls["n"] == 2 * 16 + 5:  # inside iteration 3
            raise KeyboardInterrupt
        return original(self, actions)

    monkeypatch.setattr(CartPoleVec, "step", step)
    argv = ["train", *SMALL, "--total-steps", str(6 * BATCH), "--no-progress"]
    assert main([*argv, "--checkpoint-every", "1", "--run-dir", str(tmp_path)]) == 130
    assert "interrupted" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["global_step"] == 2 * BATCH
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["iteration"] == 2


def test_help_says_the_policy_follows_the_env(capsys: pytest.CaptureFixture) -> None:
    """--env grid takes the CNN without --policy: --help must not promise the mlp."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    policy_help = text[text.index("--policy NAME policy:") :][:200]
    assert "(default: the env's: mlp for flat observations, cnn for images" in policy_help
    assert "(default: mlp)" not in policy_help


@pytest.mark.parametrize(
    "flags, kind",
    [([], "mlp"), (["--env", "grid"], "cnn"), (["--env", "catch"], "cnn"),
     (["--preset", "lstm", "--env", "grid"], "lstm"), (["--env", "grid", "--policy", "lstm"],
                                                       "lstm")],
    ids=["cartpole", "grid", "catch", "lstm-preset-on-grid", "explicit"],
)  # fmt: skip
def test_without_policy_the_env_gets_one_that_reads_its_observations(
    flags: list[str], kind: str
) -> None:
    """``rlperf train --env grid --vec-backend multiprocess ...`` names no policy: the
    grid's images take the CNN rather than failing on the default MLP; a given one stays."""
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args

    assert config_from_args(build_parser().parse_args(["train", *flags])).policy.kind == kind
