"""The GPU check (issue #49): every CUDA path of rlperf run once on one GPU machine, in one
command of at most 8 minutes, with every figure in one JSON file.

    python benchmarks/gpu_check.py --out $OUT/gpu_check.json   # on the GPU machine
    python benchmarks/gpu_check.py --cpu                         # the same control flow, here
    python benchmarks/gpu_check.py --only cartpole_475,profile   # again, some steps only
    python benchmarks/gpu_check.py --fetch-wheels .whl           # before: what the GPU lacks
    python benchmarks/gpu_check.py --prepare-cleanrl GIT_DIR     # before: CleanRL's ppo_atari.py

The steps, in this order (:data:`STEPS`). Each has its own timeout, cut to what the overall
deadline leaves; one that fails or times out is recorded and the next one runs:

- ``probe``: torch, CUDA and the GPU's name (nvidia-smi's too).
- ``install``: the wheels of ``--wheels`` (.whl/) into ``--site`` (/tmp/site, put on every
  subprocess's PYTHONPATH), then ``pip install --no-deps --no-build-isolation -e .`` (the C
  kernels built there); then which presets, envs, kernels and optional modules rlperf sees.
- ``cuda_tests``: every test under tests/ that mentions CUDA (:func:`find_cuda_tests`), with
  pytest; pass, fail and skip counts.
- ``cartpole_475``: ``rlperf train --device cuda`` on PureJaxRL's CartPole work (4 envs x 128
  steps, lr 2.5e-4, 500,000 steps), stopped at the first mean return (last 100) of 475: SPS,
  steps and seconds to that return.
- ``telemetry``: that run's NVML block (GPU utilisation and memory; nvidia-ml-py).
- ``registry_cuda``: pytest-benchmark on the registry's CUDA cases (the host/device transfers)
  and on the trainer's parts on the device (:func:`device_cases`: policy act, an update epoch,
  the optimizer step, end-to-end iterations) at 4,096 envs.
- ``profile``: ``rlperf profile --device cuda --torch-profiler`` at 4,096 envs: the synced
  sections and a torch.profiler trace, its CUDA kernels counted and the trace kept.
- ``workloads``: the GPU-sized runs: CartPole at 4,096 envs, the CNN on the robots' RGB pixels,
  the ConvLSTM (``--preset robots-rgb``), MuJoCo (``--preset mujoco``), Atari (``--preset
  atari``) and nccl with two ranks, each for a few seconds; SPS and where the time went.
- ``purejaxrl``: where jax sees the GPU, PureJaxRL's ``ppo.py`` on the CartPole work of
  ``cartpole_475`` and at the workloads' CartPole size (4,096 envs x 32 steps, against
  ``cartpole_big``) (benchmarks/purejaxrl_vs_rlperf.py's worker).
- ``atari_vs_cleanrl``: ``--preset atari --env gym:ale_py:ALE/Pong-v5`` and CleanRL's
  ``ppo_atari.py`` on PongNoFrameskip-v4, at once on the same GPU for the same seconds (what the
  deadline leaves, at most ``--atari-s``; alone: ``--only atari_vs_cleanrl --atari-s 300`` on
  the warm machine); both return curves.

``--cpu`` runs all of it on the CPU at tiny sizes (the target return lowered to 40, so that the
stop at the target runs too): only what needs CUDA is skipped, with the reason recorded.
tests/bench/test_gpu_check.py runs it, so the script is not what fails on the day.

The JSON (``--out``; default ``$OUT/gpu_check.json`` where OUT is set, else gpu_check.json) has
the GPU's name, each step's status (ok, skipped, failed or timeout), its reason and its figures,
and ``headline``: the figures issue #49 asks for. Beside it, ``<stem>.log`` holds every step's
output and ``<stem>_trace.json.gz`` the profiler's trace. The exit status is 1 when a step failed
or timed out.

pytest also collects this file (the ``registry_cuda`` step passes it to pytest): the device
cases are :func:`test_device_case`, parametrised by :func:`pytest_generate_tests`.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "rlperf.gpu_check/1"
STEPS = ("probe", "install", "cuda_tests", "cartpole_475", "telemetry", "registry_cuda",
         "profile", "workloads", "purejaxrl", "atari_vs_cleanrl")  # fmt: skip
RESERVE_S = 10.0  # kept back from the deadline for the report
MIN_STEP_S = 15.0  # a step that would get less is skipped, saying so
GRACE_S = 15.0  # after SIGINT: a trainer finishes its iteration and writes its summary
BIG = 10**9  # --total-steps of the runs that --max-wall-s stops
DEVICE_VAR, ENVS_VAR = "RLPERF_GPU_CHECK_DEVICE", "RLPERF_GPU_CHECK_ENVS"

# What the GPU machine lacks (its image has torch, jax, flax, optax, chex, numpy, cloudpickle,
# pillow, imageio, packaging, opencv-python-headless, tensorboard, nvidia-ml-py, absl-py,
# attrs, wrapt, matplotlib and seaborn): (name, version, pure Python, who needs it). envpool is
# left out: with the assets it requires it is hundreds of MB, over the 64 MiB that travel.
WHEELS = (
    ("gymnasium", "1.4.0", True, "rlperf"),
    ("farama-notifications", "0.0.6", True, "gymnasium"),
    ("typing-extensions", "4.15.0", True, "gymnasium, tyro, typeguard (newer than the image's)"),
    ("ale-py", "0.12.1", False, "Atari (ships the ROMs)"),
    ("mujoco", "4.0.0", False, "gymnasium[mujoco]"),
    ("mujoco-core", "4.0.0", False, "mujoco"),
    ("mujoco-studio", "4.0.0", False, "mujoco"),
    ("glfw", "2.11.0", False, "mujoco"),
    ("pyopengl", "3.1.10", True, "mujoco"),
    ("websockets", "17.4", False, "mujoco-studio"),
    ("tyro", "1.0.17", True, "CleanRL's ppo_atari.py"),
    ("docstring-parser", "0.18.0", True, "tyro"),
    ("typeguard", "4.6.1", True, "tyro"),
    ("stable-baselines3", "2.9.2", True, "--preset atari's EpisodicLifeEnv and FireResetEnv"),
    ("gymnax", "0.0.9", True, "PureJaxRL (benchmarks/purejaxrl/README.md pins it)"),
    ("distrax", "0.1.9", True, "PureJaxRL"),
    ("tfp-nightly", "0.26.0.dev20261027", True, "distrax"),
    ("dm-tree", "0.1.10", False, "tfp-nightly"),
    ("gast", "0.7.0", True, "tfp-nightly"),
    ("decorator", "5.3.1", True, "tfp-nightly"),
)
BINARY_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# The modules the steps look for (import name: distribution), found without importing them.
MODULES = {"gymnasium": "gymnasium", "ale_py": "ale-py", "mujoco": "mujoco", "cv2": None,
           "tyro": "tyro", "tensorboard": "tensorboard", "pynvml": "nvidia-ml-py",
           "jax": "jax", "flax": "flax", "optax": "optax", "distrax": "distrax",
           "gymnax": "gymnax", "envpool": "envpool",
           "stable_baselines3": "stable-baselines3"}  # fmt: skip

# Tests that mention CUDA but run far more cases than need it: test name -> the -k keyword of
# the cases that do (every registry case runs once in that test; only the transfers need CUDA).
NARROW_TESTS = {"test_case_runs_once": "transfer"}
# Test files that mention CUDA but are not run: this check's own tests (they run the check).
NOT_CUDA_TESTS = ("tests/bench/test_gpu_check.py",)

# rlperf's Atari run (issue #47); gymnasium's module:id form imports ale_py, which registers it.
ATARI_ENV = "gym:ale_py:ALE/Pong-v5"
CLEANRL_DIR = ".cleanrl"  # ignored (.git/info/exclude), carried to the GPU machine
CLEANRL_ENV = "PongNoFrameskip-v4"  # CleanRL's own Atari ids (its wrappers skip frames)
# (why, CleanRL's text, replacement): the least that runs cleanrl/ppo_atari.py on gymnasium 1.x.
CLEANRL_EDITS = (
    (
        "gymnasium 1.x registers the ALE ids only when ale_py registers them",
        "import gymnasium as gym\n",
        "import ale_py\nimport gymnasium as gym\n\ngym.register_envs(ale_py)\n",
    ),
    (
        "gymnasium 1.0 renamed GrayScaleObservation",
        "gym.wrappers.GrayScaleObservation(env)",
        "gym.wrappers.GrayscaleObservation(env)",
    ),
    (
        "gymnasium 1.0 renamed FrameStack",
        "gym.wrappers.FrameStack(env, 4)",
        "gym.wrappers.FrameStackObservation(env, 4)",
    ),
    (
        "gymnasium 1.x's vector env resets on the step after an episode's end unless told to "
        "reset on the same step, as gymnasium 0.29's did (the script's GAE assumes it)",
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n",
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n"
        "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
    ),
    (
        "gymnasium 1.x's final_info is one dict of arrays, 'episode' flagged by '_episode', not a "
        "list of dicts (the loop's body is kept)",
        '                for info in infos["final_info"]:\n',
        '                for info in [{"episode": {k: v[i] for k, v in '
        'infos["final_info"]["episode"].items()}}\n'
        '                             for i in np.flatnonzero(infos["final_info"]'
        '.get("_episode", ()))]:\n',
    ),
)


# -- sizes ------------------------------------------------------------------------------------
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


class Skip(Exception):
    """The step (or item) cannot run here; the message says why."""

    def __init__(self, reason: str, figures: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.figures = figures or {}


class Failed(Exception):
    """The step (or item) ran and failed; ``figures`` keeps what it measured and its log."""

    def __init__(self, reason: str, figures: dict[str, Any] | None = None, timeout: bool = False):
        super().__init__(reason)
        self.figures = figures or {}
        self.timeout = timeout


# -- processes --------------------------------------------------------------------------------
@dataclass
class Finished:
    rc: int | None
    seconds: float
    timed_out: bool  # reached its timeout (then SIGINT, and SIGKILL after GRACE_S)
    stopped: bool  # stopped on request (SIGINT from ``stop``)
    log: Path

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:]


def run_process(
    argv: list[str],
    timeout_s: float,
    log: Path,
    env: dict[str, str],
    cwd: Path = ROOT,
    stop: Callable[[], bool] | None = None,
) -> Finished:
    """Run ``argv`` in its own process group with its output in ``log``. ``stop`` is polled
    twice a second; when it says so, or at the timeout, the group gets SIGINT (rlperf finishes
    the iteration and writes its summary) and SIGKILL GRACE_S later."""
    t0 = time.monotonic()
    interrupted_at: float | None = None
    timed_out = stopped = False
    with open(log, "w") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        while True:
            try:
                rc: int | None = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if interrupted_at is None:
                if now - t0 > timeout_s:
                    timed_out = True
                elif stop is not None and stop():
                    stopped = True
                if timed_out or stopped:
                    interrupted_at = now
                    _signal_group(proc, signal.SIGINT)
            elif now - interrupted_at > GRACE_S:
                _signal_group(proc, signal.SIGKILL)
                rc = proc.wait()
                break
    return Finished(rc, time.monotonic() - t0, timed_out, stopped, log)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


class Rows:
    """The complete lines of a growing JSON-lines file, read on from where the last read ended."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.rows = path, 0, []

    def read(self) -> list[dict[str, Any]]:
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self.offset += end
            self.rows += [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        return self.rows


def first_at(rows: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    """The first metrics row whose mean return (last 100 episodes) reaches ``target``."""
    return next((r for r in rows if (r.get("mean_return") or float("-inf")) >= target), None)


def thin(points: list[Any], most: int) -> list[Any]:
    """At most ``most`` of ``points``, evenly spaced, the last one kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    return [points[int(i * step)] for i in range(most - 1)] + [points[-1]]


def last_json(text: str) -> dict[str, Any]:
    """The last line of ``text`` that is a JSON object (a worker's result among its warnings)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                return json.loads(line)
    raise ValueError("no JSON result in the output")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


# -- the run ----------------------------------------------------------------------------------
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


def done(status: str, reason: str | None, figures: dict[str, Any] | None = None) -> dict:
    return {"status": status, "reason": reason, "figures": figures or {}}


def attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a step or an item: ok with its figures, or skipped, failed or timeout with why."""
    try:
        return done("ok", None, fn())
    except Skip as e:
        return done("skipped", str(e), e.figures)
    except Failed as e:
        return done("timeout" if e.timeout else "failed", str(e), e.figures)
    except Exception as e:  # a bug of this script in one step must not stop the others
        figures = {"traceback": traceback.format_exc()[-3000:]}
        return done("failed", f"{type(e).__name__}: {e}", figures)


def items(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A step made of items: Failed naming the items that failed, Skip when none ran."""
    bad = [n for n, r in results.items() if r["status"] in ("failed", "timeout")]
    figures = {"items": results}
    if bad:
        raise Failed(f"{', '.join(bad)} failed", figures)
    if results and all(r["status"] == "skipped" for r in results.values()):
        raise Skip("; ".join(f"{n}: {r['reason']}" for n, r in results.items()), figures)
    return figures


# -- facts ------------------------------------------------------------------------------------
def facts() -> dict[str, Any]:
    """What this Python has: torch, CUDA, the GPUs, rlperf (presets, envs, kernels) and the
    optional modules (found, not imported). Run in a subprocess (``--facts``)."""
    import importlib.metadata
    import importlib.util
    import platform

    import torch

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cpus": os.cpu_count(),
        "gpus": [],
    }
    for i in range(torch.cuda.device_count() if out["cuda_available"] else 0):
        p = torch.cuda.get_device_properties(i)
        out["gpus"].append(
            {
                "name": p.name,
                "memory_gib": round(p.total_memory / 2**30, 1),
                "capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
            }
        )
    modules = {}
    for module, dist in MODULES.items():
        version = None
        if importlib.util.find_spec(module) is not None:
            version = "found"
            with contextlib.suppress(importlib.metadata.PackageNotFoundError, TypeError):
                version = importlib.metadata.version(dist or module)
        modules[module] = version
    out["modules"] = modules
    try:
        import rlperf
        from rlperf import native
        from rlperf.config import PRESETS
        from rlperf.envs import registered
        from rlperf.policies.registry import policy_names
    except Exception as e:  # a tree that does not import is a finding, not a crash
        out["rlperf"] = {"error": f"{type(e).__name__}: {e}"}
    else:
        out["rlperf"] = {
            "file": rlperf.__file__,
            "presets": sorted(PRESETS),
            "envs": sorted(registered()),
            "policies": sorted(policy_names()),
            "kernels": native.status(),
        }
    return out


def git_facts() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def nvidia_smi() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = "--query-gpu=name,driver_version,memory.total"
    done = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip() or None


def read_facts(check: Check, name: str) -> dict[str, Any]:
    path = check.work / f"{name}.json"
    argv = check.python(__file__, "--facts", str(path))
    fin = run_process(argv, check.timeout(CAP_S["probe"]), check.log(name), check.env)
    if fin.rc != 0 or not path.exists():
        raise Failed(f"the facts process exited {fin.rc}", {"log_tail": fin.tail()})
    return json.loads(path.read_text())


# -- the steps --------------------------------------------------------------------------------
def step_probe(check: Check) -> dict[str, Any]:
    check.facts = read_facts(check, "probe")
    check.facts["nvidia_smi"] = nvidia_smi()
    gpus = check.facts["gpus"]
    check.report["gpu"] = gpus[0]["name"] if gpus else None
    check.report["machine"] = check.facts
    if check.cuda and not check.facts["cuda_available"]:
        raise Skip(
            f"CUDA not available (torch {check.facts['torch']}): the CUDA steps will skip "
            "(--cpu runs this check on the CPU)",
            check.facts,
        )
    return check.facts


def step_install(check: Check) -> dict[str, Any]:
    if not check.args.cpu and not check.facts.get("cuda_available"):
        raise Skip("no CUDA here: nothing installed (--cpu runs this check on the CPU)")
    figures: dict[str, Any] = {"wheels": install_wheels(check)}
    if check.args.cpu:
        figures["rlperf"] = done("skipped", "--cpu: the rlperf this Python has installed runs")
    else:
        argv = check.python(
            "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(ROOT)
        )
        fin = run_process(
            argv, check.timeout(CAP_S["install"]), check.log("install_rlperf"), check.env
        )
        figures["rlperf"] = {
            "status": "ok" if fin.rc == 0 else "failed",
            "seconds": round(fin.seconds, 1),
        }
        if fin.rc != 0:
            raise Failed(
                f"pip install -e . exited {fin.rc}",
                {**figures, "log_tail": fin.tail()},
                fin.timed_out,
            )
    if figures["wheels"]["status"] == "ok" or figures["rlperf"]["status"] == "ok":
        check.facts = {**check.facts, **read_facts(check, "install_facts")}
    figures["facts"] = {k: check.facts.get(k) for k in ("rlperf", "modules")}
    rlperf = check.facts.get("rlperf") or {}
    if "error" in rlperf:
        raise Failed(f"rlperf does not import: {rlperf['error']}", figures)
    if not all(rlperf["kernels"].values()):
        raise Failed(f"C kernels missing: {rlperf['kernels']}", figures)
    return figures


def install_wheels(check: Check) -> dict[str, Any]:
    """pip install --target of the wheels in --wheels; their folder on PYTHONPATH after."""
    folder = Path(check.args.wheels)
    wheels = sorted(folder.glob("*.whl"))
    found = {wheel_name(w) for w in wheels}
    figures: dict[str, Any] = {
        "folder": str(folder),
        "files": [w.name for w in wheels],
        "mb": round(sum(w.stat().st_size for w in wheels) / 2**20, 1),
        "missing": [n for n, *_ in WHEELS if normal(n) not in found],
    }
    if not wheels:
        return done(
            "skipped",
            f"no wheels in {folder}: the steps that need gymnasium, ale-py, "
            "mujoco, tyro or PureJaxRL's packages will say so",
            figures,
        )
    if check.args.cpu:
        return done(
            "skipped",
            "--cpu: this Python's own packages run (the wheels are the GPU machine's, cp312)",
            figures,
        )
    site = Path(check.args.site)
    pip = "-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target"
    argv = check.python(*pip.split(), str(site), *map(str, wheels))
    fin = run_process(argv, check.timeout(CAP_S["install"]), check.log("install_wheels"), check.env)
    figures["seconds"] = round(fin.seconds, 1)
    if fin.rc != 0:
        return done("failed", f"pip install --target exited {fin.rc}: {fin.tail(600)}", figures)
    if str(site) not in check.env.get("PYTHONPATH", "").split(os.pathsep):
        check.add_path(str(site))
    return done("ok", None, figures)


def wheel_name(path: Path) -> str:
    return normal(path.name.split("-")[0])


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_cuda_tests(tests: Path) -> tuple[list[str], list[str]]:
    """(node ids of the tests under ``tests`` whose text, decorators included, or module mark
    mentions CUDA; those among them that skip where CUDA is available, left out)."""
    selected, excluded = [], []
    for path in sorted(tests.rglob("test_*.py")):
        source, rel = path.read_text(), path.relative_to(tests.parent).as_posix()
        if "cuda" not in source.lower() or rel in NOT_CUDA_TESTS:
            continue
        tree, lines = ast.parse(source), source.splitlines()
        marked = any(
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
            and "cuda" in (ast.get_source_segment(source, n) or "").lower()
            for n in tree.body
        )
        for prefix, fn in _test_functions(tree.body):
            first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
            text = "\n".join(lines[first - 1 : fn.end_lineno]).lower()
            if marked or "cuda" in text:
                node_id = f"{rel}::{prefix}{fn.name}"
                (excluded if _skips_with_cuda(fn) else selected).append(node_id)
    return selected, excluded


def _test_functions(body: list[ast.stmt], prefix: str = "") -> Iterable[tuple[str, ast.AST]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            yield prefix, node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from _test_functions(node.body, f"{prefix}{node.name}::")


def _skips_with_cuda(fn: ast.AST) -> bool:
    """Whether ``fn`` has ``if ... torch.cuda.is_available() ...: pytest.skip(...)`` with the
    call not negated: a test of the CPU-only behaviour, skipped on a GPU machine."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        negated = {
            id(n.operand)
            for n in ast.walk(node.test)
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
        }
        asks = any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "is_available"
            and id(n) not in negated
            and "cuda" in ast.dump(n.func.value)
            for n in ast.walk(node.test)
        )
        skips = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "skip"
            for stmt in node.body
            for n in ast.walk(stmt)
        )
        if asks and skips:
            return True
    return False


def narrowing(node_ids: list[str]) -> str | None:
    """pytest's -k expression that keeps only the CUDA cases of :data:`NARROW_TESTS`."""
    names = {n.rsplit("::", 1)[-1] for n in node_ids}
    parts = [f"not ({t} and not {k})" for t, k in NARROW_TESTS.items() if t in names]
    return " and ".join(parts) or None


def junit(path: Path) -> dict[str, Any]:
    """Counts, failed ids and skip reasons of a pytest --junitxml file."""
    counts = Counter({"passed": 0, "failed": 0, "errors": 0, "skipped": 0})
    failures, reasons = [], Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        node_id = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            failures.append(node_id)
        elif case.find("error") is not None:
            counts["errors"] += 1
            failures.append(node_id)
        elif (skipped := case.find("skipped")) is not None:
            counts["skipped"] += 1
            reasons[skipped.get("message") or "?"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures, "skip_reasons": dict(reasons)}


def pytest_run(check: Check, name: str, args: list[str], cap_s: float, env: dict | None = None):
    xml = check.work / f"{name}.xml"
    argv = check.python("-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *args)
    fin = run_process(argv, check.timeout(cap_s), check.log(name), env or check.env)
    if not xml.exists():
        raise Failed(
            f"pytest exited {fin.rc} without a report", {"log_tail": fin.tail()}, fin.timed_out
        )
    return fin, junit(xml)


def passed(fin: Finished, figures: dict[str, Any]) -> dict[str, Any]:
    """``figures`` of a pytest run that passed; Failed with its log's tail otherwise."""
    if figures["failed"] or figures["errors"] or fin.rc != 0 or fin.timed_out:
        figures["log_tail"] = fin.tail()
        counts = f"{figures['failed']} failed, {figures['errors']} errors"
        raise Failed(f"{counts} (pytest exit {fin.rc})", figures, fin.timed_out)
    return figures


def step_cuda_tests(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    selected, excluded = find_cuda_tests(ROOT / "tests")
    if not selected:  # pytest without paths would run the whole suite
        raise Skip("no test under tests/ mentions CUDA")
    keep = narrowing(selected)
    fin, counts = pytest_run(
        check, "cuda_tests", [*selected, *(["-k", keep] if keep else [])], CAP_S["cuda_tests"]
    )
    figures = {"selected": selected, "k": keep, "left_out_skip_with_cuda": excluded, **counts}
    return passed(fin, figures)


def train(
    check: Check,
    name: str,
    args: list[str],
    cap_s: float,
    *,
    stop_at: float | None = None,
    wall_s: float | None = None,
    command: str = "train",
) -> dict[str, Any]:
    """``rlperf <command> args --device D`` with --max-wall-s (``wall_s``, or what the timeout
    leaves after start-up), stopped at the first metrics row at ``stop_at``; its figures."""
    timeout = check.timeout(cap_s)
    wall = wall_s if wall_s is not None else timeout - check.sizes.startup_s - GRACE_S
    run_dir = check.work / name
    argv = check.python("-m", "rlperf", command, *args, "--device", check.sizes.device,
                        "--max-wall-s", f"{max(wall, 1.0):.0f}", "--run-dir", str(run_dir),
                        "--no-progress")  # fmt: skip
    rows = Rows(run_dir / "metrics.jsonl")
    stop = None if stop_at is None else (lambda: first_at(rows.read(), stop_at) is not None)
    fin = run_process(argv, timeout + GRACE_S, check.log(name), check.env, stop=stop)
    summary = read_json(run_dir / "summary.json")
    figures: dict[str, Any] = {
        "command": "rlperf " + shlex.join(argv[3:]),
        "exit": fin.rc,
        "process_s": round(fin.seconds, 2),
        "run_dir": str(run_dir),
    }
    signalled = fin.stopped or fin.timed_out
    if summary is None or fin.rc not in ((0, 130) if signalled else (0,)):
        figures["log_tail"] = fin.tail()
        raise Failed(
            f"{name}: rlperf exited {fin.rc}" + (" after its timeout" if fin.timed_out else ""),
            figures,
            fin.timed_out,
        )
    metrics = rows.read()
    startup = fin.seconds - summary["wall_s"]  # start-up and shutdown, as purejaxrl_vs_rlperf.py
    wall_total = summary["wall_s"] or 1.0
    figures.update(
        {
            "sps": summary.get("sps_cumulative"),
            "steps": summary.get("global_step"),
            "wall_s": summary.get("wall_s"),
            "startup_s": round(startup, 2),
            "mean_return_last_100": summary.get("mean_return_last_100"),
            "episodes": summary.get("episodes"),
            "update": summary.get("update"),
            "policy": summary.get("policy"),
            "device": summary.get("device"),
            "stopped_at_target": fin.stopped,
            "timed_out": fin.timed_out,  # --max-wall-s did not stop it in time (SIGINT did)
            "sections_pct": {
                k: round(100 * v / wall_total, 1)
                for k, v in (summary.get("sections") or {}).items()
            },
            "curve": thin(
                [[r["global_step"], round(r["wall_s"], 2), r.get("mean_return")] for r in metrics],
                60,
            ),
            "summary": summary,
        }
    )
    if stop_at is not None:
        row = first_at(metrics, stop_at)
        figures["target_return"] = stop_at
        figures["at_target"] = (
            None
            if row is None
            else {
                "global_step": row["global_step"],
                "trainer_s": round(row["wall_s"], 2),
                "from_process_start_s": round(startup + row["wall_s"], 2),
            }
        )
    return figures


def step_cartpole_475(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    envs, steps, total = check.sizes.cartpole
    args = f"--env cartpole --num-envs {envs} --num-steps {steps} --total-steps {total} "
    args += "--learning-rate 2.5e-4 --seed 1"  # PureJaxRL's CartPole learning rate
    target = check.sizes.target_return
    figures = train(check, "cartpole_475", args.split(), check.sizes.cartpole_s, stop_at=target)
    if figures["at_target"] is None:
        raise Failed(
            f"the mean return reached {figures['mean_return_last_100']} in "
            f"{figures['steps']:,} steps, not {target:g}",
            figures,
        )
    return figures


def step_telemetry(check: Check) -> dict[str, Any]:
    run = check.results.get("cartpole_475", {})
    summary = run.get("figures", {}).get("summary")
    if summary is None:
        raise Skip(f"no run to read: cartpole_475 {run.get('status', 'did not run')}")
    block = summary.get("telemetry") or {}
    if "gpus" not in block:
        raise Skip(block.get("note") or "the run recorded no telemetry", block)
    return block


def step_registry_cuda(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    bench = check.work / "registry_cuda.json"
    env = {**check.env, DEVICE_VAR: check.sizes.device, ENVS_VAR: str(check.sizes.big_envs)}
    args = ["benchmarks/test_components.py", str(Path(__file__).relative_to(ROOT)),
            "-k", "transfer or test_device_case", "--benchmark-only", f"--benchmark-json={bench}",
            f"--benchmark-max-time={check.sizes.bench_max_time_s}",
            f"--benchmark-min-rounds={check.sizes.bench_min_rounds}",
            "--benchmark-warmup=on", "--benchmark-warmup-iterations=3"]  # fmt: skip
    fin, counts = pytest_run(check, "registry_cuda", args, CAP_S["registry_cuda"], env)
    cases = {}
    for b in (read_json(bench) or {}).get("benchmarks", []):
        info, stats = b.get("extra_info", {}), b["stats"]
        unit = info.get("items_unit", "items")
        cases[b["param"] if "param" in b and b["param"] else b["name"]] = {
            "median_us": round(stats["median"] * 1e6, 2),
            "min_us": round(stats["min"] * 1e6, 2),
            "max_us": round(stats["max"] * 1e6, 2),
            "rounds": stats["rounds"],
            f"{unit}_per_s": info.get(f"{unit}_per_s"),
            "items_per_call": info.get("items_per_call"),
        }
    return passed(fin, {"cases": cases, **counts})


def step_profile(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    out = check.work / "profile_out"
    schedule = "--torch-profiler --wait 1 --warmup 1 --active 2 --repeat 1".split()
    args = ["--env", "cartpole", "--num-envs", str(check.sizes.big_envs), "--total-steps",
            str(BIG), *schedule, "--out", str(out)]  # fmt: skip
    wall = check.sizes.workload_s + 1  # a few iterations past the profiler's schedule
    figures = train(check, "profile", args, CAP_S["profile"], command="profile", wall_s=wall)
    figures.pop("summary")
    report = read_json(out / "report.json") or {}
    figures["sections"] = {
        s["name"]: {k: s.get(k) for k in ("calls", "mean_ms", "pct", "gpu_peak_mb")}
        for s in report.get("sections", [])
    }
    traces = sorted((out / "torch_traces").glob("*.pt.trace.json"))
    if not traces:
        raise Failed("no torch.profiler trace was written", figures)
    figures["trace"] = trace_activity(traces[0])
    kept = check.out.with_name(check.out.stem + "_trace.json.gz")
    with open(traces[0], "rb") as src, gzip.open(kept, "wb") as dst:
        shutil.copyfileobj(src, dst)
    figures["trace"]["kept"] = str(kept)
    if check.cuda and not figures["trace"]["kernels"]:
        raise Failed("the trace shows no CUDA kernel", figures)
    return figures


def trace_activity(path: Path) -> dict[str, Any]:
    """Events of a torch.profiler (Chrome) trace by category, and its CUDA kernels by time."""
    events = json.loads(path.read_text()).get("traceEvents", [])
    cats = Counter(e.get("cat") for e in events)
    kernels: Counter[str] = Counter()
    for e in events:
        if e.get("cat") == "kernel":
            kernels[e.get("name", "?")] += e.get("dur", 0)
    return {
        "mb": round(path.stat().st_size / 2**20, 2),
        "events": dict(cats),
        "kernels": cats.get("kernel", 0),
        "memcpy": cats.get("gpu_memcpy", 0),
        "top_kernels_us": dict(kernels.most_common(10)),
    }


@dataclass(frozen=True)
class Workload:
    name: str
    args: str  # rlperf train's flags
    preset: str | None = None  # needs this --preset
    modules: tuple[str, ...] = ()  # needs these modules
    gpus: int = 0  # needs this many GPUs


def workloads(s: Sizes) -> list[Workload]:
    """The GPU-relevant runs at ``s``'s sizes (each --max-wall-s ``s.workload_s``)."""
    pixel = f"--num-envs {s.pixel_envs}" + (
        f" --num-steps {s.pixel_steps}" if s.pixel_steps else ""
    )
    mujoco = f" --num-steps {s.mujoco_steps}" if s.mujoco_steps else ""
    atari = f" --num-envs {s.atari_envs}" if s.atari_envs else ""
    return [
        Workload("cartpole_big", f"--env cartpole --num-envs {s.big_envs}"),
        Workload("cnn_robots_rgb", f"--env robots --policy cnn {pixel}"),
        Workload("convlstm_robots_rgb", f"--preset robots-rgb {pixel}"),
        Workload("mujoco", "--preset mujoco" + mujoco, modules=("gymnasium", "mujoco")),
        Workload("atari_pong", f"--preset atari --env {ATARI_ENV}{atari}", "atari", ("ale_py",)),
        Workload(
            "nccl_2ranks",
            f"--env cartpole --num-envs {s.big_envs} --nproc 2 --dist-backend nccl",
            gpus=2,
        ),
    ]


def missing_for(check: Check, preset: str | None = None, modules: Iterable[str] = ()) -> str | None:
    """Why a run cannot start here (an unknown preset, a module not found), or None."""
    rlperf = check.facts.get("rlperf") or {}
    if preset and preset not in rlperf.get("presets", []):
        return (
            f"rlperf has no --preset {preset} (its presets: {', '.join(rlperf.get('presets', []))})"
        )
    absent = [m for m in modules if not (check.facts.get("modules") or {}).get(m)]
    if absent:
        return f"{', '.join(absent)} not installed (the wheels: benchmarks/README.md)"
    return None


def step_workloads(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    results = {}
    for w in workloads(check.sizes):

        def one(w: Workload = w) -> dict[str, Any]:
            why = missing_for(check, w.preset, w.modules)
            if why:
                raise Skip(why)
            if w.gpus > len(check.facts["gpus"]):
                raise Skip(f"needs {w.gpus} GPUs, found {len(check.facts['gpus'])}")
            args = [*w.args.split(), "--total-steps", str(BIG)]
            figures = train(check, w.name, args, CAP_S["workload"], wall_s=check.sizes.workload_s)
            figures.pop("summary")
            figures.pop("curve")
            return figures

        results[w.name] = attempt(one)
        print(
            f"    {w.name}: {results[w.name]['status']} "
            f"{results[w.name]['reason'] or sps_text(results[w.name]['figures'])}",
            flush=True,
        )
    return items(results)


def sps_text(figures: dict[str, Any]) -> str:
    return f"{figures['sps']:,.0f} SPS" if figures.get("sps") else ""


def step_purejaxrl(check: Check) -> dict[str, Any]:
    why = missing_for(check, modules=("jax", "flax", "optax", "distrax", "gymnax"))
    if why:
        raise Skip(f"PureJaxRL: {why}")
    timeout = check.timeout(CAP_S["purejaxrl"])
    found = check.work / "jax_backend.txt"
    code = "import jax, sys; open(sys.argv[1], 'w').write(jax.default_backend())"
    fin = run_process(check.python("-c", code, str(found)), timeout, check.log("jax"), check.env)
    if fin.rc != 0 or not found.exists():
        raise Failed(f"import jax exited {fin.rc}", {"log_tail": fin.tail()})
    backend = found.read_text()
    if check.cuda and backend != "gpu":
        raise Skip(f"jax does not see the GPU (its backend: {backend})")
    envs, steps, total = check.sizes.jax
    result = purejaxrl_worker(check, envs, steps, total, "purejaxrl")
    figures = {"backend": backend, "shape": f"{envs}x{steps}", "total_steps": total, **result}
    rlperf = check.results.get("cartpole_475", {}).get("figures", {})
    if rlperf.get("sps") and (envs, steps) == check.sizes.cartpole[:2]:
        figures["rlperf_same_work"] = {"sps": rlperf["sps"], "at_target": rlperf.get("at_target")}
        figures["rlperf_over_purejaxrl_sps"] = round(rlperf["sps"] / result["sps"], 3)
    # The same at the workloads' CartPole size, where the GPU's arithmetic counts: the gap
    # there is the one the next step on the GPU works on (docs/journal/gpu.md).
    envs, steps, total = check.sizes.jax_big
    try:
        big = purejaxrl_worker(check, envs, steps, total, "purejaxrl_big")
    except Failed as e:  # the small shape's figures stand; say why the big one has none
        figures["big"] = {"status": "failed", "reason": str(e), **e.figures}
        return figures
    figures["big"] = {"shape": f"{envs}x{steps}", "total_steps": total, **big}
    work = check.results.get("workloads", {}).get("figures", {}).get("items", {})
    big_rlperf = work.get("cartpole_big", {}).get("figures", {})
    if big_rlperf.get("sps") and envs == check.sizes.big_envs:
        figures["big"]["rlperf_sps"] = big_rlperf["sps"]
        figures["big"]["rlperf_over_purejaxrl_sps"] = round(big_rlperf["sps"] / big["sps"], 3)
    return figures


def purejaxrl_worker(check: Check, envs: int, steps: int, total: int, log: str) -> dict[str, Any]:
    """PureJaxRL's ``ppo.py`` (benchmarks/purejaxrl_vs_rlperf.py's worker) on ``envs`` x
    ``steps`` CartPole for ``total`` steps: its JSON line (SPS, compile and run seconds)."""
    worker = ROOT / "benchmarks" / "purejaxrl_vs_rlperf.py"
    fin = run_process(
        check.python(str(worker), "--jax-worker", f"{envs}x{steps}", str(total), "1"),
        check.timeout(CAP_S["purejaxrl"]),
        check.log(log),
        check.env,
    )
    if fin.rc != 0:
        raise Failed(f"PureJaxRL's worker exited {fin.rc}", {"log_tail": fin.tail()}, fin.timed_out)
    return last_json(fin.tail(100_000))


def step_atari_vs_cleanrl(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    script = Path(check.args.cleanrl)
    why_rlperf = missing_for(check, "atari", ("ale_py",))
    why_cleanrl = (
        None
        if script.is_file()
        else (
            f"no {script}: python benchmarks/gpu_check.py --prepare-cleanrl (benchmarks/README.md)"
        )
    )
    why_cleanrl = why_cleanrl or missing_for(
        check, modules=("ale_py", "tyro", "cv2", "tensorboard")
    )
    if why_rlperf and not check.args.cleanrl_alone:
        cleanrl = (
            f"; CleanRL: {why_cleanrl}"
            if why_cleanrl
            else ("; CleanRL not run alone (--cleanrl-alone runs it)")
        )
        raise Skip(f"rlperf: {why_rlperf}{cleanrl}")
    seconds = min(
        check.sizes.atari_s,
        check.timeout(check.sizes.atari_s + 60) - check.sizes.startup_s - GRACE_S,
    )
    if seconds < check.sizes.atari_s / 2:
        raise Skip(f"the deadline leaves {seconds:.0f} s a side: run it alone (--only "
                   "atari_vs_cleanrl --atari-s 300)")  # fmt: skip

    def rlperf() -> dict[str, Any]:
        if why_rlperf:
            raise Skip(why_rlperf)
        args = ["--preset", "atari", "--env", ATARI_ENV, "--total-steps", str(BIG)]
        if check.sizes.atari_envs:
            args += ["--num-envs", str(check.sizes.atari_envs)]
        figures = train(check, "atari_rlperf", args, seconds + 60, wall_s=seconds)
        figures.pop("summary")
        return figures

    def cleanrl() -> dict[str, Any]:
        if why_cleanrl:
            raise Skip(why_cleanrl)
        return run_cleanrl(check, script.resolve(), seconds)

    with ThreadPoolExecutor(2) as pool:
        sides = {"rlperf": pool.submit(attempt, rlperf), "cleanrl": pool.submit(attempt, cleanrl)}
        results = {name: future.result() for name, future in sides.items()}
    figures = items(results)
    figures.update(
        {
            "seconds_each": round(seconds, 1),
            "concurrent": True,
            "envs": {"rlperf": ATARI_ENV, "cleanrl": CLEANRL_ENV},
        }
    )
    return figures


# "episodic_return=-21.0" (a numpy scalar), "[-21.]" (an array, gymnasium 0.29's CleanRL) or
# "np.float32(-21.0)" (a numpy 2 repr).
EPISODE = re.compile(
    r"global_step=(\d+), episodic_return=(?:np\.float\d+\()?\[?(-?\d[\d.]*(?:e[-+]?\d+)?)"
)
SPS_LINE = re.compile(r"^SPS: (\d+)", re.M)


def run_cleanrl(check: Check, script: Path, seconds: float) -> dict[str, Any]:
    """CleanRL's script for ``seconds`` after its start-up allowance (it has no time limit of
    its own: it gets SIGINT then), its episode returns parsed from its output."""
    argv = check.python(
        str(script), "--env-id", CLEANRL_ENV, "--total-timesteps", str(BIG), "--seed", "1"
    )
    batch = 8 * 128  # CleanRL's 8 envs x 128 steps
    if check.sizes.atari_envs:
        argv += ["--num-envs", str(check.sizes.atari_envs), "--num-steps", "32"]
        batch = check.sizes.atari_envs * 32
    if not check.cuda:
        argv.append("--no-cuda")
    cwd = check.work / "cleanrl"
    cwd.mkdir(exist_ok=True)
    fin = run_process(
        argv, seconds + check.sizes.startup_s, check.log("atari_cleanrl"), check.env, cwd=cwd
    )
    text = fin.log.read_text(errors="replace")
    episodes = [(int(s), float(r)) for s, r in EPISODE.findall(text)]
    sps = [int(x) for x in SPS_LINE.findall(text)]
    figures: dict[str, Any] = {
        "command": shlex.join(argv[1:]),
        "exit": fin.rc,
        "process_s": round(fin.seconds, 2),
        "iterations": len(sps),
    }
    if not sps:
        figures["log_tail"] = fin.tail()
        raise Failed(f"CleanRL finished no iteration (exit {fin.rc})", figures)
    last = [r for _, r in episodes[-100:]]
    figures.update(
        {
            "sps": sps[-1],
            "steps": len(sps) * batch,  # every iteration prints its SPS
            "trained_s": round(len(sps) * batch / sps[-1], 1),  # CleanRL's own SPS clock
            "episodes": len(episodes),
            "mean_return_last_100": round(sum(last) / len(last), 2) if last else None,
            "curve": thin([list(e) for e in episodes], 300),
        }
    )
    return figures


# -- the device cases (collected by pytest from this file; the registry_cuda step) -------------
@dataclass(frozen=True)
class DeviceCase:
    """One part of the trainer on a device, at CartPole with ``num_envs`` envs."""

    component: str  # policy_act, update_epoch, optimizer_step or e2e_train
    device: str
    num_envs: int

    @property
    def name(self) -> str:
        return f"{self.component}[device={self.device},num_envs={self.num_envs}]"


def device_cases() -> list[DeviceCase]:
    device, envs = os.environ.get(DEVICE_VAR, "cuda"), int(os.environ.get(ENVS_VAR, "4096"))
    return [
        DeviceCase(c, device, envs)
        for c in ("policy_act", "update_epoch", "optimizer_step", "e2e_train")
    ]


def prepare_device_case(case: DeviceCase) -> tuple[Callable[[], Any], int, str]:
    """(call, items per call, unit): the call ends with the device synchronised."""
    import torch

    from rlperf.bench.registry.training import continued_training, trainer_config
    from rlperf.ppo.optim import FlatAdam
    from rlperf.ppo.trainer import Trainer

    cfg = trainer_config(case.num_envs, threads=2)
    cfg.run.device = case.device
    sync = torch.cuda.synchronize if case.device.startswith("cuda") else (lambda: None)
    if case.component == "e2e_train":  # one iteration a call
        prepared = continued_training(cfg, case.num_envs * cfg.ppo.num_steps)
        call, items_per_call, unit = prepared.run, prepared.items_per_call, prepared.items_unit
    else:
        cfg.ppo.update_epochs, cfg.run.telemetry = 1, False
        trainer = Trainer(cfg)
        policy = trainer.policy
        if case.component == "policy_act":
            obs = torch.randn(case.num_envs, *trainer.spec.obs_shape, device=trainer.device)
            state = policy.initial_state(case.num_envs)

            def call() -> Any:
                with torch.inference_mode():
                    return policy.act(obs, state, None, None, trainer.sample_gen)

            items_per_call, unit = case.num_envs, "samples"
        elif case.component == "update_epoch":  # forward, loss, backward and optimizer
            trainer.collect()
            trainer.compute_advantages()
            call, items_per_call, unit = trainer.update, trainer.batch_size, "samples"
        else:
            gen = torch.Generator(device=policy.flat.device).manual_seed(0)
            grad = torch.randn(policy.flat.shape, generator=gen, device=policy.flat.device)
            policy.flat.grad = grad.mul_(1e-3)
            optimizer = FlatAdam(policy.flat, 2.5e-4, eps=1e-5)
            call, items_per_call, unit = optimizer.step, policy.flat.numel(), "parameters"

    def synced() -> Any:
        out = call()
        sync()
        return out

    return synced, items_per_call, unit


def pytest_generate_tests(metafunc: Any) -> None:
    if "device_case" in metafunc.fixturenames:
        cases = device_cases()
        metafunc.parametrize("device_case", cases, ids=[c.name for c in cases])


def test_device_case(benchmark: Any, device_case: DeviceCase) -> None:
    import pytest
    import torch

    if device_case.device.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"CUDA not available (torch {torch.__version__})")
    call, items_per_call, unit = prepare_device_case(device_case)
    benchmark.group = f"device:{device_case.component}"
    benchmark.extra_info.update(
        component=device_case.component,
        device=device_case.device,
        items_per_call=items_per_call,
        items_unit=unit,
    )
    benchmark(call)
    benchmark.extra_info[f"{unit}_per_s"] = items_per_call / benchmark.stats.stats.median


# -- the report -------------------------------------------------------------------------------
def headline(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures issue #49 asks for, from the steps' figures (None where a step did not run)."""

    def fig(step: str, *path: str) -> Any:
        value: Any = results.get(step, {}).get("figures", {})
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    cases = fig("registry_cuda", "cases") or {}
    d2h = {k: v["median_us"] for k, v in cases.items() if "direction=d2h" in k}
    work = fig("workloads", "items") or {}
    return {
        "cuda_tests": {k: fig("cuda_tests", k) for k in ("passed", "failed", "errors", "skipped")},
        "cartpole_at_target": fig("cartpole_475", "at_target"),
        "cartpole_sps": fig("cartpole_475", "sps"),
        "d2h_median_us": d2h or None,
        "device_cases_median_us": {
            k: v["median_us"] for k, v in cases.items() if "direction=" not in k
        }
        or None,
        "trace_cuda_kernels": fig("profile", "trace", "kernels"),
        "gpu_util_pct": [
            (g.get("util_pct_mean"), g.get("util_pct_max")) for g in fig("telemetry", "gpus") or []
        ]
        or None,
        "workload_sps": {n: r["figures"].get("sps") for n, r in work.items()} or None,
        "purejaxrl_sps": fig("purejaxrl", "sps"),
        "rlperf_over_purejaxrl_sps": fig("purejaxrl", "rlperf_over_purejaxrl_sps"),
        "purejaxrl_big_sps": fig("purejaxrl", "big", "sps"),
        "rlperf_over_purejaxrl_big_sps": fig("purejaxrl", "big", "rlperf_over_purejaxrl_sps"),
        "atari_last_100": {
            side: fig("atari_vs_cleanrl", "items", side, "figures", "mean_return_last_100")
            for side in ("rlperf", "cleanrl")
        },
    }


def headline_of(name: str, figures: dict[str, Any]) -> str | None:
    """One line for the summary table."""
    f = figures
    if name == "probe":
        return ", ".join(g["name"] for g in f.get("gpus", [])) or f"torch {f.get('torch')}, no GPU"
    if name == "install":
        return f"kernels {(f.get('facts', {}).get('rlperf') or {}).get('kernels')}"
    if name in ("cuda_tests", "registry_cuda"):
        return f"{f.get('passed')} passed, {f.get('failed')} failed, {f.get('skipped')} skipped"
    if name == "cartpole_475":
        at = f.get("at_target") or {}
        return (
            f"{f.get('sps') or 0:,.0f} SPS; return {f.get('target_return')} at step "
            f"{at.get('global_step')}, {at.get('from_process_start_s')} s from start"
        )
    if name == "telemetry":
        return "; ".join(
            f"{g['name']}: {g.get('util_pct_mean') or 0:.1f}% mean, "
            f"{g.get('util_pct_max') or 0:.0f}% max"
            for g in f.get("gpus", [])
        )
    if name == "profile":
        return f"{(f.get('trace') or {}).get('kernels')} CUDA kernels in the trace"
    if name == "workloads":
        return "; ".join(
            f"{n} {sps_text(r['figures']) or r['status']}" for n, r in f.get("items", {}).items()
        )
    if name == "purejaxrl":
        big = f.get("big") or {}
        return (
            f"{f.get('sps') or 0:,.0f} SPS (rlperf/PureJaxRL {f.get('rlperf_over_purejaxrl_sps')});"
            f" {big.get('shape')}: {big.get('sps') or 0:,.0f} SPS"
            f" (rlperf/PureJaxRL {big.get('rlperf_over_purejaxrl_sps')})"
        )
    if name == "atari_vs_cleanrl":
        return "; ".join(
            f"{n}: {r['figures'].get('steps')} steps, last-100 return "
            f"{r['figures'].get('mean_return_last_100')}"
            if r["status"] == "ok"
            else f"{n}: {r['status']}"
            for n, r in f.get("items", {}).items()
        )
    return None


def print_table(check: Check) -> None:
    print(
        f"\ngpu_check ({check.report['mode']}) on {check.report['gpu'] or 'no GPU'}, "
        f"{check.report['seconds']:.0f} s:"
    )
    width = max(len(n) for n in STEPS)
    for name in STEPS:
        r = check.results.get(name)
        if r is None:
            continue
        text = r["reason"] or headline_of(name, r["figures"]) or ""
        print(f"  {name:<{width}}  {r['status']:<8} {r['seconds']:6.1f} s  {text[:150]}")
    print(f"report: {check.out}")


def write_logs(check: Check) -> None:
    """Every step's output in one file beside the report (each log's last 200 kB)."""
    path = check.out.with_suffix(".log")
    with open(path, "w") as out:
        for log in sorted(check.work.glob("*.log"), key=lambda p: p.stat().st_mtime):
            text = log.read_text(errors="replace")
            out.write(f"===== {log.stem} =====\n{text[-200_000:]}\n")


# -- preparing the GPU run (here, before a GPU is at hand) -------------------------------------
def fetch_wheels(folder: Path) -> int:
    """Download :data:`WHEELS` for the GPU machine's Python 3.12 into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    failed = []
    for name, version, pure, _ in WHEELS:
        platforms = ("any",) if pure else BINARY_PLATFORMS
        pip = "-m pip download -q --no-deps --only-binary=:all: --python-version 3.12"
        argv = [sys.executable, *pip.split(), "--implementation", "cp",
                *(a for p in platforms for a in ("--platform", p)), "-d", str(folder),
                f"{name}=={version}"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            failed.append(name)
            print(f"{name}=={version}: FAILED {done.stderr.strip().splitlines()[-1:]}")
    total = 0
    for w in sorted(folder.glob("*.whl")):
        total += w.stat().st_size
        print(f"{w.stat().st_size / 2**20:8.2f} MiB  {w.name}")
    print(
        f"{total / 2**20:8.2f} MiB in {folder} ({len(WHEELS) - len(failed)} of {len(WHEELS)} "
        "fetched); the tree and what it carries travel within 64 MiB"
    )
    return 1 if failed else 0


def prepare_cleanrl(source: Path, dest: Path) -> None:
    """CleanRL's ppo_atari.py (edited by :data:`CLEANRL_EDITS`) and its atari_wrappers.py into
    ``dest``, from ``source``: CleanRL's checkout, or a bare git directory (the search tool's
    fetch of github:vwxyzjn/cleanrl)."""

    def read(path: str) -> str:
        if (source / path).is_file():
            return (source / path).read_text()
        return subprocess.run(
            ["git", "--git-dir", str(source), "show", f"HEAD:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    git_dir = source / ".git" if (source / ".git").exists() else source
    rev = ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"]
    commit = subprocess.run(rev, capture_output=True, text=True).stdout.strip() or "unknown"
    text = adapt_cleanrl(read("cleanrl/ppo_atari.py"))
    header = (
        f"# CleanRL's cleanrl/ppo_atari.py at {commit}, adapted to gymnasium 1.x by "
        "benchmarks/gpu_check.py --prepare-cleanrl:\n"
        + "".join(f"#  - {why}\n" for why, _, _ in CLEANRL_EDITS)
    )
    (dest / "cleanrl_utils").mkdir(parents=True, exist_ok=True)
    (dest / "ppo_atari.py").write_text(header + text)
    (dest / "cleanrl_utils" / "__init__.py").write_text("")
    (dest / "cleanrl_utils" / "atari_wrappers.py").write_text(
        read("cleanrl_utils/atari_wrappers.py")
    )
    print(f"wrote {dest / 'ppo_atari.py'} (CleanRL {commit}) and its cleanrl_utils/")


def adapt_cleanrl(text: str) -> str:
    """``text`` with each of :data:`CLEANRL_EDITS`; ValueError where its text is not there
    exactly once (another version of the script)."""
    for why, old, new in CLEANRL_EDITS:
        if text.count(old) != 1:
            raise ValueError(
                f"ppo_atari.py has {text.count(old)} of {old.strip()!r} ({why}): "
                "another version than CleanRL's master of 2025-2026"
            )
        text = text.replace(old, new)
    return text


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_out = (
        Path(os.environ["OUT"], "gpu_check.json")
        if os.environ.get("OUT")
        else Path("gpu_check.json")
    )
    p.add_argument("--out", default=str(default_out), help="the JSON report (default: %(default)s)")
    p.add_argument("--cpu", action="store_true", help="the whole check on the CPU, tiny sizes")
    p.add_argument(
        "--only", help="comma-separated steps to run (the probe always runs): " + ", ".join(STEPS)
    )
    p.add_argument(
        "--deadline-s", type=float, help="the whole run's seconds (default: 480, --cpu 300)"
    )
    p.add_argument(
        "--atari-s", type=float, help="each Atari side's seconds (default: 120, --cpu 3)"
    )
    p.add_argument(
        "--wheels", default=str(ROOT / ".whl"), help="wheels to install (default: %(default)s)"
    )
    p.add_argument("--site", default="/tmp/site", help="where the wheels go (default: %(default)s)")
    p.add_argument(
        "--cleanrl",
        default=str(ROOT / CLEANRL_DIR / "ppo_atari.py"),
        help="CleanRL's adapted ppo_atari.py (default: %(default)s)",
    )
    p.add_argument(
        "--cleanrl-alone",
        action="store_true",
        help="run CleanRL's Atari side even where rlperf has no --preset atari",
    )
    p.add_argument(
        "--fetch-wheels",
        metavar="DIR",
        help="download the wheels the GPU machine lacks into DIR and stop",
    )
    p.add_argument(
        "--prepare-cleanrl",
        metavar="SRC",
        help="write CleanRL's ppo_atari.py, "
        f"adapted, into {CLEANRL_DIR}/ from SRC (a checkout or a bare git dir) and stop",
    )
    p.add_argument("--facts", metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = set(args.only.split(",")) - set(STEPS) if args.only else set()
    if unknown:
        p.error(f"--only: unknown steps {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.facts:
        Path(args.facts).write_text(json.dumps(facts()))
        return 0
    if args.fetch_wheels:
        return fetch_wheels(Path(args.fetch_wheels))
    if args.prepare_cleanrl:
        prepare_cleanrl(Path(args.prepare_cleanrl), ROOT / CLEANRL_DIR)
        return 0
    check = Check(args)
    try:
        for name in STEPS:
            check.run_step(name, globals()[f"step_{name}"])
    finally:
        check.write()
        write_logs(check)
        shutil.rmtree(check.work, ignore_errors=True)
    print_table(check)
    return 1 if any(r["status"] in ("failed", "timeout") for r in check.results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
