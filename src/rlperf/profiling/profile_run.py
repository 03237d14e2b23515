"""``rlperf profile``: train with every section timed and print where the time went.

Accepts every ``rlperf train`` flag (default ``--total-steps`` shorter: :data:`DEFAULT_STEPS`)
and adds the capture tools, each optional and attached only through the trainer's public seams:
profiler hooks (``record_function`` ranges, memory sampling), ``trainer.callbacks`` (torch.profiler
steps) and the summary ``train()`` returns. Ctrl-C still writes the
report (``interrupted: true``) and whatever torch.profiler trace was recorded.

Like ``rlperf train``, profile refuses to write over an earlier run's outputs (the run
directory's files, ``report.json``, the traces in the trace directory) unless ``--overwrite`` is
given, and then removes them first so that no old file survives among the new ones.

The capture tools' own work in the trainer's callbacks (torch.profiler steps and exports,
TensorBoard writes) is timed under the ``measurement`` section. torch.profiler's start and final
stop happen outside ``train()``, so their time is added to the reported wall time: the top-level
rows plus ``untimed`` still add up to it.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path
from typing import Any, cast

from rlperf.commandline import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, USAGE_ERRORS, fail
from rlperf.distributed.group import Ranks
from rlperf.ppo.commands import (
    attach_tensorboard,
    build_trainer,
    check_output_flags,
    check_training,
    join_ranks,
    launch_ranks,
    print_summary,
    refuse_existing_run,
    run_views,
    target_run_dir,
)
from rlperf.profiling import rank_spread
from rlperf.profiling.cprofile import CProfileCapture
from rlperf.profiling.memory import MemoryTracker
from rlperf.profiling.report import build_report, report_path, write_report
from rlperf.profiling.torch_trace import TorchTrace, TraceSchedule
from rlperf.run.run_dir import (
    TENSORBOARD_DIR,
    describe_files,
    remove_files,
    tensorboard_files,
    trace_files,
)
from rlperf.timing import names
from rlperf.timing.sections import Profiler, get_profiler

# Long enough for stable percentages, short enough to finish in seconds on a laptop CPU.
DEFAULT_STEPS = 100_000
TRACE_DIR_NAME = "torch_traces"
# flag dest -> (long form as in other projects' guides, help); all need --torch-profiler.
TORCH_FLAGS: dict[str, tuple[str, str]] = {
    "wait": ("--torch-profiler-wait", "iterations skipped before each cycle (default: 5)"),
    "warmup": ("--torch-profiler-warmup", "iterations traced but discarded (default: 2)"),
    "active": ("--torch-profiler-active", "iterations recorded per trace (default: 3)"),
    "repeat": ("--torch-profiler-repeat", "cycles to record, 0 = until the end (default: 1)"),
}
TORCH_SWITCHES: dict[str, tuple[str, str]] = {
    "record_shapes": ("--torch-profiler-record-shapes", "record operator input shapes"),
    "profile_memory": ("--torch-profiler-profile-memory", "record tensor allocations"),
    "with_stack": ("--torch-profiler-with-stack", "record Python stacks (large traces)"),
}


def add_profile_flags(parser: argparse.ArgumentParser) -> None:
    """The capture flags of ``rlperf profile`` (the training flags are added separately)."""
    group = parser.add_argument_group("profiling")
    group.add_argument("--out", metavar="DIR", help="write DIR/report.json (rlperf.report/1)")
    group.add_argument("--memory", action="store_true", help="per-section RSS / CUDA peaks")
    group.add_argument(
        "--cprofile", metavar="PATH", help="write a cProfile .pstats file, print top 50"
    )
    torch_group = parser.add_argument_group("torch.profiler")
    torch_group.add_argument(
        "--torch-profiler", action="store_true", help="capture torch.profiler traces"
    )
    torch_group.add_argument(
        "--torch-profiler-dir",
        metavar="DIR",
        help=f"trace directory (default: OUT/{TRACE_DIR_NAME}, or ./{TRACE_DIR_NAME}; with "
        "--tensorboard: where TensorBoard's profiler plugin looks)",
    )
    for dest, (long_flag, help_text) in TORCH_FLAGS.items():
        torch_group.add_argument(
            f"--{dest}", long_flag, dest=dest, type=int, metavar="N", help=help_text
        )
    for dest, (long_flag, help_text) in TORCH_SWITCHES.items():
        short_flag = "--" + dest.replace("_", "-")
        torch_group.add_argument(
            short_flag, long_flag, dest=dest, action="store_true", default=None, help=help_text
        )
    torch_group.add_argument(
        "--torch-profiler-summary",
        action="store_true",
        default=None,
        help="print the top operators by self time",
    )


def _trace_schedule(args: argparse.Namespace) -> TraceSchedule | None:
    """The torch.profiler schedule, None without --torch-profiler; fails on stray flags."""
    given = [d for d in (*TORCH_FLAGS, *TORCH_SWITCHES, "torch_profiler_summary",
                         "torch_profiler_dir") if getattr(args, d) is not None]  # fmt: skip
    if not args.torch_profiler:
        if given:
            fail(f"--{given[0].replace('_', '-')} needs --torch-profiler")
        return None
    defaults = TraceSchedule()
    schedule = TraceSchedule(
        **{
            d: getattr(defaults, d) if getattr(args, d) is None else getattr(args, d)
            for d in TORCH_FLAGS
        }  # fmt: skip
    )
    try:
        return schedule.validate()
    except ValueError as e:
        fail(str(e))


def _memory_table(peaks_mb: dict[str, tuple[float | None, float | None]], totals: dict) -> str:
    gpu = totals["gpu_peak_allocated_mb"] is not None
    lines = [
        "Memory: peak above the level at section entry (MB)",
        f"{'section':<36} {'cpu_peak_mb':>12}" + (f" {'gpu_peak_mb':>12}" if gpu else ""),
    ]
    for path, (cpu_mb, gpu_mb) in peaks_mb.items():
        depth = path.count("/")
        name = "  " * depth + path.rsplit("/", 1)[-1]
        lines.append(f"{name:<36} {cpu_mb:>12.1f}" + (f" {gpu_mb:>12.1f}" if gpu else ""))
    lines.append(f"process peak RSS: {totals['cpu_peak_rss_mb']:.1f} MB")
    if gpu:
        lines.append(
            f"process peak allocated CUDA memory: {totals['gpu_peak_allocated_mb']:.1f} MB"
        )
    return "\n".join(lines)


def _short_schedule_message(iterations: int, schedule: TraceSchedule) -> str:
    """What a run of ``iterations`` iterations will get from a schedule too long for it."""
    needed = f"the first full trace needs wait+warmup+active = {schedule.first_trace_iteration}"
    if iterations <= schedule.wait + schedule.warmup:
        return (
            f"this run has {iterations} iterations and {needed}: no trace will be written "
            "(lower --wait/--warmup or raise --total-steps)"
        )
    recorded = iterations - schedule.wait - schedule.warmup
    return (
        f"this run has {iterations} iterations and {needed}: the trace will hold only "
        f"{recorded} of {schedule.active} active iterations"
    )


class _Captures:
    """The optional capture tools of one profile run, started and stopped together."""

    def __init__(
        self,
        args: argparse.Namespace,
        prof: Profiler,
        trainer: Any,
        schedule: TraceSchedule | None,
        trace_dir: Path | None,
        tensorboard_dir: Path | None,
        resumed: bool,
    ) -> None:
        cuda = trainer.device.type == "cuda"
        self.prof = prof
        self.memory = MemoryTracker(cuda=cuda) if args.memory else None
        self.trace: TorchTrace | None = None
        if schedule is not None and trace_dir is not None:
            self.trace = TorchTrace(
                trace_dir,
                schedule,
                cuda=cuda,
                record_shapes=bool(args.record_shapes),
                profile_memory=bool(args.profile_memory),
                with_stack=bool(args.with_stack),
            )
            remaining = trainer.num_iterations - trainer.iteration
            if remaining < schedule.first_trace_iteration:
                print(f"rlperf: warning: {_short_schedule_message(remaining, schedule)}",
                      file=sys.stderr)  # fmt: skip
            trainer.callbacks.append(self.trace.step)
        self.cprofile = CProfileCapture(args.cprofile) if args.cprofile else None
        self.tensorboard_dir = tensorboard_dir
        self.tensorboard = (
            attach_tensorboard(trainer, tensorboard_dir, resumed) if tensorboard_dir else None
        )
        self.traces: list[Path] = []

    @property
    def names(self) -> list[str]:
        tools = [("memory", self.memory), ("torch_profiler", self.trace),
                 ("cprofile", self.cprofile), ("tensorboard", self.tensorboard)]  # fmt: skip
        return [name for name, tool in tools if tool is not None]

    def start(self) -> None:
        if self.memory is not None:
            self.memory.attach(self.prof)
        if self.trace is not None:
            self.trace.start(self.prof)
        if self.cprofile is not None:
            self.cprofile.start()

    def stop(self) -> None:
        if self.cprofile is not None:
            self.cprofile.stop()
        if self.trace is not None:
            self.traces = self.trace.stop(self.prof)
        if self.memory is not None:
            self.memory.detach(self.prof)
        if self.tensorboard is not None:
            self.tensorboard.close()


def _tensorboard_dir(args: argparse.Namespace, run_dir: Path | None) -> Path | None:
    """TensorBoard's log directory: RUN_DIR/tensorboard, else OUT's; None without the flag."""
    if not args.tensorboard:
        return None
    if run_dir is not None:
        return run_dir / TENSORBOARD_DIR
    if args.out:
        return report_path(args.out).parent / TENSORBOARD_DIR
    fail(
        f"--tensorboard needs --run-dir or --out: the scalars are written to DIR/{TENSORBOARD_DIR}"
    )


def _trace_dir(args: argparse.Namespace, tensorboard_dir: Path | None) -> Path:
    """Where torch.profiler traces go: the explicit directory, else beside the other outputs."""
    if args.torch_profiler_dir:
        return Path(args.torch_profiler_dir)
    if tensorboard_dir is not None:
        # TensorBoard's profiler plugin reads <logdir>/plugins/profile/<run>/*.pt.trace.json;
        # one timestamped folder per profile, as its own tools name them.
        return tensorboard_dir / "plugins" / "profile" / time.strftime("%Y_%m_%d_%H_%M_%S")
    if args.out:
        return report_path(args.out).parent / TRACE_DIR_NAME
    return Path(TRACE_DIR_NAME)


def _refuse_existing_outputs(
    args: argparse.Namespace, trace_dir: Path | None
) -> list[tuple[Path, list[Path]]]:
    """An earlier profile's outputs this one would write over, as (folder, files) groups for
    :func:`remove_files`; without --overwrite they are an error (one line, exit 2)."""
    fix = (
        "or remove them first (--overwrite does not combine with --resume)"
        if args.resume
        else "or replace them with --overwrite"
    )
    groups: list[tuple[Path, list[Path]]] = []
    if args.out:
        report = report_path(args.out)
        out_dir = report.parent
        files = [report] if report.is_file() else []
        files += trace_files(out_dir / TRACE_DIR_NAME) + tensorboard_files(
            out_dir / TENSORBOARD_DIR
        )
        if files and not args.overwrite:
            fail(
                f"--out {args.out} already holds a profile ({describe_files(out_dir, files)}): "
                f"use another --out, {fix}"
            )
        groups.append((out_dir, files))
    if trace_dir is not None:
        files = [p for p in trace_files(trace_dir) if all(p not in g for _, g in groups)]
        if files and not args.overwrite:
            fail(
                f"trace directory {trace_dir} already holds torch.profiler traces "
                f"({describe_files(trace_dir, files)}): use another --torch-profiler-dir, {fix}"
            )
        groups.append((trace_dir, files))
    return groups


def _measurement_ns(prof: Profiler) -> int:
    return prof.snapshot_ns().get(names.MEASUREMENT, 0)


def default_steps(args: argparse.Namespace) -> None:
    """--total-steps is :data:`DEFAULT_STEPS` here unless given (or resumed)."""
    if not args.resume and not hasattr(args, "total_steps"):
        args.total_steps = DEFAULT_STEPS


def check_profile(args: argparse.Namespace) -> None:
    """``rlperf profile``'s checks before any work (see :func:`rlperf.cli.check_command`)."""
    default_steps(args)
    _trace_schedule(args)
    check_output_flags(args)
    _tensorboard_dir(args, target_run_dir(args))
    check_training(args)


def cmd_profile(args: argparse.Namespace) -> int:
    """Run ``rlperf profile``; returns the exit status (``--nproc N``: on N ranks, each one's
    breakdown and the spread between them printed by rank 0)."""
    from rlperf.distributed import launch

    default_steps(args)
    if launch.requested(args):
        return launch_ranks(args)
    with launch.rank_errors(USAGE_ERRORS):
        ranks = join_ranks(args)
        try:
            return _profile_rank(args, ranks)
        finally:
            ranks.close()


def _profile_rank(args: argparse.Namespace, ranks: Ranks) -> int:
    from rlperf.envs.workers import WorkerError
    from rlperf.ppo.trainer import NonFiniteLossError

    if not ranks.is_main:  # the capture tools and the outputs are rank 0's
        args.memory = args.torch_profiler = args.tensorboard = False
        args.cprofile = args.out = None
        args.run_dir = None
    # Every check before the trainer is built and before any file is touched.
    schedule = _trace_schedule(args)
    check_output_flags(args)
    run_dir = target_run_dir(args)
    tensorboard_dir = _tensorboard_dir(args, run_dir)
    trace_dir = _trace_dir(args, tensorboard_dir) if schedule is not None else None
    stale = [(run_dir, refuse_existing_run(args, run_dir))] if run_dir is not None else []
    stale += _refuse_existing_outputs(args, trace_dir)
    prof = get_profiler()
    prof.enable()
    prof.reset()
    trainer, resumed = build_trainer(args, profiler=prof, ranks=ranks)
    for folder, files in stale:
        remove_files(files, folder)
    captures = _Captures(args, prof, trainer, schedule, trace_dir, tensorboard_dir, resumed)
    run_dir_name = trainer.cfg.run.run_dir
    interrupted = False
    summary = None
    # Measurement done outside train() (torch.profiler's start and final stop) is not in the
    # trainer's wall time; it is added below so the breakdown still adds up.
    outside_ns = -_measurement_ns(prof)
    captures.start()
    outside_ns += _measurement_ns(prof)
    try:
        with run_views(trainer, args):
            summary = trainer.train(run_dir_name, resumed=resumed)
    except (NonFiniteLossError, WorkerError) as e:
        print(f"rlperf: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        interrupted = True
        summary = getattr(trainer, "last_summary", None)
    finally:
        outside_ns -= _measurement_ns(prof)
        captures.stop()
        outside_ns += _measurement_ns(prof)
        trainer.env.close()  # env workers stop whatever ended the run
    if summary is None:  # interrupted before the first iteration started
        print("\nrlperf: interrupted before training started; nothing to report", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = {**summary, "wall_s": summary["wall_s"] + outside_ns / 1e9}
    per_rank = ranks.gather({"wall_s": summary["wall_s"], "sections": summary["sections"],
                             "host": socket.gethostname(),
                             "allreduce_clock": ranks.clock.window()})  # fmt: skip
    if not ranks.is_main:
        return EXIT_OK
    _print_results(args, summary, captures, interrupted)
    if ranks.distributed:
        # The main rank gathered every rank's figures.
        print("\n" + rank_spread.render(cast(list[dict[str, Any]], per_rank)))
    if args.out:
        report = build_report(
            summary,
            prof.stats(),
            trainer.cfg.to_dict(),
            memory=captures.memory.totals() if captures.memory else None,
            telemetry=summary.get("telemetry"),
            memory_mb=captures.memory.peaks_mb() if captures.memory else None,
            artifacts={
                "torch_traces": [str(p) for p in captures.traces],
                "cprofile": str(captures.cprofile.path) if captures.cprofile else None,
            },
        )
        report["interrupted"] = interrupted
        if ranks.distributed:
            rank_list = cast(list[dict[str, Any]], per_rank)
            report["allreduce_split"] = rank_spread.allreduce_split(rank_list)
            report["ranks"] = [{k: v for k, v in r.items() if k != "allreduce_clock"}
                               for r in rank_list]  # fmt: skip
        report["run"]["instrumentation"] = captures.names
        print(f"\nreport: {write_report(args.out, report)}")
    if interrupted:
        print("rlperf: interrupted; partial results above (report marked interrupted)",
              file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    return EXIT_OK


def _print_results(
    args: argparse.Namespace, summary: dict[str, Any], captures: _Captures, interrupted: bool
) -> None:
    title = "Where the time went" + (" (interrupted run)" if interrupted else "")
    if captures.names:
        title += f" [timings include {', '.join(captures.names)} overhead]"
    print_summary(summary, rows_title=title)
    if captures.memory is not None:
        print("\n" + _memory_table(captures.memory.peaks_mb(), captures.memory.totals()))
    if captures.trace is not None:
        if args.torch_profiler_summary:
            print("\ntorch.profiler: top operators by self time (last recorded window)")
            print(captures.trace.summary_table())
        if captures.traces:
            print(
                f"\ntorch.profiler traces ({len(captures.traces)}) in {captures.trace.trace_dir}:"
            )
            for path in captures.traces:
                print(f"  {path.name}")
            log_dir = captures.tensorboard_dir
            if log_dir is None or not captures.trace.trace_dir.is_relative_to(log_dir):
                log_dir = captures.trace.trace_dir
            print(f"view: tensorboard --logdir {log_dir}  (or ui.perfetto.dev)")
        else:
            print(f"\nrlperf: {captures.trace.no_trace_message()}", file=sys.stderr)
    if captures.tensorboard_dir is not None:
        print(f"\nTensorBoard scalars: tensorboard --logdir {captures.tensorboard_dir}")
    if captures.cprofile is not None:
        text = captures.cprofile.write()
        print(f"\ncProfile: top 50 functions by cumulative time ({captures.cprofile.path})")
        print(text)
