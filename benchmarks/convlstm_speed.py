"""ConvLSTM PPO throughput: the fast policy against its eager reference, stage sections on and
off, and the channels_last / bf16 / compile variants, trained end to end by the real Trainer.

    python benchmarks/convlstm_speed.py                       # catch, 3 rounds: fast,
                                                              # reference, nosections
    python benchmarks/convlstm_speed.py --variants fast,nosections,channels_last,bf16 --rounds 5
    python benchmarks/convlstm_speed.py --env robots --num-envs 16 --json robots.json

What it measures: training steps per second (environment steps / wall seconds after
``--warmup-iters`` iterations, the Trainer's ``sps_cumulative``) of ``--policy convlstm`` PPO on
the CPU with ``--threads`` torch threads (default 2): ``--num-envs`` x ``--num-steps`` per
iteration, 4 minibatches of whole environments x 4 epochs, the ConvLSTM with ``--channels``,
``--layers``, ``--ticks`` and a 256-wide projection. The environment is a flag (``catch``, the
(1, 10, 5) pixel board, by default; ``robots`` or any registered image env, with
``--env-option KEY=VALUE``).

Variants (each a fresh process; every one trains the same network from the same seed):
- ``fast``: ``rlperf.policies.convlstm.ConvLSTMActorCritic``, stage sections on (the default);
- ``nosections``: the same with ``convlstm_sections = False`` (``fast / nosections`` gives the
  sections' overhead);
- ``toggle``: the fast policy with its sections switched on and off every iteration, so that
  iterations with and without them are compared within one process, side by side in time (on a
  noisy machine far tighter than ``fast / nosections`` across processes);
- ``reference``: ``rlperf.policies.convlstm_reference.ReferenceConvLSTMActorCritic``, the plain
  eager network (one conv per gate and input, the whole step per time step), registered here as
  ``--policy convlstm-reference`` and initialised with the fast policy's parameters;
- ``channels_last``: the fast policy with its convolutions in NHWC (``channels_last=True``);
- ``bf16``: ``--precision bf16`` (autocast in the update; the rollout stays fp32);
- ``compile`` (not in the default set, slow to start): ``--compile``, torch.compile of the
  policy's ``evaluate``. Dynamo unrolls the T x N x D loop into one graph: on the 2-core machine
  a 16-step sequence took over two minutes to compile, so give it ``--warmup-iters`` to absorb
  that and expect minutes per process.

How, as ``benchmarks/lstm_sps.py``: every measurement is a fresh Python process (``--worker``
prints one JSON line), the variants take turns round by round in alternating order (A B C C B A
...), round r (from 1) seeds every variant with ``--seed`` + r - 1, and the table shows median
[min - max]. Ratios are paired round by round (same seed, neighbouring in time), which cancels
most of a drifting machine's effect. Run it on an otherwise idle machine: with as many torch
threads as cores, any other busy process distorts the figures by far more than a few percent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rlperf.bench.harness import spread

VARIANTS = ("fast", "nosections", "toggle", "reference", "channels_last", "bf16", "compile")
DEFAULT_VARIANTS = "fast,reference,nosections,toggle"
POLICY_KINDS = {"reference": "convlstm-reference", "channels_last": "convlstm-channels-last"}
# Paired ratios printed when both ran: (numerator, denominator, label).
RATIOS = (
    ("fast", "reference", "fast / eager reference SPS"),
    ("nosections", "fast", "sections off / on SPS (overhead of the sections)"),
    ("channels_last", "fast", "channels_last / fast SPS"),
    ("bf16", "fast", "bf16 / fast SPS"),
    ("compile", "fast", "compile / fast SPS"),
)


# -- worker (one process per measurement) -----------------------------------------------------
def _register_variant_policies() -> None:
    """``convlstm-reference`` and ``convlstm-channels-last`` as policy kinds (this process only)."""
    from rlperf.policies.convlstm import ConvLSTMActorCritic
    from rlperf.policies.convlstm_reference import reference_from
    from rlperf.policies.registry import IMAGE, PolicyEntry, register_policy

    def fast(spec, cfg, **kw):  # noqa: ANN001, ANN003, ANN202
        return ConvLSTMActorCritic(
            spec, cfg.convlstm_channels, cfg.convlstm_layers, cfg.convlstm_ticks,
            cfg.cnn_features, cfg.convlstm_sections, **kw,
        )  # fmt: skip

    register_policy(
        "convlstm-reference",
        PolicyEntry(lambda spec, cfg: reference_from(fast(spec, cfg)), True, IMAGE,
                    "the eager ConvLSTM reference (benchmark only)"),
    )  # fmt: skip
    register_policy(
        "convlstm-channels-last",
        PolicyEntry(lambda spec, cfg: fast(spec, cfg, channels_last=True), True, IMAGE,
                    "the ConvLSTM with NHWC convolutions (benchmark only)"),
    )  # fmt: skip


def section_cost_us(repeats: int = 20_000) -> float:
    """Microseconds to enter and leave one nested section of the process-wide profiler."""
    from rlperf.timing.sections import Profiler

    prof = Profiler()
    sec = prof.section
    with sec("parent"):
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                with sec("child"):
                    pass
            best = min(best, time.perf_counter() - start)
    return 1e6 * best / repeats


def worker(args: argparse.Namespace) -> dict:
    from rlperf.config import Config, parse_env_options
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing import names
    from rlperf.timing.sections import get_profiler

    _register_variant_policies()
    variant = args.worker
    cfg = Config()
    cfg.env.env, cfg.env.num_envs = args.env, args.num_envs
    cfg.env.options = parse_env_options(args.env_option or [])
    cfg.policy.kind = POLICY_KINDS.get(variant, "convlstm")
    cfg.policy.convlstm_channels, cfg.policy.convlstm_layers = args.channels, args.layers
    cfg.policy.convlstm_ticks = args.ticks
    cfg.policy.convlstm_sections = variant != "nosections"
    cfg.ppo.num_steps = args.num_steps
    cfg.ppo.precision = "bf16" if variant == "bf16" else "fp32"
    cfg.ppo.compile = variant == "compile"
    cfg.run.total_steps = (args.warmup_iters + args.iters) * args.num_envs * args.num_steps
    cfg.run.threads, cfg.run.progress, cfg.run.seed = args.threads, False, args.seed
    cfg.run.warmup_iters = args.warmup_iters
    # The process-wide profiler (the default): the policy's stage sections nest under the
    # trainer's, as in a real run.
    trainer = Trainer(cfg)
    timed: dict[str, float] = {}
    iteration_s: list[tuple[bool, float]] = []  # (sections on, seconds) per timed iteration

    def collect(tr, row: dict) -> None:  # noqa: ANN001
        if row["iteration"] > args.warmup_iters:
            for name, seconds in row.get("sections_s", {}).items():
                timed[name] = timed.get(name, 0.0) + seconds
            seconds = sum(row["sections_s"].get(name, 0.0) for name in names.TOP_LEVEL)
            iteration_s.append((getattr(tr.policy, "sections", False), seconds))
        if variant == "toggle":
            tr.policy.sections = not tr.policy.sections

    trainer.callbacks.append(collect)
    summary = trainer.train()
    n = args.iters
    prof = get_profiler()
    stage_calls = sum(
        s.calls for s in prof.stats() if f"/{names.CONVLSTM}" in s.name or s.name == names.CONVLSTM
    )
    convlstm_s = sum(
        seconds for name, seconds in timed.items()
        if name.endswith("/" + names.CONVLSTM)
    )  # fmt: skip
    return {
        "sps": summary["sps_cumulative"],
        "rollout_ms": 1e3 * (timed.get(names.ROLLOUT, 0.0) + timed.get(names.GAE, 0.0)) / n,
        "update_ms": 1e3 * timed.get(names.UPDATE, 0.0) / n,
        "convlstm_ms": 1e3 * convlstm_s / n,
        "mean_return": summary.get("mean_return_last_100"),
        # The sections' own cost, estimated without timing noise: stage sections entered per
        # iteration (all iterations) x the cost of entering and leaving one.
        "stage_sections_per_iter": stage_calls / summary["iterations"],
        "section_us": section_cost_us(),
        "sections_s": timed,
        "iteration_s": iteration_s,
    }


# -- driver -----------------------------------------------------------------------------------
def measure(variant: str, args: argparse.Namespace, seed: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", variant, "--seed", str(seed)]
    for flag in ("env", "num_envs", "num_steps", "channels", "layers", "ticks", "iters",
                 "warmup_iters", "threads"):  # fmt: skip
        cmd += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    for option in args.env_option or []:
        cmd += ["--env-option", option]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), check=False)
    if out.returncode != 0:
        raise SystemExit(f"convlstm_speed.py: error: {variant} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(results: dict[str, list[dict]], args: argparse.Namespace) -> None:
    print(f"\nConvLSTM PPO SPS on {args.env}, {args.num_envs} envs x {args.num_steps} steps, "
          f"4 minibatches x 4 epochs, ch {args.channels}, D {args.layers}, N {args.ticks}, "
          f"{args.threads} torch threads, {args.iters} timed iterations; median [min - max] of "
          f"{args.rounds} processes each, interleaved\n")  # fmt: skip
    print(f"{'variant':<14} {'SPS':>24}   {'rollout ms/it':>13} {'update ms/it':>12} "
          f"{'convlstm ms/it':>14}")  # fmt: skip
    for variant, samples in results.items():
        sps = [s["sps"] for s in samples]
        row = f"{variant:<14} {spread(sps, ',.0f'):>24}  "
        for key, width in (("rollout_ms", 13), ("update_ms", 12), ("convlstm_ms", 14)):
            row += f" {statistics.median(s[key] for s in samples):>{width}.1f}"
        print(row)
    fast = results.get("fast")
    if fast:
        calls = statistics.median(s["stage_sections_per_iter"] for s in fast)
        cost_us = statistics.median(s["section_us"] for s in fast)
        iter_ms = statistics.median(s["rollout_ms"] + s["update_ms"] for s in fast)
        print(f"\nstage sections: {calls:,.0f} per iteration x {cost_us:.2f} us each = "
              f"{calls * cost_us / 1e3:.2f} ms of a {iter_ms:,.0f} ms iteration "
              f"({100 * calls * cost_us / 1e3 / iter_ms:.2f}%, estimated)")  # fmt: skip
    toggle = results.get("toggle")
    if toggle:
        # Adjacent iterations of one process, one with the sections and one without.
        ratios = []
        for sample in toggle:
            its = sample["iteration_s"]
            for (on_a, a), (on_b, b) in zip(its[0::2], its[1::2], strict=False):
                ratios.append(a / b if on_a and not on_b else b / a)
        print(f"sections on / off, alternate iterations of one process: iteration time "
              f"{spread(ratios, '.3f')} ({len(ratios)} pairs)")  # fmt: skip
    print()
    for num, den, label in RATIOS:
        if num in results and den in results:
            paired = [a["sps"] / b["sps"] for a, b in zip(results[num], results[den], strict=True)]
            print(f"{label:<50} paired by round: {spread(paired, '.2f')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help=f"of {', '.join(VARIANTS)} (default: %(default)s)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="processes per variant")
    ap.add_argument("--env", default="catch", help="an image environment (catch, robots, ...)")
    ap.add_argument("--env-option", action="append", metavar="KEY=VALUE",
                    help="option for the environment's factory (repeatable)")  # fmt: skip
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--num-steps", type=int, default=16)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--ticks", type=int, default=1)
    ap.add_argument("--iters", type=int, default=4, help="timed iterations per process")
    ap.add_argument("--warmup-iters", type=int, default=2, help="untimed first iterations")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--seed", type=int, default=1, help="seed of round 1 (round r: seed + r - 1)")
    ap.add_argument("--json", help="write all samples to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        ap.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"convlstm_speed.py: warning: load average {load_before:.2f} before starting "
              f"({os.cpu_count()} cores): the timings are distorted if other processes "
              "run", file=sys.stderr)  # fmt: skip
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            sample = measure(variant, args, args.seed + r)
            results[variant].append(sample)
            print(f"  round {r + 1}/{args.rounds} {variant:<14} {sample['sps']:>8,.0f} SPS",
                  file=sys.stderr, flush=True)  # fmt: skip
    print_table(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "load_before": load_before, "results": results}, f,
                      indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
