"""benchmarks/atari_precision.py on a tiny ``--preset atari`` run (EnvPool, 2 envs x 8 steps):
the three updates from one state, their parameter steps compared. The float32 update is the
reference, so every other step has a cosine in [-1, 1] and a finite distance; a bf16 step is
near but not equal to it. A run directory without a checkpoint is one line and exit 2."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from benchmark_scripts import load_script

from rlperf.cli import main as rlperf_main

pytest.importorskip("envpool", reason="the envpool extra is not installed")


def test_three_updates_from_one_state(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = rlperf_main(["train", "--preset", "atari", "--vec-backend", "envpool", "--num-envs", "2",
                        "--num-steps", "8", "--num-minibatches", "2", "--total-steps", "16",
                        "--threads", "1", "--no-progress", "--run-dir", str(run)])  # fmt: skip
    assert code in (0, None)
    rounds = load_script("atari_precision.py").run(
        run, rollouts=2, total_steps=10_000_000, threads=1
    )
    assert len(rounds) == 2
    for res in rounds:
        assert set(res["against_fp32"]) == {"fp32, other shuffle", "bf16"}
        for figures in res["against_fp32"].values():
            assert -1.0 <= figures["cosine"] <= 1.0
            assert math.isfinite(figures["relative_distance"])
        bf16 = res["against_fp32"]["bf16"]
        assert 0.0 < bf16["relative_distance"] < 1.0 and bf16["cosine"] > 0.5
        assert set(res["stats"]) == {"fp32", "fp32, other shuffle", "bf16"}


def test_a_directory_without_a_checkpoint_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert load_script("atari_precision.py").main(["--run-dir", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "cannot compare precisions: no checkpoint.pt" in lines[0]
