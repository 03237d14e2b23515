"""A rank that raises or is killed stops the whole run within the timeout, with one line that
names it, and leaves no process behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from ranks import run_cli

SCRIPT = str(Path(__file__).with_name("faulty_rlperf.py"))
# --dist-timeout-s of these runs: the default. It also bounds how far apart the ranks may
# reach the process group's creation (connecting), seconds on a loaded 2-core machine.
TIMEOUT_S = 60
TINY = ["--num-envs", "4", "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1",
        "--hidden-sizes", "8", "--threads", "1", "--no-progress", "--dist-timeout-s",
        str(TIMEOUT_S)]  # fmt: skip


def faulty_run(tmp: Path, fault: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    """``rlperf train --nproc 2`` with ``fault`` injected; (completed process, seconds from
    the fault to the launcher's exit)."""
    env_extra = {"RLPERF_TEST_DIR": str(tmp), "RLPERF_TEST_FAULT": fault}
    argv = [sys.executable, SCRIPT, "train", "--nproc", "2", *TINY, *extra]
    done = run_cli(argv, timeout_s=180, env_extra=env_extra)
    ended = time.time()
    fault_file = tmp / "fault_time"
    return done, ended - float(fault_file.read_text()) if fault_file.exists() else -1.0


def rank_pids(tmp: Path) -> list[int]:
    return [int(p.name.split(".")[2]) for p in tmp.glob("pid.*")]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rlperf: error:")]


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("raise", "rank 1 failed: ValueError: injected fault at iteration 2"),
        ("kill", "rank 1 was killed by SIGKILL"),
    ],  # fmt: skip
)
def test_a_failing_rank_stops_every_rank(tmp_path: Path, kind: str, says: str) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    done, fault_to_exit_s = faulty_run(
        tmp_path, f"1:2:{kind}", "--total-steps", "100000", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 1, done.stderr
    assert error_lines(done.stderr) == [f"rlperf: error: {says}"], done.stderr
    assert 0 <= fault_to_exit_s < TIMEOUT_S
    pids = rank_pids(tmp_path)
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)], "a rank outlived the run"
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before
