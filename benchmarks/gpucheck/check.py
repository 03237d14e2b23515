"""One run of the check: its sizes (the GPU's, or ``--cpu``'s tiny ones), its deadline and each
step's share of it, the environment of its subprocesses, and the report it writes as it goes."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpucheck.core import MIN_STEP_S, RESERVE_S, Skip, attempt, done
from gpucheck.facts import git_facts
from gpucheck.report import headline, headline_of

SCHEMA = "rlperf.gpu_check/1"


@dataclass(frozen=True)
class Sizes:
    """Everything that differs between the GPU run and ``--cpu``."""

    device: str
    deadline_s: float  # the whole run
    startup_s: float  # a training process's start, kept out of its --max-wall-s
    target_return: float  # cartpole_475's target (mean of the last 100 episodes)
    cartpole: tuple[int, int, int]  # envs, steps a rollout, total steps (PureJaxRL's work)
    cartpole_s: float  # cartpole_475's cap
    big_envs: int  # CartPole, the device cases and the profile at GPU size
    workload_s: float  # each workload's --max-wall-s
    pixel_envs: int  # the CNN's and the ConvLSTM's envs
    pixel_steps: int | None  # their steps a rollout (None: the config's)
    mujoco_steps: int | None  # --preset mujoco's 256 steps a rollout, or fewer
    bench_max_time_s: float  # pytest-benchmark's --benchmark-max-time
    bench_min_rounds: int
    jax: tuple[int, int, int]  # PureJaxRL: envs, steps, total
    jax_big: tuple[int, int, int]  # PureJaxRL at cartpole_big's shape (big_envs x 32)
    atari_s: float  # each Atari side's seconds
    atari_envs: int | None  # None: the preset's (CleanRL's 8)


GPU = Sizes(device="cuda", deadline_s=480, startup_s=25, target_return=475.0,
            cartpole=(4, 128, 500_000), cartpole_s=100, big_envs=4096, workload_s=10,
            pixel_envs=256, pixel_steps=None, mujoco_steps=None, bench_max_time_s=0.5,
            bench_min_rounds=5, jax=(4, 128, 500_000), jax_big=(4096, 32, 20_971_520),
            atari_s=120, atari_envs=None)  # fmt: skip
CPU = Sizes(device="cpu", deadline_s=300, startup_s=10, target_return=40.0,
            cartpole=(4, 16, 200_000), cartpole_s=60, big_envs=16, workload_s=1,
            pixel_envs=4, pixel_steps=8, mujoco_steps=64, bench_max_time_s=0.01,
            bench_min_rounds=2, jax=(4, 16, 2048), jax_big=(16, 32, 2048), atari_s=3,
            atari_envs=2)  # fmt: skip
# Each step's cap in seconds at GPU sizes (the deadline cuts them further); --cpu: CPU_CAP_S.
CAP_S = {"probe": 60, "install": 240, "cuda_tests": 120, "registry_cuda": 120, "profile": 90,
         "workload": 60, "purejaxrl": 120}  # fmt: skip
CPU_CAP_S = 120


class Check:
    """One run of the check: sizes, deadline, environment of the subprocesses, the report."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = CPU if args.cpu else GPU
        for name in ("deadline_s", "atari_s"):
            if getattr(args, name):
                self.sizes = Sizes(**{**asdict(self.sizes), name: getattr(args, name)})
        self.t0 = time.monotonic()
        self.out = Path(args.out)
        self.work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        if not args.cpu and Path(args.site).is_dir():  # installed by an earlier run (--only)
            self.add_path(args.site)
        self.facts: dict[str, Any] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.only = set(args.only.split(",")) if args.only else None
        self.report: dict[str, Any] = {
            "schema": SCHEMA,
            "mode": "cpu" if args.cpu else "gpu",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": shlex.join(sys.argv),
            "gpu": None,
            "sizes": asdict(self.sizes),
            "git": git_facts(),
            "steps": self.results,
        }

    @property
    def cuda(self) -> bool:
        return self.sizes.device == "cuda"

    def left(self) -> float:
        return self.sizes.deadline_s - (time.monotonic() - self.t0)

    def cap(self, step: str) -> float:
        """``step``'s cap in seconds at GPU sizes (:data:`CAP_S`)."""
        return CAP_S[step]

    def timeout(self, cap_s: float) -> float:
        """``cap_s`` (the step's, or CPU_CAP_S with --cpu) cut to what the deadline leaves;
        Skip where that is under MIN_STEP_S."""
        cap = CPU_CAP_S if self.args.cpu else cap_s
        t = min(cap, self.left() - RESERVE_S)
        if t < MIN_STEP_S:
            raise Skip(
                f"the overall deadline of {self.sizes.deadline_s:.0f} s leaves "
                f"{max(self.left(), 0):.0f} s"
            )
        return t

    def needs_cuda(self) -> None:
        """Skip on the GPU run where CUDA is not available (--cpu runs on the CPU instead)."""
        if self.cuda and not self.facts.get("cuda_available"):
            raise Skip(
                f"CUDA not available (torch {self.facts.get('torch')}); --cpu runs "
                "this check on the CPU"
            )

    def add_path(self, folder: str) -> None:
        """Put ``folder`` first on the subprocesses' PYTHONPATH."""
        path = self.env.get("PYTHONPATH")
        self.env["PYTHONPATH"] = folder + (os.pathsep + path if path else "")

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    def run_step(self, name: str, fn: Callable[[Check], dict[str, Any]]) -> None:
        start = time.monotonic()
        print(f"[{start - self.t0:6.1f} s] {name} ...", flush=True)
        if self.only is not None and name not in self.only and name != "probe":
            result = done("skipped", f"not selected (--only {self.args.only})")
        else:
            result = attempt(lambda: fn(self))
        result["seconds"] = round(time.monotonic() - start, 2)
        self.results[name] = result
        line = result["reason"] or headline_of(name, result["figures"]) or ""
        print(
            f"[{time.monotonic() - self.t0:6.1f} s] {name}: {result['status']} {line}", flush=True
        )
        self.write()

    def write(self) -> None:
        self.report["seconds"] = round(time.monotonic() - self.t0, 2)
        self.report["headline"] = headline(self.results)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report, indent=1, default=str) + "\n")
