"""End-to-end PPO throughput on CartPole: rlperf against CleanRL's loop and the eager-pieces floor.

    python benchmarks/sps.py                          # 64x32 and 1024x32, 5 rounds, 2 threads
    python benchmarks/sps.py --configs 64x32 --rounds 9 --impls rlperf,cleanrl
    python benchmarks/sps.py --base-src /path/to/old/src  # adds "rlperf-base": before/after

Every measurement runs in a fresh process (``rlperf.bench.harness``), and the
implementations take turns (A B C C B A A B C ...) so that a machine whose speed drifts
affects them alike; the table shows the median and min-max of each. With ``--base-src`` it
also prints rlperf against rlperf-base paired round by round (SPS, rollout and update
time), which cancels most of that drift.

The same PPO work everywhere: 64x64 Tanh actor and critic, 4 minibatches x 4 epochs, clipped
policy and value losses, entropy bonus, advantage normalisation, grad-norm clip 0.5, Adam, LR
annealing.

Implementations:
- ``rlperf``: ``rlperf.ppo.Trainer`` (default config, sized by ``--configs``), cumulative SPS
  after its warm-up iterations;
- ``rlperf-autograd``: the same with ``analytic=False`` (autograd for the update);
- ``cleanrl``: CleanRL ``ppo.py``'s loop, written out as it is there in ``rlperf.bench.cleanrl``
  (``Agent`` of two ``nn.Sequential``, ``Categorical``, a Python GAE loop in torch,
  index-gathered minibatches, ``clip_grad_norm_``, ``.item()`` per minibatch; the loop
  ``lstm_sps.py``'s ``cleanrl`` runs too) on gymnasium's native vector CartPole;
- ``floor``: the "eager-pieces floor": each piece timed alone in plain eager PyTorch and the
  times added up (native vector CartPole step, actor+critic forward with sampling, and
  update_epochs x num_minibatches full minibatch updates: forward, loss, backward, clip, Adam).
  It has no rollout storage, no GAE and no Python glue, so it is not a trainer: it is the bar
  an eager implementation cannot beat without doing the update with fewer or larger operations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from rlperf.bench.cleanrl import CLEANRL_PPO, Minibatch, minibatch_update, mlp_agent, run_mlp
from rlperf.bench.harness import Implementation, compare, paired_ratios, parse_shape, spread

WARMUP_ITERS = 2


def default_total_steps(num_envs: int, num_steps: int) -> int:
    """About 4-6 s of work per process at the target speeds, whole iterations."""
    batch = num_envs * num_steps
    iters = max(WARMUP_ITERS + 8, (300_000 if batch < 16_384 else 1_000_000) // batch)
    return iters * batch


# -- workers (each runs in its own process) ------------------------------------------------
def worker_rlperf(num_envs: int, num_steps: int, total: int, threads: int, fast: bool) -> dict:
    from rlperf.config import Config
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps = num_envs, num_steps
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = total, threads, False
    cfg.run.warmup_iters = WARMUP_ITERS
    # The field was ``fast_update`` before it was ``analytic``: --base-src may be older code.
    fields = cfg.policy.__dataclass_fields__
    setattr(cfg.policy, "analytic" if "analytic" in fields else "fast_update", fast)
    summary = Trainer(cfg, profiler=Profiler()).train()
    return {"sps": summary["sps_cumulative"], "sections": summary["sections"]}


def worker_floor(num_envs: int, num_steps: int, total: int, threads: int) -> dict:
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
    envs.reset(seed=1)
    agent = mlp_agent(4, 2)
    optimizer = torch.optim.Adam(agent.parameters(), lr=CLEANRL_PPO.learning_rate, eps=1e-5)
    rng = np.random.default_rng(1)
    reps = max(total // (num_envs * num_steps), 10) * num_steps

    def timed(fn, n: int) -> float:  # noqa: ANN001
        for _ in range(max(n // 10, 5)):
            fn()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n

    actions_np = [rng.integers(0, 2, num_envs) for _ in range(64)]
    k = [0]

    def env_step() -> None:
        k[0] = (k[0] + 1) % 64
        envs.step(actions_np[k[0]])

    obs = torch.randn(num_envs, 4)

    def forward() -> None:
        with torch.no_grad():
            agent.get_action_and_value(obs)

    mbs = (num_envs * num_steps) // 4
    mb = Minibatch(torch.randn(mbs, 4), torch.randint(0, 2, (mbs,)).float(),
                   torch.randn(mbs) * 0.1 - 0.7, torch.randn(mbs), torch.randn(mbs),
                   torch.randn(mbs))  # fmt: skip

    def update() -> None:
        minibatch_update(agent, optimizer, mb)

    env_s = timed(env_step, reps)
    fwd_s = timed(forward, reps)
    upd_s = timed(update, max(reps // num_steps * 4, 20))
    iteration_s = num_steps * (env_s + fwd_s) + 16 * upd_s
    return {
        "sps": num_envs * num_steps / iteration_s,
        "env_step_ms": env_s * 1e3,
        "forward_ms": fwd_s * 1e3,
        "update_ms": upd_s * 1e3,
    }


# -- driver ----------------------------------------------------------------------------------
def implementations(impls: list[str], config: str, total: int, threads: int,
                    base_src: str | None) -> list[Implementation]:  # fmt: skip
    num_envs, num_steps = parse_shape(config)
    size = {"num_envs": num_envs, "num_steps": num_steps, "total": total, "threads": threads}
    workers = {
        "rlperf": (worker_rlperf, {"fast": True}),
        "rlperf-base": (worker_rlperf, {"fast": True}),
        "rlperf-autograd": (worker_rlperf, {"fast": False}),
        "cleanrl": (run_mlp, {"warmup_iters": WARMUP_ITERS}),
        "floor": (worker_floor, {}),
    }
    unknown = [impl for impl in impls if impl not in workers]
    if unknown:
        raise SystemExit(f"sps.py: error: unknown implementation {unknown[0]!r}")
    return [Implementation(impl, workers[impl][0], {**size, **workers[impl][1]},
                           base_src if impl == "rlperf-base" else None)
            for impl in impls]  # fmt: skip


def print_paired(new: list[dict], base: list[dict]) -> None:
    """rlperf against rlperf-base round by round: the two ran next to each other in each round,
    so their ratio cancels most of the machine's drift that separate medians keep."""
    ratios = paired_ratios([a["sps"] for a in new], [b["sps"] for b in base])
    faster = sum(r > 1 for r in ratios)
    print(f"{'':>8} rlperf / rlperf-base SPS, paired by round: median {spread(ratios)}, "
          f"faster in {faster} of {len(ratios)}")  # fmt: skip
    for section in ("rollout", "update"):
        new_s = [a["sections"].get(section) for a in new]
        base_s = [b["sections"].get(section) for b in base]
        if None in new_s or None in base_s:
            continue
        ratios = spread(paired_ratios(new_s, base_s), unit="x")
        print(f"{'':>8} {section} time, paired: median {ratios}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="64x32,1024x32", help="ENVSxSTEPS,... (%(default)s)")
    ap.add_argument("--impls", default="rlperf,cleanrl,floor", help="default: %(default)s")
    ap.add_argument("--rounds", type=int, default=5, help="processes per implementation")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--total-steps", type=int, default=0, help="per process (0: auto)")
    ap.add_argument("--base-src", help="a src/ tree of an older rlperf, run as rlperf-base")
    ap.add_argument("--json", help="write all samples to this file")
    args = ap.parse_args()
    impls = args.impls.split(",")
    if args.base_src and "rlperf-base" not in impls:
        impls.insert(1, "rlperf-base")
    if "rlperf-base" in impls and not args.base_src:
        ap.error("--impls rlperf-base needs --base-src, the older tree it runs")
    try:
        configs = {config: parse_shape(config) for config in args.configs.split(",")}
    except argparse.ArgumentTypeError as e:
        ap.error(f"--configs: {e}")
    results: dict[str, dict[str, list[dict]]] = {}
    for config, (num_envs, num_steps) in configs.items():
        total = args.total_steps or default_total_steps(num_envs, num_steps)

        def progress(r: int, impl: str, sample: dict, config: str = config) -> None:
            print(f"  round {r + 1}/{args.rounds} {config:>8} {impl:<16} "
                  f"{sample['sps']:>10,.0f} SPS", file=sys.stderr, flush=True)  # fmt: skip

        chosen = implementations(impls, config, total, args.threads, args.base_src)
        results[config] = compare(chosen, args.rounds, progress)
    print(f"\nSPS, {args.threads} torch threads, median [min - max] of {args.rounds} processes "
          f"each, interleaved\n")  # fmt: skip
    print(f"{'config':>8} {'implementation':<16} {'median SPS':>11} {'range':>23} "
          f"{'vs cleanrl':>10}")  # fmt: skip
    for config, by_impl in results.items():
        cleanrl = by_impl.get("cleanrl")
        ref = statistics.median(s["sps"] for s in cleanrl) if cleanrl else None
        for impl, samples in by_impl.items():
            sps = [s["sps"] for s in samples]
            med = statistics.median(sps)
            ratio = f"{med / ref:>9.2f}x" if ref else ""
            print(f"{config:>8} {impl:<16} {med:>11,.0f} {min(sps):>11,.0f} - {max(sps):>9,.0f} "
                  f"{ratio}")  # fmt: skip
        floor = by_impl.get("floor")
        if floor:
            keys = ("env_step_ms", "forward_ms", "update_ms")
            pieces = {k: statistics.median(s[k] for s in floor) for k in keys}
            print(f"{'':>8} floor pieces (median ms): env step {pieces['env_step_ms']:.3f}, "
                  f"forward+sample {pieces['forward_ms']:.3f}, "
                  f"one minibatch update {pieces['update_ms']:.3f}")  # fmt: skip
        if "rlperf-base" in by_impl:
            print_paired(by_impl["rlperf"], by_impl["rlperf-base"])
    if args.json:
        with open(args.json, "w") as f:
            record = {"threads": args.threads, "rounds": args.rounds, "results": results}
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
