"""Launching: resume of a 2-rank run is exact, an elastic restart continues from the last
checkpoint exactly, two "machines" (torchrun node processes on 127.0.0.1, c10d rendezvous)
write one run directory, and bad launch flags are one line and status 2 before any work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ranks import env_with_src, free_port, rlperf_command, run_cli
from test_faults import TINY, error_lines, faulty_run

from rlperf.distributed.shm_sum import supported

ITERATIONS = 6
# No learning-rate annealing: its schedule follows --total-steps, which the resume test's first
# part sets shorter.
STEPS = ["--total-steps", str(ITERATIONS * 2 * 4 * 8), "--checkpoint-every", "1", "--no-anneal-lr"]


def rows(run_dir: Path) -> list[tuple]:
    """Each iteration's figures that a different history would change (not its timings)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [
        (r["iteration"], r["global_step"], r["loss"], r["approx_kl"], r["mean_return"])
        for r in map(json.loads, lines)
    ]


def final_parameters(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoint.pt", weights_only=True)["policy"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-rank run of ITERATIONS iterations, not interrupted."""
    tmp = tmp_path_factory.mktemp("straight")
    done, _ = faulty_run(tmp, "", *STEPS, "--run-dir", str(tmp / "run"))
    assert done.returncode == 0, done.stderr
    assert len(rows(tmp / "run")) == ITERATIONS
    return tmp / "run"


def assert_same_run(run_dir: Path, straight: Path) -> None:
    assert rows(run_dir) == rows(straight)
    for name, value in final_parameters(straight).items():
        assert torch.equal(final_parameters(run_dir)[name], value), name


def test_resume_of_a_two_rank_run_is_exact(tmp_path: Path, straight: Path) -> None:
    run_dir = tmp_path / "run"
    first = ["--total-steps", str(2 * 2 * 4 * 8), *STEPS[2:]]
    done = run_cli(rlperf_command("train", "--nproc", "2", *TINY, *first, "--run-dir",
                                  str(run_dir)), timeout_s=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert saved["world_size"] == 2 and len(saved["other_ranks"]) == 1
    resume = ["train", "--nproc", "2", "--resume", str(run_dir), "--no-progress",
              "--dist-timeout-s", "60", *STEPS[:2]]  # fmt: skip
    done = run_cli(rlperf_command(*resume), timeout_s=180)
    assert done.returncode == 0, done.stderr
    assert_same_run(run_dir, straight)


def test_max_restarts_continue_from_the_last_checkpoint(tmp_path: Path, straight: Path) -> None:
    done, _ = faulty_run(tmp_path, "1:4:raise-once", *STEPS, "--max-restarts", "1",
                         "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fault_time").exists(), "the fault never fired"
    assert_same_run(tmp_path / "run", straight)


def test_two_nodes_on_one_host_write_one_run_directory(tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    run_dir = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--rdzv-id", "two-nodes", "-m", "rlperf", "train", *TINY,
                "--total-steps", str(3 * 2 * 4 * 8), "--run-dir", str(run_dir)]  # fmt: skip
    nodes = [
        subprocess.Popen(
            torchrun, env=env_with_src(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [node.communicate(timeout=240) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ranks"] == 2 and summary["global_step"] == 3 * 2 * 4 * 8
    # The defaults: on one host the gradient goes through shared memory, and gloo's threads,
    # which then carry only the iteration's few calls, stay as gloo made them.
    assert summary["grad_exchange"] == ("shm" if supported() else "sendrecv")
    assert summary["gloo_io"] == ("normal" if supported() else "idle")
    assert len(rows(run_dir)) == 3
    # Rank 0 printed the summary; the other node printed none.
    assert sum("steps in" in out for out, _ in outputs) == 1


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--nproc", "0"], "--nproc must be at least 1, got 0"),
        (["--nproc", "64"], "cores this process may use"),
        (["--nproc", "2", "--dist-backend", "nccl"], "nccl needs CUDA"),
        (["--nproc", "2", "--device", "auto"], "--device auto probes one process"),
        (["--nproc", "2", "--grad-exchange", "ring"], "invalid choice: 'ring'"),
        (
            "--nnodes 2 --rdzv-endpoint h:1 --grad-exchange shm".split(),
            "--grad-exchange shm needs every rank on one machine",
        ),
        (
            "--nproc 3 --oversubscribe --grad-exchange sendrecv".split(),
            "--grad-exchange sendrecv needs exactly 2 ranks, got 3",
        ),
    ],
)
def test_bad_launch_flags(tmp_path: Path, flags: list[str], says: str) -> None:
    if "nccl" in says and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run_dir = tmp_path / "run"
    done = run_cli(rlperf_command("train", *flags, "--run-dir", str(run_dir)), timeout_s=60)
    assert done.returncode == 2
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert not run_dir.exists(), "bad input must not start any work"


@pytest.mark.parametrize("nproc", ["1", "3"])
def test_resume_with_another_number_of_ranks(straight: Path, nproc: str) -> None:
    before = (straight / "checkpoint.pt").read_bytes()
    flags = ["--oversubscribe"] if nproc == "3" else []
    done = run_cli(rlperf_command("train", "--resume", str(straight), "--nproc", nproc, *flags),
                   timeout_s=60)  # fmt: skip
    assert done.returncode == 2
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "made by 2 rank(s)" in lines[0] and "--nproc 2" in lines[0]
    assert (straight / "checkpoint.pt").read_bytes() == before
