"""How near the Atari update comes to this CPU's float32 matmul peak (issue #47, "Near the limit").

    python benchmarks/atari_limit.py                      # 2 threads, 5 rounds, ~1 min
    python benchmarks/atari_limit.py --quick              # ~10 s: 2 rounds, 256 frames
    python benchmarks/atari_limit.py --threads 1 --rounds 7 --json atari_limit.json
    python benchmarks/atari_limit.py --variants default,compile   # compile: minutes to start

In one process, interleaved over ``--rounds`` rounds (each round runs every variant, in an
order rotated by round), it measures:

1. the peak: ``torch.mm`` of square float32 matrices (``--mm-sizes``, 2048 and 4096) on the
   same ``--threads``, GFLOP/s (``2 n^3`` a product); a round's peak is its best size;
2. rlperf's Atari update as the trainer runs it: ``Trainer.update()`` of ``--preset atari``
   (its Nature CNN, its update class, ``AutogradUpdate``) on a ``--batch``-frame rollout of
   uint8 4x84x84 frames (random frames in the rollout buffer, an env of the right spaces that
   never steps: no emulator), ``--minibatches`` minibatches x 1 epoch, thread adaptation off so
   the update runs on exactly ``--threads``; and the CNN's forward and forward+backward on one
   minibatch (``evaluate``, and the gradients of a sum of its outputs);
3. each layer alone on one minibatch: its forward and its backward (``autograd.grad`` of the
   layer's output), what torch's own convolutions and matmuls reach here: the limit.

FLOPs are counted, not measured: a multiply-add is 2 FLOP; a convolution's forward is
``2 Cin kh kw Cout Hout Wout`` a frame, a linear layer's ``2 in out``; backward is twice the
forward (input and weight gradients) except for the first convolution, whose input needs no
gradient (1x). Biases, ReLUs, the /255, the loss and Adam are not counted (they are the
"non-FLOP" costs below). GFLOP/s = counted FLOPs / median seconds; the fraction of peak is
paired, a round's rate over the same round's peak.

Where the rest goes: one update of ``default`` under torch.profiler, its operators' self time
grouped (convolutions, matmuls, ReLU, uint8->float /255, the minibatch gather, the loss and
distribution, gradient zeroing and accumulation, clip_grad_norm, Adam), the remainder Python
and autograd's own work; and each non-FLOP piece timed alone.

Variants (``--variants``, paired against ``default``, the encoder as rlperf builds it):
``nchw`` (the frames to the convolutions in NCHW, not the encoder's channels-last on the CPU),
``no_mkldnn``
(``torch.backends.mkldnn`` off), ``bf16`` (``--precision bf16``: autocast in the update),
``compile`` (``--compile``; not in the default set, not yet measured: compiling a forward and
backward took minutes for the ConvLSTM on 2 cores; the warm-up update absorbs it).

Prints a table and, with ``--json PATH``, writes every figure. Run on an idle machine; the
figures in docs/atari.md say when they were not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

# What --quick changes (an explicit flag still wins).
QUICK = {"rounds": 2, "batch": 256, "mm_sizes": "512,1024", "variants": "default,nchw"}
DEFAULTS = {"rounds": 5, "batch": 1024, "mm_sizes": "2048,4096",
            "variants": "default,nchw,no_mkldnn,bf16"}  # fmt: skip
VARIANTS = ("default", "nchw", "no_mkldnn", "bf16", "compile")
ENV_NAME = "atari_limit_frames"
FRAMES, ACTIONS = (4, 84, 84), 4


# -- an env with Atari's spaces that never steps ----------------------------------------------
def register_frames_env() -> None:
    """Register :data:`ENV_NAME`: 4x84x84 uint8 frames, 4 actions. The trainer resets it once;
    the rollout buffer is then filled with random frames, so no emulator is needed."""
    from gymnasium import spaces
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space

    from rlperf.envs.registry import factory_of, register

    class FramesVec(VectorEnv):
        metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

        def __init__(self, num_envs: int) -> None:
            self.num_envs = num_envs
            self.single_observation_space = spaces.Box(0, 255, FRAMES, dtype=np.uint8)
            self.single_action_space = spaces.Discrete(ACTIONS)
            self.observation_space = batch_space(self.single_observation_space, num_envs)
            self.action_space = batch_space(self.single_action_space, num_envs)

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
            return np.zeros((self.num_envs, *FRAMES), np.uint8), {}

    if factory_of(ENV_NAME) is None:
        register(ENV_NAME, FramesVec)


def make_trainer(batch: int, minibatches: int, threads: int, variant: str) -> Any:
    """``--preset atari`` on :data:`ENV_NAME`, 8 envs x ``batch/8`` steps, one epoch, its rollout
    buffer filled with seeded random frames, actions, values and advantages."""
    from rlperf.config import preset
    from rlperf.ppo.trainer import Trainer

    cfg = preset("atari")
    cfg.env.env, cfg.env.options = ENV_NAME, {}
    cfg.env.num_envs, cfg.ppo.num_steps = 8, batch // 8
    cfg.ppo.num_minibatches, cfg.ppo.update_epochs, cfg.ppo.anneal_lr = minibatches, 1, False
    cfg.ppo.precision = "bf16" if variant == "bf16" else "fp32"
    cfg.ppo.compile = variant == "compile"
    cfg.run.threads, cfg.run.adapt_threads = threads, False
    cfg.run.seed, cfg.run.progress, cfg.run.telemetry = 1, False, False
    trainer = Trainer(cfg)
    buf, gen = trainer.buffer, torch.Generator().manual_seed(1)
    buf.obs.copy_(torch.randint(0, 256, buf.obs.shape, dtype=torch.uint8, generator=gen))
    buf.actions.copy_(torch.randint(0, ACTIONS, buf.actions.shape, generator=gen))
    buf.logprobs.fill_(-math.log(ACTIONS))  # the initial, near-uniform policy's
    buf.values.normal_(generator=gen)
    buf.advantages.normal_(generator=gen)
    encoder = trainer.policy.encoder
    if variant == "nchw":
        encoder.channels_last = False
    return trainer


def variant_context(variant: str) -> contextlib.AbstractContextManager:
    """What a variant wraps each timed call in."""
    if variant == "no_mkldnn":
        return torch.backends.mkldnn.flags(enabled=False)
    return contextlib.nullcontext()


# -- FLOPs -------------------------------------------------------------------------------------
@dataclass
class Layer:
    name: str
    module: nn.Module
    in_shape: tuple[int, ...]  # one frame's input to the layer
    forward: int  # FLOP a frame
    backward: int


def count_layers(policy: Any) -> list[Layer]:
    """The Nature CNN's convolutions and linear layers with their FLOPs a frame (module
    docstring's convention)."""
    encoder, layers = policy.encoder, []
    c, h, w = FRAMES
    convs = [m for m in encoder.convs if isinstance(m, nn.Conv2d)]
    for i, conv in enumerate(convs):
        (kh, kw), (sh, sw), (ph, pw) = conv.kernel_size, conv.stride, conv.padding
        ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        fwd = 2 * conv.in_channels * kh * kw * conv.out_channels * ho * wo
        layers.append(Layer(f"conv{i + 1}", conv, (c, h, w), fwd, fwd if i == 0 else 2 * fwd))
        c, h, w = conv.out_channels, ho, wo
    for name, lin in (("fc", encoder.fc[0]), ("heads", policy.out.linear)):
        fwd = 2 * lin.in_features * lin.out_features
        layers.append(Layer(name, lin, (lin.in_features,), fwd, 2 * fwd))
    return layers


# -- timing ------------------------------------------------------------------------------------
def seconds(fn: Callable[[], object], calls: int) -> float:
    """Median wall seconds of ``calls`` calls of ``fn``."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def mm_gflops(n: int, calls: int, mats: dict[int, tuple[torch.Tensor, ...]]) -> float:
    """GFLOP/s of ``torch.mm`` of two ``n x n`` float32 matrices into a preallocated output."""
    a, b, out = mats[n]
    return 2 * n**3 / seconds(lambda: torch.mm(a, b, out=out), calls) / 1e9


def cnn_seconds(trainer: Any, frames: torch.Tensor, actions: torch.Tensor) -> tuple[float, float]:
    """(forward, forward + backward) seconds of ``evaluate`` on one minibatch, as the update
    runs it (under its autocast, through its compiled ``evaluate`` if any)."""
    impl = trainer.update_impl

    def forward() -> torch.Tensor:
        with impl._autocast():
            logprob, entropy, value = impl.evaluate(frames[None], actions[None], (), None, None)
        return logprob.float().sum() + entropy.float().sum() + value.float().sum()

    def both() -> None:
        forward().backward()

    return seconds(forward, 2), seconds(both, 2)


def layer_seconds(
    trainer: Any, frames: torch.Tensor, variant: str
) -> dict[str, tuple[float, float]]:
    """Each layer alone on one minibatch: (forward, backward) seconds, the backward being the
    gradients of its output with respect to its parameters (and its input, but the first)."""
    encoder, layers = trainer.policy.encoder, count_layers(trainer.policy)
    bf16 = trainer.update_impl.autocast_dtype is not None
    cast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with torch.no_grad():
        x = encoder.scale(frames)  # channels-last where the encoder makes it so
    out = {}
    for i, layer in enumerate(layers):
        if layer.name == "fc":
            x = x.flatten(1)
        x = x.detach().requires_grad_(i > 0)

        def fwd(layer: Layer = layer, x: torch.Tensor = x) -> torch.Tensor:
            with cast:
                return layer.module(x)

        y = fwd()
        grad_out = torch.randn_like(y)
        inputs = [*([x] if i > 0 else []), *layer.module.parameters()]
        t_fwd = seconds(fwd, 3)
        t_bwd = seconds(lambda y=y, g=grad_out, inp=inputs: torch.autograd.grad(  # type: ignore[misc]
            y, inp, g, retain_graph=True), 3)  # fmt: skip
        out[layer.name] = (t_fwd, t_bwd)
        x = torch.relu(y.detach()).float()  # keeps the layout
    return out


def nonflop_seconds(trainer: Any, frames: torch.Tensor) -> dict[str, float]:
    """The update's non-FLOP pieces alone, per minibatch."""
    from rlperf.policies.base import clip_grad_norm

    impl, encoder = trainer.update_impl, trainer.policy.encoder
    with torch.no_grad():
        convert = seconds(lambda: encoder.scale(frames), 5)
    clip = seconds(lambda: clip_grad_norm(impl.grad, trainer.cfg.ppo.max_grad_norm), 5)
    zero = seconds(impl.grad.zero_, 5)
    adam = seconds(impl.optimizer.step, 5)
    return {"uint8->float /255": convert, "clip_grad_norm": clip, "grad zero_": zero,
            "Adam (fused, flat)": adam}  # fmt: skip


# -- the profiled update -----------------------------------------------------------------------
def category(name: str, shapes: list[Any], flat_numel: int) -> str:
    """An operator's group for "where the rest goes"."""
    first = shapes[0] if shapes else []
    if "conv" in name:
        return "convolutions"
    if name in ("aten::mm", "aten::addmm", "aten::bmm"):
        return "matmuls (fc, heads)"
    if name in ("aten::clamp_min", "aten::relu", "aten::relu_", "aten::threshold_backward"):
        return "ReLU forward and backward"
    if name in ("aten::index_select", "aten::index", "aten::randperm", "aten::take"):
        return "minibatch gather"
    if "adam" in name or "foreach" in name:
        return "Adam"
    if name == "aten::linalg_vector_norm" or (name == "aten::mul_" and first == [flat_numel]):
        return "clip_grad_norm"
    if name in ("aten::fill_", "aten::zero_") and first == [flat_numel]:
        return "grad zero_"
    if name == "aten::add_":
        return "grad accumulation (add_ into .grad)"
    if name in ("aten::copy_", "aten::_to_copy", "aten::mul_", "aten::to") and len(first) == 4:
        return "uint8->float /255 (and layout copies)"
    return "loss, distribution, other ops"


def profile_update(trainer: Any, variant: str) -> dict[str, Any]:
    """One update under torch.profiler: seconds per group of operators' self time, and the
    wall time the operators do not account for (Python, autograd's engine, the profiler)."""
    from torch.profiler import ProfilerActivity, profile

    flat_numel = trainer.update_impl.grad.numel()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        with variant_context(variant):
            trainer.update()
        wall = time.perf_counter() - t0
    groups: dict[str, float] = {}
    for ev in prof.key_averages(group_by_input_shape=True):
        if ev.key.startswith(("autograd::", "ProfilerStep", "## ")) or ev.self_cpu_time_total <= 0:
            continue
        group = category(ev.key, list(ev.input_shapes or []), flat_numel)
        groups[group] = groups.get(group, 0.0) + ev.self_cpu_time_total / 1e6
    groups["Python, autograd engine, profiler (unaccounted)"] = max(wall - sum(groups.values()), 0)
    return {"wall_s": wall, "groups_s": dict(sorted(groups.items(), key=lambda kv: -kv[1]))}


# -- the run -----------------------------------------------------------------------------------
def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    register_frames_env()
    variants = args.variants
    trainers = {v: make_trainer(args.batch, args.minibatches, args.threads, v) for v in variants}
    base = trainers[variants[0]]
    layers = count_layers(base.policy)
    mb = args.batch // args.minibatches
    frames = base.buffer.obs.view(-1, *FRAMES)[:mb].clone()
    actions = base.buffer.actions.view(-1)[:mb].clone()
    per_frame_fwd = sum(layer.forward for layer in layers)
    per_frame = per_frame_fwd + sum(layer.backward for layer in layers)
    update_flop = per_frame * args.batch  # one epoch: every frame once, forward and backward
    mats = {n: (torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)) for n in args.mm_sizes}
    t_start = time.perf_counter()
    for n in args.mm_sizes:  # warm-up: pages, oneDNN's primitives, compile
        mm_gflops(n, 1, mats)
    compile_s = {}
    for v, tr in trainers.items():
        t0 = time.perf_counter()
        with variant_context(v):
            tr.update()
            cnn_seconds(tr, frames, actions)
        compile_s[v] = time.perf_counter() - t0
    rows: dict[str, dict[str, list[Any]]] = {
        v: {"update_s": [], "fwd_s": [], "fwdbwd_s": [], "layers": [], "nonflop": []}
        for v in variants
    }
    peaks: dict[int, list[float]] = {n: [] for n in args.mm_sizes}
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants) :] + variants[: rnd % len(variants)]
        for n in args.mm_sizes:
            peaks[n].append(mm_gflops(n, 3 if n <= 2048 else 1, mats))
        for v in order:
            tr, row = trainers[v], rows[v]
            with variant_context(v):
                row["update_s"].append(seconds(tr.update, args.updates))
                fwd, both = cnn_seconds(tr, frames, actions)
                row["fwd_s"].append(fwd)
                row["fwdbwd_s"].append(both)
                if v != "compile":
                    row["layers"].append(layer_seconds(tr, frames, v))
                if v == variants[0]:
                    row["nonflop"].append(nonflop_seconds(tr, frames))
        print(f"round {rnd + 1}/{args.rounds} done ({time.perf_counter() - t_start:.0f} s)",
              file=sys.stderr, flush=True)  # fmt: skip
    profiled = profile_update(base, variants[0])
    round_peak = [max(peaks[n][r] for n in args.mm_sizes) for r in range(args.rounds)]
    result: dict[str, Any] = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": args.threads,
        "rounds": args.rounds,
        "batch": args.batch,
        "minibatch": mb,
        "update_class": type(base.update_impl).__name__,
        "encoder_channels_last": base.policy.encoder.channels_last,
        "flop_convention": "multiply-add = 2; conv fwd 2*Cin*kh*kw*Cout*Hout*Wout a frame, "
        "linear 2*in*out; backward 2x forward, 1x for the first conv (no input grad); "
        "biases, ReLU, /255, loss, Adam not counted",
        "layers": [
            {"name": x.name, "fwd_flop_per_frame": x.forward, "bwd_flop_per_frame": x.backward}
            for x in layers
        ],  # fmt: skip
        "flop_per_frame": per_frame,
        "update_gflop": update_flop / 1e9,
        "mm_gflops": {str(n): summary(peaks[n]) for n in args.mm_sizes},
        "peak_gflops": summary(round_peak),
        "first_call_s": compile_s,
        "variants": {},
        "profile": profiled,
    }
    for v in variants:
        row = rows[v]
        rates = [update_flop / t / 1e9 for t in row["update_s"]]
        var: dict[str, Any] = {
            "update_s": summary(row["update_s"]),
            "update_gflops": summary(rates),
            "update_fraction_of_peak": summary(
                [r / p for r, p in zip(rates, round_peak, strict=True)]
            ),
            "cnn_fwd_s": summary(row["fwd_s"]),
            "cnn_fwdbwd_s": summary(row["fwdbwd_s"]),
            "cnn_fwdbwd_gflops": summary([per_frame * mb / t / 1e9 for t in row["fwdbwd_s"]]),
        }
        if v != variants[0]:
            base_row = rows[variants[0]]
            var["update_speedup_paired"] = summary(
                [b / t for b, t in zip(base_row["update_s"], row["update_s"], strict=True)]
            )
            var["cnn_fwdbwd_speedup_paired"] = summary(
                [b / t for b, t in zip(base_row["fwdbwd_s"], row["fwdbwd_s"], strict=True)]
            )
        if row["layers"]:
            var["layers"] = {}
            for x in layers:
                f = [r[x.name][0] for r in row["layers"]]
                b = [r[x.name][1] for r in row["layers"]]
                var["layers"][x.name] = {
                    "fwd_s": summary(f),
                    "bwd_s": summary(b),
                    "fwd_fraction_of_peak": statistics.median(
                        [x.forward * mb / t / 1e9 / p
                         for t, p in zip(f, round_peak, strict=True)]),
                    "bwd_fraction_of_peak": statistics.median(
                        [x.backward * mb / t / 1e9 / p
                         for t, p in zip(b, round_peak, strict=True)]),
                }  # fmt: skip
        if row["nonflop"]:
            var["nonflop_s"] = {k: statistics.median(r[k] for r in row["nonflop"])
                                for k in row["nonflop"][0]}  # fmt: skip
        result["variants"][v] = var
    return result


def report(res: dict[str, Any]) -> None:
    def mr(s: dict[str, float], scale: float = 1.0, fmt: str = ".1f") -> str:
        return (f"{s['median'] * scale:{fmt}} [{s['min'] * scale:{fmt}}-"
                f"{s['max'] * scale:{fmt}}]")  # fmt: skip

    print(f"torch {res['torch']} ({res['cpu_capability']}), {res['threads']} threads, "
          f"{res['rounds']} rounds, medians [min-max]; update class {res['update_class']}, "
          f"channels-last: {res['encoder_channels_last']}")  # fmt: skip
    print("\nFLOPs a frame (" + res["flop_convention"] + "):")
    for x in res["layers"]:
        print(f"  {x['name']:<6} forward {x['fwd_flop_per_frame'] / 1e6:7.3f} M  "
              f"backward {x['bwd_flop_per_frame'] / 1e6:7.3f} M")  # fmt: skip
    print(f"  total  {res['flop_per_frame'] / 1e6:.2f} MFLOP a frame; one epoch of "
          f"{res['batch']} frames: {res['update_gflop']:.2f} GFLOP (the preset's 4 epochs: "
          f"{4 * res['update_gflop']:.1f})")  # fmt: skip
    print("\ntorch.mm peak, GFLOP/s:")
    for n, s in res["mm_gflops"].items():
        print(f"  {n}x{n}: {mr(s)}")
    print(f"  peak (a round's best): {mr(res['peak_gflops'])}")
    for v, var in res["variants"].items():
        print(f"\n[{v}] update ({res['minibatch']}-frame minibatches x "
              f"{res['batch'] // res['minibatch']}): {mr(var['update_s'], 1e3, '.0f')} ms, "
              f"{mr(var['update_gflops'])} GFLOP/s, "
              f"{mr(var['update_fraction_of_peak'], 100, '.0f')}% of peak")  # fmt: skip
        print(
            f"  CNN per minibatch: forward {mr(var['cnn_fwd_s'], 1e3)} ms, forward+backward "
            f"{mr(var['cnn_fwdbwd_s'], 1e3)} ms ({mr(var['cnn_fwdbwd_gflops'])} GFLOP/s)"
        )
        if "update_speedup_paired" in var:
            print(f"  vs {next(iter(res['variants']))}, paired: update "
                  f"{mr(var['update_speedup_paired'], 1, '.2f')}x, CNN fwd+bwd "
                  f"{mr(var['cnn_fwdbwd_speedup_paired'], 1, '.2f')}x")  # fmt: skip
        for name, lay in var.get("layers", {}).items():
            print(f"  {name:<6} forward {lay['fwd_s']['median'] * 1e3:7.2f} ms "
                  f"({100 * lay['fwd_fraction_of_peak']:3.0f}% of peak)  backward "
                  f"{lay['bwd_s']['median'] * 1e3:7.2f} ms "
                  f"({100 * lay['bwd_fraction_of_peak']:3.0f}%)")  # fmt: skip
        for name, t in var.get("nonflop_s", {}).items():
            print(f"  {name:<20} {t * 1e3:7.2f} ms alone")
    prof = res["profile"]
    print(f"\nWhere one update's {prof['wall_s'] * 1e3:.0f} ms go (torch.profiler, self time; "
          f"the profiler adds a little):")  # fmt: skip
    for name, s in prof["groups_s"].items():
        print(f"  {name:<48} {s * 1e3:8.1f} ms  {100 * s / prof['wall_s']:4.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, help=f"default {DEFAULTS['rounds']}")
    ap.add_argument(
        "--batch", type=int, help=f"frames of the rollout (default {DEFAULTS['batch']})"
    )
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--updates", type=int, default=1, help="timed updates per variant a round")
    ap.add_argument("--mm-sizes", help=f"square matmul sizes (default {DEFAULTS['mm_sizes']})")
    ap.add_argument("--variants", help=f"comma-separated, the first the baseline, of "
                    f"{', '.join(VARIANTS)} (default {DEFAULTS['variants']})")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help=f"~10 s: {QUICK}")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.mm_sizes = [int(n) for n in str(args.mm_sizes).split(",")]
    args.variants = args.variants.split(",")
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or len(set(args.variants)) != len(args.variants):
        ap.error(
            f"--variants: unknown or repeated {unknown or args.variants}; choose from {VARIANTS}"
        )
    if min(args.threads, args.rounds, args.updates, args.minibatches, *args.mm_sizes) < 1:
        ap.error("--threads, --rounds, --updates, --minibatches and --mm-sizes must be >= 1")
    if args.batch % 8 or args.batch % args.minibatches or args.batch < 8:
        ap.error("--batch must be a multiple of 8 (envs) and of --minibatches")
    res = run(args)
    report(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
