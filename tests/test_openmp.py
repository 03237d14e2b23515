"""``openmp.py``: the ``rlperf`` command shortens libgomp's idle spin for runs with env workers,
before torch loads, and only for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.openmp import SPIN_VAR, WORKERS_SPIN_COUNT, tune, uses_env_workers


@pytest.mark.parametrize(
    ("argv", "workers"),
    [
        (["train", "--vec-backend", "multiprocess", "--num-workers", "2"], True),
        (["profile", "--vec-backend=multiprocess"], True),
        (["train", "--vec-backend", "serial"], False),
        # EnvPool stepping batches beside the trainer: the same layout of cores as workers.
        (["train", "--preset", "atari", "--vec-backend", "envpool", "--env-batch-size", "4"], True),
        (["train", "--vec-backend", "envpool", "--num-envs", "4", "--env-batch-size", "4"], False),
        (["train", "--preset", "atari", "--vec-backend", "envpool"], False),
        (["train", "--vec-backend", "envpool", "--env-batch-size", "four"], False),
        (["train", "--env", "gym:CartPole-v1"], False),
        (["train", "--preset", "lstm"], False),
        (["train", "--preset", "no-such-preset"], False),  # the parser proper says why
        (["train", "--vec-back", "multiprocess"], False),  # an abbreviation: refused later
        (["compare", "--a", "", "--b", "backend=multiprocess"], False),  # its children decide
        ([], False),
    ],
)
def test_the_command_line_says_whether_envs_step_in_workers(argv, workers) -> None:
    assert uses_env_workers(argv) is workers


def test_a_resumed_run_is_read_from_its_saved_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"env": {"backend": "multiprocess"}}))
    assert uses_env_workers(["train", "--resume", str(tmp_path)])
    (tmp_path / "config.json").write_text(json.dumps({"env": {"backend": "serial"}}))
    assert not uses_env_workers(["train", "--resume", str(tmp_path)])
    batches = {"backend": "envpool", "num_envs": 8, "env_batch_size": 4}
    (tmp_path / "config.json").write_text(json.dumps({"env": batches}))
    assert uses_env_workers(["train", "--resume", str(tmp_path)])
    assert not uses_env_workers(["train", "--resume", str(tmp_path / "missing")])


def test_tune_sets_the_spin_only_for_workers_and_never_over_the_user() -> None:
    env: dict[str, str] = {}
    assert tune(["train", "--vec-backend", "multiprocess"], env)
    assert env == {SPIN_VAR: WORKERS_SPIN_COUNT}
    mine = {SPIN_VAR: "123"}
    assert not tune(["train", "--vec-backend", "multiprocess"], mine)
    assert mine == {SPIN_VAR: "123"}
    serial: dict[str, str] = {}
    assert not tune(["train"], serial) and serial == {}


def test_importing_the_module_does_not_load_torch() -> None:
    code = "import sys, rlperf.openmp; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_command_sets_it_before_torch_loads(tmp_path: Path, no_orphans) -> None:
    """``python -m rlperf train`` with workers runs with the spin set; serial without it."""
    env = {k: v for k, v in os.environ.items() if k != SPIN_VAR}
    common = ["--num-envs", "4", "--num-steps", "8", "--total-steps", "64", "--threads", "1",
              "--no-progress", "--no-telemetry"]  # fmt: skip
    for name, extra, expected in (
        ("workers", ["--vec-backend", "multiprocess", "--num-workers", "2"], WORKERS_SPIN_COUNT),
        ("serial", [], None),
    ):
        run_dir = tmp_path / name
        done = subprocess.run(
            [sys.executable, "-m", "rlperf", "train", *common, *extra, "--run-dir", str(run_dir)],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["gomp_spincount"] == expected
