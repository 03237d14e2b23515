"""The wheels the GPU machine lacks: fetched here for its Python (``--fetch-wheels``), carried
in an ignored folder, and installed there with ``pip install --target`` by the ``install`` step,
before rlperf itself (``pip install -e .``, its C kernels built on that machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.core import ROOT, Failed, Skip, done, run_process
from gpucheck.facts import read_facts

if TYPE_CHECKING:
    from gpucheck.check import Check

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
            argv, check.timeout(check.cap("install")), check.log("install_rlperf"), check.env
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
    fin = run_process(
        argv, check.timeout(check.cap("install")), check.log("install_wheels"), check.env
    )
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
