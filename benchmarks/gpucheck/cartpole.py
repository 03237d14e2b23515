"""rlperf's CartPole on the GPU, paired in one run (issue #57): the ``cartpole_rows`` step runs
the big shape (4,096 envs x 32 steps) and PureJaxRL's small one (4 x 128) each on the host env
(today's path, the reference), on the envs on the device with CUDA graphs, and on them eagerly;
each row under ``rlperf profile`` so that its trace gives the GPU's busy share of two
iterations, while its SPS is read from the iterations after the trace. The ``graphs_equal``
step trains a few iterations with graphs and without, from one seed, and compares the
parameters of the two checkpoints."""

from __future__ import annotations

import gzip
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.busy import trace_activity
from gpucheck.core import BIG, ENTRY, Failed, Skip, attempt, items, read_json, run_process
from gpucheck.facts import lacks
from gpucheck.report import sps_text
from gpucheck.training import train

if TYPE_CHECKING:
    from gpucheck.check import Check

# The profiler's schedule in each row: iterations 3-4 traced after one skipped and one warm-up;
# the iterations after the trace's export (from the 6th) give the row's steady SPS.
WAIT, WARMUP, ACTIVE = 1, 1, 2
STEADY_AFTER = WAIT + WARMUP + ACTIVE + 1
TRACES_MB = 15.0  # the rows' traces kept beside the report, within a file that comes back
# Parameters after a few iterations: graphs against eager (different kernels: float rounding).
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Row:
    """One CartPole run: its shape, where the envs step and whether CUDA graphs are on."""

    name: str
    envs: int
    steps: int
    backend: str  # serial (numpy on the host) or torch (on the run's device)
    graphs: bool | None  # --cuda-graphs or --no-cuda-graphs; None: the host path's own

    def needs(self) -> tuple[str, ...]:
        if self.backend != "torch":
            return ()
        return ("vec_backend_torch", "cuda_graphs") if self.graphs else ("vec_backend_torch",)

    def args(self, check: Check) -> list[str]:
        iterations = check.sizes.row_iterations
        total = BIG if iterations is None else iterations * self.envs * self.steps
        args = f"--env cartpole --num-envs {self.envs} --num-steps {self.steps} --vec-backend "
        args += f"{self.backend} --learning-rate 2.5e-4 --seed 1 --total-steps {total}"
        if check.has("cuda_graphs"):  # the host reference is today's eager path
            args += " --cuda-graphs" if self.graphs else " --no-cuda-graphs"
        return args.split()


def rows(check: Check) -> list[Row]:
    """The big shape's rows, then PureJaxRL's small one's (``cartpole_475``'s envs and steps)."""
    shapes = {"big": check.sizes.big, "small": check.sizes.cartpole[:2]}
    return [
        Row(f"{path}_{envs}x{steps}", envs, steps, backend, graphs)
        for envs, steps in shapes.values()
        for path, backend, graphs in (
            ("host", "serial", None),
            ("device_graphs", "torch", True),
            ("device_eager", "torch", False),
        )  # fmt: skip
    ]


def profiled_row(check: Check, row: Row) -> dict[str, Any]:
    """``row`` under ``rlperf profile --torch-profiler`` for the rows' wall budget: SPS (the
    whole run's and the steady one after the trace), the trace's GPU busy share and kernels."""
    why = lacks(check, *row.needs())
    if why:
        raise Skip(why)
    out = check.work / f"{row.name}_profile"
    schedule = f"--torch-profiler --wait {WAIT} --warmup {WARMUP} --active {ACTIVE} --repeat 1"
    args = [*row.args(check), *schedule.split(), "--out", str(out)]
    figures = train(check, row.name, args, check.sizes.row_s + 30, wall_s=check.sizes.row_s,
                    command="profile", steady_after=STEADY_AFTER)  # fmt: skip
    summary = figures.pop("summary")
    figures.pop("curve")
    figures["telemetry_gpu_util_pct"] = [
        g.get("util_pct_mean") for g in (summary.get("telemetry") or {}).get("gpus", [])
    ]
    traces = sorted((out / "torch_traces").glob("*.pt.trace.json"))
    if not traces:
        raise Failed(f"{row.name}: no torch.profiler trace was written", figures)
    figures["trace"] = {**trace_activity(traces[0]), "file": str(traces[0])}
    report = read_json(out / "report.json") or {}
    figures["sections"] = {
        s["name"]: {k: s.get(k) for k in ("calls", "mean_ms", "pct")}
        for s in report.get("sections", [])
    }
    if check.cuda and not figures["trace"]["kernels"]:
        raise Failed(f"{row.name}: the trace shows no CUDA kernel", figures)
    return figures


def step_cartpole_rows(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    results = {}
    for row in rows(check):
        results[row.name] = result = attempt(lambda row=row: profiled_row(check, row))
        f = result["figures"]
        busy = (f.get("trace") or {}).get("busy_pct")
        line = result["reason"] or f"{sps_text(f)}, steady {f.get('sps_steady')}, busy {busy}%"
        print(f"    {row.name}: {result['status']} {line}", flush=True)
    figures = items(results)
    figures["traces"] = keep_traces(check, results)
    return figures


def keep_traces(check: Check, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rows' traces, gzipped, in one tar beside the report (``<stem>_traces.tar``) while it
    stays under :data:`TRACES_MB`; the others named as left out."""
    path = check.out.with_name(check.out.stem + "_traces.tar")
    kept, left = [], []
    with tarfile.open(path, "w") as tar:
        for name, result in results.items():
            trace = Path((result["figures"].get("trace") or {}).get("file", ""))
            if not trace.is_file():
                continue
            packed = check.work / f"{name}.json.gz"
            with open(trace, "rb") as src, gzip.open(packed, "wb") as dst:
                dst.write(src.read())
            if path.stat().st_size + packed.stat().st_size > TRACES_MB * 2**20:
                left.append(name)
                continue
            tar.add(packed, arcname=packed.name)
            kept.append(name)
    return {"file": str(path), "kept": kept, "left_out_for_size": left}


def step_graphs_equal(check: Check) -> dict[str, Any]:
    """Each shape trained ``graphs_iterations`` iterations with CUDA graphs and without, from
    seed 1 on the envs on the device: the two checkpoints' parameters compared."""
    check.needs_cuda()
    why = lacks(check, "vec_backend_torch", "cuda_graphs")
    if why:
        raise Skip(why)
    results = {}
    for envs, steps in (check.sizes.big, check.sizes.cartpole[:2]):
        name = f"cartpole_{envs}x{steps}"
        results[name] = r = attempt(lambda e=envs, s=steps, n=name: graphs_vs_eager(check, n, e, s))
        print(f"    {name}: {r['status']} {r['reason'] or r['figures'].get('equal')}", flush=True)
    return items(results)


def graphs_vs_eager(check: Check, name: str, envs: int, steps: int) -> dict[str, Any]:
    total = check.sizes.graphs_iterations * envs * steps
    args = f"--env cartpole --num-envs {envs} --num-steps {steps} --vec-backend torch "
    args += f"--total-steps {total} --seed 1 --no-telemetry"
    runs = {}
    for side in ("graphs", "eager"):
        flag = "--cuda-graphs" if side == "graphs" else "--no-cuda-graphs"
        runs[side] = train(check, f"{name}_{side}", [*args.split(), flag], 60)
        runs[side].pop("summary")
        runs[side].pop("curve")
    found = check.work / f"{name}_params.json"
    argv = check.python(str(ENTRY), "--compare-params", runs["graphs"]["run_dir"],
                        runs["eager"]["run_dir"], str(found))  # fmt: skip
    fin = run_process(argv, check.timeout(60), check.log(f"{name}_compare"), check.env)
    if fin.rc != 0 or not found.exists():
        raise Failed(f"the comparison exited {fin.rc}", {"runs": runs, "log_tail": fin.tail()})
    figures = {**json.loads(found.read_text()), "iterations": check.sizes.graphs_iterations,
               "runs": runs}  # fmt: skip
    if not figures["equal"]:
        raise Failed(
            f"{name}: graphs' parameters differ from eager's by up to "
            f"{figures['max_abs_diff']:.3g} (rtol {RTOL:g}, atol {ATOL:g})",
            figures,
        )
    return figures


def compare_params(graphs_dir: Path, eager_dir: Path) -> dict[str, Any]:
    """The policy parameters of two run directories' checkpoints, tensor by tensor: equal within
    :data:`RTOL` and :data:`ATOL`, bit for bit, and the largest differences. Run in a
    subprocess (``--compare-params``): the check's own process never imports torch."""
    import torch

    a, b = (torch.load(d / "checkpoint.pt", weights_only=True) for d in (graphs_dir, eager_dir))
    out: dict[str, Any] = {"global_step": [a.get("global_step"), b.get("global_step")],
                           "tensors": {}}  # fmt: skip
    for key, x in a["policy"].items():
        y = b["policy"][key]
        diff = (x.double() - y.double()).abs()
        out["tensors"][key] = {
            "numel": x.numel(),
            "max_abs_diff": float(diff.max()) if x.numel() else 0.0,
            "max_rel_diff": float((diff / y.double().abs().clamp_min(1e-12)).max())
            if x.numel()
            else 0.0,
            "close": bool(torch.allclose(x, y, rtol=RTOL, atol=ATOL)),
            "identical": bool(torch.equal(x, y)),
        }
    tensors = out["tensors"].values()
    out.update(
        equal=all(t["close"] for t in tensors) and a.get("global_step") == b.get("global_step"),
        identical=all(t["identical"] for t in tensors),
        max_abs_diff=max((t["max_abs_diff"] for t in tensors), default=0.0),
        max_rel_diff=max((t["max_rel_diff"] for t in tensors), default=0.0),
    )
    return out
