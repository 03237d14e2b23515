"""What the check prints and writes for a person: each step's one line, the summary table, the
``headline`` of the JSON (the figures the GPU issues ask for) and the steps' logs in one file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucheck.check import Check


def headline(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures issue #57 (and #49 before it) asks for, from the steps' figures (None where a
    step did not run): every row's SPS and GPU busy share, the ratios its targets are stated
    in, and whether CUDA graphs' parameters equal eager's."""

    def fig(step: str, *path: str) -> Any:
        value: Any = results.get(step, {}).get("figures", {})
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def rows(step: str) -> dict[str, Any]:
        return {
            n: r["figures"] for n, r in (fig(step, "items") or {}).items() if r["status"] == "ok"
        }

    cartpole = rows("cartpole_rows")
    cases = fig("registry_cuda", "cases") or {}
    return {
        "cuda_tests": {k: fig("cuda_tests", k) for k in ("passed", "failed", "errors", "skipped")},
        "cartpole_475": {
            "path": fig("cartpole_475", "path"),
            "sps": fig("cartpole_475", "sps"),
            "at_target": fig("cartpole_475", "at_target"),
        },  # fmt: skip
        "cartpole_sps": {n: f.get("sps_steady") or f.get("sps") for n, f in cartpole.items()},
        "cartpole_gpu_busy_pct": {
            n: (f.get("trace") or {}).get("busy_pct") for n, f in cartpole.items()
        },  # fmt: skip
        "graphs_equal": {
            n: {k: f.get(k) for k in ("equal", "identical", "max_abs_diff")}
            for n, f in rows("graphs_equal").items()
        },  # fmt: skip
        "purejaxrl": {
            n: {k: f.get(k) for k in ("shape", "sps", "rlperf_over_purejaxrl")}
            for n, f in rows("purejaxrl").items()
        },  # fmt: skip
        "mujoco_sps": {n: f.get("sps") for n, f in rows("mujoco_devices").items()},
        "mujoco_auto_over_best": fig("mujoco_devices", "auto_over_best"),
        "breakout_sps": {n: f.get("sps") for n, f in rows("breakout").items()},
        "breakout_ratios": fig("breakout", "ratios"),
        "halfcheetah_sps": {n: f.get("sps") for n, f in rows("halfcheetah").items()},
        "halfcheetah_ratios": fig("halfcheetah", "ratios"),
        "gpu_busy_pct": {
            f"{step}/{n}": (f.get("gpu_busy") or {}).get("pct")
            for step in ("purejaxrl", "mujoco_devices", "breakout", "halfcheetah")
            for n, f in rows(step).items()
        },
        "gpu_util_pct": [
            (g.get("util_pct_mean"), g.get("util_pct_max")) for g in fig("telemetry", "gpus") or []
        ]
        or None,
        "d2h_median_us": {k: v["median_us"] for k, v in cases.items() if "direction=d2h" in k}
        or None,
        "workload_sps": {n: f.get("sps") for n, f in rows("workloads").items()} or None,
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
        rlperf = f.get("facts", {}).get("rlperf") or {}
        return f"kernels {rlperf.get('kernels')}; features {rlperf.get('features')}"
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
    if name == "graphs_equal":
        return "; ".join(
            f"{n} {r['figures'].get('equal')} (max diff {r['figures'].get('max_abs_diff')})"
            if r["status"] == "ok"
            else f"{n} {r['status']}"
            for n, r in f.get("items", {}).items()
        )
    if name == "atari_vs_cleanrl":
        return "; ".join(
            f"{n}: {r['figures'].get('steps')} steps, last-100 return "
            f"{r['figures'].get('mean_return_last_100')}"
            if r["status"] == "ok"
            else f"{n}: {r['status']}"
            for n, r in f.get("items", {}).items()
        )
    if "items" in f:  # a step of rows: each one's SPS
        return "; ".join(
            f"{n} {sps_text(r['figures']) or r['status']}" for n, r in f["items"].items()
        )
    return None


def print_plan(check: Check, plan: list[tuple[str, float | None, str | None]]) -> None:
    """The plan before the first step: each step's budget and its planned end (--cpu: every
    step runs, each of its processes capped), or why it does not run."""
    if check.args.cpu:
        print(f"plan (cpu: every step, each process capped at {plan[0][1]:.0f} s; deadline "
              f"{check.sizes.deadline_s:.0f} s)")  # fmt: skip
    else:
        print(
            f"plan (gpu; each step's budget and its end; deadline {check.sizes.deadline_s:.0f} s)"
        )
    end = 0.0
    for step, budget, why in plan:
        if budget is None:
            print(f"  {step:<17} {'-':>5}             {why}")
        elif check.args.cpu:
            print(f"  {step}")
        else:
            end += budget
            print(f"  {step:<17} {budget:5.0f} s  ends {end:5.0f} s")
    print(flush=True)


def print_table(check: Check) -> None:
    print(
        f"\ngpu_check ({check.report['mode']}) on {check.report['gpu'] or 'no GPU'}, "
        f"{check.report['seconds']:.0f} s:"
    )
    width = max(len(n) for n in check.results)
    for name, r in check.results.items():  # in the order they ran
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


def sps_text(figures: dict[str, Any]) -> str:
    return f"{figures['sps']:,.0f} SPS" if figures.get("sps") else ""
