"""What the machine has (Python, torch, CUDA, the GPUs, rlperf and the optional modules), read
in a subprocess so that the check's own process never imports torch, and what a run needs of it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpucheck.core import ENTRY, ROOT, Failed, Skip, run_process

if TYPE_CHECKING:
    from gpucheck.check import Check

# The modules the steps look for (import name: distribution), found without importing them.
MODULES = {"gymnasium": "gymnasium", "ale_py": "ale-py", "mujoco": "mujoco", "cv2": None,
           "tyro": "tyro", "tensorboard": "tensorboard", "pynvml": "nvidia-ml-py",
           "jax": "jax", "flax": "flax", "optax": "optax", "distrax": "distrax",
           "gymnax": "gymnax", "envpool": "envpool",
           "stable_baselines3": "stable-baselines3", "tensordict": "tensordict",
           "tqdm": "tqdm"}  # fmt: skip


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
            "features": features(),
        }
    return out


def features() -> dict[str, bool]:
    """Which of issue #57's features this rlperf has, read from its config (nothing runs):
    ``vec_backend_torch`` (``--vec-backend torch``: envs as torch code on the device),
    ``cuda_graphs`` (``--cuda-graphs``/``--no-cuda-graphs``) and ``device_auto``
    (``--device auto``). A row that needs one that is missing says so and the check goes on."""
    from rlperf import config

    fields = config.field_index()
    flags = {config.flag_name(name) for name in fields}

    def help_of(name: str) -> str:
        return str(fields[name][1].metadata.get("help", "")) if name in fields else ""

    return {
        "vec_backend_torch": "torch" in getattr(config, "BACKENDS", ()),
        "cuda_graphs": "--cuda-graphs" in flags,
        "device_auto": "auto" in getattr(config, "DEVICES", ()) or "auto" in help_of("device"),
    }


# What each feature is, as a row that lacks it says.
FEATURES = {
    "vec_backend_torch": "--vec-backend torch",
    "cuda_graphs": "--cuda-graphs",
    "device_auto": "--device auto",
}


def lacks(check: Check, *needed: str) -> str | None:
    """Why a row cannot run on this rlperf (the features of :data:`FEATURES` it lacks), or
    None."""
    absent = [FEATURES[f] for f in needed if not check.has(f)]
    return f"rlperf has no {', '.join(absent)} yet (issue #57)" if absent else None


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
    argv = check.python(str(ENTRY), "--facts", str(path))
    fin = run_process(argv, check.timeout(check.cap("probe"), 5), check.log(name), check.env)
    if fin.rc != 0 or not path.exists():
        raise Failed(f"the facts process exited {fin.rc}", {"log_tail": fin.tail()})
    return json.loads(path.read_text())


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
