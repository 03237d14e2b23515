"""Subcommands of this package (registered into ``rlperf`` by cli.py): profile, analyze, compare,
ablate.

Each command's logic lives in its own module; here are only the parsers and the glue that turns
bad input into one ``rlperf: error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from rlperf.commandline import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    OneLineParser,
    UsageError,
    check_parsed,
    fail,
)
from rlperf.distributed.launch import add_launch_flags
from rlperf.ppo.commands import (
    add_config_flags,
    add_output_flags,
    config_from_args,
    explicit_overrides,
)


# -- analyze ---------------------------------------------------------------------------------
def check_analyze(args: argparse.Namespace) -> None:
    """``analyze``'s options (the report is read by :func:`cmd_analyze`)."""
    if args.top < 1:
        fail(f"--top must be at least 1, got {args.top}")


def cmd_analyze(args: argparse.Namespace) -> int:
    from rlperf.profiling.analyze import analyze, render_analysis
    from rlperf.profiling.charts import ChartsUnavailable, write_charts
    from rlperf.profiling.report import ReportError, load_report

    try:
        report = load_report(args.report)
    except ReportError as e:
        fail(str(e))
    check_analyze(args)
    analysis = analyze(report)
    text = render_analysis(analysis, top_n=args.top)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
        print(f"\nanalysis: {args.output}")
    if args.detailed:
        Path(args.detailed).write_text(json.dumps(analysis, indent=2) + "\n")
        print(f"detailed: {args.detailed}")
    if args.charts:
        try:
            print(f"charts: {write_charts(report, args.charts)}")
        except ChartsUnavailable as e:
            fail(str(e), EXIT_FAILED)
    return EXIT_OK


# -- compare ---------------------------------------------------------------------------------
def compare_flags(args: argparse.Namespace) -> tuple[list[str], list[str]] | None:
    """The ``rlperf profile`` flags of configurations A and B, each validated; None when
    comparing two report files. Fails (one line, exit 2) on bad input, before any run."""
    from rlperf.config import ConfigError, set_field
    from rlperf.profiling import compare

    run_mode = args.a is not None or args.b is not None
    if args.reports and run_mode:
        fail("compare either two report files or --a/--b configurations, not both")
    if not run_mode:
        if len(args.reports) != 2:
            fail("compare needs two reports (A.json B.json) or --a and --b configurations")
        return None
    if args.a is None or args.b is None:
        fail("--a and --b must both be given (use --a '' for the unchanged configuration)")
    if args.repeats < 1:
        fail(f"--repeats must be at least 1, got {args.repeats}")
    if args.resume or hasattr(args, "run_dir"):
        fail("compare runs fresh processes: --resume and --run-dir do not apply")
    shared = explicit_overrides(args)
    base = config_from_args(args)  # validates the shared flags
    env = base.env.env
    sides = {side: compare.parse_overrides(text, side, env)
             for side, text in (("a", args.a), ("b", args.b))}  # fmt: skip
    for overrides in sides.values():
        if "options" in overrides:  # env options add to (and override) the shared ones
            overrides["options"] = {**shared.get("options", {}), **overrides["options"]}
    for side, overrides in sides.items():
        cfg = config_from_args(args)
        for name, value in overrides.items():
            set_field(cfg, _section(name), name, value)
        try:
            cfg.validate()
        except ConfigError as e:
            raise ConfigError(f"--{side}: {e}") from None
    preset = ["--preset", args.preset]
    return (
        preset + compare.to_flags({**shared, **sides["a"]}),
        preset + compare.to_flags({**shared, **sides["b"]}),
    )


def check_compare(args: argparse.Namespace) -> tuple[list[str], list[str]] | None:
    """``compare``'s checks before any run: :func:`compare_flags`, then each side's
    ``rlperf profile`` command checked as that command checks itself, the env and the policy's
    fit included (as :func:`rlperf.cli.check_command` does, with this package's parsers).
    Returns :func:`compare_flags`'s."""
    flags = compare_flags(args)
    parser = OneLineParser(prog="rlperf")
    register(parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser))
    for side, side_flags in zip("ab", flags or (), strict=False):
        try:
            check_parsed(parser, ["profile", *side_flags])
        except UsageError as e:
            fail(f"--{side}: {e}")
    return flags


def cmd_compare(args: argparse.Namespace) -> int:
    import dataclasses

    from rlperf.profiling import compare, worker_split
    from rlperf.profiling.report import ReportError, load_report

    flags = check_compare(args)  # every run's config, before the first starts
    if flags is None:
        try:
            a, b = (load_report(p) for p in args.reports)
        except ReportError as e:
            fail(str(e))
        print(compare.render_reports(a, b, *args.reports))
        workers = worker_split.split([a], [b])
        if workers is not None:
            print(f"\n{workers.render()}")
        return EXIT_OK

    a_flags, b_flags = flags
    out_dir = Path(args.out) if args.out else None
    # --cprofile's .pstats must outlive the runs to be printed: keep them somewhere.
    keep_dir = out_dir or (Path(tempfile.mkdtemp(prefix="rlperf-compare-")) if args.cprofile
                           else None)  # fmt: skip
    try:
        a_reports, b_reports, interrupted = compare.run_alternating(
            a_flags, b_flags, args.repeats, keep_dir, cprofile=args.cprofile
        )
    except compare.RunFailed as e:
        fail(f"a profile run failed: {e}", EXIT_FAILED)
    except KeyboardInterrupt:
        print("\nrlperf: interrupted before a complete A/B pair; nothing to compare",
              file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    comparisons = compare.compare_runs(a_reports, b_reports)
    explanations = compare.explain(a_reports, b_reports, comparisons)
    only = compare.one_sided(a_reports, b_reports)
    print(compare.render_runs(comparisons, args.a or "(base)", args.b or "(base)", only))
    workers = worker_split.split(a_reports, b_reports)
    print(compare.render_explanation(explanations))
    if workers is not None:
        print(f"- {workers.render()}")
    if args.cprofile:
        from rlperf.profiling.cprofile import top_functions

        for side, reports in (("A", a_reports), ("B", b_reports)):
            pstats_path = reports[-1]["artifacts"]["cprofile"]
            print(f"\ncProfile of the last {side} run: top 50 functions by cumulative time "
                  f"({pstats_path})")  # fmt: skip
            print(top_functions(pstats_path))
        if out_dir is None:  # the pstats were kept in a temporary directory
            shutil.rmtree(cast(Path, keep_dir), ignore_errors=True)
    if out_dir is not None:
        summary = {
            "schema": "rlperf.compare/1",
            "a": args.a,
            "b": args.b,
            "a_flags": a_flags,
            "b_flags": b_flags,
            "figures": [
                {
                    "name": c.name,
                    "a": c.a,
                    "b": c.b,
                    "paired_changes": c.paired_changes,
                    "median_change": c.median_change,
                    "noise": c.noise,
                    "verdict": c.verdict,
                }
                for c in comparisons
            ],  # fmt: skip
            "explanation": [
                {
                    "section": e.section,
                    "share": e.share,
                    "speedup": e.speedup,
                    "predicted_speedup": e.predicted,
                    "measured_speedups": e.measured,
                    "within_measured_spread": e.within,
                }
                for e in explanations
            ],  # fmt: skip
            "one_sided": [
                {"name": name, "side": side, "values": values} for name, side, values in only
            ],  # fmt: skip
            "env_workers": None if workers is None else dataclasses.asdict(workers),
        }
        (out_dir / "compare.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(f"\ncompare: {out_dir / 'compare.json'} (reports in {out_dir}/a_N, b_N)")
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


# -- ablate ----------------------------------------------------------------------------------
def ablate_plan(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """The variants ``ablate`` would run and the settings shared by all, every variant's
    config checked (:func:`rlperf.profiling.ablate.variant_config`); fails (one line, exit 2)
    on bad input, before any run."""
    import math

    from rlperf.config import PRESETS, ConfigError, parse_env_options, preset
    from rlperf.profiling import ablate, compare

    for flag, name in (("--base", args.base), ("--target", args.target)):
        if name not in PRESETS:
            fail(f"unknown preset {name!r} in {flag}: choose one of {', '.join(sorted(PRESETS))}")
    if not (math.isfinite(args.budget_s) and args.budget_s > 0):
        fail(f"--budget-s must be a positive number of seconds, got {args.budget_s}")
    if args.repeats < 1:
        fail(f"--repeats must be at least 1, got {args.repeats}")
    if args.chart and (charts_missing := ablate.charts_missing()):
        fail(charts_missing)
    env = preset(args.base).env.env
    shared = compare.parse_overrides(" ".join(args.set or []), "set", env)
    if args.env_option:
        shared["options"] = {**shared.get("options", {}), **parse_env_options(args.env_option)}
    try:
        plan = ablate.select(ablate.variants(args.base, args.target), args.only)
    except ConfigError as e:
        fail(str(e))
    for variant in plan:  # every row's config checked before the first run
        ablate.variant_config(args.base, variant, shared)
    return plan, shared


def cmd_ablate(args: argparse.Namespace) -> int:
    from rlperf.profiling import ablate, compare

    plan, shared = ablate_plan(args)
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None and out_dir.exists() and any(out_dir.iterdir()):
        fail(f"--out {out_dir} is not empty: ablate writes a fresh directory of runs")
    seeds = args.seed or [1]
    try:
        results, flags = ablate.run_ablation(
            args.base, plan, shared, args.budget_s, seeds, args.repeats, out_dir
        )
    except compare.RunFailed as e:
        fail(f"a profile run failed: {e}", EXIT_FAILED)
    except KeyboardInterrupt:
        kept = f"; the runs so far are in {out_dir}" if out_dir else ""
        print(f"\nrlperf: interrupted before every run finished{kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    rows = ablate.build_rows(plan, results, flags)
    print(ablate.render(rows, args.target, args.budget_s, seeds, args.repeats))
    summary = ablate.to_json(
        rows, args.base, args.target, shared, args.budget_s, seeds, args.repeats
    )
    for path in [args.json, out_dir / "ablate.json" if out_dir else None]:
        if path:
            Path(path).write_text(json.dumps(summary, indent=2) + "\n")
            print(f"\nablation: {path}")
    if args.chart:
        print(f"chart: {ablate.write_chart(rows, args.chart)}")
    return EXIT_OK


def _section(name: str) -> str:
    from rlperf.config import field_index

    return field_index()[name][0]


# -- registration ----------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``profile``, ``analyze``, ``compare`` and ``ablate``."""
    from rlperf.profiling.profile_run import (
        DEFAULT_STEPS,
        add_profile_flags,
        check_profile,
        cmd_profile,
    )

    profile = subparsers.add_parser(
        "profile",
        help="train briefly and show where every millisecond went",
        description=(
            "Train with every section timed and print a nested breakdown. Every `rlperf train` "
            f"flag applies; --total-steps defaults to {DEFAULT_STEPS:,} here."
        ),
    )
    add_profile_flags(profile)
    add_config_flags(profile)
    add_output_flags(profile)
    add_launch_flags(profile)
    profile.set_defaults(func=cmd_profile, check=check_profile)

    analyze = subparsers.add_parser(
        "analyze",
        help="rank the bottlenecks of a saved report, with advice",
        description="Score sections, flag CRITICAL/SLOW/MEMORY/GPU MEMORY, and give advice.",
    )
    analyze.add_argument("report", help="report.json from `rlperf profile --out` (or its DIR)")
    analyze.add_argument("--output", metavar="TXT", help="also write the text analysis here")
    analyze.add_argument("--charts", metavar="PNG", help="write breakdown + per-call charts")
    analyze.add_argument("--detailed", metavar="JSON", help="write everything computed as JSON")
    analyze.add_argument("--top", type=int, default=10, help="rows in the ranking (default 10)")
    analyze.set_defaults(func=cmd_analyze, check=check_analyze)

    compare = subparsers.add_parser(
        "compare",
        help="is B faster than A? two reports, or run both configs with noise shown",
        description=(
            "rlperf compare A.json B.json | rlperf compare --env ENV --a 'k=v ...' "
            "--b 'k=v ...' --repeats N [any rlperf train flag, applied to both]"
        ),
    )
    compare.add_argument("reports", nargs="*", metavar="REPORT", help="two report.json files")
    compare.add_argument("--a", metavar="'k=v ...'", help="settings of configuration A")
    compare.add_argument("--b", metavar="'k=v ...'", help="settings of configuration B")
    compare.add_argument(
        "--repeats", type=int, default=5, help="runs of each configuration (default 5)"
    )
    compare.add_argument("--out", metavar="DIR", help="keep every run's report and compare.json")
    compare.add_argument(
        "--cprofile",
        action="store_true",
        help="cProfile every run too, and print the top 50 functions of each side's last run",
    )
    add_config_flags(compare)
    compare.set_defaults(func=cmd_compare, check=check_compare)

    from rlperf.profiling.ablate import DEFAULT_BUDGET_S

    ablate = subparsers.add_parser(
        "ablate",
        help="what each knob of a preset buys: SPS and wall time to the base's return",
        description=(
            "Train the base preset, each knob of the target applied alone to the base, and the "
            "target, each under the same wall-clock budget in fresh processes, interleaved; "
            "print SPS, speedup, time to the base's final return and the phase that moved most."
        ),
    )
    ablate.add_argument("--base", default="original", help="base preset (default: original)")
    ablate.add_argument(
        "--target", default="ultra_fast", help="preset whose knobs are measured (ultra_fast)"
    )
    ablate.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"wall-clock seconds of training per run (default {DEFAULT_BUDGET_S:g})",
    )
    ablate.add_argument(
        "--repeats", type=int, default=1, help="rounds over every variant and seed (default 1)"
    )
    ablate.add_argument(
        "--seed", type=int, nargs="+", metavar="N", help="seeds, each a run of every variant (1)"
    )
    ablate.add_argument(
        "--env-option",
        action="append",
        metavar="KEY=VALUE",
        help="env option for every variant (repeatable)",
    )
    ablate.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="config field for every variant, over the presets' and the knobs' values "
        "(repeatable; e.g. --set threads=1)",
    )
    ablate.add_argument(
        "--only",
        nargs="+",
        metavar="ROW",
        help="run the base and only these rows: knob names (envs, batch, compile ...) or all "
        "(the target); e.g. --only all for time to return alone",
    )
    ablate.add_argument("--out", metavar="DIR", help="keep every run and DIR/ablate.json")
    ablate.add_argument("--json", metavar="FILE", help="write the table's every row as JSON")
    ablate.add_argument(
        "--chart", metavar="PNG", help="SPS speedups and return curves (needs rlperf[charts])"
    )
    ablate.set_defaults(func=cmd_ablate, check=ablate_plan)
