"""Ctrl-C in a real terminal (a tmux pane): on one process, with env workers and on two ranks
(``--nproc 2``), every process stops after the iteration the key landed in, one line says so,
the exit status is 130, no traceback; the checkpoint holds that iteration, and ``--resume``
continues from it to exactly the run that was never interrupted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import torch
from tmux_terminal import needs_tmux, tmux, wait_for

import rlperf

SRC = Path(rlperf.__file__).resolve().parents[1]
# No learning-rate annealing: its schedule follows --total-steps, which differs between the
# interrupted run (far more than it will do) and the straight one.
TINY = ["--num-envs", "4", "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1",
        "--hidden-sizes", "8", "--threads", "1", "--seed", "4", "--no-anneal-lr",
        "--checkpoint-every", "1000000"]  # fmt: skip
SETUPS = {
    "one process": ([], 1),
    "env workers": (["--vec-backend", "multiprocess", "--num-workers", "1"], 1),
    "two ranks": (["--nproc", "2", "--no-progress", "--dist-timeout-s", "60"], 2),
}
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}


def rlperf_train(*argv: str) -> list[str]:
    return [sys.executable, "-m", "rlperf", "train", *TINY, *argv]


def rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING_FIELDS} for x in lines]


def checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)


def run_to_the_end(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr


@needs_tmux
@pytest.mark.parametrize("setup", list(SETUPS))
def test_ctrl_c_stops_every_process_with_one_line_and_resume_repeats_nothing(
    tmp_path: Path, setup: str
) -> None:
    extra, world_size = SETUPS[setup]
    steps_per_iteration = 4 * 8 * world_size
    run_dir, rc_file = tmp_path / "run", tmp_path / "rc"
    socket, session = f"rlperf-ctrl-c-{os.getpid()}", "run"
    train = rlperf_train(*extra, "--total-steps", "1000000000", "--run-dir", str(run_dir))
    # bash waits for the run in the foreground (Ctrl-C reaches it), then records its status.
    script = f"PYTHONPATH={SRC} {' '.join(train)}; echo $? > {rc_file}; sleep 60"
    tmux(socket, "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash", "-c", script)
    try:
        metrics = run_dir / "metrics.jsonl"
        wait_for(lambda: metrics.is_file() and len(metrics.read_text().splitlines()) >= 2,
                 timeout_s=180, what="two iterations")  # fmt: skip
        tmux(socket, "send-keys", "-t", session, "C-c")
        rc = wait_for(lambda: rc_file.exists() and rc_file.read_text().strip(), 120, "the exit")
        screen = tmux(socket, "capture-pane", "-p", "-J", "-t", session)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
    assert rc == "130", screen
    said = [line for line in screen.splitlines() if line.startswith("rlperf")]
    assert len(said) == 1, screen
    assert "Traceback" not in screen and "SignalException" not in screen, screen
    saved = checkpoint(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    iteration = saved["iteration"]
    assert said[0] == (
        f"rlperf: interrupted; summary written, iteration {iteration} (global step "
        f"{iteration * steps_per_iteration:,}) checkpointed: continue with rlperf train "
        f"--resume {run_dir}"
    )
    assert summary["interrupted"] is True and summary["iterations"] == iteration
    assert len(rows(run_dir)) == iteration, "the checkpoint holds the last row's iteration"
    assert saved.get("world_size", 1) == world_size
    leftover = [p.pid for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [""])[0] == sys.executable
                and str(run_dir) in p.info["cmdline"]]  # fmt: skip
    assert leftover == [], "no process of the run is left"

    # Two more iterations from the checkpoint: the run that was never interrupted.
    total = str((iteration + 2) * steps_per_iteration)
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
