"""``rlperf tune --env ENV [--preset P] --trials N --trial-wall-s S [--storage URL] --out FILE``:
the search for the settings that reach the highest return in S seconds of training.

- **Trials**: each a fresh ``rlperf train`` process (``trial.py``) on ``--env`` with the
  preset's settings and the trial's draw from the search space (``space.py``), stopped by
  ``--max-wall-s S`` with its learning rate annealed over those seconds; all on ``--seed``, so
  that trials differ by their settings alone (paired seeds). The first trial is the preset
  itself: the search is measured against where it started.
- **Objective**: the mean return of the trial's last 100 episodes when its budget ran out
  (``summary.json``'s ``mean_return_last_100``), maximised.
- **Sampler**: Optuna's TPE (seeded by ``--seed`` and the trials already run, so a resumed
  search does not draw its first trials again). **Pruner**: Optuna's median rule on the
  learning curve: every S/10 seconds of a trial's budget its current mean return is reported,
  and a trial below the median of the earlier trials at the same point (after 5 trials, past the
  first 3 points) is stopped there. The median rule rather than successive halving: with the
  20-odd trials a search on a 2-core machine affords, halving's rungs would hold 2-3 trials.
- **Storage and resuming**: the study lives in ``--storage`` (SQLite beside ``--out`` unless
  given), named by the preset and env (``--study-name``); the same command continues it until
  ``--trials`` trials have ended (finished, pruned or failed). SIGTERM or Ctrl-C stops the
  running trial's process, records that trial as failed and interrupted, queues its settings to
  run again, and exits 130 with every ended trial kept. One ``rlperf tune`` at a time per study:
  a trial found running at the start was left by a process that died, and is treated as
  interrupted.
- **Result**: after every trial, the best finished trial's settings as a preset file ``--out``
  (``rlperf train --preset-file FILE``), with the budget it was found at (``--max-wall-s``,
  ``--anneal-with-wall``) and where it came from under ``about``.

A trial that crashes, or whose settings ``rlperf train`` refuses, is recorded as failed with
its last line; it is not lost and does not stop the search. Bad input to ``tune`` itself is one
line ``rlperf: error: ...`` and exit 2, before any trial.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.commandline import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, fail
from rlperf.config import PRESETS, Config, ConfigError, configure, preset_file_text, set_field
from rlperf.run.run_dir import cannot_write, out_file_problem
from rlperf.tune import space, trial

TICKS = 10  # points of a trial's learning curve reported to the pruner: every S/10 seconds
PRUNE_AFTER_TRIALS, PRUNE_AFTER_TICKS = 5, 3
POLL_S = 0.5  # how often the curve is read
# A trial's process may take this long beyond its budget (start-up: imports, building envs)
# before it is called hung and stopped.
STARTUP_ALLOWANCE_S = 300.0
INSTALL_HINT = "pip install 'rlperf[tune]'"
SQLITE = "sqlite:///"
# The settings a study was started with: resuming it with others would mix two searches.
IDENTITY = ("env", "preset", "trial_wall_s", "seed")


@dataclass
class Plan:
    """What ``rlperf tune`` will do, checked before any trial."""

    env: str
    preset: str
    trials: int
    wall_s: float
    seed: int
    storage: str
    study_name: str
    out: Path
    trials_dir: Path
    start: dict[str, Any]  # the preset's values of the searched settings


@dataclass
class Outcome:
    """How a trial ended: ``complete`` (with its return), ``pruned`` (stopped below the median),
    ``failed`` (crashed or refused; ``reason`` its last line) or ``interrupted``."""

    state: str
    value: float | None = None
    reason: str = ""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``tune``."""
    parser = subparsers.add_parser(
        "tune",
        help="search PPO's settings for the highest return in a wall-clock budget (Optuna)",
        description=(
            "Run --trials trials of rlperf train on --env, each for --trial-wall-s seconds with "
            "settings drawn by Optuna's TPE sampler (the first: the preset's own), stopping "
            "those below the median learning curve; write the best as a preset file --out. "
            "The study is kept in --storage: the same command resumes it after a stop. "
            f"Needs {INSTALL_HINT}."
        ),
    )
    parser.add_argument("--env", required=True, metavar="NAME", help="the env to tune for")
    parser.add_argument(
        "--preset", default="default", choices=sorted(PRESETS), help="the starting settings"
    )
    parser.add_argument("--trials", type=int, required=True, help="trials in the study, in all")
    parser.add_argument(
        "--trial-wall-s", type=float, required=True, metavar="S", help="each trial's budget"
    )
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="Optuna storage URL (default: sqlite:///OUT.db, beside --out)",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="FILE", help="the preset file")
    parser.add_argument("--study-name", help="default: rlperf-tune:PRESET:ENV")
    parser.add_argument(
        "--trials-dir", type=Path, metavar="DIR", help="trial folders (default: OUT-trials/)"
    )
    parser.add_argument("--seed", type=int, default=1, help="every trial's seed (default: 1)")
    parser.set_defaults(func=cmd_tune, check=check_tune)


def check_tune(args: argparse.Namespace) -> Plan:
    """Every check before any trial (one line, exit 2 on the first problem); the plan."""
    from rlperf.commandline import check_seed
    from rlperf.ppo.checks import check_config

    if importlib.util.find_spec("optuna") is None:
        fail(f"rlperf tune needs optuna: {INSTALL_HINT}")
    if args.trials < 1:
        fail(f"--trials must be at least 1, got {args.trials}")
    if not (math.isfinite(args.trial_wall_s) and args.trial_wall_s > 0):
        fail(f"--trial-wall-s must be a positive number of seconds, got {args.trial_wall_s}")
    check_seed(args.seed)
    cfg = configure(args.preset, args.env)
    check_config(cfg)
    out = Path(args.out)
    storage = args.storage or f"{SQLITE}{out.with_suffix('.db')}"
    if "://" not in storage:
        fail(f"--storage must be a database URL such as {SQLITE}tune.db, got {storage!r}")
    trials_dir = args.trials_dir or out.with_name(out.with_suffix("").name + "-trials")
    problem = out_file_problem("--out", out)
    if storage.startswith(SQLITE):
        problem = problem or out_file_problem("--storage", Path(storage[len(SQLITE) :]))
    folder_problem = cannot_write(trials_dir, folder=True)
    if problem or folder_problem:
        fail(problem or f"--trials-dir {trials_dir}: {folder_problem}")
    return Plan(
        env=args.env, preset=args.preset, trials=args.trials, wall_s=args.trial_wall_s,
        seed=args.seed, storage=storage,
        study_name=args.study_name or f"rlperf-tune:{args.preset}:{args.env}",
        out=out, trials_dir=trials_dir, start=space.start_values(cfg),
    )  # fmt: skip


def cmd_tune(args: argparse.Namespace) -> int:
    plan = check_tune(args)
    study = open_study(plan)
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        stop.set()  # the loop stops the running trial and records it

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run_study(study, plan, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def open_study(plan: Plan) -> Any:
    """The study in ``plan.storage``: created (its first trial the preset's own settings) or
    resumed (its identity checked, trials a dead process left running requeued)."""
    import optuna
    import sqlalchemy.exc

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.MedianPruner(PRUNE_AFTER_TRIALS, PRUNE_AFTER_TICKS)
    try:
        study = optuna.create_study(
            storage=plan.storage, study_name=plan.study_name, direction="maximize",
            pruner=pruner, load_if_exists=True,
        )  # fmt: skip
    except (optuna.exceptions.OptunaError, sqlalchemy.exc.SQLAlchemyError, ValueError) as e:
        fail(f"--storage {plan.storage}: {str(e).splitlines()[0]}")
    identity = {key: getattr(plan, "wall_s" if key == "trial_wall_s" else key) for key in IDENTITY}
    saved = study.user_attrs
    if not saved:
        for key, value in identity.items():
            study.set_user_attr(key, value)
    for key, value in identity.items():
        if key in saved and saved[key] != value:
            fail(
                f"study {plan.study_name!r} in {plan.storage} was started with {key} "
                f"{saved[key]}, not {value}: resume it with its settings, or give another "
                "--study-name or --storage"
            )
    states = optuna.trial.TrialState
    for left in study.get_trials(deepcopy=False, states=(states.RUNNING,)):
        # A live handle on the left trial (FrozenTrial has none; _trial_id is its storage key).
        requeue(study, optuna.trial.Trial(study, left._trial_id))
    if not study.trials:
        study.enqueue_trial(plan.start, user_attrs={"start": True})
    study.sampler = optuna.samplers.TPESampler(seed=plan.seed + len(study.trials))
    return study


def requeue(study: Any, stopped: Any) -> None:
    """Record trial ``stopped`` as failed and interrupted (it does not count towards
    ``--trials``), and queue its settings to run again."""
    import optuna

    stopped.set_user_attr("interrupted", True)
    study.tell(stopped, state=optuna.trial.TrialState.FAIL)
    kept = {k: v for k, v in stopped.user_attrs.items() if k == "start"}
    study.enqueue_trial(stopped.params, user_attrs={**kept, "retry_of": stopped.number})


def ended(study: Any) -> int:
    """Trials that count towards ``--trials``: finished, pruned, or failed but not interrupted."""
    import optuna

    states = optuna.trial.TrialState
    return sum(
        t.state in (states.COMPLETE, states.PRUNED)
        or (t.state == states.FAIL and not t.user_attrs.get("interrupted"))
        for t in study.get_trials(deepcopy=False)
    )


def run_study(study: Any, plan: Plan, stop: threading.Event) -> int:
    """Trials until ``plan.trials`` have ended or a stop is requested; the exit status."""
    import optuna

    fixed = space.distributions(plan.start)
    states = optuna.trial.TrialState
    while ended(study) < plan.trials and not stop.is_set():
        this = study.ask(fixed)
        outcome = run_trial(this, plan, stop)
        if outcome.state == "complete":
            study.tell(this, outcome.value)
        elif outcome.state == "pruned":
            study.tell(this, state=states.PRUNED)
        elif outcome.state == "failed":
            this.set_user_attr("error", outcome.reason)
            study.tell(this, state=states.FAIL)
        else:  # interrupted: kept as such, its settings queued for the resumed search
            requeue(study, this)
        print(trial_line(this.number, outcome, this.params), flush=True)
        write_best(study, plan)
    done = ended(study)
    if stop.is_set():
        print(
            f"\nrlperf: tune interrupted: {done} ended trials kept in {plan.storage} (study "
            f"{plan.study_name!r}), the stopped trial queued to run again: the same command "
            "resumes",
            flush=True,
        )
        return EXIT_INTERRUPTED
    if not study.get_trials(deepcopy=False, states=(states.COMPLETE,)):
        print(
            f"rlperf: error: no trial of {done} finished: see {plan.trials_dir}/*/{trial.LOG_NAME}",
            flush=True,
        )
        return EXIT_FAILED
    best = study.best_trial
    print(f"\nbest: trial {best.number}, return {best.value:.1f} -> {plan.out}")
    print(f"train with it: rlperf train --preset-file {plan.out}")
    return EXIT_OK


def trial_config(plan: Plan, params: dict[str, Any]) -> tuple[Config, dict[str, dict[str, Any]]]:
    """The config a trial trains, and its overrides of the preset (ConfigError if refused)."""
    overrides = space.overrides(params)
    overrides["env"] = {**overrides.get("env", {}), "env": plan.env}
    cfg = configure(plan.preset, plan.env)
    for section, values in overrides.items():
        for key, value in values.items():
            set_field(cfg, section, key, value)
    cfg.validate()
    return cfg, overrides


def run_trial(this: Any, plan: Plan, stop: threading.Event) -> Outcome:
    """Train trial ``this`` in a process of its own, reporting its curve to the pruner."""
    try:
        _, overrides = trial_config(plan, this.params)
    except ConfigError as e:  # rlperf train would refuse it: no process needed to say so
        return Outcome("failed", reason=str(e))
    folder = plan.trials_dir / f"trial-{this.number:04d}"
    text = preset_file_text(plan.preset, overrides, about={"study": plan.study_name})
    process = trial.start(folder, text, plan.env, plan.wall_s, plan.seed)
    curve = trial.Curve(folder / trial.RUN_NAME / "metrics.jsonl")
    deadline = time.monotonic() + plan.wall_s + STARTUP_ALLOWANCE_S
    reported = 0
    try:
        while True:
            finished = process.poll() is not None
            for row in curve.new_rows():
                value = row.get("mean_return")
                point = min(int(row["wall_s"] * TICKS / plan.wall_s), TICKS)
                if value is None or point <= reported:
                    continue
                this.report(float(value), point)
                reported = point
                if not finished and this.should_prune():
                    return Outcome("pruned", value, f"at {row['wall_s']:.0f} s")
            if finished:
                break
            if stop.is_set():
                return Outcome("interrupted")
            if time.monotonic() > deadline:
                return Outcome("failed", reason=f"still running {STARTUP_ALLOWANCE_S:g} s past "
                               "its budget: stopped")  # fmt: skip
            stop.wait(POLL_S)
    finally:
        trial.stop(process)  # nothing when it ended by itself
    if process.returncode != EXIT_OK:
        return Outcome("failed", reason=trial.last_line(folder) or f"exit {process.returncode}")
    value = trial.mean_return(folder)
    if value is None:
        return Outcome("failed", reason="no episode ended within the budget")
    return Outcome("complete", value)


def trial_line(number: int, outcome: Outcome, params: dict[str, Any]) -> str:
    """``trial 3: return 412.5 (learning_rate 3e-04, ...)`` and the like."""
    if outcome.state == "complete":
        what = f"return {outcome.value:.1f}"
    elif outcome.state == "pruned":
        what = f"pruned {outcome.reason} (return {outcome.value:.1f})"
    elif outcome.state == "failed":
        what = f"failed: {outcome.reason}"
    else:
        what = "interrupted, queued to run again"
    return f"trial {number}: {what} ({space.describe(params)})"


def write_best(study: Any, plan: Plan) -> None:
    """The best finished trial's settings as the preset file ``plan.out`` (replaced whole)."""
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return
    best = max(complete, key=lambda t: t.value)
    start = [t.value for t in complete if t.user_attrs.get("start")]
    _, overrides = trial_config(plan, best.params)
    overrides["ppo"] = {**overrides.get("ppo", {}), "anneal_with_wall": True}
    overrides["run"] = {"max_wall_s": plan.wall_s, "total_steps": trial.UNBOUNDED_STEPS}
    about = {
        "found_by": f"rlperf tune, study {plan.study_name!r} in {plan.storage}",
        "objective": f"mean return of the last 100 episodes after {plan.wall_s:g} s of "
        f"training, seed {plan.seed}",
        "trial": best.number,
        "return": best.value,
        "start_return": start[0] if start else None,
        "trials_ended": ended(study),
    }
    text = preset_file_text(plan.preset, overrides, about)
    partial = plan.out.with_name(plan.out.name + ".partial")
    partial.write_text(text)
    os.replace(partial, plan.out)
