"""Helpers for the distributed tests: N gloo ranks in fresh processes on this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

from rlperf.distributed.group import join

TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int, fn: Callable, out: str, args: tuple,
               join_options: dict[str, Any]) -> None:  # fmt: skip
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    torch.set_num_threads(1)
    ranks = join("gloo", "cpu", TIMEOUT_S, **join_options)
    try:
        torch.save(fn(ranks, *args), Path(out) / f"rank{rank}.pt")
    finally:
        ranks.close()


def run_ranks(fn: Callable[..., Any], world_size: int, tmp: Path, *args: Any,
              join_options: dict[str, Any] | None = None) -> list[Any]:  # fmt: skip
    """``fn(ranks, *args)`` on ``world_size`` gloo ranks (spawned processes, one thread
    each, joined with ``join(..., **join_options)``); returns what each rank returned, in rank
    order. ``fn`` must be importable."""
    mp.start_processes(
        _rank_main, (world_size, free_port(), fn, str(tmp), args, join_options or {}),
        nprocs=world_size,
        start_method="spawn",
    )  # fmt: skip
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(world_size)]


def rlperf_command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "rlperf", *argv]


def env_with_src() -> dict[str, str]:
    """The environment for a child ``python -m rlperf``: this checkout's package first."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_cli(
    argv: list[str], timeout_s: float, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``argv`` with this checkout's package; stdout and stderr captured as text."""
    env = {**env_with_src(), **(env_extra or {})}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
