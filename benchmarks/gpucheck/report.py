"""What the check prints and writes for a person: each step's one line, the summary table, the
``headline`` of the JSON (the figures the GPU issues ask for) and the steps' logs in one file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucheck.check import Check


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
