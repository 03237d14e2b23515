"""SIGTERM, as SLURM, Kubernetes, CI runners and ``timeout`` stop a job: on one process, with
env workers and on two ranks (``--nproc 2``), the run does what Ctrl-C does (test_ctrl_c.py):
every process stops after the iteration the signal landed in, one line says so, no traceback,
the checkpoint holds that iteration and ``--resume`` continues from it to exactly the run that
was never stopped; the exit status is 143 (128 + SIGTERM).

The signal goes to the run's whole process group, as ``timeout`` and SLURM send it: the env
workers (and the forkserver that starts them) get it too, and must outlive the iteration."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from stopped_runs import (
    FOREVER,
    SETUPS,
    check_resume_repeats_nothing,
    check_stopped,
    iterations_done,
    rlperf_train,
    run_env,
)
from tmux_terminal import wait_for


@pytest.mark.parametrize("setup", list(SETUPS))
def test_sigterm_stops_every_process_with_one_line_and_resume_repeats_nothing(
    tmp_path: Path, setup: str
) -> None:
    extra, world_size = SETUPS[setup]
    run_dir = tmp_path / "run"
    train = rlperf_train(*extra, *FOREVER, "--no-progress", "--run-dir", str(run_dir))
    with open(tmp_path / "out", "w+") as out:
        run = subprocess.Popen(train, stdout=out, stderr=subprocess.STDOUT, env=run_env(),
                               start_new_session=True)  # fmt: skip
        try:
            wait_for(lambda: iterations_done(run_dir) >= 2, timeout_s=180, what="two iterations")
            os.killpg(run.pid, signal.SIGTERM)
            rc = run.wait(timeout=120)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait(timeout=10)
        out.seek(0)
        said = out.read()
    assert rc == 128 + signal.SIGTERM, said
    iteration = check_stopped(said, run_dir, world_size)
    check_resume_repeats_nothing(tmp_path, run_dir, extra, world_size, iteration)
