"""How often ``rlperf gate`` cries wolf, and how often it catches a planted slowdown.

Clones this repository at one commit into a temporary directory, adds a second commit there
that makes every training iteration cost ``--slowdown`` more CPU (a busy-wait proportional to
the CPU time of collect, compute_advantages and update: SPS drops by that fraction, 5% by
default), then runs the gate over ``--cases`` alternately

- base against itself (A/A: an exit 1 is a false alarm, for the whole case set), and
- base against the planted commit (an exit 1 is a catch),

recording each run's exit status, wall time, ratios and the phase each case's verdict names.
The gate code that runs is the clone's own (``python -m rlperf.cli gate``), so edits to this
checkout during the experiment change nothing. Each run's ``--json`` is kept; with pairs run
in turns (``-- --pairing turns``) the samples are re-decided on wall time as well, to compare
the two metrics on the same measurements. The
planted slowdown is in the Trainer, so ``--cases`` must be cases that train (``e2e_train``,
``petri_e2e``, ``grid_e2e``: the gate's default set, one per workload, is all of these), and
every one of them slows. The rates are family-wise: a run is a false alarm, or a catch, when
the gate exits 1, whichever of its cases it called a regression.

    python benchmarks/gate_experiment.py --runs 20 --out gate-experiment/
    python benchmarks/gate_experiment.py --runs 20 --cases e2e_train --out ge-all/ \
        -- --threshold 0.03 --max-rounds 30
    python benchmarks/gate_experiment.py --runs 10 --busy 2 --out ge-busy/   # a busy machine

Prints a Markdown summary: the false-alarm and catch rates, every run's duration, and the
round-to-round noise of the A/A runs (the sd of one round's log-ratio, which the sample-size
table of ``--power`` turns into the rounds a 5% catch needs). Also written to OUT/summary.md,
with every run in OUT/runs.json, rewritten after each run (``--summarise OUT/runs.json``
summarises a partial one).

    python benchmarks/gate_experiment.py --power

times nothing: it prints the sample-size table and the exact family-wise false-alarm rates of
the gate's statistics (docs/benchmarks.md), from synthetic samples, in seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlperf.bench.gate import round_log_ratio
from rlperf.bench.harness import busy_processes

RUN_BUDGET_S = 300.0  # the limit on one gate run, seconds

PLANTED = """

# --- planted by benchmarks/gate_experiment.py: every phase of an iteration costs {pct}% more
import time as _planted_time  # noqa: E402


def _planted_slowdown(method):  # noqa: ANN001, ANN202
    def slowed(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        start = _planted_time.process_time()
        out = method(self, *args, **kwargs)
        spin_until = _planted_time.process_time() + {fraction} * (
            _planted_time.process_time() - start
        )
        while _planted_time.process_time() < spin_until:
            pass
        return out

    return slowed


for _name in ("collect", "compute_advantages", "update"):
    setattr(Trainer, _name, _planted_slowdown(getattr(Trainer, _name)))
"""


def git(args: list[str], cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_clone(repo: Path, commit: str, slowdown: float, where: Path) -> tuple[Path, str, str]:
    """(clone path, clean sha, planted sha)."""
    clone = where / "clone"
    git(["clone", "--quiet", str(repo), str(clone)], where)
    git(["checkout", "--quiet", "--detach", commit], clone)
    clean = git(["rev-parse", "HEAD"], clone)
    trainer = clone / "src" / "rlperf" / "ppo" / "trainer.py"
    pct = round(100 * slowdown)
    trainer.write_text(trainer.read_text() + PLANTED.format(pct=pct, fraction=slowdown))
    git(["-c", "user.name=experiment", "-c", "user.email=experiment@localhost",
         "commit", "--quiet", "-am", f"Plant a {pct}% slowdown"], clone)  # fmt: skip
    planted = git(["rev-parse", "HEAD"], clone)
    git(["checkout", "--quiet", "--detach", clean], clone)
    return clone, clean, planted


def run_gate(clone: Path, base: str, head: str, json_path: Path, gate_args: list[str]) -> dict:
    """One gate run of ``head`` (checked out as the working tree) against ``base``."""
    git(["checkout", "--quiet", "--detach", head], clone)
    # A file an earlier experiment left in OUT must not pass for this run's results.
    json_path.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    cmd = [sys.executable, "-m", "rlperf.cli", "gate", "--base", base, "--json", str(json_path),
           *gate_args]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    row: dict[str, Any] = {"exit": done.returncode, "wall_s": wall_s, "stdout": done.stdout}
    if done.returncode not in (0, 1, 2) or not json_path.exists():
        row["stderr"] = done.stderr[-2000:]
        return row
    data = json.loads(json_path.read_text())
    row["cases"] = {
        case["name"]: {
            "verdicts": case["verdicts"],
            "rounds": len(case["rounds"]),
            "round_log_ratios": [round_log_ratio(r, "cpu") for r in case["rounds"]],
            "moved_phase": case.get("moved_phase"),
        }
        for case in data["cases"]
    }
    if data.get("pooled"):
        row["pooled"] = {k: data["pooled"][k] for k in ("verdicts", "moved_phase", "weights")}
    return row


def redecide_on_wall(clone: Path, json_path: Path) -> int | None:
    """Exit status the gate gives on the same samples decided on wall time; None where there
    are none to decide on (no file, or pairs run together: a side's wall time counts the
    other's share of the CPU)."""
    if not json_path.exists():
        return None
    if json.loads(json_path.read_text()).get("settings", {}).get("pairing") == "together":
        return None
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    cmd = [sys.executable, "-m", "rlperf.cli", "gate", "--from-json", str(json_path),
           "--metric", "wall"]  # fmt: skip
    return subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True).returncode


def _meets(count: int, runs: int, target: float = 0.95) -> str:
    return "meets >= 95%" if runs and count >= target * runs else "below 95%"


def summarise(rows: list[dict], slowdown: float) -> str:
    """The rates, the per-case catches, every run's duration and the A/A round noise."""

    def count(kind: str, key: str, code: int) -> int:
        return sum(1 for r in rows if r["kind"] == kind and r[key] == code)

    n_aa = sum(1 for r in rows if r["kind"] == "A/A")
    n_pl = len(rows) - n_aa
    walls = sorted(r["wall_s"] for r in rows)
    names = sorted({name for r in rows for name in r.get("cases", {})})
    lines = [
        f"{len(names)} case{'' if len(names) == 1 else 's'}, family-wise: a run counts as a false "
        "alarm (A/A) or a catch (planted) when it exits 1, whichever of its cases was flagged",
        "",
        f"| metric | A/A false alarms (exit 1) | A/A undecided (exit 2) | "
        f"planted {slowdown:.0%} caught (exit 1) | planted missed (exit 0) | "
        f"planted undecided (exit 2) |",
        "|---|---|---|---|---|---|",
    ]
    for metric, key in (("cpu (gate default)", "exit"), ("wall (same samples)", "exit_wall")):
        if all(r.get(key) is None for r in rows):
            lines.append(f"| {metric} | not measured (pairs run together) | | | | |")
            continue
        lines.append(
            f"| {metric} | {count('A/A', key, 1)}/{n_aa} | {count('A/A', key, 2)}/{n_aa} | "
            f"{count('planted', key, 1)}/{n_pl} | {count('planted', key, 0)}/{n_pl} | "
            f"{count('planted', key, 2)}/{n_pl} |"
        )
    lines += [
        "",
        f"gate wall time per run: median {statistics.median(walls):.0f} s, "
        f"range {walls[0]:.0f}-{walls[-1]:.0f} s over {len(rows)} runs",
    ]
    over = sum(1 for w in walls if w > RUN_BUDGET_S)
    lines.append(f"runs over {RUN_BUDGET_S / 60:.0f} minutes: {over}/{len(rows)}")
    # The targets: an undecided run (exit 2) is a red CI to re-run, so it counts
    # against both rates, not as a neutral outcome.
    passed, caught = count("A/A", "exit", 0), count("planted", "exit", 1)
    lines.append(
        f"targets: A/A exit 0 in {passed}/{n_aa} ({_meets(passed, n_aa)}), planted caught in "
        f"{caught}/{n_pl} ({_meets(caught, n_pl)}), runs within {RUN_BUDGET_S / 60:.0f} "
        f"minutes {len(rows) - over}/{len(rows)}"
    )
    for r in rows:
        if r["exit"] == 2:
            why = (
                "; ".join(
                    f"{name}: {c['verdicts']['cpu'].get('reason', 'undecided')}"
                    for name, c in r.get("cases", {}).items()
                    if c["verdicts"]["cpu"]["decision"] == "undecided"
                )
                or "could not run"
            )
            lines.append(f"undecided {r['kind']} run {r['index']}: {why}")
    for kind in ("A/A", "planted"):
        durations = ", ".join(f"{r['wall_s']:.0f}" for r in rows if r["kind"] == kind)
        lines.append(f"{kind} run durations (s): {durations}")
    if len(names) > 1:
        # The planted slowdown slows every training case: a run that flagged only some caught the
        # regression (exit 1) but missed it in the others.
        every = sum(
            1 for r in rows if r["kind"] == "planted" and r.get("cases") and all(
                c["verdicts"]["cpu"]["decision"] == "regression" for c in r["cases"].values())
        )  # fmt: skip
        lines.append(f"planted runs that flagged every case: {every}/{n_pl}")
    pooled = {kind: [r["pooled"] for r in rows if r["kind"] == kind and r.get("pooled")]
              for kind in ("A/A", "planted")}  # fmt: skip
    if pooled["A/A"] or pooled["planted"]:
        flagged = {k: sum(p["verdicts"]["cpu"]["decision"] == "regression" for p in ps)
                   for k, ps in pooled.items()}  # fmt: skip
        ratios = {k: [p["verdicts"]["cpu"]["ratio"] for p in ps] for k, ps in pooled.items()}
        span = {k: f"{min(v):.3f}-{max(v):.3f}" if v else "n/a" for k, v in ratios.items()}
        phases = [p["moved_phase"]["name"] for p in pooled["planted"] if p.get("moved_phase")]
        top = max(set(phases), key=phases.count) if phases else "none"
        lines.append(
            f"the cases pooled: regression in {flagged['A/A']}/{len(pooled['A/A'])} A/A and "
            f"{flagged['planted']}/{len(pooled['planted'])} planted runs; cpu ratio A/A "
            f"{span['A/A']}, planted {span['planted']}; phase named in planted runs: {top} "
            f"({phases.count(top)}/{len(phases)})"
        )
    for name in names:
        runs = {kind: [r["cases"][name] for r in rows if r["kind"] == kind
                       and name in r.get("cases", {})] for kind in ("A/A", "planted")}  # fmt: skip
        decided = {kind: sum(c["verdicts"]["cpu"]["decision"] == "regression" for c in cs)
                   for kind, cs in runs.items()}  # fmt: skip
        undecided = {kind: sum(c["verdicts"]["cpu"]["decision"] == "undecided" for c in cs)
                     for kind, cs in runs.items()}  # fmt: skip
        ratios = {kind: [c["verdicts"]["cpu"]["ratio"] for c in cs if c["verdicts"]["cpu"]["ratio"]]
                  for kind, cs in runs.items()}  # fmt: skip
        aa_logs = [d for c in runs["A/A"] for d in c["round_log_ratios"]]
        # Robust sd of one A/A round's log-ratio: 1.4826 x the median absolute deviation.
        noise = 1.4826 * statistics.median(abs(d - statistics.median(aa_logs)) for d in aa_logs) \
            if aa_logs else float("nan")  # fmt: skip
        phases = [c["moved_phase"]["name"] for c in runs["planted"] if c.get("moved_phase")]
        top = max(set(phases), key=phases.count) if phases else "none"
        span = {k: f"{min(v):.3f}-{max(v):.3f}" if v else "n/a" for k, v in ratios.items()}
        lines.append(
            f"{name}: regression in {decided['A/A']}/{len(runs['A/A'])} A/A and "
            f"{decided['planted']}/{len(runs['planted'])} planted runs, undecided in "
            f"{undecided['A/A']}/{len(runs['A/A'])} and "
            f"{undecided['planted']}/{len(runs['planted'])}; cpu ratio A/A "
            f"{span['A/A']}, planted {span['planted']}; A/A round noise sd {noise:.3f}; "
            f"phase named in planted runs: {top} ({phases.count(top)}/{len(phases)})"
        )
    return "\n".join(lines)


def power_table(seed: int = 0, trials: int = 200) -> str:
    """How often the gate's own decision (synthetic rounds, :func:`decide_family`) flags a
    slowdown of one case among the default set's, by round noise and horizon, and the exact
    family-wise false-alarm rates; nothing is timed."""
    from rlperf.bench.gate import Settings
    from rlperf.bench.registry import gate_case_names
    from rlperf.bench.stats import REGRESSION, decide_family, family_false_alarm_rate

    cases, default_threshold = len(gate_case_names()), Settings().threshold

    def caught(slowdown: float, threshold: float, noise: float, horizon: int) -> float:
        rng, hits = random.Random(seed), 0
        for _ in range(trials):
            family = {f"c{i}": [math.log1p(slowdown if i == 0 else 0.0) + rng.gauss(0.0, noise)
                                for _ in range(horizon)] for i in range(cases)}  # fmt: skip
            verdicts = decide_family(family, threshold, 0.95, 6, horizon)
            hits += verdicts["c0"].decision == REGRESSION
        return hits / trials

    horizons = (10, 15, 25)
    lines = []
    for slowdown, threshold in ((0.02, default_threshold), (0.05, 0.02)):
        lines += [
            f"A {slowdown:.0%} slowdown of one case among {cases}, threshold {threshold:.0%}: "
            f"share of {trials} synthetic runs that flag it (noise = sd of one round's "
            "log-ratio; tested at the horizon):",
            "",
            "| round noise sd | " + " | ".join(f"horizon {h}" for h in horizons) + " |",
            "|---|" + "---|" * len(horizons),
        ]
        for noise in (0.01, 0.02, 0.03):
            cells = [f"{caught(slowdown, threshold, noise, h):.0%}" for h in horizons]
            lines.append(f"| {noise:.2f} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Exact family-wise false-alarm rate (all cases unchanged, run to the horizon):",
        "",
        "| any number of cases (max-T) | " + " | ".join(f"horizon {h}" for h in horizons) + " |",
        "|---|" + "---|" * len(horizons),
        "| | " + " | ".join(f"{family_false_alarm_rate(0.95, 6, h):.2%}" for h in horizons) + " |",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="gate runs of each kind")
    parser.add_argument("--slowdown", type=float, default=0.05, help="planted CPU slowdown")
    parser.add_argument("--cases", help="the gate's --cases (default: the gate's default case set)")
    parser.add_argument(
        "--power", action="store_true", help="print the synthetic sample-size table and exit"
    )
    parser.add_argument("--commit", default="HEAD", help="commit of this repo to test")
    parser.add_argument("--out", type=Path, default=Path("gate-experiment"))
    parser.add_argument(
        "--summarise", type=Path, metavar="RUNS_JSON", help="only summarise an earlier runs.json"
    )
    parser.add_argument(
        "--busy", type=int, default=0, metavar="N",
        help="run N busy processes (pure-Python spin loops) beside every gate run, as a shared "
        "CI runner or a laptop would (default: 0)",
    )  # fmt: skip
    parser.add_argument("gate_args", nargs="*", help="extra rlperf gate arguments (after --)")
    args = parser.parse_args()
    if args.busy < 0:
        parser.error(f"--busy takes a count of processes >= 0, got {args.busy}")
    if args.power:
        print(power_table())
        return 0
    gate_args = [*(["--cases", args.cases] if args.cases else []), *args.gate_args]
    if args.summarise is not None:
        print(summarise(json.loads(args.summarise.read_text()), args.slowdown))
        return 0
    # The repository this script is in, wherever it is run from.
    repo = Path(git(["rev-parse", "--show-toplevel"], Path(__file__).resolve().parent))
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gate-experiment-") as tmp, busy_processes(args.busy):
        clone, clean, planted = make_clone(repo, args.commit, args.slowdown, Path(tmp))
        print(f"clean {clean[:12]}, planted {planted[:12]} in {clone}", file=sys.stderr)
        for i in range(args.runs):
            # Interleave the two kinds so both see the same spread of machine load.
            for kind, head in (("A/A", clean), ("planted", planted)):
                json_path = args.out / f"run{i:02d}-{'aa' if kind == 'A/A' else 'planted'}.json"
                row = run_gate(clone, clean, head, json_path, gate_args)
                row.update(kind=kind, index=i, exit_wall=redecide_on_wall(clone, json_path))
                rows.append(row)
                said = (row["stdout"].strip().splitlines() or [row.get("stderr", "")])[-1]
                print(f"{kind:8s} run {i:2d}: exit {row['exit']} (wall metric: "
                      f"{row['exit_wall']}) in {row['wall_s']:.0f} s: {said}",
                      file=sys.stderr, flush=True)  # fmt: skip
                (args.out / "runs.json").write_text(json.dumps(rows, indent=1))
    summary = summarise(rows, args.slowdown)
    (args.out / "summary.md").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
