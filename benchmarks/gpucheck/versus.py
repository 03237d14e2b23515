"""rlperf beside LeanRL and CleanRL on the same GPU, one after another (issue #57):

- ``mujoco_devices``: ``--preset mujoco`` with ``--device cpu``, ``cuda`` and ``auto``: does
  ``auto`` train at the better of the two (its target: >= 0.95x of it)?
- ``breakout``: ``--preset atari`` on EnvPool's Breakout, LeanRL's
  ``ppo_atari_envpool_torchcompile.py`` (``--compile --cudagraphs``) and CleanRL's
  ``ppo_atari_envpool.py``, all at CleanRL's 8 envs x 128 steps;
- ``halfcheetah``: LeanRL's ``ppo_continuous_action_torchcompile.py`` and CleanRL's
  ``ppo_continuous_action.py`` (1 env x 2,048 steps), beside ``mujoco_devices``' rlperf rows
  (the preset's 8 envs x 256 steps: another shape, said in the figures).

Each row's GPU use: rlperf's own telemetry (NVML, over its training) or the check's NVML samples
from the script's first figure on (:mod:`gpucheck.busy`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucheck.core import BIG, Skip, attempt, items
from gpucheck.facts import lacks, missing_for
from gpucheck.report import sps_text
from gpucheck.scripts import run_script
from gpucheck.training import train

if TYPE_CHECKING:
    from gpucheck.check import Check

BREAKOUT_ENV = "gym:ale_py:ALE/Breakout-v5"  # rlperf's id; EnvPool's Breakout-v5 steps it
SCRIPT_CAP_S = 300  # a script's cap: the step's budget is what stops it


def rlperf_row(check: Check, name: str, args: str, wall_s: float, device: str | None = None):
    """``rlperf train args`` for ``wall_s`` seconds of training: its SPS, the device it trained
    on and its GPU utilisation (its own NVML telemetry)."""
    figures = train(check, name, [*args.split(), "--total-steps", str(BIG)], wall_s + 40,
                    wall_s=wall_s, device=device)  # fmt: skip
    summary = figures.pop("summary")
    figures.pop("curve")
    util = [g.get("util_pct_mean") for g in (summary.get("telemetry") or {}).get("gpus", [])]
    figures["gpu_busy"] = {"source": "rlperf telemetry (nvml)", "pct": util[0] if util else None}
    return figures


def side_by_side(check: Check, rows: dict[str, Any]) -> dict[str, Any]:
    """Run ``rows`` (name: a function returning its figures) in order, each line printed."""
    results = {}
    for name, row in rows.items():
        results[name] = result = attempt(row)
        text = result["reason"] or sps_text(result["figures"])
        print(f"    {name}: {result['status']} {text}", flush=True)
    return results


def ratios(sps: dict[str, float | None], pairs: list[tuple[str, str]]) -> dict[str, float]:
    """``a_over_b`` for each pair of rows that both have an SPS."""
    return {
        f"{a}_over_{b}": round(sps[a] / sps[b], 3)
        for a, b in pairs
        if sps.get(a) and sps.get(b)  # both measured, neither zero
    }


def sps_of(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    return {n: r["figures"].get("sps") for n, r in results.items() if r["status"] == "ok"}


def step_mujoco_devices(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    why = missing_for(check, "mujoco", ("gymnasium", "mujoco"))
    if why:
        raise Skip(why)
    steps = f" --num-steps {check.sizes.mujoco_steps}" if check.sizes.mujoco_steps else ""

    def row(device: str) -> Any:
        def run() -> dict[str, Any]:
            if device == "cuda" and not check.cuda:
                raise Skip("--cpu: no CUDA to train on")
            why = lacks(check, "device_auto") if device == "auto" else None
            if why:
                raise Skip(why)
            args = "--preset mujoco" + steps
            return rlperf_row(check, f"mujoco_{device}", args, check.sizes.mujoco_s, device)

        return run

    results = side_by_side(check, {d: row(d) for d in ("cpu", "cuda", "auto")})
    figures = items(results)
    sps = sps_of(results)
    best = max((sps[d] for d in ("cpu", "cuda") if sps.get(d)), default=None)
    if sps.get("auto") and best:
        figures["auto_over_best"] = round(sps["auto"] / best, 3)  # issue #57: >= 0.95
        figures["auto_chose"] = results["auto"]["figures"].get("device")
    return figures


def step_breakout(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    envs = f" --num-envs {check.sizes.atari_envs}" if check.sizes.atari_envs else ""

    def rlperf() -> dict[str, Any]:
        why = missing_for(check, "atari", ("envpool",))
        if why:
            raise Skip(why)
        args = f"--preset atari --env {BREAKOUT_ENV} --vec-backend envpool{envs}"
        return rlperf_row(check, "breakout_rlperf", args, check.sizes.script_s)

    results = side_by_side(check, {
        "rlperf": rlperf,
        "cleanrl": lambda: run_script(check, "cleanrl_atari", SCRIPT_CAP_S),
        "leanrl": lambda: run_script(check, "leanrl_atari", SCRIPT_CAP_S),  # last: it compiles
    })  # fmt: skip
    figures = items(results)
    pairs = [("rlperf", "leanrl"), ("rlperf", "cleanrl"), ("leanrl", "cleanrl")]
    figures["ratios"] = ratios(sps_of(results), pairs)
    return figures


def step_halfcheetah(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    results = side_by_side(check, {
        "cleanrl": lambda: run_script(check, "cleanrl_continuous", SCRIPT_CAP_S),
        "leanrl": lambda: run_script(check, "leanrl_continuous", SCRIPT_CAP_S),
    })  # fmt: skip
    figures = items(results)
    devices = check.results.get("mujoco_devices", {}).get("figures", {}).get("items", {})
    rlperf = {f"rlperf_{d}": r["figures"].get("sps") for d, r in devices.items()
              if r["status"] == "ok"}  # fmt: skip
    figures["rlperf"] = {**rlperf, "shape": "the preset's 8 envs x 256 steps (theirs: 1 x 2,048)"}
    sps = {**sps_of(results), **rlperf}
    figures["ratios"] = ratios(sps, [(r, s) for r in rlperf for s in ("leanrl", "cleanrl")])
    return figures
