"""Subcommands of this package (registered into ``rlperf`` by cli.py): eval, export.

The evaluation itself is ``run/evaluate.py``, the policy's loading and files ``run/export.py``;
here are only the parsers, the output, and the glue that turns bad input into one
``rlperf: error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import torch

from rlperf.commandline import EXIT_INTERRUPTED, EXIT_OK, check_seed, fail
from rlperf.run.evaluate import (
    VIDEO_INSTALL,
    EvalError,
    EvalResult,
    evaluate_run,
    video_format_problem,
)
from rlperf.run.run_dir import out_file_problem


# -- eval: output ------------------------------------------------------------------------
def episode_row(index: int, episode_return: float, length: int) -> str:
    """One episode's line of the table: its number (from 1), return and length."""
    return f"{index:>7}  {episode_return:>12.2f}  {length:>7}"


def table_header(result: EvalResult) -> str:
    """The table's column names, the length's unit among them (``length (emulator frames)``)."""
    return f"{'episode':>7}  {'return':>12}  length ({result.length_unit})"


def summary_line(result: EvalResult) -> str:
    """``return 1234.5 +- 67.8 over 10 episodes (deterministic)``."""
    n = len(result.returns)
    how = "deterministic" if result.deterministic else "stochastic"
    return (
        f"return {result.mean_return:.1f} +- {result.std_return:.1f} over {n} "
        f"episode{'' if n == 1 else 's'} ({how})"
    )


def header_line(result: EvalResult) -> str:
    """What was evaluated, and how."""
    norm = ", observations normalised with the run's statistics (frozen)"
    return (
        f"{result.run_dir}: {result.env}, policy {result.policy}, global step "
        f"{result.global_step:,}; seed {result.seed}, {result.num_envs} env"
        f"{'' if result.num_envs == 1 else 's'}{norm if result.normalized_obs else ''}"
    )


def print_progress(out: TextIO) -> Callable[[EvalResult], None]:
    """:func:`~rlperf.run.evaluate.evaluate_run`'s ``progress``: the header, the notes and the
    table's column names before the first episode, then each episode's line as it ends (an
    evaluation with a video can take minutes: the lines say it is moving)."""

    def progress(result: EvalResult) -> None:
        if not result.returns:
            print(header_line(result), file=out)
            for note in result.notes:
                print(f"note: {note}", file=out)
            print(table_header(result), file=out, flush=True)
            return
        n = len(result.returns)
        print(episode_row(n, result.returns[-1], result.lengths[-1]), file=out, flush=True)

    return progress


# -- eval: the command -------------------------------------------------------------------
def add_eval_flags(parser: argparse.ArgumentParser) -> None:
    """``rlperf eval``'s arguments."""
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path,
                        help="a run directory (rlperf train --run-dir)")  # fmt: skip
    parser.add_argument("--episodes", type=int, default=10,
                        help="episodes to play (default: 10)")  # fmt: skip
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="take the most likely action (the Gaussian's mean, the largest logit) instead of "
        "sampling",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the envs' reset seed and the sampler's (default: 0)"
    )
    parser.add_argument(
        "--num-envs",
        type=int,
        default=1,
        metavar="N",
        help="envs stepped together, each counting its share of the episodes (default: 1)",
    )
    parser.add_argument(
        "--video",
        metavar="PATH",
        type=Path,
        help=f"write env 0's first episodes as a video: .mp4 ({VIDEO_INSTALL}) or .gif",
    )
    parser.add_argument(
        "--video-episodes",
        type=int,
        metavar="K",
        help="env 0's first K episodes go into the video; the others play unrendered (default: 1)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write the results as JSON to FILE ('-': print only the JSON, on stdout; "
        "the episodes' lines go to stderr)",
    )


def check_eval(args: argparse.Namespace) -> None:
    """``rlperf eval``'s flags, before any work (the files they name are :func:`cmd_eval`'s)."""
    if args.episodes < 1:
        fail(f"--episodes must be at least 1, got {args.episodes}")
    if args.num_envs < 1:
        fail(f"--num-envs must be at least 1, got {args.num_envs}")
    if args.video_episodes is not None:
        if args.video is None:
            fail("--video-episodes says how many episodes go into the video: give --video PATH")
        if args.video_episodes < 1:
            fail(f"--video-episodes must be at least 1, got {args.video_episodes}")
    check_seed(args.seed)  # ConfigError: one line
    problem = video_format_problem(args.video) if args.video is not None else None
    if problem:
        fail(problem)


def cmd_eval(args: argparse.Namespace) -> int:
    """``rlperf eval``: a line per episode as it ends, then the summary, on stdout (with
    ``--json -`` the JSON alone on stdout, the lines on stderr); exit 0, 2 on bad input, 130
    on Ctrl-C."""
    check_eval(args)
    to_stdout = args.json == "-"
    if args.json is not None and not to_stdout:
        problem = out_file_problem("--json", Path(args.json))
        if problem:
            fail(problem)
    # A policy of a few small matmuls a step, a batch of one env: more threads only wait on
    # each other. Restored after, for a caller in the same process (tests).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = evaluate_run(args.run_dir, args.episodes, args.deterministic, args.seed,
                              args.num_envs, args.video, args.video_episodes or 1,
                              print_progress(sys.stderr if to_stdout else sys.stdout))  # fmt: skip
    except EvalError as e:
        fail(str(e))
    except KeyboardInterrupt:
        print("\nrlperf: eval interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        torch.set_num_threads(threads)
    text = json.dumps(result.to_dict(), indent=1)
    if to_stdout:
        print(text)
        return EXIT_OK
    print(summary_line(result))
    if result.video is not None:
        print(f"video: {result.video} ({result.video_frames} frames)")
    if args.json is not None:
        Path(args.json).write_text(text + "\n")
    return EXIT_OK


# -- export ------------------------------------------------------------------------------
def check_export(args: argparse.Namespace) -> None:
    """``rlperf export``'s flags, before any work (the run and the file: :func:`cmd_export`)."""
    from rlperf.run.export import format_problem

    problem = format_problem(args.format)
    if problem:
        fail(problem)


def cmd_export(args: argparse.Namespace) -> int:
    """``rlperf export``: the run's deterministic policy as one file; a line saying what it
    holds. Exit 0, 2 on bad input (nothing written)."""
    from rlperf.run.export import describe_export, export_policy, exportable_problem, load_policy

    check_export(args)
    problem = out_file_problem("--out", args.out)
    if problem:
        fail(problem)
    try:
        loaded = load_policy(args.run_dir)
    except EvalError as e:
        fail(str(e))
    problem = exportable_problem(loaded)
    if problem:
        fail(f"cannot export: {problem}")
    export_policy(loaded, args.format, args.out)
    print(describe_export(loaded, args.format, args.out))
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``eval`` and ``export``."""
    parser = subparsers.add_parser(
        "eval",
        help="a trained policy's return over N episodes (mean, std, each episode), and a video",
        description=(
            "Play a run's checkpoint for --episodes episodes with its observation normalisation "
            "frozen; print each episode's return and length (the env's own) as it ends, then "
            "their mean and std. --video writes env 0's first --video-episodes episodes "
            "through the env's rgb_array rendering."
        ),
    )
    add_eval_flags(parser)
    parser.set_defaults(func=cmd_eval, check=check_eval)
    export = subparsers.add_parser(
        "export",
        help="a trained policy as one TorchScript or ONNX file (normalisation inside)",
        description=(
            "Write a run's deterministic policy, with its observation normalisation, as one "
            "file that runs without rlperf: TorchScript (torch.jit.load) or ONNX "
            "(onnxruntime). Input obs (B, *obs_shape), output the actions the env takes; "
            "feed-forward policies without action masks (others: rlperf.load_policy)."
        ),
    )
    export.add_argument("run_dir", metavar="RUN_DIR", type=Path,
                        help="a run directory (rlperf train --run-dir)")  # fmt: skip
    export.add_argument("--format", required=True, metavar="FORMAT",
                        help="torchscript or onnx (onnx needs the export extra)")  # fmt: skip
    export.add_argument("--out", required=True, metavar="FILE", type=Path,
                        help="the file to write (replaced if it exists)")  # fmt: skip
    export.set_defaults(func=cmd_export, check=check_export)
