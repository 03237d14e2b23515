"""Subcommands of this package (registered into ``rlperf`` by cli.py): ``rlperf gate``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rlperf.bench.gate import (
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
from rlperf.bench.registry import UnknownCaseError, select
from rlperf.bench.worktree import GitError, checked_out, repo_root, resolve_commit

# CartPole's MLP end to end: the case the gate's false-alarm and catch rates were measured on
# (docs/benchmarks.md). The other workloads' e2e cases are selected with --cases e2e_train.
DEFAULT_CASES = "e2e_train[num_envs=64,env_steps=4096,threads=1]"
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
    gate.add_argument(
        "--threshold",
        type=float,
        default=0.10,
        help="slowdown that fails the gate, as a fraction (default: 0.10)",
    )
    gate.add_argument(
        "--cases",
        default=DEFAULT_CASES,
        help=f"comma-separated case names or components (default: {DEFAULT_CASES})",
    )
    gate.add_argument(
        "--metric", choices=METRICS, default="cpu", help="time the decision uses (default: cpu)"
    )
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
    defaults = Settings()
    tuning = (
        ("--confidence", float, "confidence", "interval coverage"),
        ("--min-rounds", int, "min_rounds", "fewest rounds before deciding"),
        ("--max-rounds", int, "max_rounds", "rounds before giving up undecided"),
        ("--pairs", int, "pairs_per_round", "samples per side per round"),
        ("--sample-s", float, "sample_s", "CPU seconds of one sample"),
        ("--warmup-s", float, "warmup_s", "untimed CPU seconds per case and round"),
    )
    for flag, kind, attr, text in tuning:
        default = getattr(defaults, attr)
        gate.add_argument(flag, type=kind, default=default, help=f"{text} (default: {default})")
    gate.set_defaults(func=cmd_gate)


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


def cmd_gate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        settings = settings_from_args(args)
        if args.json is not None and not args.json.parent.is_dir():
            raise GateError(f"--json: directory {args.json.parent} does not exist")
        if args.from_json is not None:
            results, sides = load_results(args.from_json, settings)
        else:
            if not args.base:
                raise GateError("--base REF is required (or --from-json FILE)")
            names = [c.name for c in select(split_cases(args.cases))]
            if not names:
                raise GateError("--cases names no case")
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


def measure(
    base_ref: str, head_ref: str | None, names: list[str], settings: Settings
) -> tuple[list[CaseResult], dict[str, Any]]:
    """Check the base (and a head ref) out in worktrees and run the rounds."""
    repo = repo_root(Path.cwd())
    base_sha = resolve_commit(base_ref, repo)
    head_sha = resolve_commit(head_ref, repo) if head_ref else ""
    with ExitStack() as stack:
        base_tree = stack.enter_context(checked_out(base_sha, repo))
        head_tree = stack.enter_context(checked_out(head_sha, repo)) if head_sha else repo
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


def load_results(path: Path, settings: Settings) -> tuple[list[CaseResult], dict[str, Any]]:
    """Results of an earlier ``--json`` run, decided again with ``settings``."""
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise GateError(f"{path} is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise GateError(f"malformed gate results in {path}: not an object")
    results = results_from_json(data)
    for res in results:
        res.verdicts = analyse(res.rounds, settings)
    return results, data.get("sides", {})


def verdict_line(results: list[CaseResult], settings: Settings, code: int) -> str:
    if code == EXIT_REGRESSION:
        bad = [r.name for r in results if r.decision(settings.metric) == "regression"]
        return f"gate: REGRESSION beyond {settings.threshold:.0%} in {', '.join(bad)} (exit 1)"
    if code == EXIT_UNDECIDED:
        open_cases = [r.name for r in results if r.decision(settings.metric) != "ok"]
        return (
            f"gate: could not decide for {', '.join(open_cases)} within "
            f"{settings.max_rounds} rounds (exit 2): rerun, or raise --max-rounds"
        )
    return f"gate: no regression beyond {settings.threshold:.0%} (exit 0)"
