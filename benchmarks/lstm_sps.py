"""LSTM PPO throughput on position-only CartPole: rlperf against sb3-contrib and a CleanRL loop.

    python benchmarks/lstm_sps.py                       # 5 rounds, 2 threads, rlperf (whole
                                                        # rollout and BPTT 8), sb3, cleanrl
    python benchmarks/lstm_sps.py --rounds 9 --impls rlperf,sb3 --json lstm.json
    python benchmarks/lstm_sps.py --impls rlperf,sb3,sb3-enc,cleanrl   # + sb3 with an encoder
    python benchmarks/lstm_sps.py --impls rlperf,sb3 --base-src /tmp/old/src  # + rlperf-base

What it measures: training steps per second (environment steps / wall seconds, on the CPU with
``--threads`` torch intra-op threads, default 2) of recurrent PPO with 64 environments x 32 steps
per iteration (batch 2048), 4 minibatches x 4 epochs, on rlperf's native batched CartPole with
only the cart position and pole angle observed (``make_vec("cartpole", 64, seed=...,
observe="position")``, gymnasium 1.x vector API, same-step autoreset, 500-step time limit). All
implementations step that same environment. The first 2 iterations of every process are
warm-up and are not timed; SPS is counted over the remaining whole iterations.

How: as ``benchmarks/sps.py``. Every measurement is a fresh Python process (``--worker`` mode
prints one JSON line), the implementations take turns round by round (A B C C B A A B C ...) so
that a machine whose speed drifts affects them alike, and the table shows median [min - max] of
the processes of each. Round r (from 1) seeds every implementation with ``--seed`` + r - 1.
Because the rounds are interleaved, the ratios are also given paired round by round (rlperf's
SPS over the other's in the same round), which cancels most of that drift. The breakdown
columns are milliseconds per timed iteration: "rollout" is collecting the 32 x 64 transitions
plus GAE, "update" the 4 x 4 minibatch updates.

Run it on an otherwise idle machine. With as many torch threads as cores, any other busy process
makes the OpenMP threads wait for each other at every op (spinning, so it also shows as CPU
time), and SPS drops by 10x or more, not by a few percent; the driver warns when the load average
is already high before it starts and records it in the JSON.

Shared hyperparameters: Adam lr 2.5e-3 (eps 1e-5) annealed linearly to 0, gamma 0.99,
GAE lambda 0.95, clip 0.2, value clipping 0.2, entropy 0.01, value 0.5, grad-norm clip 0.5,
advantages normalised per minibatch, categorical policy over the 2 actions.

Implementations:
- ``rlperf``: ``rlperf.ppo.Trainer`` with ``policy.kind = "lstm"``: MLP encoder Linear(2, 64) +
  Tanh + Linear(64, 64) + Tanh, one LSTM layer of 64 (rlperf's fused unroll), actor
  Linear(64, 2) and critic Linear(64, 1) heads on the LSTM output; minibatches of 16 whole
  environments x 32 steps, LSTM state zeroed at episode starts inside the sequence; truncated
  episodes bootstrapped from V(final observation). SPS is the trainer's ``sps_cumulative``
  (after ``warmup_iters = 2``); the breakdown sums the trainer's own per-iteration sections over
  the timed iterations.
- ``rlperf-bptt8``: the same with ``bptt_horizon = 8``: each minibatch is 64 segments of 8
  steps (truncated BPTT, every segment starting from the state recorded during collection)
  instead of 16 whole environments x 32 steps. The same samples and the same arithmetic per
  sample; only the gradient's path back through time is cut at 8 steps.
- ``sb3``: sb3-contrib ``RecurrentPPO("MlpLstmPolicy")`` with ``lstm_hidden_size=64``,
  ``shared_lstm=True``, ``enable_critic_lstm=False``, ``net_arch=[]``, ``batch_size=512`` (4
  minibatches), ``n_epochs=4``, ``clip_range_vf=0.2`` (sb3's default is no value clipping), a
  linear LR schedule, on a small sb3 ``VecEnv`` (``RlperfVecEnv`` below) over the same rlperf
  environment. Network: observation -> LSTM(2, 64) -> actor Linear(64, 2) and critic
  Linear(64, 1). ``learn`` runs 2 iterations first, then the timed ``learn(...,
  reset_num_timesteps=False)``.
- ``sb3-enc`` (not in the default set): the same with an sb3 features extractor equal to
  rlperf's encoder (Linear(2, 64) + Tanh + Linear(64, 64) + Tanh) before the LSTM, to show how
  much of the gap is the encoder sb3 does not have.
- ``cleanrl``: CleanRL ``ppo_atari_lstm.py``'s loop, written out in ``rlperf.bench.cleanrl``
  (the loop ``sps.py``'s ``cleanrl`` runs too) with the CNN replaced by the same MLP encoder:
  ``nn.LSTM(64, 64)`` (orthogonal weights gain 1, zero biases) stepped one time step at a time
  in ``get_states`` with the state multiplied by ``1 - done``, actor ``layer_init(Linear(64, 2),
  std=0.01)``, critic ``layer_init(Linear(64, 1), std=1)``, rollout into torch tensors, the
  Python GAE loop, minibatches of 16 shuffled whole environments gathered through ``flatinds``,
  ``.item()`` per minibatch for the clip fraction, and once per iteration the host reads of
  what CleanRL logs to TensorBoard.

Differences that remain (the work is not identical, and the table should be read with them):
- sb3 has no encoder: its LSTM reads the 2 observed values directly, so it skips two
  (N x 2 -> 64 -> 64) linear layers forward and backward (``sb3-enc`` puts them back).
- sb3's ``shared_lstm=True`` gives the critic the LSTM output *detached*: the value loss trains
  only the value head, so sb3's backward has no value-gradient path through the LSTM (rlperf and
  CleanRL backpropagate both losses through LSTM and encoder). ``enable_critic_lstm=True``, the
  sb3 default, would instead run a second LSTM for the critic (about twice the LSTM work).
- sb3's minibatches are not whole environments: the env-major flattened batch is rotated by a
  new random offset every epoch and cut into 4 runs of 512 consecutive transitions (no shuffle
  of environments; usually 17 env fragments per minibatch), then split again at every episode
  start into separate sequences, each padded with masked rows to the longest one (up to 32
  steps). With short early CartPole episodes that is far more rows than 512 through the LSTM
  and heads, forward and backward (``padded rows/mb`` in the sb3 rows, about 1,200 in the first
  iterations; it shrinks as episodes grow), plus per-sequence ``th.tensor`` + ``pad_sequence``
  work in Python for 9 arrays every minibatch. When any sequence of the minibatch starts an
  episode (nearly always) it steps the LSTM one time step at a time, as CleanRL always does;
  otherwise it makes one ``nn.LSTM`` call over the whole sequence.
- sb3 bootstraps truncated episodes (one critic call per truncated env, in a Python loop over
  the 64 ``dones`` every step) as rlperf does; CleanRL treats truncation as termination.
- sb3's value loss is ``mean((R - V_clipped)^2)`` (no max with the unclipped loss, no 0.5);
  CleanRL's and rlperf's is ``0.5 * mean(max(unclipped, clipped))``. Same cost to within a few ops.
- sb3 keeps its rollout in numpy and copies LSTM states (actor and critic, h and c) into it
  every step, builds a list of 64 info dicts every step (as ``DummyVecEnv`` does), logs per
  iteration and reads 5 scalars to the host per minibatch (CleanRL: 1). Its LSTM has PyTorch's
  default (uniform) initialisation: ``ortho_init`` covers only the linear layers.
- CleanRL's loop and sb3 use ``nn.LSTM`` and ``torch.distributions.Categorical``; rlperf uses
  its own LSTM step and distribution code, and no host sync inside rollout or update.
- The three learn from different random streams; how long the episodes are (and so how often
  states are reset and how much sb3 pads) drifts differently as each learns. ``mean_return``
  in the JSON samples shows where each run ended. By default each implementation runs its own
  number of iterations (about 4-8 s of timed work each), so the slower ones are timed earlier
  in learning, where episodes are shortest; that matters for sb3 only (its padding shrinks as
  episodes grow; the other two always step the LSTM one time step at a time with resets).
  ``--total-steps N`` gives every implementation the same number of iterations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WARMUP_ITERS = 2
LSTM_HIDDEN = 64  # rlperf's default lstm_hidden_size; every implementation uses it
# --shape ENVSxSTEPS (default 64x32) reaches the worker processes through this variable, so
# that every implementation's module-level shape is the one asked for.
SHAPE_VAR = "LSTM_SPS_SHAPE"
NUM_ENVS, NUM_STEPS = (int(x) for x in os.environ.get(SHAPE_VAR, "64x32").split("x"))
BATCH = NUM_ENVS * NUM_STEPS
NUM_MINIBATCHES, UPDATE_EPOCHS = 4, 4
LR, GAMMA, GAE_LAMBDA, CLIP, ENT_COEF, VF_COEF, MAX_GRAD_NORM = (
    2.5e-3, 0.99, 0.95, 0.2, 0.01, 0.5, 0.5
)  # fmt: skip
IMPLS = ("rlperf", "rlperf-base", "rlperf-bptt8", "sb3", "sb3-enc", "cleanrl")
# Iterations per process (2 warm-up + timed): about 4-8 s of timed work at the speeds seen on a
# 2-core machine with 2 threads (sb3 ~5,000-6,000 SPS, cleanrl ~6,500, rlperf ~50,000 with its
# compiled kernels, ~20,000 without).
DEFAULT_ITERS = {
    "rlperf": 120, "rlperf-base": 60, "rlperf-bptt8": 120, "sb3": 14, "sb3-enc": 14,
    "cleanrl": 16,
}  # fmt: skip
# Ratios printed when both sides ran: (numerator, denominator).
RATIOS = (
    ("rlperf", "rlperf-base"), ("rlperf", "sb3"), ("rlperf", "sb3-enc"), ("rlperf", "cleanrl"),
    ("rlperf-bptt8", "sb3"), ("rlperf-bptt8", "cleanrl"), ("cleanrl", "sb3"),
)  # fmt: skip


def total_steps(impl: str, requested: int) -> int:
    """Whole iterations: the default for ``impl``, or ``requested`` rounded up (at least one
    timed iteration after the warm-up)."""
    iters = -(-requested // BATCH) if requested else DEFAULT_ITERS[impl]
    return max(iters, WARMUP_ITERS + 1) * BATCH


def _make_env(seed: int):  # noqa: ANN202
    from rlperf.envs import make_vec

    return make_vec("cartpole", NUM_ENVS, seed=seed, observe="position")


# -- rlperf -----------------------------------------------------------------------------------
def worker_rlperf(total: int, threads: int, seed: int, bptt_horizon: int = 0) -> dict:
    from rlperf.config import Config
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    cfg = Config()
    cfg.policy.kind = "lstm"
    cfg.policy.lstm_hidden_size = LSTM_HIDDEN
    cfg.ppo.bptt_horizon = bptt_horizon
    cfg.ppo.learning_rate, cfg.ppo.gamma, cfg.ppo.gae_lambda = LR, GAMMA, GAE_LAMBDA
    cfg.ppo.clip_coef, cfg.ppo.ent_coef, cfg.ppo.vf_coef = CLIP, ENT_COEF, VF_COEF
    cfg.ppo.max_grad_norm = MAX_GRAD_NORM
    cfg.env.options = {"observe": "position"}
    cfg.env.num_envs, cfg.ppo.num_steps = NUM_ENVS, NUM_STEPS
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = total, threads, False
    cfg.run.warmup_iters = WARMUP_ITERS
    cfg.run.seed = seed
    trainer = Trainer(cfg, profiler=Profiler())
    timed: dict[str, float] = {}
    timed_iters = [0]

    def collect_sections(tr, row: dict) -> None:  # noqa: ANN001
        if row["iteration"] > WARMUP_ITERS:
            timed_iters[0] += 1
            for name, seconds in row.get("sections_s", {}).items():
                timed[name] = timed.get(name, 0.0) + seconds

    trainer.callbacks.append(collect_sections)
    summary = trainer.train()
    result = {"sps": summary["sps_cumulative"], "mean_return": summary.get("mean_return_last_100")}
    if timed_iters[0]:
        n = timed_iters[0]
        result["rollout_ms"] = 1e3 * (timed.get("rollout", 0.0) + timed.get("gae", 0.0)) / n
        result["update_ms"] = 1e3 * timed.get("update", 0.0) / n
        result["sections_s"] = timed
    return result


# -- stable-baselines3 / sb3-contrib ----------------------------------------------------------
def _sb3_vec_env(env):  # noqa: ANN001, ANN202 - local factory (sb3 imported in the worker only)
    import numpy as np
    from stable_baselines3.common.vec_env import VecEnv

    class RlperfVecEnv(VecEnv):
        """sb3 ``VecEnv`` over a gymnasium 1.x vector env with same-step autoreset."""

        def __init__(self, venv) -> None:  # noqa: ANN001
            self.venv = venv
            self._actions = None
            super().__init__(venv.num_envs, venv.single_observation_space,
                             venv.single_action_space)  # fmt: skip

        def reset(self):  # noqa: ANN202
            obs, _ = self.venv.reset(seed=self._seeds[0])
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions) -> None:  # noqa: ANN001
            self._actions = actions

        def step_wait(self):  # noqa: ANN202
            obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
            dones = terminated | truncated
            # As DummyVecEnv: one info dict per env, every step.
            env_infos: list[dict] = [{} for _ in range(self.num_envs)]
            if infos and dones.any():
                final_obs, ep = infos["final_obs"], infos["episode"]
                for i in np.flatnonzero(dones):
                    env_infos[i] = {
                        "terminal_observation": final_obs[i],
                        "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
                        "episode": {"r": float(ep["r"][i]), "l": int(ep["l"][i])},
                    }
            return obs, rewards, dones, env_infos

        def close(self) -> None:
            self.venv.close()

        def get_attr(self, attr_name: str, indices=None) -> list:  # noqa: ANN001
            n = len(list(self._get_indices(indices)))
            if attr_name == "render_mode":
                return [None] * n
            return [getattr(self.venv, attr_name)] * n

        def set_attr(self, attr_name: str, value, indices=None) -> None:  # noqa: ANN001
            setattr(self.venv, attr_name, value)

        def env_method(self, method_name: str, *args, indices=None, **kwargs) -> list:  # noqa: ANN001, ANN002, ANN003
            n = len(list(self._get_indices(indices)))
            return [getattr(self.venv, method_name)(*args, **kwargs)] * n

        def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:  # noqa: ANN001
            return [False] * len(list(self._get_indices(indices)))

    return RlperfVecEnv(env)


def worker_sb3(total: int, threads: int, seed: int, encoder: bool) -> dict:
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO

    torch.set_num_threads(threads)
    policy_kwargs = dict(
        lstm_hidden_size=LSTM_HIDDEN, n_lstm_layers=1, shared_lstm=True, enable_critic_lstm=False,
        net_arch=[], ortho_init=True,
    )  # fmt: skip
    if encoder:
        from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
        from torch import nn

        class MlpEncoder(BaseFeaturesExtractor):
            """rlperf's encoder: Linear(obs, 64) + Tanh + Linear(64, 64) + Tanh."""

            def __init__(self, observation_space, features_dim: int = 64) -> None:  # noqa: ANN001
                super().__init__(observation_space, features_dim)
                n_in = int(np.prod(observation_space.shape))
                self.net = nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(),
                                         nn.Linear(64, features_dim), nn.Tanh())  # fmt: skip

            def forward(self, obs: torch.Tensor) -> torch.Tensor:
                return self.net(obs.flatten(1))

        policy_kwargs["features_extractor_class"] = MlpEncoder
    venv = _sb3_vec_env(_make_env(seed))
    model = RecurrentPPO(
        "MlpLstmPolicy", venv, n_steps=NUM_STEPS, batch_size=BATCH // NUM_MINIBATCHES,
        n_epochs=UPDATE_EPOCHS, learning_rate=lambda progress: LR * progress, gamma=GAMMA,
        gae_lambda=GAE_LAMBDA, clip_range=CLIP, clip_range_vf=CLIP, ent_coef=ENT_COEF,
        vf_coef=VF_COEF, max_grad_norm=MAX_GRAD_NORM, policy_kwargs=policy_kwargs,
        device="cpu", seed=seed, verbose=0,
    )  # fmt: skip
    # Per-iteration timers and the padded minibatch sizes, by wrapping the bound methods.
    times = {"rollout": 0.0, "update": 0.0}
    padded: list[int] = []
    collect, train = model.collect_rollouts, model.train
    get_samples = model.rollout_buffer._get_samples

    def timed_collect(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        t = time.perf_counter()
        out = collect(*args, **kwargs)
        times["rollout"] += time.perf_counter() - t
        return out

    def timed_train() -> None:
        t = time.perf_counter()
        train()
        times["update"] += time.perf_counter() - t

    def counted_samples(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        samples = get_samples(*args, **kwargs)
        padded.append(len(samples.mask))
        return samples

    model.collect_rollouts, model.train = timed_collect, timed_train
    model.rollout_buffer._get_samples = counted_samples
    model.learn(total_timesteps=WARMUP_ITERS * BATCH)
    times.update(rollout=0.0, update=0.0)
    padded.clear()
    steps0 = model.num_timesteps
    t0 = time.perf_counter()
    model.learn(total_timesteps=total - WARMUP_ITERS * BATCH, reset_num_timesteps=False)
    elapsed = time.perf_counter() - t0
    steps = model.num_timesteps - steps0
    iters = steps // BATCH
    returns = [ep["r"] for ep in model.ep_info_buffer]
    return {
        "sps": steps / elapsed,
        "rollout_ms": 1e3 * times["rollout"] / iters,
        "update_ms": 1e3 * times["update"] / iters,
        "padded_rows_per_mb": statistics.fmean(padded) if padded else None,
        "mean_return": statistics.fmean(returns) if returns else None,
    }


# -- CleanRL ppo_atari_lstm.py, on the MLP encoder ----------------------------------------------
def worker_cleanrl(total: int, threads: int, seed: int) -> dict:
    # Imported here, not at the top: the rlperf-base worker runs an older tree without it.
    from rlperf.bench.cleanrl import PPOCoefs, run_lstm

    coefs = PPOCoefs(learning_rate=LR, gamma=GAMMA, gae_lambda=GAE_LAMBDA, clip_coef=CLIP,
                     ent_coef=ENT_COEF, vf_coef=VF_COEF, max_grad_norm=MAX_GRAD_NORM,
                     num_minibatches=NUM_MINIBATCHES, update_epochs=UPDATE_EPOCHS)  # fmt: skip
    return run_lstm(total, threads, seed, num_envs=NUM_ENVS, num_steps=NUM_STEPS,
                    hidden=LSTM_HIDDEN, coefs=coefs, warmup_iters=WARMUP_ITERS)  # fmt: skip


def run_worker(args: argparse.Namespace) -> None:
    impl, total, threads, seed = args.worker, args.total_steps, args.threads, args.seed
    if impl in ("rlperf", "rlperf-base"):  # rlperf-base: another src/ first on the path
        result = worker_rlperf(total, threads, seed)
    elif impl == "rlperf-bptt8":
        result = worker_rlperf(total, threads, seed, bptt_horizon=8)
    elif impl in ("sb3", "sb3-enc"):
        result = worker_sb3(total, threads, seed, encoder=impl == "sb3-enc")
    elif impl == "cleanrl":
        result = worker_cleanrl(total, threads, seed)
    else:
        raise SystemExit(f"lstm_sps.py: error: unknown implementation {impl!r}")
    print(json.dumps(result))


# -- driver -------------------------------------------------------------------------------------
def measure(impl: str, total: int, threads: int, seed: int, base_src: str | None) -> dict:
    env = dict(os.environ)
    if impl == "rlperf-base":
        env["PYTHONPATH"] = base_src + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--worker", impl, "--total-steps", str(total),
           "--threads", str(threads), "--seed", str(seed)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"lstm_sps.py: error: {impl} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(results: dict[str, list[dict]], threads: int, rounds: int) -> None:
    # Imported here, not at the top: a worker may run an older tree (--base-src) without it.
    from rlperf.bench.harness import spread

    print(f"\nLSTM PPO SPS, position-only CartPole, {NUM_ENVS} envs x {NUM_STEPS} steps, "
          f"{NUM_MINIBATCHES} minibatches x {UPDATE_EPOCHS} epochs, {threads} torch threads; "
          f"median [min - max] of {rounds} processes each, interleaved\n")  # fmt: skip
    print(f"{'implementation':<14} {'median SPS':>11} {'range':>21}   {'rollout ms/it':>13} "
          f"{'update ms/it':>12}")  # fmt: skip
    for impl, samples in results.items():
        sps = [s["sps"] for s in samples]
        parts = [f"{impl:<14} {statistics.median(sps):>11,.0f} {min(sps):>9,.0f} - "
                 f"{max(sps):>9,.0f}  "]  # fmt: skip
        for key, width in (("rollout_ms", 13), ("update_ms", 12)):
            vals = [s[key] for s in samples if s.get(key) is not None]
            parts.append(f" {statistics.median(vals):>{width}.1f}" if vals else f" {'-':>{width}}")
        padded = [s["padded_rows_per_mb"] for s in samples if s.get("padded_rows_per_mb")]
        if padded:
            parts.append(f"   (padded rows/mb {statistics.median(padded):.0f} of "
                         f"{BATCH // NUM_MINIBATCHES})")  # fmt: skip
        print("".join(parts))
    print()
    for num, den in RATIOS:
        if num not in results or den not in results:
            continue
        a = [s["sps"] for s in results[num]]
        b = [s["sps"] for s in results[den]]
        of_medians = statistics.median(a) / statistics.median(b)
        paired = [x / y for x, y in zip(a, b, strict=True)]
        print(f"{num + ' / ' + den:<18} ratio of medians {of_medians:6.2f}x   "
              f"paired by round: median {spread(paired, '.2f')}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--impls", default="rlperf,rlperf-bptt8,sb3,cleanrl",
                    help=f"of {', '.join(IMPLS)} (default: %(default)s)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5, help="processes per implementation")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--total-steps", type=int, default=0,
                    help="env steps per process, warm-up included, rounded up to whole "
                    f"iterations of {BATCH} (0: per-implementation default)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=1, help="seed of round 1 (round r: seed + r - 1)")
    ap.add_argument("--json", help="write all samples to this file")
    ap.add_argument("--base-src", help="a src/ tree of an older rlperf (with its C extensions "
                    "built in place, if it has any), run as rlperf-base: before/after")  # fmt: skip
    ap.add_argument("--shape", default=None, metavar="ENVSxSTEPS",
                    help=f"environments x steps per iteration (default {NUM_ENVS}x{NUM_STEPS}); "
                    "minibatches of a quarter of the batch, as at the default")  # fmt: skip
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.shape is not None:
        from rlperf.bench.harness import parse_shape  # noqa: PLC0415  (workers import later)

        try:
            envs, steps = parse_shape(args.shape)
        except argparse.ArgumentTypeError as e:
            ap.error(f"--shape: {e}")
        if envs < NUM_MINIBATCHES or steps < 1:
            ap.error(f"--shape {args.shape}: at least {NUM_MINIBATCHES} envs (one per "
                     "minibatch) and 1 step")  # fmt: skip
        # Re-run this process with the shape in the environment: every module-level figure
        # (BATCH, the iteration counts) is then the one asked for, here and in the workers.
        os.environ[SHAPE_VAR] = f"{envs}x{steps}"
        argv, skip = [], False
        for a in sys.argv[1:]:
            if not skip and a != "--shape" and not a.startswith("--shape="):
                argv.append(a)
            skip = a == "--shape"
        os.execv(sys.executable, [sys.executable, __file__, *argv])
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    if "rlperf-base" in impls:
        ap.error("rlperf-base is not an --impls entry: give --base-src SRC to add it")
    if args.base_src:
        if not os.path.isfile(os.path.join(args.base_src, "rlperf", "__init__.py")):
            ap.error(f"--base-src {args.base_src}: no rlperf package there")
        impls.insert(1, "rlperf-base")
    unknown = [i for i in impls if i not in IMPLS]
    if unknown or not impls:
        ap.error(f"unknown implementation(s) {unknown}; choose from {', '.join(IMPLS)}")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"lstm_sps.py: warning: load average {load_before:.2f} before starting "
              f"({os.cpu_count()} cores): if other processes are running, the timings are "
              "distorted", file=sys.stderr)  # fmt: skip
    results: dict[str, list[dict]] = {impl: [] for impl in impls}
    for r in range(args.rounds):
        # Alternate the order so that no implementation always runs first after another.
        for impl in impls if r % 2 == 0 else impls[::-1]:
            total = total_steps(impl, args.total_steps)
            sample = measure(impl, total, args.threads, args.seed + r, args.base_src)
            sample["total_steps"] = total
            results[impl].append(sample)
            print(f"  round {r + 1}/{args.rounds} {impl:<8} {sample['sps']:>10,.0f} SPS",
                  file=sys.stderr, flush=True)  # fmt: skip
    print_table(results, args.threads, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            record = {"threads": args.threads, "rounds": args.rounds, "num_envs": NUM_ENVS,
                      "num_steps": NUM_STEPS, "seed": args.seed, "load_before": load_before,
                      "results": results}  # fmt: skip
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
