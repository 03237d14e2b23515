"""Presets (``presets.py``) and preset files: which envs each preset fits, ``mujoco-fast``'s
entry per env, and ``--preset-file``; every mismatch one line, exit 2, before any work."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from test_cli import expect_usage_error

from rlperf.cli import build_parser
from rlperf.config import (
    Config,
    ConfigError,
    configure,
    preset,
    preset_file_text,
    read_preset_file,
)
from rlperf.ppo.commands import config_from_args
from rlperf.presets import MUJOCO_FAST, MUJOCO_FAST_MINIBATCH, MUJOCO_V5, PRESETS

GENERIC = sorted(name for name, p in PRESETS.items() if p.envs is None)


def train_config(*flags: str) -> Config:
    """``rlperf train``'s config for ``flags``; ``--policy mlp`` spares building the env to see
    which policy reads it (``fit_policy_to_env``)."""
    return config_from_args(build_parser().parse_args(["train", *flags, "--policy", "mlp"]))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_fits_its_own_env(name: str) -> None:
    fits = PRESETS[name].envs
    env = preset(name).env.env
    assert fits is None or any(fnmatchcase(env, pattern) for pattern in fits), (name, env)
    preset(name, env).validate()


def test_only_presets_that_change_the_algorithm_take_any_env() -> None:
    assert GENERIC == ["default", "lstm"]
    assert configure("lstm", "grid").env.env == "grid"
    assert PRESETS["mujoco"].envs == PRESETS["mujoco-fast"].envs == MUJOCO_V5
    assert len(MUJOCO_V5) == 11 and sorted(MUJOCO_FAST) == sorted(MUJOCO_V5)


@pytest.mark.parametrize(
    "flags, fits",
    [
        (["--preset", "mujoco", "--env", "cartpole"], "gym:HalfCheetah-v5"),
        (["--preset", "mujoco-fast", "--env", "gym:HalfCheetah-v4"], "gym:Walker2d-v5"),
        (["--preset", "atari", "--env", "gym:HalfCheetah-v5"], "gym:ale_py:ALE/*"),
        (["--preset", "grid", "--env", "cartpole"], "grid"),
        (["--preset", "robots-rgb", "--env", "catch"], "robots"),
    ],
    ids=["mujoco-cartpole", "mujoco-fast-v4", "atari-halfcheetah", "grid-cartpole", "robots"],
)
def test_a_preset_outside_its_envs_is_one_line_exit_2_naming_them(
    capsys: pytest.CaptureFixture, tmp_path: Path, flags: list[str], fits: str
) -> None:
    run_dir = tmp_path / "run"
    argv = ["train", *flags, "--run-dir", str(run_dir)]
    line = expect_usage_error(capsys, argv, f"--preset {flags[1]} fits ")
    assert fits in line
    assert f"not env {flags[3]!r}" in line and ", ".join(GENERIC) in line
    assert not run_dir.exists(), "before any work"


@pytest.mark.parametrize("env", MUJOCO_V5)
def test_mujoco_fast_takes_the_entry_of_the_env(env: str) -> None:
    entry = MUJOCO_FAST[env]
    cfg = train_config("--preset", "mujoco-fast", "--env", env)
    assert cfg.env.env == env and cfg.env.num_envs == 64 and cfg.env.backend == "auto"
    assert cfg.env.normalize_obs and cfg.env.normalize_reward
    assert (cfg.ppo.num_steps, cfg.ppo.update_epochs) == (entry.num_steps, entry.update_epochs)
    assert cfg.ppo.learning_rate == entry.learning_rate
    assert (cfg.ppo.gamma, cfg.ppo.gae_lambda) == (entry.gamma, entry.gae_lambda)
    assert cfg.policy.hidden_sizes == entry.hidden_sizes and cfg.policy.kind == "mlp"
    assert cfg.policy.init_log_std == entry.init_log_std
    assert cfg.ppo.lr_kl_target == entry.lr_kl_target and cfg.ppo.final_std == entry.final_std
    assert cfg.env.options == dict(entry.env_options)
    assert cfg.minibatch_size == min(MUJOCO_FAST_MINIBATCH, cfg.batch_size)
    assert cfg.ppo.anneal_lr and cfg.ppo.anneal_with_wall and cfg.ppo.ent_coef == 0.0
    assert cfg.run.total_steps == entry.total_steps and entry.source


def test_mujoco_fast_flags_override_the_entry_and_other_presets_keep_their_env() -> None:
    cfg = train_config("--preset", "mujoco-fast", "--env", "gym:Hopper-v5", "--num-steps", "32")
    assert cfg.ppo.num_steps == 32 and cfg.policy.hidden_sizes == (256, 128, 64)
    assert preset("mujoco-fast").env.env == "gym:HalfCheetah-v5"
    cheetah = train_config("--preset", "mujoco-fast", "--init-log-std", "0")
    assert cheetah.policy.init_log_std == 0.0 and MUJOCO_FAST["gym:HalfCheetah-v5"].init_log_std
    assert preset("mujoco").policy.init_log_std == 0.0  # CleanRL's
    assert train_config("--preset", "mujoco", "--env", "gym:Hopper-v5").ppo.num_steps == 256


def test_mujoco_fast_env_options_merge_with_the_flags_naming_other_keys() -> None:
    ant = ("--preset", "mujoco-fast", "--env", "gym:Ant-v5")
    assert train_config(*ant).env.options == {"include_cfrc_ext_in_observation": False}
    cfg = train_config(*ant, "--env-option", "ctrl_cost_weight=0.3")
    assert cfg.env.options == {"include_cfrc_ext_in_observation": False, "ctrl_cost_weight": 0.3}
    forces = train_config(*ant, "--env-option", "include_cfrc_ext_in_observation=true")
    assert forces.env.options == {"include_cfrc_ext_in_observation": True}
    assert train_config("--preset", "mujoco", "--env", "gym:Ant-v5").env.options == {}


def test_a_preset_file_round_trips_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "best.json"
    overrides = {
        "env": {"env": "gym:Walker2d-v5", "num_envs": 32},
        "ppo": {"learning_rate": 1e-3, "update_epochs": 3},
        "policy": {"hidden_sizes": (128, 128)},
    }
    path.write_text(preset_file_text("mujoco-fast", overrides, about={"trial": 7}))
    read = read_preset_file(path)
    assert read.preset == "mujoco-fast" and read.env == "gym:Walker2d-v5"
    cfg = train_config("--preset-file", str(path))
    expected = preset("mujoco-fast", "gym:Walker2d-v5")
    expected.env.num_envs, expected.policy.hidden_sizes = 32, (128, 128)
    expected.ppo.learning_rate, expected.ppo.update_epochs = 1e-3, 3
    assert cfg == expected
    flagged = train_config("--preset-file", str(path), "--learning-rate", "2e-4")
    assert flagged.ppo.learning_rate == 2e-4 and flagged.ppo.update_epochs == 3
    # The file's env stays unless --env names another the preset fits.
    assert train_config("--preset-file", str(path), "--env", "gym:Ant-v5").env.env == "gym:Ant-v5"
    # A file without a preset starts from --preset's.
    (tmp_path / "lr.json").write_text(json.dumps({"ppo": {"learning_rate": 0.01}}))
    assert configure("lstm", None, tmp_path / "lr.json").policy.kind == "lstm"


BAD_FILES = [
    (None, "cannot read it"),
    ("{", "not JSON"),
    ("[1, 2]", "must hold a JSON object, got list"),
    ('{"ppo": {"learning_rate": "fast"}}', "ppo.learning_rate must be a number, got 'fast'"),
    ('{"ppo": {"num_steps": 2.5}}', "ppo.num_steps must be an integer, got 2.5"),
    ('{"ppo": {"anneal_lr": 1}}', "ppo.anneal_lr must be true or false, got 1"),
    ('{"policy": {"hidden_sizes": [64, "x"]}}', "policy.hidden_sizes must be a list of integers"),
    ('{"ppo": {"learning_rte": 0.1}}', "unknown config field ppo.learning_rte"),
    ('{"optimiser": {}}', "unknown key 'optimiser'"),
    ('{"ppo": 3}', "section 'ppo' must be an object of fields"),
    ('{"preset": "fastest"}', "unknown preset 'fastest'"),
    ('{"ppo": {"learning_rate": -1}}', "learning_rate must be positive"),
    ('{"preset": "atari", "env": {"env": "cartpole"}}', "--preset atari fits gym:ale_py:ALE/*"),
]


@pytest.mark.parametrize("text, message", BAD_FILES, ids=[m for _, m in BAD_FILES])
def test_a_bad_preset_file_is_one_line_exit_2(
    capsys: pytest.CaptureFixture, tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "preset.json"
    if text is not None:
        path.write_text(text)
    expect_usage_error(capsys, ["train", "--preset-file", str(path)], message)


def test_a_preset_file_and_another_preset_disagree(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(preset_file_text("mujoco", {}))
    with pytest.raises(ConfigError, match="--preset atari and --preset-file .* disagree"):
        configure("atari", None, path)
    assert configure("mujoco", None, path) == preset("mujoco")


def test_a_preset_file_does_not_go_with_resume(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "p.json"
    path.write_text(preset_file_text("default", {}))
    argv = ["train", "--preset-file", str(path), "--resume", str(tmp_path / "run")]
    expect_usage_error(capsys, argv, "--preset-file sets a new run's settings and --resume")
