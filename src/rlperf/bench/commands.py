"""Subcommands of this package (registered into ``rlperf`` by cli.py): ``rlperf gate``,
``rlperf bisect`` and ``rlperf history``."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from rlperf.bench import learning_gate
from rlperf.bench.bisection import BisectError, bisect
from rlperf.bench.bisection import verdict_line as bisect_verdict_line
from rlperf.bench.gate import (
    COUNTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    METRICS,
    CaseResult,
    GateError,
    PooledResult,
    Settings,
    Side,
    Worker,
    analyse,
    exit_code,
    report,
    results_from_json,
    run_rounds,
)
from rlperf.bench.history import HistoryError, build, results_dir_from_conf
from rlperf.bench.learning_gate import LEARNING_METRICS, LearningSettings, WorkloadResult
from rlperf.bench.registry import UnknownCaseError, gate_case_names, select
from rlperf.bench.registry import learning as learning_registry
from rlperf.bench.registry.learning import UnknownWorkloadError
from rlperf.bench.worktree import (
    GitError,
    build_in_place,
    check_same_kernels_built,
    checked_out,
    repo_root,
    resolve_commit,
)
from rlperf.commandline import EXIT_INTERRUPTED, UsageError
from rlperf.run.run_dir import out_file_problem


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add this package's subcommands."""
    gate = subparsers.add_parser(
        "gate",
        help="fail when HEAD is slower than a base commit (CI gate on SPS)",
        description=(
            "Time registry cases of a base commit and of the head, alternating in fresh "
            "processes, until the head/base time ratio's interval is clearly below or above "
            "1 + threshold. With --learning, train workloads of both up to a return threshold "
            "instead and compare steps to it. Exit 0: no regression; 1: regression; 2: undecided "
            "or could not run."
        ),
    )
    gate.add_argument("--base", metavar="REF", help="commit to compare against (origin/main)")
    gate.add_argument(
        "--head", metavar="REF", help="commit to test (default: the current working tree)"
    )
    add_settings(gate)
    add_learning_options(gate)
    gate.add_argument(
        "--json",
        metavar="FILE",
        type=Path,
        help="write settings, every sample and the verdicts here",
    )
    gate.add_argument(
        "--from-json",
        metavar="FILE",
        type=Path,
        help="decide again on the samples of an earlier --json file; runs nothing",
    )
    gate.set_defaults(func=cmd_gate, check=check_gate)

    bisect_parser = subparsers.add_parser(
        "bisect",
        help="find the first commit between GOOD and BAD that made a case slower",
        description=(
            "Binary search over BAD's first-parent history after GOOD, each step a gate "
            "decision of that commit against GOOD (about log2(n) steps; the path is printed). "
            "Exit 1: the first slower commit was found; 0: BAD is not slower than GOOD; "
            "2: a step could not be decided, or could not run."
        ),
    )
    bisect_parser.add_argument("good", metavar="GOOD", help="a commit known to be fast")
    bisect_parser.add_argument("bad", metavar="BAD", help="a later commit known or feared slow")
    add_settings(bisect_parser)
    add_learning_options(bisect_parser)
    bisect_parser.set_defaults(func=cmd_bisect, check=check_bisect)

    history = subparsers.add_parser(
        "history",
        help="one self-contained HTML page of benchmark history (opens offline)",
        description=(
            "Chart every case across commits from asv results and/or gate --json files into "
            "one HTML file with inline SVG: no scripts, no network. With neither source, the "
            "results_dir of ./asv.conf.json is read. Exit 2 on missing or malformed input."
        ),
    )
    history.add_argument(
        "--asv-results", metavar="DIR", type=Path, help="asv results directory (.asv/results)"
    )
    history.add_argument(
        "--gate-json",
        metavar="FILE",
        type=Path,
        nargs="+",
        default=[],
        help="rlperf gate --json files, oldest first",
    )
    history.add_argument(
        "--out", metavar="FILE", type=Path, default=Path("history.html"), help="page to write"
    )
    history.set_defaults(func=cmd_history)


class Unset:
    """A default the parser filled in, not a value given on the command line: the SPS gate and
    the learning gate share options with different defaults, and ``--learning`` replaces only
    these. The subclasses below are the value itself otherwise (``0.02``, ``25``, ``cpu``)."""


class UnsetFloat(float, Unset):
    pass


class UnsetInt(int, Unset):
    pass


class UnsetStr(str, Unset):
    pass


def unset(value: Any) -> Any:
    """``value`` marked as the parser's default."""
    return {float: UnsetFloat, int: UnsetInt, str: UnsetStr}[type(value)](value)


# Options the SPS gate and the learning gate share: the SPS gate's defaults, marked unset.
SHARED = (
    ("--threshold", float, "threshold",
     "slowdown (--learning: more steps to the return) that fails the gate, as a fraction"),
    ("--confidence", float, "confidence", "interval coverage; false alarms <= (1-c)/2"),
    ("--min-rounds", int, "min_rounds", "fewest rounds before deciding (--learning: first look)"),
    ("--max-rounds", int, "max_rounds",
     "rounds before giving up undecided (--learning: last look)"),
)  # fmt: skip


def as_given(value: str) -> str:
    """A str option's type: the value itself, so the parser's :class:`UnsetStr` default stays
    marked (``type=str`` would make it a plain str, as if given)."""
    return value


# The SPS gate's alone: refused with --learning.
SPS_ONLY: tuple[tuple[str, Callable[[str], Any], str, str], ...] = (
    ("--pairs", int, "pairs_per_round", "samples per side per round"),
    ("--sample-s", float, "sample_s", "CPU seconds of one sample"),
    ("--warmup-s", float, "warmup_s", "untimed CPU seconds per case and round"),
    ("--pairing", as_given, "pairing",
     "together: a pair's two samples at once on one CPU; turns: one after the other (--metric "
     "wall: turns)"),
    ("--budget-s", float, "budget_s",
     "wall seconds a run may take on the slowest box beside two busy processes, planned from "
     "the cases' measured costs: caps --max-rounds (0: no budget)"),
)  # fmt: skip


def add_settings(parser: argparse.ArgumentParser) -> None:
    """The gate's measuring and deciding options (shared by gate and bisect)."""
    parser.add_argument(
        "--cases",
        help="comma-separated case names or components (default: the registry's cases tagged "
        "gate, one end-to-end training case per workload; printed when the gate starts)",
    )
    parser.add_argument(
        "--metric",
        choices=(*METRICS, *COUNTED, *(m for m in LEARNING_METRICS if m not in METRICS)),
        default=unset(Settings.metric),
        help="what the decision uses: cpu or wall time, or instructions where the kernel counts "
        "them (default: cpu); with --learning, steps or cpu seconds to the return (default: "
        "steps)",
    )
    sps, learning = Settings(), LearningSettings()
    for flag, kind, attr, text in SHARED:
        default = getattr(sps, attr)
        both = f"default: {default}; --learning: {getattr(learning, attr)}"
        parser.add_argument(flag, type=kind, default=unset(default), help=f"{text} ({both})")
    for flag, convert, attr, text in SPS_ONLY:
        default = getattr(sps, attr)
        parser.add_argument(flag, type=convert, default=unset(default),
                            help=f"{text} (default: {default})")  # fmt: skip


def add_learning_options(parser: argparse.ArgumentParser) -> None:
    """``--learning`` and the options only it takes."""
    defaults = LearningSettings()
    parser.add_argument(
        "--learning",
        action="store_true",
        help="the learning gate: train workloads up to a return threshold on both sides and "
        "compare env steps to it (docs/gate.md#learning-gate)",
    )
    parser.add_argument(
        "--workloads",
        help="--learning: comma-separated learning workloads, each NAME or NAME=RETURN for "
        f"another threshold (default: {','.join(learning_registry.default_names())})",
    )
    parser.add_argument(
        "--looks",
        type=int,
        default=unset(defaults.looks),
        help=f"--learning: looks from --min-rounds to --max-rounds (default: {defaults.looks})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="--learning: seed of the first base run, the others follow it (default: random, "
        "printed)",
    )


def error(message: str) -> int:
    print(f"rlperf: error: {message}", file=sys.stderr)
    return EXIT_UNDECIDED


def split_cases(text: str) -> list[str]:
    """``"e2e_train,gae[num_steps=32,num_envs=64]"`` -> its entries (commas inside [] kept)."""
    return [name.strip() for name in re.split(r",(?![^\[]*\])", text) if name.strip()]


def given(args: argparse.Namespace, attr: str, default: Any) -> Any:
    """The option's value, or ``default`` where it was not given (None, or the parser's
    :class:`Unset` default)."""
    value = getattr(args, attr, None)
    return default if value is None or isinstance(value, Unset) else value


def was_given(args: argparse.Namespace, attr: str) -> bool:
    return given(args, attr, None) is not None


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The SPS gate's settings; GateError on an option only ``--learning`` takes."""
    for flag, attr in (("--workloads", "workloads"), ("--looks", "looks"), ("--seed", "seed")):
        if was_given(args, attr):
            raise GateError(f"{flag} needs --learning")
    if args.metric not in METRICS + COUNTED:
        raise GateError(f"--metric {args.metric} needs --learning")
    d = Settings()
    return Settings(
        threshold=given(args, "threshold", d.threshold),
        metric=given(args, "metric", d.metric),
        confidence=given(args, "confidence", d.confidence),
        min_rounds=given(args, "min_rounds", d.min_rounds),
        max_rounds=given(args, "max_rounds", d.max_rounds),
        pairs_per_round=given(args, "pairs", d.pairs_per_round),
        sample_s=given(args, "sample_s", d.sample_s),
        warmup_s=given(args, "warmup_s", d.warmup_s),
        budget_s=given(args, "budget_s", d.budget_s),
        # Wall time needs turns, so asking for it picks them unless --pairing says otherwise.
        pairing=given(args, "pairing", "turns" if args.metric == "wall" else d.pairing),
    ).check()


def learning_settings_from_args(args: argparse.Namespace) -> LearningSettings:
    """The learning gate's settings; GateError on an option only the SPS gate takes."""
    for flag in ("--cases", *(option[0] for option in SPS_ONLY)):
        if was_given(args, flag[2:].replace("-", "_")):  # the option's dest
            raise GateError(f"{flag} is the SPS gate's option: not for --learning")
    if was_given(args, "metric") and args.metric not in LEARNING_METRICS:
        raise GateError(
            f"--learning --metric must be one of {', '.join(LEARNING_METRICS)}, got {args.metric}"
        )
    d = LearningSettings()
    return LearningSettings(
        threshold=given(args, "threshold", d.threshold),
        metric=given(args, "metric", d.metric),
        confidence=given(args, "confidence", d.confidence),
        min_rounds=given(args, "min_rounds", d.min_rounds),
        max_rounds=given(args, "max_rounds", d.max_rounds),
        looks=given(args, "looks", d.looks),
        seed=args.seed,
    ).check()


def learning_workloads(text: str | None) -> list[tuple[str, float | None]]:
    """(name, return threshold or None) per ``--workloads`` entry (None: the default set);
    UnknownWorkloadError for a name that is none, GateError for a threshold no run can reach
    (above the best return the workload's episodes can give) or an empty list."""
    if text is None:
        return [(name, None) for name in learning_registry.default_names()]
    chosen: list[tuple[str, float | None]] = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, _, value = entry.partition("=")
        workload = learning_registry.get(name.strip())
        threshold: float | None = None
        if value:
            try:
                threshold = float(value)
            except ValueError:
                raise GateError(f"--workloads {entry}: {value!r} is not a return") from None
            if not math.isfinite(threshold) or threshold > workload.best_return:
                raise GateError(
                    f"--workloads {entry}: no run can reach a return of {value}: the best an "
                    f"episode of {workload.name} returns is {workload.best_return:g}"
                )
        if any(n == workload.name for n, _ in chosen):
            raise GateError(f"--workloads names {workload.name} twice")
        chosen.append((workload.name, threshold))
    if not chosen:
        raise GateError("--workloads names no workload")
    return chosen


def gate_plan(args: argparse.Namespace) -> tuple[Settings, list[str] | None]:
    """The gate's settings and the cases it would time (None with --from-json: it times
    nothing); GateError or UnknownCaseError on bad input, before any work."""
    settings = settings_from_args(args)
    if args.from_json is not None:
        return settings, None
    if not args.base:
        raise GateError("--base REF is required (or --from-json FILE)")
    names = case_names(args.cases)
    settings.check_family(len(names))
    replace(settings).fit_budget(names)  # GateError now if the budget holds too few rounds
    return settings, names


def learning_plan(
    args: argparse.Namespace,
) -> tuple[LearningSettings, list[tuple[str, float | None]] | None]:
    """``gate --learning``'s settings and workloads (None with --from-json); GateError or
    UnknownWorkloadError on bad input, before any work."""
    settings = learning_settings_from_args(args)
    if args.from_json is not None:
        return settings, None
    if not args.base:
        raise GateError("--base REF is required (or --from-json FILE)")
    workloads = learning_workloads(args.workloads)
    settings.check_family(len(workloads))
    return settings, workloads


def check_gate(args: argparse.Namespace) -> None:
    """``gate``'s checks before any work, less the files and git refs it names (see
    :func:`rlperf.cli.check_command`)."""
    with usage_errors():
        if args.learning:
            learning_plan(args)
        else:
            gate_plan(args)


def check_bisect(args: argparse.Namespace) -> None:
    """``bisect``'s checks before any work, less the git refs it names."""
    with usage_errors():
        if args.learning:
            learning_settings_from_args(args).check_family(len(learning_workloads(args.workloads)))
        else:
            settings_from_args(args)
            case_names(args.cases)


@contextmanager
def usage_errors() -> Iterator[None]:
    """This package's errors of bad input as :class:`~rlperf.commandline.UsageError`."""
    try:
        yield
    except (GateError, UnknownCaseError, UnknownWorkloadError) as e:
        raise UsageError(str(e)) from None


def process_started() -> float:
    """``time.perf_counter()`` when this process started: the interpreter's start and the
    imports before a command runs (~6 s beside two busy processes) are wall time a CI budget
    pays as much as the rounds."""
    age_s = max(0.0, time.time() - psutil.Process().create_time())
    return time.perf_counter() - age_s


def cmd_gate(args: argparse.Namespace) -> int:
    started = process_started()
    try:
        problem = out_file_problem("--json", args.json)
        if problem:
            raise GateError(problem)
        if args.learning:
            code, text, payload = learning_gate_run(args)
        else:
            code, text, payload = sps_gate_run(args, started)
    except (GateError, GitError, UnknownCaseError, UnknownWorkloadError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        print("rlperf: gate interrupted; nothing decided", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(text)
    if args.json is not None:
        payload.update(exit_code=code, gate_wall_s=time.perf_counter() - started)
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return code


def sps_gate_run(
    args: argparse.Namespace, started: float | None = None
) -> tuple[int, str, dict[str, Any]]:
    """The SPS gate: (exit status, report and verdict line, ``--json`` fields); ``started``:
    ``time.perf_counter()`` at the command's start, what its time budget counts from."""
    settings, names = gate_plan(args)
    if names is None:
        results, sides, settings = load_results(args.from_json, settings)
    else:
        results, sides = measure(args.base, args.head, names, settings, started)
    code = exit_code(results, settings.metric)
    text = f"{report(results, settings)}\n{verdict_line(results, settings, code)}"
    cases = [r.to_dict() for r in results if not isinstance(r, PooledResult)]
    payload = {"sides": sides, "settings": vars(settings), "cases": cases}
    pooled = [r.to_dict() for r in results if isinstance(r, PooledResult)]
    if pooled:
        payload["pooled"] = pooled[0]
    return code, text, payload


def learning_gate_run(args: argparse.Namespace) -> tuple[int, str, dict[str, Any]]:
    """``rlperf gate --learning``: (exit status, report and verdict line, ``--json`` fields)."""
    settings, workloads = learning_plan(args)
    if workloads is None:
        results, sides, settings = load_learning_results(args.from_json, settings)
    else:
        results, sides = measure_learning(args.base, args.head, workloads, settings)
    code = exit_code(results, settings.metric)
    report_text = learning_gate.report(results, settings)
    text = f"{report_text}\n{learning_gate.verdict_line(results, settings, code)}"
    entries = [r.to_dict() for r in results]
    payload = {"kind": "learning", "sides": sides, "settings": vars(settings), "workloads": entries}
    return code, text, payload


def case_names(text: str | None) -> list[str]:
    """Full case names selected by ``--cases`` (None: the default set); GateError when none."""
    if text is None:
        return gate_case_names()
    names = [c.name for c in select(split_cases(text))]
    if not names:
        raise GateError("--cases names no case")
    return names


def cmd_bisect(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(line, flush=True)

    def log(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        repo = repo_root(Path.cwd())
        settings: Settings | LearningSettings
        if args.learning:
            settings = learning_settings_from_args(args)
            workloads = learning_workloads(args.workloads)
            out = bisect(repo, args.good, args.bad, workloads, settings, log, say,
                         learning_gate.LEARNING_REGISTRY, rounds=learning_rounds)  # fmt: skip
        else:
            settings = settings_from_args(args)
            names = case_names(args.cases)
            out = bisect(repo, args.good, args.bad, names, settings, log, say)
    except (BisectError, GateError, GitError, UnknownCaseError, UnknownWorkloadError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        print("rlperf: bisect interrupted; nothing found", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(bisect_verdict_line(out, settings))
    return out.code


def cmd_history(args: argparse.Namespace) -> int:
    try:
        asv_results = args.asv_results
        if asv_results is None and not args.gate_json:
            asv_results = results_dir_from_conf(Path("asv.conf.json"))
        problem = out_file_problem("--out", args.out)
        if problem:
            raise HistoryError(problem)
        page, count = build(asv_results, args.gate_json)
        args.out.write_text(page)
    except HistoryError as e:
        return error(str(e))
    except OSError as e:  # the folder refused the page after all (a full disk)
        return error(f"--out {args.out}: cannot write it ({e.strerror or e})")
    print(f"history: {count} chart{'' if count == 1 else 's'} written to {args.out}")
    return EXIT_OK


@contextmanager
def trees(base_ref: str, head_ref: str | None) -> Iterator[tuple[Side, Side]]:
    """The base (and a head ref) checked out in worktrees and built, the head the working tree
    (built in place) without a head ref; removed on exit."""
    repo = repo_root(Path.cwd())
    base_sha = resolve_commit(base_ref, repo)
    head_sha = resolve_commit(head_ref, repo) if head_ref else ""
    with ExitStack() as stack:
        base_tree = stack.enter_context(checked_out(base_sha, repo))
        if head_sha:
            head_tree = stack.enter_context(checked_out(head_sha, repo))
        else:
            head_tree = repo
            build_in_place(repo)  # the working tree as it is now, C extension included
        check_same_kernels_built(base_tree, head_tree)
        base = Side("base", base_ref, base_sha, base_tree / "src")
        head = Side("head", head_ref or "working tree", head_sha, head_tree / "src")
        for side in (base, head):
            if not (side.src / "rlperf" / "__init__.py").is_file():
                raise GateError(f"{side.label} {side.describe()} has no src/rlperf package")
        yield base, head


def measure(
    base_ref: str, head_ref: str | None, names: list[str], settings: Settings,
    started: float | None = None,
) -> tuple[list[CaseResult], dict[str, Any]]:  # fmt: skip
    """Check the base (and a head ref) out in worktrees and run the rounds (``started``: as
    :func:`rlperf.bench.gate.run_rounds` takes it)."""
    with trees(base_ref, head_ref) as (base, head):
        print(
            f"gate: base {base.describe()} vs head {head.describe()}: {', '.join(names)}",
            file=sys.stderr,
        )
        results = run_rounds(base, head, names, settings, lambda m: print(m, file=sys.stderr),
                             started=started)  # fmt: skip
    sides = {s.label: {"ref": s.ref, "sha": s.sha} for s in (base, head)}
    return results, sides


def measure_learning(
    base_ref: str,
    head_ref: str | None,
    workloads: list[tuple[str, float | None]],
    settings: LearningSettings,
) -> tuple[list[WorkloadResult], dict[str, Any]]:
    """Check the base (and a head ref) out in worktrees and train the rounds."""
    with trees(base_ref, head_ref) as (base, head):
        names = ", ".join(name if t is None else f"{name}={t:g}" for name, t in workloads)
        print(f"gate: learning: base {base.describe()} vs head {head.describe()}: {names}",
              file=sys.stderr)  # fmt: skip
        results = learning_gate.run_learning_rounds(
            base, head, workloads, settings, lambda m: print(m, file=sys.stderr)
        )
    sides = {s.label: {"ref": s.ref, "sha": s.sha} for s in (base, head)}
    return results, sides


def learning_rounds(
    good: Side,
    commit: Side,
    workloads: list[tuple[str, float | None]],
    settings: LearningSettings,
    log: Callable[[str], None],
    worker: Worker,
) -> list[WorkloadResult]:
    """One bisect step of the learning gate: ``commit`` against GOOD."""
    return learning_gate.run_learning_rounds(good, commit, workloads, settings, log, worker)


def load_learning_results(
    path: Path, settings: LearningSettings
) -> tuple[list[WorkloadResult], dict[str, Any], LearningSettings]:
    """Runs of an earlier ``--learning --json`` file, decided again with ``settings`` and the
    file's looks (the alpha spending depends on them); returns the settings used."""
    data = read_json(path)
    results, saved = learning_gate.results_from_json(data)
    settings = learning_gate.looks_of(saved, settings)
    learning_gate.analyse(results, settings)
    return results, data.get("sides", {}), settings


def read_json(path: Path) -> Any:
    """The JSON in ``path``; GateError saying why not."""
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise GateError(f"{path} is not JSON: {e}") from e


def load_results(
    path: Path, settings: Settings
) -> tuple[list[CaseResult], dict[str, Any], Settings]:
    """Results of an earlier ``--json`` run, decided again with ``settings``; returns the
    settings used.

    The rounds at which the run could have stopped (its min and max rounds) are the file's
    own: they are how the samples were gathered, and a regression is tested at the max
    (:func:`rlperf.bench.stats.decide_family`). Threshold, metric and confidence are the
    command line's.
    """
    data = read_json(path)
    if not isinstance(data, dict):
        raise GateError(f"malformed gate results in {path}: not an object")
    results = results_from_json(data)
    saved = data.get("settings")
    saved = saved if isinstance(saved, dict) else {}
    try:
        first = int(saved.get("min_rounds", settings.min_rounds))
        last = int(saved.get("max_rounds", settings.max_rounds))
    except (TypeError, ValueError) as e:
        raise GateError(f"malformed gate results in {path}: settings: {e}") from e
    longest = max(len(r.rounds) for r in results)
    # Files from before 2026-12-03 have no pairing: their pairs ran in turns.
    pairing = saved.get("pairing", "turns")
    settings = replace(settings, min_rounds=first, max_rounds=max(last, longest), pairing=pairing)
    if settings.metric == "wall" and pairing == "together":
        raise GateError(
            f"--metric wall: the samples in {path} were paired together, so "
            "their wall times count each other's share of the CPU; decide on cpu"
        )
    settings.check()
    pooled = analyse(results, settings)
    return results + ([pooled] if pooled else []), data.get("sides", {}), settings


def verdict_line(results: list[CaseResult], settings: Settings, code: int) -> str:
    if code == EXIT_REGRESSION:
        bad = []
        for res in results:
            if res.decision(settings.metric) == "regression":
                phase = res.moved_phase()
                bad.append(res.name if phase is None else f"{res.name} ({phase.describe()})")
        return f"gate: REGRESSION beyond {settings.threshold:.0%} in {', '.join(bad)} (exit 1)"
    if code == EXIT_UNDECIDED:
        open_cases = [r.name for r in results if r.decision(settings.metric) != "ok"]
        return (
            f"gate: could not decide for {', '.join(open_cases)} within "
            f"{settings.max_rounds} rounds (exit 2): rerun, or raise --max-rounds"
        )
    return f"gate: no regression beyond {settings.threshold:.0%} (exit 0)"
