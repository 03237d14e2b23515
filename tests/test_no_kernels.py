"""The configuration without the compiled kernels, end to end: ``RLPERF_NO_KERNELS=1`` (what an
install without a C compiler has), in a fresh process, trains the MLP and the LSTM through
their torch paths. The checks of the boundary itself are in ``test_native.py``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import rlperf

SCRIPT = """
import json
from rlperf import native
from rlperf.config import Config
from rlperf.ppo.trainer import Trainer

out = {"status": native.status()}
for kind in ("mlp", "lstm"):
    cfg = Config()
    cfg.policy.kind = kind
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = 8, 16, 2
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress, cfg.run.seed = 3 * 128, 1, False, 3
    trainer = Trainer(cfg.validate())
    rows = []
    trainer.callbacks.append(lambda _, row: rows.append(row))
    summary = trainer.train()
    out[kind] = {
        "fused_rollout": trainer.whole_rollout is not None,
        "analytic": trainer.policy.analytic,
        "update": summary["update"],
        "steps": trainer.global_step,
        "losses": [row["loss"] for row in rows],
    }
print(json.dumps(out))
"""


def test_mlp_and_lstm_train_through_the_torch_paths_without_the_kernels() -> None:
    env = {**os.environ, "RLPERF_NO_KERNELS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(rlperf.__file__).parents[1]), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == {"lstm": False, "loss": False, "update": False, "rollout": False}
    # Without the rollout kernel the MLP on CartPole collects through the torch path.
    assert not out["mlp"]["fused_rollout"]
    # The MLP's analytic update needs no kernel (its loss falls back to torch ops); the LSTM's
    # does, so it trains through autograd and the torch recurrence.
    assert out["mlp"]["analytic"] and out["mlp"]["update"] == "AnalyticUpdate"
    assert not out["lstm"]["analytic"] and out["lstm"]["update"] == "AutogradUpdate"
    for kind in ("mlp", "lstm"):
        assert out[kind]["steps"] == 3 * 128
        losses = out[kind]["losses"]
        assert len(losses) == 3 and all(math.isfinite(x) for x in losses), (kind, losses)
