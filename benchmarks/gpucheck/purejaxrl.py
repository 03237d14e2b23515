"""The ``purejaxrl`` step: PureJaxRL's ``ppo.py`` on the same GPU and CartPole work as rlperf
(benchmarks/purejaxrl_vs_rlperf.py's worker), at 4 envs x 128 steps (``small``, the work of
``cartpole_475``) and at 4,096 envs x 32 (``big``), each beside ``cartpole_rows``' rlperf rows
of that shape. Its GPU use: NVML's samples over its steady run (the last thing it does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucheck.core import ROOT, Failed, Finished, Skip, attempt, items, last_json, run_process
from gpucheck.facts import missing_for
from gpucheck.report import sps_text

if TYPE_CHECKING:
    from gpucheck.check import Check


def step_purejaxrl(check: Check) -> dict[str, Any]:
    why = missing_for(check, modules=("jax", "flax", "optax", "distrax", "gymnax"))
    if why:
        raise Skip(f"PureJaxRL: {why}")
    timeout = check.timeout(check.cap("purejaxrl"))
    found = check.work / "jax_backend.txt"
    code = "import jax, sys; open(sys.argv[1], 'w').write(jax.default_backend())"
    fin = run_process(check.python("-c", code, str(found)), timeout, check.log("jax"), check.env)
    if fin.rc != 0 or not found.exists():
        raise Failed(f"import jax exited {fin.rc}", {"log_tail": fin.tail()})
    backend = found.read_text()
    if check.cuda and backend != "gpu":
        raise Skip(f"jax does not see the GPU (its backend: {backend})")
    results = {}
    for name, (envs, steps, total) in (("small", check.sizes.jax), ("big", check.sizes.jax_big)):
        results[name] = r = attempt(lambda e=envs, s=steps, n=total: shape(check, e, s, n))
        print(f"    {name}: {r['status']} {r['reason'] or sps_text(r['figures'])}", flush=True)
    return {"backend": backend, **items(results)}


def shape(check: Check, envs: int, steps: int, total: int) -> dict[str, Any]:
    """PureJaxRL at ``envs`` x ``steps``, beside rlperf's rows of ``cartpole_rows`` at that
    shape (``rlperf_over_purejaxrl`` for each)."""
    result, fin = purejaxrl_worker(check, envs, steps, total, f"purejaxrl_{envs}x{steps}")
    end = fin.started + fin.seconds  # its steady run is the last thing it does
    figures = {"shape": f"{envs}x{steps}", "total_steps": total, **result,
               "gpu_busy": check.nvml.mean_pct(end - result["steady_s"], end)}  # fmt: skip
    rows = check.results.get("cartpole_rows", {}).get("figures", {}).get("items", {})
    rlperf = {
        n.rsplit("_", 1)[0]: r["figures"]["sps_steady"] or r["figures"]["sps"]
        for n, r in rows.items()
        if n.endswith(f"_{envs}x{steps}") and r["status"] == "ok"
    }
    figures["rlperf_sps"] = rlperf  # steady SPS where the row had iterations after its trace
    figures["rlperf_over_purejaxrl"] = {n: round(s / result["sps"], 3) for n, s in rlperf.items()}
    return figures


def purejaxrl_worker(
    check: Check, envs: int, steps: int, total: int, log: str
) -> tuple[dict[str, Any], Finished]:
    """PureJaxRL's ``ppo.py`` (benchmarks/purejaxrl_vs_rlperf.py's worker) on ``envs`` x
    ``steps`` CartPole for ``total`` steps: its JSON line (SPS, compile and run seconds) and
    its process."""
    worker = ROOT / "benchmarks" / "purejaxrl_vs_rlperf.py"
    fin = run_process(
        check.python(str(worker), "--jax-worker", f"{envs}x{steps}", str(total), "1"),
        check.timeout(check.cap("purejaxrl")),
        check.log(log),
        check.env,
    )
    if fin.rc != 0:
        raise Failed(f"PureJaxRL's worker exited {fin.rc}", {"log_tail": fin.tail()}, fin.timed_out)
    return last_json(fin.tail(100_000)), fin
