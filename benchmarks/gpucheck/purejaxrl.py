"""The ``purejaxrl`` step: PureJaxRL's ``ppo.py`` on the same GPU and CartPole work as rlperf
(benchmarks/purejaxrl_vs_rlperf.py's worker), at ``cartpole_475``'s shape and at the
workloads' 4,096 envs x 32 steps, with rlperf's SPS beside each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucheck.core import ROOT, Failed, Skip, last_json, run_process
from gpucheck.facts import missing_for

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
    envs, steps, total = check.sizes.jax
    result = purejaxrl_worker(check, envs, steps, total, "purejaxrl")
    figures = {"backend": backend, "shape": f"{envs}x{steps}", "total_steps": total, **result}
    rlperf = check.results.get("cartpole_475", {}).get("figures", {})
    if rlperf.get("sps") and (envs, steps) == check.sizes.cartpole[:2]:
        figures["rlperf_same_work"] = {"sps": rlperf["sps"], "at_target": rlperf.get("at_target")}
        figures["rlperf_over_purejaxrl_sps"] = round(rlperf["sps"] / result["sps"], 3)
    # The same at the workloads' CartPole size, where the GPU's arithmetic counts: the gap
    # there is the one the next step on the GPU works on (docs/journal/gpu.md).
    envs, steps, total = check.sizes.jax_big
    try:
        big = purejaxrl_worker(check, envs, steps, total, "purejaxrl_big")
    except Failed as e:  # the small shape's figures stand; say why the big one has none
        figures["big"] = {"status": "failed", "reason": str(e), **e.figures}
        return figures
    figures["big"] = {"shape": f"{envs}x{steps}", "total_steps": total, **big}
    work = check.results.get("workloads", {}).get("figures", {}).get("items", {})
    big_rlperf = work.get("cartpole_big", {}).get("figures", {})
    if big_rlperf.get("sps") and envs == check.sizes.big_envs:
        figures["big"]["rlperf_sps"] = big_rlperf["sps"]
        figures["big"]["rlperf_over_purejaxrl_sps"] = round(big_rlperf["sps"] / big["sps"], 3)
    return figures


def purejaxrl_worker(check: Check, envs: int, steps: int, total: int, log: str) -> dict[str, Any]:
    """PureJaxRL's ``ppo.py`` (benchmarks/purejaxrl_vs_rlperf.py's worker) on ``envs`` x
    ``steps`` CartPole for ``total`` steps: its JSON line (SPS, compile and run seconds)."""
    worker = ROOT / "benchmarks" / "purejaxrl_vs_rlperf.py"
    fin = run_process(
        check.python(str(worker), "--jax-worker", f"{envs}x{steps}", str(total), "1"),
        check.timeout(check.cap("purejaxrl")),
        check.log(log),
        check.env,
    )
    if fin.rc != 0:
        raise Failed(f"PureJaxRL's worker exited {fin.rc}", {"log_tail": fin.tail()}, fin.timed_out)
    return last_json(fin.tail(100_000))
