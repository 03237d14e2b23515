"""rlperf's own runs: :func:`train` (``rlperf train`` or ``rlperf profile`` on the check's device,
stopped by its wall budget or at a target return, its summary and curve read back), and the
steps made of one such run: ``cartpole_475``, ``telemetry`` and ``profile``."""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.core import BIG, GRACE_S, Failed, Rows, Skip, first_at, read_json, run_process, thin

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


def step_profile(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    out = check.work / "profile_out"
    schedule = "--torch-profiler --wait 1 --warmup 1 --active 2 --repeat 1".split()
    args = ["--env", "cartpole", "--num-envs", str(check.sizes.big_envs), "--total-steps",
            str(BIG), *schedule, "--out", str(out)]  # fmt: skip
    wall = check.sizes.workload_s + 1  # a few iterations past the profiler's schedule
    figures = train(check, "profile", args, check.cap("profile"), command="profile", wall_s=wall)
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
