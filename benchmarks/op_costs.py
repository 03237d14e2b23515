"""What the update's operations cost on this machine. README's "Where the time goes" quotes it.

    python benchmarks/op_costs.py                 # 2 threads, 40 timed calls per figure
    python benchmarks/op_costs.py --threads 1 --calls 80

Each figure is the median of ``--calls`` timed calls after 5 untimed ones, in one process, on
buffers allocated once (as the trainer's workspaces are):

- an 8192x64x64 float32 matmul (``torch.mm``), in microseconds and GFLOP/s, with 1 and with
  ``--threads`` threads: the hidden layer's cost per network and pass;
- ``sigmoid_`` and ``tanh_`` over float32 tensors from 0.25 to 64 MiB, with the implied
  throughput (bytes read + written per second): a rate that does not fall as the tensor
  outgrows the caches means the op is compute-bound, not memory-bound;
- the output layer's skinny matmul (2 outputs from 64 hidden units, both networks, B=8192) in
  the three layouts tried: ``h @ W``, ``W^T @ h^T`` with ``W^T`` a transposed view, and with
  ``W^T`` contiguous (how ``policies/mlp.py`` stores it);
- the PPO loss with its closed-form head gradients (``ppo/loss.py``) at B=512 and B=8192.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import torch

from rlperf.ppo.loss import STAT_NAMES, LossCoefs, discrete_ppo_loss_and_head_grads


def median_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def matmul(threads: int, calls: int) -> None:
    x, w, out = torch.rand(8192, 64), torch.randn(64, 64), torch.empty(8192, 64)
    flop = 2 * 8192 * 64 * 64
    for n in sorted({1, threads}):
        torch.set_num_threads(n)
        us = median_us(lambda: torch.mm(x, w, out=out), calls)
        print(f"  {n} thread(s): {us:8.1f} us  {flop / us / 1e3:6.1f} GFLOP/s")
    torch.set_num_threads(threads)


def activations(calls: int) -> None:
    for mib in (0.25, 1, 4, 16, 64):
        t = torch.randn(int(mib * 2**20 / 4))
        row = f"  {mib:>5} MiB:"
        for name in ("sigmoid_", "tanh_"):
            t.normal_()  # fresh, finite values for each op
            us = median_us(getattr(t, name), calls)
            row += f"  {name} {us:8.1f} us ({2 * mib * 2**20 / us / 1e3:5.1f} GB/s)"
        print(row)


def output_layer(calls: int) -> None:
    b, k = 8192, 2
    h = torch.rand(2, b, 64)
    w = torch.randn(2, 64, k)  # (2, in, out)
    w_t = w.transpose(1, 2).contiguous()  # (2, out, in), as stored
    out, out_t = torch.empty(2, b, k), torch.empty(2, k, b)
    cases = {
        "h @ W": lambda: torch.bmm(h, w, out=out),
        "W^T @ h^T, W^T a view": lambda: torch.bmm(w.transpose(1, 2), h.transpose(1, 2), out=out_t),
        "W^T @ h^T, W^T contiguous": lambda: torch.bmm(w_t, h.transpose(1, 2), out=out_t),
    }
    for name, fn in cases.items():
        print(f"  {name:<28} {median_us(fn, calls):8.1f} us")


def loss(calls: int) -> None:
    coefs = LossCoefs()
    gen = torch.Generator().manual_seed(0)
    for b in (512, 8192):
        out_t = torch.randn(2, 2, b, generator=gen)
        logits, value = out_t[0].T, out_t[1, 0]
        actions = torch.randint(0, 2, (b,), generator=gen)
        oldlogprob = torch.randn(b, generator=gen) * 0.1 - 0.7
        adv, ret = torch.randn(b, generator=gen), torch.randn(b, generator=gen)
        oldvalue = value + torch.randn(b, generator=gen) * 0.3
        grads, rows = torch.zeros(2, 2, b), torch.empty(len(STAT_NAMES), b)
        step = functools.partial(
            discrete_ppo_loss_and_head_grads,
            logits, value, actions, oldlogprob, adv, ret, oldvalue, coefs,
            grads[0].T, grads[1, 0], rows,
        )  # fmt: skip
        print(f"  B={b:<5} {median_us(step, calls):8.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
          f"{args.threads} threads, median of {args.calls} calls")  # fmt: skip
    with torch.no_grad():
        print("8192x64x64 matmul:")
        matmul(args.threads, args.calls)
        print("activations in place:")
        activations(args.calls)
        print("output layer, 2 outputs, both networks, B=8192:")
        output_layer(args.calls)
        print("PPO loss + head gradients:")
        loss(args.calls)


if __name__ == "__main__":
    main()
