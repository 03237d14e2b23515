"""What the tests of a stopped run share (Ctrl-C in test_ctrl_c.py, SIGTERM in
test_sigterm.py): a tiny training command, the same run under each launcher, the run
directory's rows and checkpoint, and the check that a resume continues to exactly the run that
was never stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import torch

import rlperf

SRC = Path(rlperf.__file__).resolve().parents[1]
# No learning-rate annealing: its schedule follows --total-steps, which differs between the
# stopped run (far more than it will do) and the straight one.
TINY = ["--num-envs", "4", "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1",
        "--hidden-sizes", "8", "--threads", "1", "--seed", "4", "--no-anneal-lr",
        "--checkpoint-every", "1000000"]  # fmt: skip
STEPS_PER_RANK = 4 * 8
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}
# Where the run goes forever: the test stops it.
FOREVER = ["--total-steps", "1000000000"]
# Each launcher: its flags, and its number of ranks.
SETUPS = {
    "one process": ([], 1),
    "env workers": (["--vec-backend", "multiprocess", "--num-workers", "2"], 1),
    "two ranks": (["--nproc", "2", "--no-progress", "--dist-timeout-s", "60"], 2),
}


def rlperf_train(*argv: str) -> list[str]:
    return [sys.executable, "-m", "rlperf", "train", *TINY, *argv]


def rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING_FIELDS} for x in lines]


def checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)


def iterations_done(run_dir: Path) -> int:
    metrics = run_dir / "metrics.jsonl"
    return len(metrics.read_text().splitlines()) if metrics.is_file() else 0


def run_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC)}


def run_to_the_end(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=run_env())
    assert done.returncode == 0, done.stderr


def stop_line(run_dir: Path, iteration: int, world_size: int) -> str:
    """The one line a run stopped at the end of ``iteration`` prints."""
    return (
        f"rlperf: interrupted; summary written, iteration {iteration} (global step "
        f"{iteration * STEPS_PER_RANK * world_size:,}) checkpointed: continue with rlperf train "
        f"--resume {run_dir}"
    )


def check_stopped(output: str, run_dir: Path, world_size: int) -> int:
    """The stopped run said one line and no traceback, and lost nothing
    (:func:`check_nothing_lost`); returns the iteration it stopped after."""
    said = [line for line in output.splitlines() if line.startswith("rlperf")]
    assert len(said) == 1, output
    assert "Traceback" not in output and "SignalException" not in output, output
    iteration = check_nothing_lost(run_dir, world_size)
    assert said[0] == stop_line(run_dir, iteration, world_size)
    return iteration


def check_nothing_lost(run_dir: Path, world_size: int) -> int:
    """The stopped run's summary and checkpoint hold its last row's iteration, and no process
    of it is left; returns that iteration."""
    saved = checkpoint(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    iteration = saved["iteration"]
    assert summary["interrupted"] is True and summary["iterations"] == iteration
    assert len(rows(run_dir)) == iteration, "the checkpoint holds the last row's iteration"
    assert saved.get("world_size", 1) == world_size
    leftover = [p.pid for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [""])[0] == sys.executable
                and str(run_dir) in p.info["cmdline"]]  # fmt: skip
    assert leftover == [], "no process of the run is left"
    return iteration


def check_resume_repeats_nothing(
    tmp_path: Path, run_dir: Path, extra: list[str], world_size: int, iteration: int
) -> None:
    """Two more iterations from the checkpoint give the run that was never stopped."""
    total = str((iteration + 2) * STEPS_PER_RANK * world_size)
    launch = extra[:2] if world_size > 1 else []
    resume = [sys.executable, "-m", "rlperf", "train", *launch, "--resume", str(run_dir),
              "--total-steps", total, "--no-progress"]  # fmt: skip
    run_to_the_end(resume)
    straight = tmp_path / "straight"
    run_to_the_end(rlperf_train(*extra, "--total-steps", total, "--no-progress",
                                "--run-dir", str(straight)))  # fmt: skip
    assert rows(run_dir) == rows(straight)
    for name, value in checkpoint(straight)["policy"].items():
        assert torch.equal(checkpoint(run_dir)["policy"][name], value), name
