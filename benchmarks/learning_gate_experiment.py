"""How often ``rlperf gate --learning`` cries wolf, and how often it catches a planted learning bug.

Clones this repository at one commit into a temporary directory and adds one commit per planted
bug there (:data:`BUGS`: each appends a few lines to one module, so it applies to any commit
that has the names it wraps; the clone is scratch, this checkout is never touched). Then, round
after round, it runs the learning gate of the clean commit against

- itself (A/A: an exit 1 is a false alarm, for the whole workload set), and
- each planted commit (an exit 1 is a catch),

recording every run's exit status, wall time and, per workload, the decision, the median
steps ratio, the SPS ratio and what moved. The gate that runs is the clone's own (``python -m
rlperf.cli gate --learning``). Each run's ``--json`` is kept in OUT.

    python benchmarks/learning_gate_experiment.py --runs 20 --out lg20/        # the issue's check
    python benchmarks/learning_gate_experiment.py --runs 1 --out lg1/          # one of each
    python benchmarks/learning_gate_experiment.py --runs 20 --busy 2 --out lg20-busy/
    python benchmarks/learning_gate_experiment.py --runs 1 --bugs lr_x0.4 --out x/ -- --seed 5

Prints a Markdown summary (also OUT/summary.md; every run in OUT/runs.json, rewritten after
each run; ``--summarise OUT/runs.json`` summarises a partial one).

    python benchmarks/learning_gate_experiment.py --power

trains nothing: the false-alarm rate and the catch rates of the gate's decision rule on
simulated censored runs (lognormal steps at the default set's measured spreads), in seconds.

    python benchmarks/learning_gate_experiment.py --seeds 1-48 --workload cartpole_mlp \
        --bugs gae_done_shift --out seeds.json

trains the workload in this process, seed after seed, on the clean code and with each bug
applied in-process (its lines run in the module's namespace, as a commit would append them),
to the workload's cap: each run's steps to its threshold, their median and spread, the bug's
median ratio. What the gate's workloads, thresholds and runs a round were chosen from.
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

from rlperf.bench.censored import Obs, decide_learning, median_ratio
from rlperf.bench.harness import busy_processes
from rlperf.bench.learning_gate import LearningSettings
from rlperf.bench.registry.learning import get

RUN_BUDGET_S = 300.0  # the limit on one gate run of the default set, seconds


def config_bug(change: str) -> str:
    """Lines for trainer.py that make every Trainer apply ``change`` to its config first."""
    return f"""
_planted_init = Trainer.__init__


def _planted_trainer_init(self, cfg, *args, **kwargs):
    {change}
    _planted_init(self, cfg, *args, **kwargs)


Trainer.__init__ = _planted_trainer_init
"""


# name -> (module of the clone, what it does, the lines appended to that module). Each bug
# trains exactly the same computations per step as the clean code (SPS within noise) and
# learns later: docs/gate.md ("Learning gate") has their measured effects.
BUGS: dict[str, tuple[str, str, str]] = {
    "lr_x0.4": (
        "src/rlperf/ppo/trainer.py",
        "the learning rate at 0.4x the configured one (a mistyped default, a schedule bug)",
        config_bug("cfg.ppo.learning_rate *= 0.4"),
    ),
    "gae_done_shift": (
        "src/rlperf/ppo/trainer.py",
        "GAE reads each step's done flags one step late (an off-by-one in the done mask)",
        """
_planted_gae = gae


def _planted_one_step_late(flags):
    late = flags * 0  # same dtype and layout: GAE keeps its native path
    late[1:] = flags[:-1]
    return late


def gae(*, terminations, truncations, **kwargs):
    return _planted_gae(terminations=_planted_one_step_late(terminations),
                        truncations=_planted_one_step_late(truncations), **kwargs)
""",
    ),
    "no_adv_norm": (
        "src/rlperf/ppo/trainer.py",
        "advantage normalisation off whatever --norm-adv says (a flag read from the wrong place)",
        config_bug("cfg.ppo.norm_adv = False"),
    ),
    "entropy_sign": (
        "src/rlperf/ppo/update.py",
        "the entropy term's sign flipped: the loss rewards certainty instead of exploration",
        """
import dataclasses as _planted_dataclasses

_planted_loss_coefs = loss_coefs


def loss_coefs(ppo):
    coefs = _planted_loss_coefs(ppo)
    return _planted_dataclasses.replace(coefs, ent_coef=-coefs.ent_coef)
""",
    ),
    "truncation_as_termination": (
        "src/rlperf/ppo/trainer.py",
        "a time limit treated as a terminal state: no bootstrap from V(final observation)",
        """
_planted_gae = gae


def gae(*, terminations, truncations, bootstrap_values, **kwargs):
    ended = terminations + truncations - terminations * truncations
    return _planted_gae(terminations=ended, truncations=truncations * 0,
                        bootstrap_values=bootstrap_values * 0, **kwargs)
""",
    ),
}


# The planted set: each makes the median steps to the return >= 25% worse on at least one
# default workload (docs/gate.md). entropy_sign does not (1.13x on CartPole at the 0.01
# coefficient, none on the others): it is kept to measure that blind spot, not in the set.
DEFAULT_BUGS = ["lr_x0.4", "gae_done_shift", "no_adv_norm", "truncation_as_termination"]


def git(args: list[str], cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def plant(clone: Path, clean: str, name: str) -> str:
    """Commit bug ``name`` on top of ``clean`` in the clone; its sha."""
    module, what, code = BUGS[name]
    git(["checkout", "--quiet", "--detach", clean], clone)
    path = clone / module
    path.write_text(f"{path.read_text()}\n\n# --- planted by {Path(__file__).name}: {what}{code}")
    git(["-c", "user.name=experiment", "-c", "user.email=experiment@localhost",
         "commit", "--quiet", "-am", f"Plant {name}: {what}"], clone)  # fmt: skip
    return git(["rev-parse", "HEAD"], clone)


def make_clone(repo: Path, commit: str, bugs: list[str], where: Path) -> tuple[Path, str, dict]:
    """(clone path, clean sha, bug -> planted sha)."""
    clone = where / "clone"
    git(["clone", "--quiet", str(repo), str(clone)], where)
    git(["checkout", "--quiet", "--detach", commit], clone)
    clean = git(["rev-parse", "HEAD"], clone)
    planted = {name: plant(clone, clean, name) for name in bugs}
    git(["checkout", "--quiet", "--detach", clean], clone)
    return clone, clean, planted


def run_gate(clone: Path, base: str, head: str, json_path: Path, gate_args: list[str]) -> dict:
    """One learning gate run of ``head`` (checked out as the working tree) against ``base``."""
    git(["checkout", "--quiet", "--detach", head], clone)
    json_path.unlink(missing_ok=True)  # an earlier experiment's file must not pass for this one
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    cmd = [sys.executable, "-m", "rlperf.cli", "gate", "--learning", "--base", base,
           "--json", str(json_path), *gate_args]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True)
    row: dict[str, Any] = {"exit": done.returncode, "wall_s": time.perf_counter() - started,
                           "stdout": done.stdout}  # fmt: skip
    if done.returncode not in (0, 1, 2) or not json_path.exists():
        row["stderr"] = done.stderr[-2000:]
        return row
    data = json.loads(json_path.read_text())
    row["seed"] = data["settings"].get("seed")
    row["workloads"] = {w["name"]: workload_row(w) for w in data["workloads"]}
    return row


def workload_row(entry: dict) -> dict:
    """A workload's decision, rounds and medians from a ``--json`` file's entry."""
    runs = entry["runs"]

    def med(side: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[side])

    def sps(side: str) -> float:
        return statistics.median(run.get("sps") or run["steps"] / run["cpu_s"]
                                 for run in runs[side])  # fmt: skip

    verdict = entry["verdicts"]["steps"]
    return {
        "decision": verdict["decision"], "rounds": verdict["rounds"], "ratio": verdict["ratio"],
        "reason": verdict["reason"], "base_steps": med("base", "steps"),
        "head_steps": med("head", "steps"), "sps_ratio": sps("head") / sps("base"),
        "censored": {side: sum(not r["reached"] for r in runs[side]) for side in runs},
    }  # fmt: skip


def summarise(rows: list[dict]) -> str:
    """Rates per kind, durations, and per kind and workload the decisions and ratios."""
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    lines = [
        "A run counts as a false alarm (A/A) or a catch (planted bug) when it exits 1, whichever "
        "workload was flagged.",
        "",
        "| kind | runs | exit 0 | exit 1 | exit 2 | wall time per run, s: median [min-max] |",
        "|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        codes = [r["exit"] for r in mine]
        walls = sorted(r["wall_s"] for r in mine)
        lines.append(
            f"| {kind} | {len(mine)} | {codes.count(0)} | {codes.count(1)} | {codes.count(2)} | "
            f"{statistics.median(walls):.0f} [{walls[0]:.0f}-{walls[-1]:.0f}] |"
        )
    over = sum(r["wall_s"] > RUN_BUDGET_S for r in rows)
    lines += ["", f"runs over {RUN_BUDGET_S / 60:.0f} minutes: {over}/{len(rows)}", ""]
    aa = [r for r in rows if r["kind"] == "A/A"]
    if aa:
        passed = sum(r["exit"] == 0 for r in aa)
        lines.append(f"target A/A (at most 1 false alarm in 20): exit 0 in {passed}/{len(aa)}")
    for kind in kinds:
        if kind == "A/A":
            continue
        mine = [r for r in rows if r["kind"] == kind]
        caught = sum(r["exit"] == 1 for r in mine)
        lines.append(f"target {kind} (caught in 19 of 20): caught in {caught}/{len(mine)}")
    lines += ["", "| kind | workload | decisions | median steps head/base | SPS head/base |",
              "|---|---|---|---|---|"]  # fmt: skip
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind and "workloads" in r]
        for name in dict.fromkeys(w for r in mine for w in r["workloads"]):
            entries = [r["workloads"][name] for r in mine if name in r["workloads"]]
            decisions = [e["decision"] for e in entries]
            counts = ", ".join(f"{decisions.count(d)} {d}" for d in dict.fromkeys(decisions))
            ratios = [e["head_steps"] / e["base_steps"] for e in entries]
            sps = [e["sps_ratio"] for e in entries]
            lines.append(f"| {kind} | {name} | {counts} | {span(ratios)} | {span(sps)} |")
    for r in rows:
        if r["exit"] not in (0, 1) or "workloads" not in r:
            said = (r["stdout"].strip().splitlines() or [r.get("stderr", "")])[-1]
            lines.append(f"{r['kind']} run {r['index']}: exit {r['exit']}: {said}")
    return "\n".join(lines)


def span(values: list[float]) -> str:
    """``1.02`` for one value, ``1.02 [0.97-1.08]`` for several."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


# -- the decision rule on simulated runs ------------------------------------------------------
# Spread (sd of log steps across seeds) and median steps of the default set's workloads, from
# 12 seeds each (CartPole MLP: 48; docs/gate.md); censoring at the workload's cap.
SIMULATED = {
    "cartpole_mlp": (0.21, 171_008, 300_000),
    "cartpole_lstm_position": (0.10, 32_768, 150_000),
    "petri_masked": (0.125, 18_432, 60_000),
    "catch_cnn": (0.08, 7_424, 30_000),
    "pendulum": (0.155, 102_400, 200_000),
}


def simulated_runs(rng: random.Random, factor: float, n: int, sd: float, median_steps: float,
                   cap: float) -> list[Obs]:  # fmt: skip
    """``n`` runs' steps to the return: lognormal, counted in iterations of 2,048 steps as the
    trainer checks, censored at ``cap``."""
    runs = []
    for _ in range(n):
        steps = median_steps * factor * math.exp(rng.gauss(0.0, sd))
        runs.append(Obs(cap, False) if steps > cap else Obs(2048 * math.ceil(steps / 2048)))
    return runs


def simulate(factors: dict[str, float], trials: int, seed: int) -> tuple[float, float, float]:
    """(share of gate runs that flag a regression, share undecided, mean runs a side) of the
    default settings with each workload ``factors[name]`` times slower to learn."""
    settings, rng = LearningSettings(), random.Random(seed)
    looks = settings.look_rounds()
    per_round = {name: get(name).runs_per_round for name in SIMULATED}
    flagged = undecided = runs_a_side = 0
    for _ in range(trials):
        runs = {}
        for name, (sd, med, cap) in SIMULATED.items():
            n = looks[-1] * per_round[name]
            runs[name] = (simulated_runs(rng, factors.get(name, 1.0), n, sd, med, cap),
                          simulated_runs(rng, 1.0, n, sd, med, cap))  # fmt: skip
        verdicts = decide_learning(runs, looks, settings.threshold, settings.confidence,
                                   per_round)  # fmt: skip
        flagged += any(v.decision == "regression" for v in verdicts.values())
        undecided += any(v.decision == "undecided" for v in verdicts.values())
        runs_a_side += sum(v.rounds * per_round[name] for name, v in verdicts.items())
    return flagged / trials, undecided / trials, runs_a_side / trials


def power_table(trials: int = 1000, seed: int = 0) -> str:
    names = list(SIMULATED)
    lines = [
        f"The default settings ({LearningSettings().look_rounds()} looks, threshold 10%, "
        f"confidence 95%) on {trials} simulated gate runs of the {len(names)} default workloads "
        "(lognormal steps at their measured spreads, censored at their caps):",
        "",
        "| head learns | flagged (exit 1) | undecided | runs a side a gate run (of "
        f"{sum(get(n).runs_per_round for n in names) * LearningSettings().max_rounds}) |",
        "|---|---|---|---|",
    ]
    cases = [("as the base (A/A)", {})]
    cases.append(("1.35x the steps, cartpole_mlp alone (gae_done_shift)", {"cartpole_mlp": 1.35}))
    for factor in (1.1, 1.25, 1.5, 2.0):
        cases.append((f"{factor:.2f}x the steps, every workload", dict.fromkeys(names, factor)))
    for factor in (1.25, 1.5):
        for name in names:
            cases.append((f"{factor:.2f}x the steps, {name} alone", {name: factor}))
    for label, factors in cases:
        flagged, undecided, runs_a_side = simulate(factors, trials, seed)
        lines.append(f"| {label} | {flagged:.1%} | {undecided:.1%} | {runs_a_side:.1f} |")
    return "\n".join(lines)


# -- seeds in this process: each workload's spread, each bug's effect -------------------------
def plant_in_process(name: str) -> None:
    """Apply bug ``name`` to the imported modules as its commit would (its lines run in the
    module's namespace; they rebind the names they wrap)."""
    import importlib

    module_path, _, code = BUGS[name]
    dotted = module_path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    exec(code, vars(importlib.import_module(dotted)))  # noqa: S102  # our own planted lines


def steps_to_threshold(workload: str, seed: int) -> dict[str, Any]:
    """One seed trained to the workload's threshold or cap, as the gate's runs are."""
    from rlperf.bench.registry.learning import learn

    out = learn(workload, seed)
    return {"seed": seed, "reached": out["reached"], "steps": out["steps"], "cpu_s": out["cpu_s"]}


def seed_table(workload: str, seeds: list[int], bugs: list[str]) -> tuple[list[dict], str]:
    """Every seed on the clean code, then with each bug (cumulative patches are avoided by
    training the bugs in child processes); rows and a Markdown table."""
    rows = [{"code": "clean", **steps_to_threshold(workload, s)} for s in seeds]
    for bug in bugs:
        rows += run_in_child(workload, seeds, bug)
    lines = ["| code | runs | reached | median steps [min-max] of those reached | sd of log steps "
             "| median ratio to clean (Kaplan-Meier) |", "|---|---|---|---|---|---|"]  # fmt: skip
    clean = [Obs(float(r["steps"]), r["reached"]) for r in rows if r["code"] == "clean"]
    for code in ["clean", *bugs]:
        mine = [r for r in rows if r["code"] == code]
        reached = [r["steps"] for r in mine if r["reached"]]
        obs = [Obs(float(r["steps"]), r["reached"]) for r in mine]
        sd = statistics.pstdev(math.log(x) for x in reached) if len(reached) > 1 else math.nan
        steps = (f"{statistics.median(reached):,.0f} [{min(reached):,}-{max(reached):,}]"
                 if reached else "-")  # fmt: skip
        lines.append(f"| {code} | {len(mine)} | {len(reached)} | {steps} | {sd:.2f} | "
                     f"{median_ratio(obs, clean)} |")  # fmt: skip
    return rows, "\n".join(lines)


def run_in_child(workload: str, seeds: list[int], bug: str) -> list[dict]:
    """The seeds with ``bug`` planted, in a child process (the patch stays there)."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import learning_gate_experiment as x\n"
        f"x.plant_in_process({bug!r})\n"
        f"print(json.dumps([x.steps_to_threshold({workload!r}, s) for s in {seeds!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return [{"code": bug, **row} for row in json.loads(done.stdout.strip().splitlines()[-1])]


def parse_seeds(text: str) -> list[int]:
    """``1-48`` or ``1,2,5``."""
    if "-" in text:
        first, last = (int(x) for x in text.split("-", 1))
        return list(range(first, last + 1))
    return [int(x) for x in text.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="gate runs of each kind")
    parser.add_argument(
        "--bugs",
        default=",".join(DEFAULT_BUGS),
        help=f"comma-separated planted bugs of {', '.join(BUGS)} (default: "
        f"{', '.join(DEFAULT_BUGS)})",
    )
    parser.add_argument("--commit", default="HEAD", help="commit of this repo to test")
    parser.add_argument(
        "--no-aa", action="store_true", help="planted bugs only (a batch beside an A/A one)"
    )
    parser.add_argument("--out", type=Path, default=Path("learning-gate-experiment"))
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run N busy processes (pure-Python spin loops) beside every gate run",
    )
    parser.add_argument(
        "--power",
        action="store_true",
        help="print the simulated false-alarm and catch rates and exit",
    )
    parser.add_argument(
        "--summarise", type=Path, metavar="RUNS_JSON", help="only summarise an earlier runs.json"
    )
    parser.add_argument("--seeds", help="train these seeds in this process (1-48 or 1,2,5) and "
                        "print each bug's effect on --workload; writes --out as JSON")  # fmt: skip
    parser.add_argument("--workload", default="cartpole_mlp", help="the workload of --seeds")
    parser.add_argument("gate_args", nargs="*", help="extra rlperf gate arguments (after --)")
    args = parser.parse_args()  # fmt: skip
    bugs = [b for b in args.bugs.split(",") if b]
    unknown = [b for b in bugs if b not in BUGS]
    if unknown or args.runs < 1 or args.busy < 0 or (args.no_aa and not bugs):
        parser.error(f"--bugs takes {', '.join(BUGS)}; --runs >= 1; --busy >= 0; --no-aa "
                     "needs a bug")  # fmt: skip
    if args.power:
        print(power_table())
        return 0
    if args.summarise is not None:
        print(summarise(json.loads(args.summarise.read_text())))
        return 0
    if args.seeds:
        from rlperf.bench.registry.learning import get

        try:
            get(args.workload)  # an unknown workload: its error before any training
            seeds = parse_seeds(args.seeds)
        except ValueError as e:  # UnknownWorkloadError is one; int() of a bad seed too
            parser.error(f"--workload/--seeds: {e}")
        out = args.out / "seeds.json" if args.out.is_dir() else args.out
        if not out.parent.is_dir():  # said before the training, not after it
            parser.error(f"--out {out}: folder {out.parent} does not exist")
        rows, table = seed_table(args.workload, seeds, bugs)
        out.write_text(json.dumps(rows, indent=1))
        print(table)
        return 0
    repo = Path(git(["rev-parse", "--show-toplevel"], Path.cwd()))
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="learning-gate-") as tmp, busy_processes(args.busy):
        clone, clean, planted = make_clone(repo, args.commit, bugs, Path(tmp))
        heads = planted if args.no_aa else {"A/A": clean, **planted}
        print(f"clean {clean[:12]}; planted: " +
              ", ".join(f"{b} {s[:12]}" for b, s in planted.items()), file=sys.stderr)  # fmt: skip
        for i in range(args.runs):
            for kind, head in heads.items():  # interleaved: each sees the same spread of load
                json_path = args.out / f"run{i:02d}-{kind.replace('/', '')}.json"
                started = time.strftime("%Y-%m-%d %H:%M:%S")
                row = run_gate(clone, clean, head, json_path, args.gate_args)
                row.update(kind=kind, index=i, started=started)
                rows.append(row)
                said = (row["stdout"].strip().splitlines() or [row.get("stderr", "")])[-1]
                print(f"{kind:26s} run {i:2d}: exit {row['exit']} in {row['wall_s']:.0f} s: "
                      f"{said}", file=sys.stderr, flush=True)  # fmt: skip
                (args.out / "runs.json").write_text(json.dumps(rows, indent=1))
    summary = summarise(rows)
    (args.out / "summary.md").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
