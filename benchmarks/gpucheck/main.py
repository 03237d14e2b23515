"""The command: its flags, the steps in the order they run, and the modes that prepare the GPU
run here (``--fetch-wheels``, ``--prepare-cleanrl``, ``--prepare-leanrl``) or serve it
(``--facts``, ``--compare-params``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpucheck
from gpucheck.atari import CLEANRL_DIR, prepare_cleanrl, step_atari_vs_cleanrl
from gpucheck.cartpole import compare_params, step_cartpole_rows, step_graphs_equal
from gpucheck.check import Check
from gpucheck.core import ROOT
from gpucheck.facts import facts, step_probe
from gpucheck.purejaxrl import step_purejaxrl
from gpucheck.pytests import step_cuda_tests, step_registry_cuda
from gpucheck.report import print_plan, print_table, write_logs
from gpucheck.scripts import prepare_scripts
from gpucheck.training import step_cartpole_475, step_telemetry
from gpucheck.versus import step_breakout, step_halfcheetah, step_mujoco_devices
from gpucheck.wheels import fetch_wheels, step_install
from gpucheck.workloads import step_workloads

# The steps, in the order they run: each takes the check and returns its figures. The last
# three are outside the GPU's 8-minute plan (check.EXTRA_S); --cpu runs them all.
STEPS: dict[str, Callable[[Check], dict[str, Any]]] = {
    "probe": step_probe,
    "install": step_install,
    "cuda_tests": step_cuda_tests,
    "cartpole_475": step_cartpole_475,
    "telemetry": step_telemetry,
    "cartpole_rows": step_cartpole_rows,
    "graphs_equal": step_graphs_equal,
    "mujoco_devices": step_mujoco_devices,
    "purejaxrl": step_purejaxrl,
    "breakout": step_breakout,
    "halfcheetah": step_halfcheetah,
    "registry_cuda": step_registry_cuda,
    "workloads": step_workloads,
    "atari_vs_cleanrl": step_atari_vs_cleanrl,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(gpucheck.__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        "--deadline-s", type=float, help="the whole run's seconds (default: 480, --cpu 480)"
    )
    p.add_argument("--atari-s", type=float, help="each Pong side's seconds (default: 120, --cpu 3)")
    p.add_argument(
        "--script-s",
        type=float,
        help="seconds each LeanRL and CleanRL script runs after its first figure, and each "
        "rlperf Breakout row (default: 10, --cpu 2)",
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
        "--scripts",
        default=str(ROOT / CLEANRL_DIR),
        help="LeanRL's and CleanRL's adapted scripts (default: %(default)s)",
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
        help="write CleanRL's ppo_atari.py, ppo_atari_envpool.py and ppo_continuous_action.py, "
        f"adapted, into {CLEANRL_DIR}/ from SRC (a checkout or a bare git dir) and stop",
    )
    p.add_argument(
        "--prepare-leanrl",
        metavar="SRC",
        help="write LeanRL's ppo_atari_envpool_torchcompile.py and "
        f"ppo_continuous_action_torchcompile.py, adapted, into {CLEANRL_DIR}/ from SRC and stop",
    )
    p.add_argument("--compare-params", nargs=3, metavar="PATH", help=argparse.SUPPRESS)
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
    if args.compare_params:
        graphs, eager, out = map(Path, args.compare_params)
        out.write_text(json.dumps(compare_params(graphs, eager)))
        return 0
    if args.prepare_cleanrl:
        prepare_cleanrl(Path(args.prepare_cleanrl), ROOT / CLEANRL_DIR)
        prepare_scripts("cleanrl", Path(args.prepare_cleanrl), ROOT / CLEANRL_DIR)
        return 0
    if args.prepare_leanrl:
        prepare_scripts("leanrl", Path(args.prepare_leanrl), ROOT / CLEANRL_DIR)
        return 0
    check = Check(args)
    print_plan(check, check.make_plan(list(STEPS)))
    try:
        for name, step in STEPS.items():
            check.run_step(name, step)
    finally:
        check.nvml.close()
        check.write()
        write_logs(check)
        shutil.rmtree(check.work, ignore_errors=True)
    print_table(check)
    return 1 if any(r["status"] in ("failed", "timeout") for r in check.results.values()) else 0
