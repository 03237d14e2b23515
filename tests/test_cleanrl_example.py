"""examples/cleanrl_ppo.py: CleanRL's PPO on rlperf's worker backend runs and logs returns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cleanrl_ppo.py"


def test_cleanrl_ppo_logs_episodic_returns(tmp_path):
    pytest.importorskip("torch.utils.tensorboard", reason="the example logs to TensorBoard")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    args = [
        "--env-id", "cartpole", "--num-envs", "4", "--num-workers", "2", "--num-steps", "128",
        "--total-timesteps", "2048", "--seed", "1", "--runs-dir", str(tmp_path / "runs"),
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    returns = [float(r) for r in re.findall(r"episodic_return=([0-9.]+)", done.stdout)]
    # 2048 steps of CartPole from a near-random policy: dozens of episodes of 9 steps or more
    assert len(returns) >= 20, done.stdout[-2000:]
    assert all(r >= 8 for r in returns)
    assert "SPS:" in done.stdout
    assert list((tmp_path / "runs").iterdir()), "no TensorBoard run written"
