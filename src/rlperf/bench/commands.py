"""Subcommands of this package (registered into ``rlperf`` by cli.py): ``rlperf gate``,
``rlperf bisect`` and ``rlperf history``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlperf.bench.bisection import BisectError, bisect
from rlperf.bench.bisection import verdict_line as bisect_verdict_line
from rlperf.bench.gate import (
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    METRICS,
    CaseResult,
    GateError,
    Settings,
    Side,
    analyse,
    exit_code,
    report,
    results_from_json,
    run_rounds,
)
from rlperf.bench.history import HistoryError, build, results_dir_from_conf
from rlperf.bench.registry import UnknownCaseError, gate_case_names, select
from rlperf.bench.worktree import (
    GitError,
    build_in_place,
    check_same_kernels_built,
    checked_out,
    repo_root,
    resolve_commit,
)
from rlperf.run.run_dir import cannot_write

EXIT_INTERRUPTED = 130  # as rlperf train


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add this package's subcommands."""
    gate = subparsers.add_parser(
        "gate",
        help="fail when HEAD is slower than a base commit (CI gate on SPS)",
        description=(
            "Time registry cases of a base commit and of the head, alternating in fresh "
            "processes, until the head/base time ratio's interval is clearly below or above "
            "1 + threshold. Exit 0: no regression; 1: regression; 2: undecided or could not run."
        ),
    )
    gate.add_argument("--base", metavar="REF", help="commit to compare against (origin/main)")
    gate.add_argument(
        "--head", metavar="REF", help="commit to test (default: the current working tree)"
    )
    add_settings(gate)
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


def add_settings(parser: argparse.ArgumentParser) -> None:
    """The gate's measuring and deciding options (shared by gate and bisect)."""
    parser.add_argument(
        "--threshold",
        type=float,
        default=Settings.threshold,
        help=f"slowdown that fails the gate, as a fraction (default: {Settings.threshold})",
    )
    parser.add_argument(
        "--cases",
        help="comma-separated case names or components (default: the registry's cases tagged "
        "gate, one end-to-end training case per workload; printed when the gate starts)",
    )
    parser.add_argument(
        "--metric", choices=METRICS, default="cpu", help="time the decision uses (default: cpu)"
    )
    defaults = Settings()
    tuning = (
        ("--confidence", float, "confidence", "interval coverage; false alarms <= (1-c)/2"),
        ("--min-rounds", int, "min_rounds", "fewest rounds before deciding"),
        ("--max-rounds", int, "max_rounds", "rounds before giving up undecided"),
        ("--pairs", int, "pairs_per_round", "samples per side per round"),
        ("--sample-s", float, "sample_s", "CPU seconds of one sample"),
        ("--warmup-s", float, "warmup_s", "untimed CPU seconds per case and round"),
    )
    for flag, kind, attr, text in tuning:
        default = getattr(defaults, attr)
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default: {default})")


def error(message: str) -> int:
    print(f"rlperf: error: {message}", file=sys.stderr)
    return EXIT_UNDECIDED


def split_cases(text: str) -> list[str]:
    """``"e2e_train,gae[num_steps=32,num_envs=64]"`` -> its entries (commas inside [] kept)."""
    return [name.strip() for name in re.split(r",(?![^\[]*\])", text) if name.strip()]


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(
        threshold=args.threshold,
        metric=args.metric,
        confidence=args.confidence,
        min_rounds=args.min_rounds,
        max_rounds=args.max_rounds,
        pairs_per_round=args.pairs,
        sample_s=args.sample_s,
        warmup_s=args.warmup_s,
    ).check()


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
    return settings, names


def check_gate(args: argparse.Namespace) -> None:
    """``gate``'s checks before any work, less the files and git refs it names (see
    :func:`rlperf.cli.check_command`)."""
    with usage_errors():
        gate_plan(args)


def check_bisect(args: argparse.Namespace) -> None:
    """``bisect``'s checks before any work, less the git refs it names."""
    with usage_errors():
        settings_from_args(args)
        case_names(args.cases)


@contextmanager
def usage_errors() -> Iterator[None]:
    """This package's errors of bad input as the CLI's :class:`~rlperf.cli.UsageError`."""
    from rlperf.cli import UsageError

    try:
        yield
    except (GateError, UnknownCaseError) as e:
        raise UsageError(str(e)) from None


def cmd_gate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        problem = out_file_problem("--json", args.json)
        if problem:
            raise GateError(problem)
        settings, names = gate_plan(args)
        if names is None:
            results, sides, settings = load_results(args.from_json, settings)
        else:
            results, sides = measure(args.base, args.head, names, settings)
    except (GateError, GitError, UnknownCaseError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        print("rlperf: gate interrupted; nothing decided", file=sys.stderr)
        return EXIT_INTERRUPTED
    code = exit_code(results, settings.metric)
    print(report(results, settings))
    print(verdict_line(results, settings, code))
    if args.json is not None:
        payload = {
            "sides": sides,
            "settings": vars(settings),
            "cases": [r.to_dict() for r in results],
            "exit_code": code,
            "gate_wall_s": time.perf_counter() - started,
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return code


def out_file_problem(flag: str, path: Path | None) -> str | None:
    """Why the file ``flag`` names could not be written, or None; checked before any work,
    so a long run does not end in a traceback at its last step."""
    if path is None:
        return None
    if not path.parent.is_dir():
        return f"{flag}: directory {path.parent} does not exist"
    problem = cannot_write(path, folder=False)
    return f"{flag} {path}: {problem}" if problem else None


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

    try:
        settings = settings_from_args(args)
        names = case_names(args.cases)
        repo = repo_root(Path.cwd())
        out = bisect(repo, args.good, args.bad, names, settings,
                     lambda m: print(m, file=sys.stderr), say)  # fmt: skip
    except (BisectError, GateError, GitError, UnknownCaseError) as e:
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


def measure(
    base_ref: str, head_ref: str | None, names: list[str], settings: Settings
) -> tuple[list[CaseResult], dict[str, Any]]:
    """Check the base (and a head ref) out in worktrees and run the rounds."""
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
        print(
            f"gate: base {base.describe()} vs head {head.describe()}: {', '.join(names)}",
            file=sys.stderr,
        )
        results = run_rounds(base, head, names, settings, lambda m: print(m, file=sys.stderr))
    sides = {s.label: {"ref": s.ref, "sha": s.sha} for s in (base, head)}
    return results, sides


def load_results(
    path: Path, settings: Settings
) -> tuple[list[CaseResult], dict[str, Any], Settings]:
    """Results of an earlier ``--json`` run, decided again with ``settings``; returns the
    settings used.

    The rounds at which the run could have stopped (its min and max rounds) are the file's
    own: they are how the samples were gathered, and the sequential test's p-value depends on
    them (:func:`rlperf.bench.stats.sequential_sign_pvalue`). Threshold, metric and confidence
    are the command line's.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise GateError(f"{path} is not JSON: {e}") from e
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
    settings = replace(settings, min_rounds=first, max_rounds=max(last, longest))
    analyse(results, settings)
    return results, data.get("sides", {}), settings


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
