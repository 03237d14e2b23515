"""How far ``--precision bf16`` moves an Atari update from float32's, against how far PPO's own
minibatch shuffle moves it.

    python benchmarks/atari_precision.py --run-dir runs/breakout      # a --preset atari run
    python benchmarks/atari_precision.py --run-dir DIR --rollouts 5 --total-steps 10000000

From a run's checkpoint (its policy, optimizer, envs and RNGs), each round collects one real
rollout with the run's own settings and then takes the same update three times from the same
state: in float32; in float32 with another minibatch shuffle (the variation every PPO run has);
and under bf16 autocast (``--precision bf16``: the update's forward and backward in bf16, the
loss and the optimizer in float32). It prints the cosine similarity and the relative distance
between the parameter steps (``after - before``, every parameter flattened), and each update's
approximate KL, clip fraction and losses. The run then goes on from the float32 update.

The learning rate is the preset's schedule at the checkpoint's iteration for ``--total-steps``
(default 10M, the preset's: ~2.4e-4 early on): a short run's own schedule would have annealed it
to near zero by its last iteration, and its steps with it.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

DEFAULT_TOTAL_STEPS = 10_000_000  # --preset atari's, whose schedule the learning rate follows
OTHER_SHUFFLE_SEED = 12_345  # the float32 update's second shuffle, plus the round


def flat_params(policy: Any) -> Any:
    import torch

    return torch.cat([p.detach().flatten().clone() for p in policy.parameters()])


def run(run_dir: Path, rollouts: int, total_steps: int, threads: int) -> list[dict[str, Any]]:
    """The rounds' figures (module docstring), one dict a rollout."""
    import torch

    from rlperf.config import Config
    from rlperf.ppo.loss import STAT_NAMES
    from rlperf.ppo.trainer import Trainer
    from rlperf.ppo.trainer_state import load_trainer
    from rlperf.run.checkpoint import CheckpointError, load_checkpoint

    payload = load_checkpoint(run_dir, purpose="compare precisions")
    cfg = Config.from_dict(payload["config"])
    if cfg.policy.kind != "cnn":
        raise CheckpointError(f"{run_dir} is a run of the {cfg.policy.kind} policy, not the CNN")
    cfg.run.total_steps, cfg.run.threads, cfg.run.adapt_threads = total_steps, threads, False
    cfg.run.progress, cfg.run.telemetry = False, False
    cfg.ppo.precision = "fp32"
    trainer = Trainer(cfg.validate())
    load_trainer(trainer, payload)
    impl = trainer.update_impl
    rounds = []
    for r in range(rollouts):
        trainer.collect()
        trainer.compute_advantages()
        policy0 = copy.deepcopy(trainer.policy.state_dict())
        optim0 = copy.deepcopy(impl.state_dict())
        shuffle0 = trainer.shuffle_gen.get_state()
        before = flat_params(trainer.policy)
        steps, stats = {}, {}
        variants = (("fp32", None, None), ("fp32, other shuffle", None, OTHER_SHUFFLE_SEED + r),
                    ("bf16", torch.bfloat16, None))  # fmt: skip
        for name, dtype, shuffle_seed in variants:
            trainer.policy.load_state_dict(policy0)
            impl.load_state_dict(optim0)
            trainer.shuffle_gen.set_state(shuffle0)
            if shuffle_seed is not None:
                trainer.shuffle_gen.manual_seed(shuffle_seed)
            impl.autocast_dtype = dtype
            means = trainer.update()
            steps[name] = flat_params(trainer.policy) - before
            stats[name] = dict(zip(STAT_NAMES, means.tolist(), strict=True))
        # The run goes on from the float32 update, its own arithmetic.
        trainer.policy.load_state_dict(policy0)
        impl.load_state_dict(optim0)
        trainer.shuffle_gen.set_state(shuffle0)
        impl.autocast_dtype = None
        trainer.update()
        ref = steps["fp32"]
        rounds.append({
            "iteration": trainer.iteration,
            "lr": impl.lr,
            "against_fp32": {
                name: {
                    "cosine": float(torch.nn.functional.cosine_similarity(s, ref, dim=0)),
                    "relative_distance": float((s - ref).norm() / ref.norm()),
                }
                for name, s in steps.items() if name != "fp32"
            },
            "stats": stats,
        })  # fmt: skip
    return rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True, type=Path,
                        help="a run directory of --preset atari (or any CNN run) with its "
                             "checkpoint")  # fmt: skip
    parser.add_argument("--rollouts", type=int, default=3, help="rounds, a rollout each")
    parser.add_argument("--total-steps", type=int, default=DEFAULT_TOTAL_STEPS,
                        help="the schedule the learning rate is annealed on")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.rollouts < 1 or args.threads < 1 or args.total_steps < 1:
        parser.error("--rollouts, --threads and --total-steps must be >= 1")
    from rlperf.run.checkpoint import CheckpointError

    try:
        rounds = run(args.run_dir, args.rollouts, args.total_steps, args.threads)
    except CheckpointError as e:
        print(f"atari_precision.py: {e}", file=sys.stderr)
        return 2
    for r, res in enumerate(rounds):
        parts = [f"{name}: cosine {v['cosine']:.4f}, relative distance {v['relative_distance']:.3f}"
                 for name, v in res["against_fp32"].items()]  # fmt: skip
        print(f"rollout {r} (iteration {res['iteration']}, lr {res['lr']:.2e}), the parameter "
              f"step against fp32's: " + "; ".join(parts))  # fmt: skip
        for name, s in res["stats"].items():
            figures = "  ".join(f"{k} {v:.4f}" for k, v in s.items())
            print(f"    {name:20s} {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
