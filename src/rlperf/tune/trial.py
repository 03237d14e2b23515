"""One trial of ``rlperf tune``: a fresh ``rlperf train`` process with a wall-clock budget, its
learning curve read from ``metrics.jsonl`` as it grows, and its result from ``summary.json``.

A trial's folder holds ``preset.json`` (the settings it trains, a preset file), ``train.log``
(the process's stdout and stderr) and ``run/`` (its run directory). The process starts in a
session of its own, so a Ctrl-C in the terminal reaches ``rlperf tune`` alone, which then stops
the trial itself (:func:`stop`): SIGINT, on which ``rlperf train`` finishes its iteration and
writes its summary and checkpoint, then SIGKILL if it has not ended ``STOP_GRACE_S`` later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

# The command a trial runs (a module attribute: tests put a crashing stand-in here).
TRAIN_COMMAND: list[str] = [sys.executable, "-m", "rlperf.cli", "train"]
# --total-steps of a trial: --max-wall-s ends it, never the steps.
UNBOUNDED_STEPS = 10**12
STOP_GRACE_S = 20.0
PRESET_NAME, LOG_NAME, RUN_NAME = "preset.json", "train.log", "run"


def command(folder: Path, env: str, wall_s: float, seed: int) -> list[str]:
    """``rlperf train`` for the trial in ``folder``: its preset file on ``env`` for ``wall_s``
    seconds, the learning rate annealed over them (``--anneal-with-wall``)."""
    return [
        *TRAIN_COMMAND,
        "--preset-file", str(folder / PRESET_NAME), "--env", env,
        "--max-wall-s", f"{wall_s:g}", "--anneal-with-wall",
        "--total-steps", str(UNBOUNDED_STEPS), "--seed", str(seed),
        "--run-dir", str(folder / RUN_NAME), "--overwrite", "--no-progress",
        "--checkpoint-every", "0",
    ]  # fmt: skip


def start(folder: Path, preset_text: str, env: str, wall_s: float, seed: int) -> subprocess.Popen:
    """Write the trial's preset file and start its process (stdout and stderr to its log)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PRESET_NAME).write_text(preset_text)
    log: IO[Any] = open(folder / LOG_NAME, "w")  # noqa: SIM115 (the process owns it)
    try:
        return subprocess.Popen(
            command(folder, env, wall_s, seed),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        log.close()  # the child holds its own copy


def stop(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """End a trial's process: SIGINT (``rlperf train`` finishes its iteration and writes its
    summary), SIGKILL if it is still running ``grace_s`` seconds later."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class Curve:
    """The rows of a run's ``metrics.jsonl`` as they are written: :meth:`new_rows` returns the
    complete lines added since the last call (a line still being written waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new_rows(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def mean_return(folder: Path) -> float | None:
    """The trial's objective: the mean return of its last 100 episodes when its budget ran out
    (``summary.json``), None without a summary or an episode."""
    try:
        summary = json.loads((folder / RUN_NAME / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    value = summary.get("mean_return_last_100")
    return None if value is None else float(value)


def last_line(folder: Path) -> str:
    """The last line the trial's process printed (its error, when it failed)."""
    try:
        lines = (folder / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""
