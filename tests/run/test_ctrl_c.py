"""Ctrl-C in a real terminal (a tmux pane): on one process, with env workers and on two ranks
(``--nproc 2``), every process stops after the iteration the key landed in, one line says so,
the exit status is 130, no traceback; the checkpoint holds that iteration, and ``--resume``
continues from it to exactly the run that was never interrupted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from stopped_runs import (
    FOREVER,
    SETUPS,
    SRC,
    check_resume_repeats_nothing,
    check_stopped,
    iterations_done,
    rlperf_train,
)
from tmux_terminal import needs_tmux, tmux, wait_for


@needs_tmux
@pytest.mark.parametrize("setup", list(SETUPS))
def test_ctrl_c_stops_every_process_with_one_line_and_resume_repeats_nothing(
    tmp_path: Path, setup: str
) -> None:
    extra, world_size = SETUPS[setup]
    run_dir, rc_file = tmp_path / "run", tmp_path / "rc"
    socket, session = f"rlperf-ctrl-c-{os.getpid()}", "run"
    train = rlperf_train(*extra, *FOREVER, "--run-dir", str(run_dir))
    # bash waits for the run in the foreground (Ctrl-C reaches it), then records its status.
    script = f"PYTHONPATH={SRC} {' '.join(train)}; echo $? > {rc_file}; sleep 60"
    tmux(socket, "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash", "-c", script)
    try:
        wait_for(lambda: iterations_done(run_dir) >= 2, timeout_s=180, what="two iterations")
        tmux(socket, "send-keys", "-t", session, "C-c")
        rc = wait_for(lambda: rc_file.exists() and rc_file.read_text().strip(), 120, "the exit")
        screen = tmux(socket, "capture-pane", "-p", "-J", "-t", session)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
    assert rc == "130", screen
    iteration = check_stopped(screen, run_dir, world_size)
    check_resume_repeats_nothing(tmp_path, run_dir, extra, world_size, iteration)
