"""A trained policy leaves rlperf: ``rlperf.load_policy`` and ``rlperf export`` take the same
actions as ``rlperf eval --deterministic`` on the same observations (the observations and
actions of an evaluated episode, recorded at the env), the exported files in a fresh Python
process that never imports rlperf; a recurrent policy's export is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlperf
from rlperf.cli import main
from rlperf.commandline import EXIT_OK
from rlperf.run.evaluate import load_run, make_eval_env, policy_for_env, run_episodes
from rlperf.run.export import FORMATS

TINY = ["--num-envs", "4", "--num-steps", "32", "--num-minibatches", "2", "--update-epochs",
        "1", "--threads", "1", "--seed", "1", "--total-steps", "256", "--no-progress"]  # fmt: skip
# run name -> flags: an MLP with discrete actions and one with a Gaussian (both normalising
# their observations), a CNN on small images, a recurrent policy.
RUNS = {
    "mlp_discrete": ["--env", "gym:CartPole-v1", "--normalize-obs"],
    "mlp_gaussian": ["--env", "gym:Pendulum-v1", "--normalize-obs"],
    "cnn": ["--env", "catch"],
    "lstm": ["--env", "gym:CartPole-v1", "--policy", "lstm", "--num-minibatches", "4"],
}
# The Atari preset's Nature CNN on 84x84 frames (needs the atari extra).
ATARI = ["--preset", "atari", "--num-envs", "2", "--num-steps", "8", "--num-minibatches", "1",
         "--update-epochs", "1", "--threads", "1", "--total-steps", "16", "--no-progress",
         "--vec-backend", "serial", "--env-option", "max_episode_steps=60"]  # fmt: skip
ONNX = ("onnx", "onnxscript", "onnxruntime")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for name, flags in RUNS.items():
        assert main(["train", *TINY, *flags, "--run-dir", str(root / name)]) == EXIT_OK
    return root


class Recorder:
    """A vector env that records the raw observations it returns and the actions it is given."""

    def __init__(self, env: Any) -> None:
        self.env, self.obs, self.actions, self.dones = env, [], [], [1.0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = self.env.reset(**kwargs)
        self.obs.append(np.array(obs))
        return obs, infos

    def step(self, actions: np.ndarray) -> Any:
        self.actions.append(np.array(actions))
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self.obs.append(np.array(obs))
        self.dones.append(float((terms | truncs)[0]))
        return obs, rewards, terms, truncs, infos


def eval_episode(run: Path, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One deterministic episode as ``rlperf eval`` plays it: the raw observations the policy
    was given, the actions the env was given, and the ``done`` flags before each step."""
    cfg, payload = load_run(run)
    recorder = Recorder(make_eval_env(cfg, 1))
    spec, policy, normalizer = policy_for_env(cfg, payload, recorder.env, seed)
    run_episodes(policy, recorder, spec, 1, seed, deterministic=True, normalizer=normalizer)
    recorder.env.close()
    steps = len(recorder.actions)  # the last observation is the next episode's first
    obs = np.concatenate(recorder.obs[:steps])
    return obs, np.concatenate(recorder.actions), np.array(recorder.dones[:steps])


def assert_same_actions(got: np.ndarray, expected: np.ndarray) -> None:
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(got, expected)
    else:  # another runtime's matmuls round differently in the last bits
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# A fresh interpreter without rlperf: it loads the file, acts on the observations, and checks
# that nothing imported rlperf.
RUN_FILE = """
import sys
import numpy as np
fmt, path, obs_path, out_path = sys.argv[1:]
obs = np.load(obs_path)
if fmt == "torchscript":
    import torch
    with torch.no_grad():
        actions = torch.jit.load(path)(torch.from_numpy(obs)).numpy()
else:
    import onnxruntime
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    actions = session.run(["actions"], {"obs": obs})[0]
assert "rlperf" not in sys.modules, "the exported file imported rlperf"
np.save(out_path, actions)
"""


def exported_actions(tmp_path: Path, fmt: str, path: Path, obs: np.ndarray) -> np.ndarray:
    np.save(tmp_path / "obs.npy", obs)
    script = tmp_path / "run_file.py"
    script.write_text(RUN_FILE)
    argv = [sys.executable, str(script), fmt, str(path), str(tmp_path / "obs.npy"),
            str(tmp_path / "actions.npy")]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return np.load(tmp_path / "actions.npy")


def needs(fmt: str) -> None:
    """Skip, saying which extra, where ``fmt``'s files cannot be written and run here."""
    if fmt == "onnx":
        for module in ONNX:
            pytest.importorskip(module, reason=f"the export extra's {module} is not installed")


def check_exports(
    run: Path, formats: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    obs, expected, _ = eval_episode(run)
    assert len(obs) > 1
    capsys.readouterr()  # the training's output
    loaded = rlperf.load_policy(run)
    assert_same_actions(loaded.act(obs, deterministic=True).numpy(), expected)
    for fmt in formats:
        out = tmp_path / f"policy.{fmt}"
        assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == EXIT_OK
        assert capsys.readouterr().out.startswith(f"{out} ({fmt},")
        assert_same_actions(exported_actions(tmp_path, fmt, out, obs), expected)
        # Another batch size than the one traced: the batch dimension is dynamic.
        assert_same_actions(exported_actions(tmp_path, fmt, out, obs[:1]), expected[:1])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["mlp_discrete", "mlp_gaussian", "cnn"])
def test_load_and_export_take_evals_actions(
    name: str, fmt: str, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    needs(fmt)
    check_exports(runs / name, (fmt,), tmp_path, capsys)


@pytest.fixture(scope="module")
def atari_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("ale_py", "cv2", "stable_baselines3"):
        pytest.importorskip(module, reason=f"the atari extra's {module} is not installed")
    run = tmp_path_factory.mktemp("atari") / "run"
    assert main(["train", *ATARI, "--run-dir", str(run)]) == EXIT_OK
    return run


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_atari_cnn_exports_with_evals_actions(
    fmt: str, atari_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    needs(fmt)
    check_exports(atari_run, (fmt,), tmp_path, capsys)


def test_a_recurrent_policy_loads_with_its_state_and_is_not_exported(
    runs: Path, tmp_path: Path, usage_error
) -> None:
    obs, expected, dones = eval_episode(runs / "lstm")
    loaded = rlperf.load_policy(runs / "lstm")
    actions = [
        loaded.act(o[None], deterministic=True, done=d[None])
        for o, d in zip(obs, dones, strict=True)
    ]
    np.testing.assert_array_equal(torch.cat(actions).numpy(), expected)
    out = tmp_path / "lstm.pt"
    line = usage_error(["export", str(runs / "lstm"), "--format", "torchscript", "--out", str(out)])
    assert "is recurrent" in line and "rlperf.load_policy" in line
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_sampled_actions_repeat_with_a_seeded_generator(runs: Path) -> None:
    loaded = rlperf.load_policy(runs / "mlp_gaussian")
    obs = np.zeros((5, 3), np.float32)
    a, b = (loaded.act(obs, generator=torch.Generator().manual_seed(3)) for _ in range(2))
    torch.testing.assert_close(a, b)
    assert a.shape == (5, 1) and (a.abs() <= 2.0).all()  # Pendulum's torque bounds


def test_bad_exports_are_one_line_and_write_nothing(
    runs: Path, tmp_path: Path, usage_error
) -> None:
    run = str(runs / "mlp_discrete")
    cases = [
        (["export", run, "--format", "tflite", "--out", str(tmp_path / "p")], "--format must be"),
        (
            [
                "export",
                str(tmp_path / "nope"),
                "--format",
                "torchscript",
                "--out",
                str(tmp_path / "p"),
            ],
            "cannot load the policy: run directory",  # not eval's "cannot evaluate"
        ),  # fmt: skip
        (
            ["export", run, "--format", "torchscript", "--out", str(tmp_path / "no" / "p")],
            "does not exist",
        ),  # fmt: skip
    ]
    for argv, words in cases:
        assert words in usage_error(argv)
    assert list(tmp_path.iterdir()) == []


def test_onnx_without_its_packages_names_the_extra(
    runs: Path, tmp_path: Path, usage_error, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if not installed
    out = tmp_path / "p.onnx"
    line = usage_error(["export", str(runs / "cnn"), "--format", "onnx", "--out", str(out)])
    assert "pip install 'rlperf[export]'" in line
    assert not out.exists()


def test_the_run_directory_is_unchanged(runs: Path, tmp_path: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in (runs / "cnn").iterdir()}
    assert main(["export", str(runs / "cnn"), "--format", "torchscript", "--out",
                 str(tmp_path / "p.pt")]) == EXIT_OK  # fmt: skip
    assert {p.name: p.stat().st_mtime_ns for p in (runs / "cnn").iterdir()} == before
