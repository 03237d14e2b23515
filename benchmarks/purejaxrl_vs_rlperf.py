"""PureJaxRL's PPO (``purejaxrl/ppo.py`` as written, vendored in ``benchmarks/purejaxrl/``) beside
rlperf on CartPole-v1: steady-state SPS and time from a fresh process to a return of 475.

    python benchmarks/purejaxrl_vs_rlperf.py --help
    python benchmarks/purejaxrl_vs_rlperf.py --rounds 2 --shapes 4x128 64x32 --threads 1 \\
        --total-steps 200000 --out runs/purejaxrl.json

PureJaxRL needs jax on the CPU, which this project does not depend on. Install it into its own
environment (gymnax brings a gymnasium of its own choosing; rlperf's tests need 1.4) and point
``--jax-python`` at it (default: ``.venv-jax/bin/python`` beside this repository's root, if it
exists)::

    python -m venv .venv-jax && .venv-jax/bin/pip install jax flax optax distrax "gymnax==0.0.9"

(gymnax 1.0 changed ``step``'s return, which ``ppo.py``'s wrappers unpack: benchmarks/purejaxrl/
README.md.)

The same PPO work on both sides: 64x64 tanh actor and critic, ``update_epochs`` 4 x 4
minibatches, clip 0.2, GAE 0.99/0.95, entropy 0.01, value 0.5, grad-norm clip 0.5, Adam with
LR annealing (ppo.py's CartPole config; rlperf's defaults are the same, its learning rate
2.5e-4 given explicitly). Every run is a fresh process; the two implementations take turns
(rlperf, jax, jax, rlperf, ...) at each shape and thread setting, so drift affects both alike.

What is measured:
- **steady SPS**: PureJaxRL's whole run is one XLA program; the script compiles it ahead of
  time (``jax.jit(...).lower(rng).compile()``), runs it once, then runs it again and reports
  ``total_steps / second run's seconds``. rlperf reports its cumulative SPS after its warm-up
  iterations (``sps_cumulative`` of the run's summary).
- **time to 475**: seconds from the process's start to the first point where the mean return of
  the last 100 episodes reaches 475. PureJaxRL cannot stop early and reports its returns only
  at the end, so its figure is ``start -> compiled`` plus the first run's seconds times the
  fraction of its steps done when the mean crossed 475 (its speed is uniform); rlperf's is the
  process's start-up (its total seconds minus the trainer's wall time) plus the trainer's
  ``wall_s`` at the first metrics row with ``mean_return >= 475``. "none" where the run ended
  first (raise ``--total-steps``).

Threads: ``--threads 1`` pins each process to CPU 0 (``taskset -c 0``) and gives rlperf
``--threads 1`` and XLA ``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1"``; ``--threads default`` sets nothing (each uses the machine
as it would by default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLVED = 475.0
ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
LR = 2.5e-4


def first_solved(returns: list[float], window: int = 100) -> int | None:
    """Index (0-based) of the first episode at which the mean of the last ``window`` episodes
    (fewer at the start, as rlperf's episode log) reaches :data:`SOLVED`, or None."""
    total = 0.0
    for i, r in enumerate(returns):
        total += r
        if i >= window:
            total -= returns[i - window]
        if total / min(i + 1, window) >= SOLVED:
            return i
    return None


# -- PureJaxRL, run inside the jax environment ---------------------------------------------
def jax_worker(envs: int, steps: int, total: int, seed: int) -> dict:
    """Compile and run ppo.py's ``make_train`` twice; times and the step of return 475."""
    t_start = time.perf_counter()
    sys.path.insert(0, str(HERE / "purejaxrl"))
    import jax  # noqa: PLC0415  (only in the jax environment)
    import numpy as np  # noqa: PLC0415
    from ppo import make_train  # noqa: PLC0415  (benchmarks/purejaxrl/ppo.py)

    config = {
        "LR": LR, "NUM_ENVS": envs, "NUM_STEPS": steps, "TOTAL_TIMESTEPS": total,
        "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": False,
    }  # fmt: skip
    rng = jax.random.PRNGKey(seed)
    compiled = jax.jit(make_train(config)).lower(rng).compile()
    t_compiled = time.perf_counter()
    out = jax.block_until_ready(compiled(rng))
    t_first = time.perf_counter()
    jax.block_until_ready(compiled(rng))
    t_second = time.perf_counter()
    info = out["metrics"]
    done = np.asarray(info["returned_episode"])  # (updates, steps, envs)
    rets = np.asarray(info["returned_episode_returns"])
    step_of = np.broadcast_to(
        (np.arange(done.shape[0])[:, None, None] * steps + np.arange(steps)[None, :, None] + 1)
        * envs,
        done.shape,
    )
    # Episodes in the order they ended (step, then env), as a vector env's log sees them.
    returns, at_step = rets[done].tolist(), step_of[done].tolist()
    solved = first_solved(returns)
    steps_done = config["NUM_UPDATES"] * steps * envs
    first_s = t_first - t_compiled
    return {
        "steps": steps_done,
        "compile_s": t_compiled - t_start,
        "first_run_s": first_s,
        "steady_s": t_second - t_first,
        "sps": steps_done / (t_second - t_first),
        "solved_step": at_step[solved] if solved is not None else None,
        "to_solved_in_process_s": (t_compiled - t_start) + first_s * at_step[solved] / steps_done
        if solved is not None
        else None,
        "final_mean_return": float(np.mean(returns[-100:])) if returns else None,
        "jax": jax.__version__,
    }


# -- one measured process of either implementation ---------------------------------------------
def run_jax(python: str, envs: int, steps: int, total: int, seed: int, env: dict, pin: list[str]):
    cmd = [*pin, python, str(Path(__file__).resolve()), "--jax-worker",
           f"{envs}x{steps}", str(total), str(seed)]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"PureJaxRL worker failed:\n{done.stderr[-3000:]}")
    res = json.loads(done.stdout.strip().splitlines()[-1])
    # The worker's clock starts after the interpreter did: add what came before, measured here.
    startup = wall - (res["compile_s"] + res["first_run_s"] + res["steady_s"])
    if res["to_solved_in_process_s"] is not None:
        res["to_solved_s"] = res["to_solved_in_process_s"] + max(startup, 0.0)
    else:
        res["to_solved_s"] = None
    res["process_s"] = wall
    return res


def run_rlperf(envs: int, steps: int, total: int, seed: int, threads: str, env: dict,
               pin: list[str]):  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        # This interpreter's rlperf, not an `rlperf` on PATH (another environment's, maybe).
        cmd = [*pin, sys.executable, "-m", "rlperf", "train",
               "--env", "cartpole", "--num-envs", str(envs), "--num-steps", str(steps),
               "--total-steps", str(total), "--seed", str(seed), "--learning-rate", str(LR),
               "--no-telemetry", "--no-progress", "--run-dir", tmp, "--overwrite"]  # fmt: skip
        if threads == "1":
            cmd += ["--threads", "1"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"rlperf failed:\n{done.stderr[-3000:]}")
        summary = json.loads((Path(tmp) / "summary.json").read_text())
        rows = [json.loads(x) for x in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    solved = next((r for r in rows if (r.get("mean_return") or 0) >= SOLVED), None)
    startup = wall - summary["wall_s"]
    return {
        "steps": summary["global_step"],
        "sps": summary["sps_cumulative"],
        "solved_step": solved["global_step"] if solved else None,
        "to_solved_s": startup + solved["wall_s"] if solved else None,
        "final_mean_return": summary["mean_return_last_100"],
        "update": summary["update"],
        "process_s": wall,
    }


def med(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "none"
    if len(got) < len(values):
        return f"{statistics.median(got):,.1f} ({len(values) - len(got)} none)"
    return f"{statistics.median(got):,.1f} [{min(got):,.1f}-{max(got):,.1f}]"


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--jax-worker":
        # The jax environment has no rlperf; the shape is the parent's, already checked.
        envs, steps = (int(x) for x in sys.argv[2].split("x"))
        print(json.dumps(jax_worker(envs, steps, int(sys.argv[3]), int(sys.argv[4]))))
        return 0
    from rlperf.bench.harness import parse_shape  # noqa: PLC0415  (not in the jax worker)

    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2],
    )  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="runs of each (default %(default)s)")
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=["4x128", "64x32", "1024x32"],
                    help="ENVSxSTEPS shapes (default 4x128 64x32 1024x32)")  # fmt: skip
    ap.add_argument("--threads", nargs="+", choices=["1", "default"], default=["1", "default"],
                    help="thread settings to run (default both)")  # fmt: skip
    ap.add_argument("--total-steps", type=int, default=500_000,
                    help="environment steps per run (default %(default)s)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jax-python", default=str(HERE.parent / ".venv-jax" / "bin" / "python"),
                    help="python of the environment with jax (default %(default)s)")  # fmt: skip
    ap.add_argument("--out", type=Path, help="write every run's figures here (JSON)")
    args = ap.parse_args()
    args.shapes = [parse_shape(s) if isinstance(s, str) else s for s in args.shapes]
    if args.rounds < 1 or args.total_steps < 1:
        ap.error("--rounds and --total-steps must be >= 1")
    if not Path(args.jax_python).exists():
        ap.error(f"--jax-python {args.jax_python} does not exist (see --help for the install)")
    if args.out is not None and not args.out.parent.is_dir():
        ap.error(f"--out: folder {args.out.parent} does not exist")
    results: list[dict] = []
    for threads in args.threads:
        env = dict(os.environ)
        pin: list[str] = []
        if threads == "1":
            env["XLA_FLAGS"] = ONE_THREAD_XLA
            pin = ["taskset", "-c", "0"]
        for envs, steps in args.shapes:
            for rnd in range(args.rounds):
                order = ("rlperf", "purejaxrl") if rnd % 2 == 0 else ("purejaxrl", "rlperf")
                for impl in order:
                    if impl == "rlperf":
                        res = run_rlperf(
                            envs, steps, args.total_steps, args.seed, threads, env, pin
                        )
                    else:
                        res = run_jax(args.jax_python, envs, steps, args.total_steps, args.seed,
                                      env, pin)  # fmt: skip
                    res.update(impl=impl, shape=f"{envs}x{steps}", threads=threads, round=rnd)
                    results.append(res)
                    solved = res["to_solved_s"]
                    print(f"{threads:>7} {envs}x{steps:<5} round {rnd} {impl:>9}: "
                          f"{res['sps']:>10,.0f} SPS, to 475 {solved}", flush=True)  # fmt: skip
    print(f"\n{'threads':>7} {'shape':>8} {'impl':>9} {'steady SPS median [min-max]':>34} "
          f"{'rlperf/PureJaxRL paired':>24} {'s to 475 from a fresh process':>30}")  # fmt: skip
    for threads in args.threads:
        for envs, steps in args.shapes:
            shape = f"{envs}x{steps}"
            sel = {i: [r for r in results if r["impl"] == i and r["shape"] == shape
                       and r["threads"] == threads] for i in ("rlperf", "purejaxrl")}  # fmt: skip
            # Round by round: the two ran back to back, so the box's drift cancels.
            ratios = [r["sps"] / j["sps"] for r, j in zip(sel["rlperf"], sel["purejaxrl"],
                                                          strict=True)]  # fmt: skip
            paired = f"{statistics.median(ratios):.3f}x [{min(ratios):.3f}-{max(ratios):.3f}]"
            for impl, rows in sel.items():
                ratio = paired if impl == "purejaxrl" else ""
                print(f"{threads:>7} {shape:>8} {impl:>9} {med([r['sps'] for r in rows]):>34} "
                      f"{ratio:>24} {med([r['to_solved_s'] for r in rows]):>30}")  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                        "runs": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
