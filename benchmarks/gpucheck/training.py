"""rlperf's own runs: :func:`train` (``rlperf train`` or ``rlperf profile`` on a device, stopped
by its wall budget or at a target return, its summary and curve read back), and the steps made
of one such run: ``cartpole_475`` and ``telemetry``."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from gpucheck.core import (
    GRACE_S,
    MIN_STEP_S,
    Failed,
    Rows,
    Skip,
    first_at,
    read_json,
    run_process,
    thin,
)
from gpucheck.facts import lacks

if TYPE_CHECKING:
    from gpucheck.check import Check


def train(
    check: Check,
    name: str,
    args: list[str],
    cap_s: float,
    *,
    stop_at: float | None = None,
    wall_s: float | None = None,
    command: str = "train",
    device: str | None = None,
    steady_after: int | None = None,
) -> dict[str, Any]:
    """``rlperf <command> args --device D`` (``device``, else the check's) with --max-wall-s
    (``wall_s``, or what the timeout leaves after start-up), stopped at the first metrics row at
    ``stop_at``; its figures. ``steady_after``: also the SPS of the iterations after that one
    (``sps_steady``: a profiled run's traced iterations and their trace export left out)."""
    least = (wall_s or 0) + 5 if wall_s is not None else MIN_STEP_S
    timeout = check.timeout(cap_s, least_s=min(least, MIN_STEP_S))
    wall = wall_s if wall_s is not None else timeout - check.sizes.startup_s
    run_dir = check.work / name
    argv = check.python("-m", "rlperf", command, *args, "--device", device or check.sizes.device,
                        "--max-wall-s", f"{max(wall, 1.0):g}", "--run-dir", str(run_dir),
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
            "env": summary.get("env"),
            "sps_steady": steady_sps(metrics, steady_after) if steady_after else None,
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


def steady_sps(metrics: list[dict[str, Any]], after: int) -> float | None:
    """Steps per second from the end of iteration ``after`` to the last metrics row; None where
    no row follows it."""
    base = [r for r in metrics if r.get("iteration", 0) <= after]
    rest = [r for r in metrics if r.get("iteration", 0) > after]
    if not base or not rest or rest[-1]["wall_s"] <= base[-1]["wall_s"]:
        return None
    steps = rest[-1]["global_step"] - base[-1]["global_step"]
    return round(steps / (rest[-1]["wall_s"] - base[-1]["wall_s"]), 1)


def step_cartpole_475(check: Check) -> dict[str, Any]:
    """PureJaxRL's CartPole work to a return of 475, on the envs on the device where rlperf has
    them (issue #57: the device path reaches 475 as the host path did), else on the host."""
    check.needs_cuda()
    envs, steps, total = check.sizes.cartpole
    args = f"--env cartpole --num-envs {envs} --num-steps {steps} --total-steps {total} "
    args += "--learning-rate 2.5e-4 --seed 1"  # PureJaxRL's CartPole learning rate
    path = lacks(check, "vec_backend_torch") or "--vec-backend torch"
    if check.has("vec_backend_torch"):
        args += " --vec-backend torch"
    target = check.sizes.target_return
    figures = train(check, "cartpole_475", args.split(), check.cap("cartpole_475"), stop_at=target)
    figures["path"] = path
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
