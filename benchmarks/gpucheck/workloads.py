"""The ``workloads`` step (not in the 8-minute plan: ``--only workloads``): rlperf's other
GPU-sized runs, the CNN and the ConvLSTM on the robots' pixels and nccl with two ranks, each for a
few seconds. CartPole, MuJoCo and Atari have rows of their own (:mod:`gpucheck.cartpole`,
:mod:`gpucheck.versus`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucheck.core import BIG, Skip, attempt, items
from gpucheck.facts import missing_for
from gpucheck.report import sps_text
from gpucheck.training import train

if TYPE_CHECKING:
    from gpucheck.check import Check, Sizes


@dataclass(frozen=True)
class Workload:
    name: str
    args: str  # rlperf train's flags
    preset: str | None = None  # needs this --preset
    modules: tuple[str, ...] = ()  # needs these modules
    gpus: int = 0  # needs this many GPUs


def workloads(s: Sizes) -> list[Workload]:
    """The GPU-relevant runs at ``s``'s sizes (each --max-wall-s ``s.workload_s``)."""
    pixel = f"--num-envs {s.pixel_envs}" + (
        f" --num-steps {s.pixel_steps}" if s.pixel_steps else ""
    )
    return [
        Workload("cnn_robots_rgb", f"--env robots --policy cnn {pixel}"),
        Workload("convlstm_robots_rgb", f"--preset robots-rgb {pixel}"),
        Workload(
            "nccl_2ranks",
            f"--env cartpole --num-envs {s.big_envs} --nproc 2 --dist-backend nccl",
            gpus=2,
        ),
    ]


def step_workloads(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    results = {}
    for w in workloads(check.sizes):

        def one(w: Workload = w) -> dict[str, Any]:
            why = missing_for(check, w.preset, w.modules)
            if why:
                raise Skip(why)
            if w.gpus > len(check.facts["gpus"]):
                raise Skip(f"needs {w.gpus} GPUs, found {len(check.facts['gpus'])}")
            args = [*w.args.split(), "--total-steps", str(BIG)]
            figures = train(
                check, w.name, args, check.cap("workload"), wall_s=check.sizes.workload_s
            )
            figures.pop("summary")
            figures.pop("curve")
            return figures

        results[w.name] = attempt(one)
        print(
            f"    {w.name}: {results[w.name]['status']} "
            f"{results[w.name]['reason'] or sps_text(results[w.name]['figures'])}",
            flush=True,
        )
    return items(results)
