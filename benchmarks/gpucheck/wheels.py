"""The wheels the GPU machine lacks: fetched here for its Python (``--fetch-wheels``), carried
in an ignored folder, and installed there with ``pip install --target`` by the ``install`` step,
before rlperf itself (``pip install -e .``, its C kernels built on that machine)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.core import ROOT, Failed, Skip, done, run_process
from gpucheck.facts import read_facts

if TYPE_CHECKING:
    from gpucheck.check import Check

# What the GPU machine lacks (its image has torch, jax, flax, optax, chex, numpy, cloudpickle,
# pillow, imageio, packaging, opencv-python-headless, tensorboard, nvidia-ml-py, absl-py,
# attrs, wrapt, tqdm, rich, matplotlib and seaborn): (name, version, pure Python, who needs it).
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
    ("tyro", "1.0.17", True, "CleanRL's and LeanRL's scripts"),
    ("docstring-parser", "0.18.0", True, "tyro"),
    ("typeguard", "4.6.1", True, "tyro"),
    ("stable-baselines3", "2.9.2", True, "--preset atari's EpisodicLifeEnv and FireResetEnv"),
    ("gymnax", "0.0.9", True, "PureJaxRL (benchmarks/purejaxrl/README.md pins it)"),
    ("distrax", "0.1.9", True, "PureJaxRL"),
    ("tfp-nightly", "0.26.0.dev20261027", True, "distrax"),
    ("dm-tree", "0.1.10", False, "tfp-nightly, dm-env"),
    ("gast", "0.7.0", True, "tfp-nightly"),
    ("decorator", "5.3.1", True, "tfp-nightly"),
    ("tensordict", "0.15.3", True, "LeanRL's scripts (CudaGraphModule; it asks torch>=2.11)"),
    ("pyvers", "0.2.3", True, "tensordict"),
    ("envpool", "1.2.5", False, "--vec-backend envpool, LeanRL's and CleanRL's Atari scripts"),
    ("envpool-assets", "0.3.0", True, "envpool (its Atari ROMs)"),
    ("dm-env", "1.6", True, "envpool"),
    ("optree", "0.20.0", False, "envpool"),
)
BINARY_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# Wheels too large to travel whole (EnvPool's is 50 MiB, its assets 60 MiB, over what a run
# carries with the rest), cut to the Atari envs the check runs: the folders kept, and files
# given new text (EnvPool's entry point imports every env family's registration).
SLIM = {
    "envpool": (
        ("envpool/__init__.py", "envpool/entry.py", "envpool/registration.py",
         "envpool/py.typed", "envpool/python/", "envpool/atari/"),
        {"envpool/entry.py": '"""Entry point: the Atari envs only (benchmarks/gpucheck/wheels.py '
                             'slimmed this wheel)."""\n\nimport envpool.atari.registration  '
                             '# noqa: F401\n'},
    ),
    "envpool_assets": (("envpool_assets/__init__.py", "envpool_assets/atari/"), {}),
}  # fmt: skip


def fetch_wheels(folder: Path) -> int:
    """Download :data:`WHEELS` for the GPU machine's Python 3.12 into ``folder``, the ones of
    :data:`SLIM` cut to what the check runs."""
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
        elif normal(name) in SLIM:
            for wheel in folder.glob(f"{normal(name)}-{version}-*.whl"):
                slim_wheel(wheel, *SLIM[normal(name)])
    total = 0
    for w in sorted(folder.glob("*.whl")):
        total += w.stat().st_size
        print(f"{w.stat().st_size / 2**20:8.2f} MiB  {w.name}")
    print(
        f"{total / 2**20:8.2f} MiB in {folder} ({len(WHEELS) - len(failed)} of {len(WHEELS)} "
        "fetched); the tree and what it carries travel within 64 MiB"
    )
    return 1 if failed else 0


def slim_wheel(path: Path, keep: tuple[str, ...], new_text: dict[str, str]) -> None:
    """Rewrite wheel ``path`` in place with only its members under ``keep`` and its
    .dist-info, those of ``new_text`` given that text, and a RECORD listing what is left (pip
    installs what RECORD lists)."""
    slim = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as dst:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        dist_info = record.rsplit("/", 1)[0] + "/"
        lines = []
        for info in src.infolist():
            if info.filename == record or not info.filename.startswith((dist_info, *keep)):
                continue
            data = new_text[info.filename].encode() if info.filename in new_text else None
            data = src.read(info) if data is None else data
            dst.writestr(info, data)  # the member's own mode bits (a .so stays executable)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            lines.append(f"{info.filename},sha256={digest.decode()},{len(data)}")
        dst.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    slim.replace(path)


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
