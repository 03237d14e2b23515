"""Driving a command in a real terminal: a tmux pane on a private server (the dashboard's and
Ctrl-C's tests)."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed (apt-get install tmux): the real-terminal tests run rlperf "
    "in a tmux pane and send it keys",
)


def tmux(socket: str, *args: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
