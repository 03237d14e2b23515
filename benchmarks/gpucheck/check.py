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

from gpucheck.busy import Nvml
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
    big: tuple[int, int]  # CartPole at GPU size: envs, steps a rollout (the device cases too)
    row_s: float  # each CartPole row's --max-wall-s
    # Each row's iterations, where the row ends on a count, not on row_s (which then only caps
    # it): a wall budget that ends inside the traced iterations leaves a shorter trace on a
    # slower box, so the CPU check, a test, counts iterations. None: until row_s.
    row_iterations: int | None
    graphs_iterations: int  # iterations before graphs' and eager's parameters are compared
    mujoco_s: float  # each --preset mujoco row's --max-wall-s
    script_s: float  # a third-party script's seconds after its first figure
    workload_s: float  # each workload's --max-wall-s
    pixel_envs: int  # the CNN's and the ConvLSTM's envs
    pixel_steps: int | None  # their steps a rollout (None: the config's)
    mujoco_steps: int | None  # --preset mujoco's 256 steps a rollout, or fewer
    bench_max_time_s: float  # pytest-benchmark's --benchmark-max-time
    bench_min_rounds: int
    jax: tuple[int, int, int]  # PureJaxRL: envs, steps, total
    jax_big: tuple[int, int, int]  # PureJaxRL at the big CartPole shape
    atari_s: float  # each Pong side's seconds (atari_vs_cleanrl)
    atari_envs: int | None  # None: the preset's (CleanRL's 8)

    @property
    def big_envs(self) -> int:
        return self.big[0]


GPU = Sizes(device="cuda", deadline_s=480, startup_s=10, target_return=475.0,
            cartpole=(4, 128, 500_000), big=(4096, 32), row_s=6, row_iterations=None,
            graphs_iterations=3,
            mujoco_s=8, script_s=10, workload_s=10, pixel_envs=256, pixel_steps=None,
            mujoco_steps=None, bench_max_time_s=0.5, bench_min_rounds=5, jax=(4, 128, 500_000),
            jax_big=(4096, 32, 20_971_520), atari_s=120, atari_envs=None)  # fmt: skip
CPU = Sizes(device="cpu", deadline_s=480, startup_s=10, target_return=40.0,
            cartpole=(4, 16, 200_000), big=(16, 32), row_s=60, row_iterations=7,
            graphs_iterations=2, mujoco_s=1,
            script_s=2, workload_s=1, pixel_envs=4, pixel_steps=8, mujoco_steps=64,
            bench_max_time_s=0.01, bench_min_rounds=2, jax=(4, 16, 2048), jax_big=(16, 32, 2048),
            atari_s=3, atari_envs=2)  # fmt: skip
# The plan on the GPU: each step's budget in seconds, in the order the steps run, within the
# deadline less RESERVE_S (470 of 480). A step may run until the plan's end of it (the budgets
# of the steps before it and its own, from the start): what one leaves unspent goes to the next.
# Printed before the first step. With --only, the steps chosen are bounded by the deadline alone.
PLAN_S = {"probe": 15, "install": 40, "cuda_tests": 25, "cartpole_475": 40, "telemetry": 0,
          "cartpole_rows": 80, "graphs_equal": 25, "mujoco_devices": 50, "purejaxrl": 50,
          "breakout": 95, "halfcheetah": 50}  # fmt: skip
# Steps outside the 8 minutes on the GPU (measured on 2026-11-28; --only NAME runs one, its
# processes capped at this): their questions are not issue #57's.
EXTRA_S = {"registry_cuda": 60, "workloads": 60, "atari_vs_cleanrl": 300}
CPU_CAP_S = 120  # --cpu: every step runs, each process capped at this


class Check:
    """One run of the check: sizes, deadline, environment of the subprocesses, the report."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = CPU if args.cpu else GPU
        for name in ("deadline_s", "atari_s", "script_s"):
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
        self.step_end = float("inf")  # when the running step's budget ends (monotonic s)
        self.plan_end: dict[str, float] = {}  # each step's end in the plan, s from the start
        self.nvml = Nvml()  # the GPU's utilisation, for the rows that are not rlperf's
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
        """``step``'s budget in seconds on the GPU (:data:`PLAN_S`, :data:`EXTRA_S`)."""
        return PLAN_S.get(step, EXTRA_S.get(step, CPU_CAP_S))

    def planned(self, step: str) -> str | None:
        """Why ``step`` does not run in this run (None: it runs)."""
        if self.only is not None:
            ok = step in self.only or step == "probe"
            return None if ok else f"not selected (--only {self.args.only})"
        if self.args.cpu or step in PLAN_S:
            return None
        return f"not in the {self.sizes.deadline_s / 60:.0f}-minute plan: --only {step} runs it"

    def make_plan(self, steps: list[str]) -> list[tuple[str, float | None, str | None]]:
        """The plan for ``steps`` in order: (step, its budget in seconds or None where it does
        not run, why not); each running step's end is kept for :meth:`run_step`."""
        plan, end = [], 0.0
        for step in steps:
            why = self.planned(step)
            budget = None if why else (CPU_CAP_S if self.args.cpu else self.cap(step))
            if budget is not None:
                end += budget
                self.plan_end[step] = end
            plan.append((step, budget, why))
        self.report["plan"] = [{"step": s, "budget_s": b, "why_not": w} for s, b, w in plan]
        return plan

    def timeout(self, cap_s: float, least_s: float = MIN_STEP_S) -> float:
        """``cap_s`` (a process's, or CPU_CAP_S with --cpu) cut to what the step's budget and
        the deadline leave; Skip where that is under ``least_s``."""
        cap = CPU_CAP_S if self.args.cpu else cap_s
        now = time.monotonic()
        t = min(cap, self.step_end - now, self.left() - RESERVE_S)
        if t < least_s:
            if self.step_end - now < self.left() - RESERVE_S:
                raise Skip(f"the step's budget leaves {max(self.step_end - now, 0):.0f} s")
            raise Skip(
                f"the overall deadline of {self.sizes.deadline_s:.0f} s leaves "
                f"{max(self.left(), 0):.0f} s"
            )
        return t

    def has(self, feature: str) -> bool:
        """Whether this rlperf has one of issue #57's features (:func:`gpucheck.facts.features`)."""
        return bool(((self.facts.get("rlperf") or {}).get("features") or {}).get(feature))

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
        why = self.planned(name)
        if why:
            result = done("skipped", why)
        else:
            if not self.args.cpu and self.only is None:  # --only: the deadline alone bounds
                self.step_end = self.t0 + self.plan_end[name]
            result = attempt(lambda: fn(self))
            self.step_end = float("inf")
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
