"""``rlperf train``: the command's parser, its run, and what every train-style command shares.

Registered into ``rlperf`` by cli.py as the other packages' commands are; ``rlperf profile``
(``profiling/profile_run.py``), ``compare`` and ``ablate`` build their runs with the same
pieces: the config flags, the run directory's checks, :func:`build_trainer`, the summary.

Every ``rlperf train`` flag is generated from a field of :class:`rlperf.config.Config`
(``--num-envs`` sets ``env.num_envs``), so the CLI and the config cannot drift apart. Flags the
user did not give are absent from the parsed namespace (``argparse.SUPPRESS``); that is how
``--resume`` tells an explicit, conflicting flag from a default.

Errors a user can fix (bad values, unknown env, unreadable checkpoint, a run directory that
already holds a run) print one line ``rlperf: error: ...`` and exit with status 2 before any work
starts, leaving every file already written as it was.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

from rlperf.commandline import (
    EXIT_FAILED,
    EXIT_OK,
    USAGE_ERRORS,
    check_seed,
    fail,
)
from rlperf.config import (
    PRECISIONS,
    PRESETS,
    Config,
    ConfigError,
    configure,
    field_index,
    flag_name,
    parse_env_options,
    preset,
    set_field,
)
from rlperf.distributed.group import SINGLE, Ranks
from rlperf.distributed.launch import add_launch_flags
from rlperf.run.checkpoint import CheckpointError
from rlperf.run.run_dir import (
    TENSORBOARD_DIR,
    cannot_write,
    describe_files,
    remove_files,
    run_files,
)
from rlperf.run.tensorboard import INSTALL_HINT, tensorboard_missing

# --policy's default as fit_policy_to_env chooses it: the preset's "mlp" is where it starts.
POLICY_DEFAULT = (
    "the env's: mlp for flat observations, cnn for images; a --preset's own where it fits"
)

# Settings that may change when resuming; any other explicit flag must match the checkpoint.
RESUMABLE_OVERRIDES = {
    "total_steps", "threads", "oversubscribe", "pin_workers", "inline_worker", "worker_spin_us",
    "progress", "checkpoint_every", "sps_window_s", "warmup_iters", "cuda_sync", "max_wall_s",
    "telemetry", "telemetry_interval_s", "keep_freed_memory",
}  # fmt: skip


# -- config flags ------------------------------------------------------------------------
def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per config field, plus --preset and --resume."""
    group = parser.add_argument_group("training configuration (defaults: the preset)")
    group.add_argument(
        "--preset", default="default", choices=sorted(PRESETS), help="named configuration"
    )
    group.add_argument(
        "--preset-file",
        metavar="FILE",
        help="a preset written as a JSON file (as rlperf tune writes one): the preset it "
        "names, then its settings by section; flags given here override it",
    )
    group.add_argument("--resume", metavar="DIR", help="continue the run saved in DIR")
    for name, (_, f) in field_index().items():
        flag = flag_name(name)
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "dest": name}
        help_text = f.metadata.get("help", "")
        default_value = getattr(getattr(Config(), _section_of(name)), name)
        if isinstance(default_value, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        elif isinstance(default_value, tuple):
            kwargs.update(nargs="+", type=int, metavar="N")
        elif isinstance(default_value, dict):
            kwargs.update(action="append", metavar="KEY=VALUE")
        elif name == "run_dir":
            kwargs.update(metavar="DIR")
        else:
            kwargs["type"] = type(default_value) if default_value is not None else str
            if name in ("env", "kind"):
                kwargs["metavar"] = "NAME"
            if name == "precision":
                kwargs["choices"] = PRECISIONS
        default_text = POLICY_DEFAULT if name == "kind" else default_value
        group.add_argument(flag, help=f"{help_text} (default: {default_text})", **kwargs)


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """Add --overwrite and --tensorboard (``train`` and ``profile``: the commands with a run)."""
    group = parser.add_argument_group("run directory")
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's files in the run directory (profile: also the report "
        "and traces) instead of refusing; --resume DIR continues a run",
    )
    group.add_argument(
        "--tensorboard",
        action="store_true",
        help=f"also write the metrics as TensorBoard scalars to RUN_DIR/{TENSORBOARD_DIR} "
        f"(needs {INSTALL_HINT})",
    )


def check_output_flags(args: argparse.Namespace) -> None:
    """--overwrite against --resume, and --tensorboard's package; fails before any work."""
    if args.overwrite and args.resume:
        fail("--overwrite replaces a run and --resume continues one: give only one of them")
    if args.resume and getattr(args, "preset_file", None):
        fail("--preset-file sets a new run's settings and --resume continues a saved run's: "
             "give only one of them")  # fmt: skip
    if args.tensorboard:
        missing = tensorboard_missing()
        if missing:
            fail(missing)


def target_run_dir(args: argparse.Namespace) -> Path | None:
    """The run directory the command will write: --resume's, else the configured one."""
    if args.resume:
        return Path(args.resume)
    run_dir = config_from_args(args).run.run_dir  # ConfigError on bad flags, as later
    return Path(run_dir) if run_dir else None


def refuse_existing_run(args: argparse.Namespace, run_dir: Path | None) -> list[Path]:
    """The earlier run's files in ``run_dir`` that ``--overwrite`` will remove (call
    :func:`remove_files` once the trainer is built, so a bad input still loses nothing).

    Without ``--overwrite`` such files are an error: a second run would replace some files and
    leave others, mixing two runs. ``--resume`` continues the run, so it finds nothing here.
    A directory that cannot be created or written is an error too, found here rather than
    when the trainer opens its first file.
    """
    if run_dir is None:
        return []
    # A missing --resume directory is the checkpoint loader's to name.
    problem = cannot_write(run_dir, folder=True) if not args.resume or run_dir.is_dir() else None
    if problem:
        fail(f"{'--resume' if args.resume else '--run-dir'} {run_dir}: {problem}")
    if args.resume:
        return []
    files = run_files(run_dir)
    if files and not args.overwrite:
        fail(
            f"run directory {run_dir} already holds a run ({describe_files(run_dir, files)}): "
            f"continue it with --resume {run_dir}, or replace it with --overwrite"
        )
    return files


def attach_tensorboard(trainer: Any, log_dir: Path, resumed: bool) -> Any:
    """A :class:`~rlperf.run.tensorboard.TensorBoardLogger` added to ``trainer.callbacks``."""
    from rlperf.run.tensorboard import TensorBoardLogger

    # A resumed run logs again every step after its checkpoint: hide the stopped run's copies.
    purge_step = trainer.global_step + 1 if resumed else None
    logger = TensorBoardLogger(log_dir, purge_step=purge_step)
    trainer.callbacks.append(logger)
    return logger


def add_display_flags(parser: argparse.ArgumentParser) -> None:
    """Add --dashboard (``train``)."""
    parser.add_argument_group("display").add_argument(
        "--dashboard",
        action="store_true",
        help="a live view of the run in the terminal (SPS, time left, phases, utilisation, "
        "return, losses) instead of the progress line; needs stdout to be a terminal",
    )


def check_display_flags(args: argparse.Namespace) -> None:
    """--dashboard needs a terminal on stdout; fails before any work."""
    if getattr(args, "dashboard", False) and not sys.stdout.isatty():
        fail(
            "--dashboard needs a terminal, and stdout is a file or a pipe: leave --dashboard "
            "out, and the plain progress line on stderr reports the run"
        )


@contextmanager
def run_views(trainer: Any, args: argparse.Namespace) -> Iterator[Any]:
    """The dashboard (``--dashboard``) around a ``trainer.train()`` call; yields the trainer's
    :class:`~rlperf.run.telemetry.Telemetry` (None with ``--no-telemetry``), which the run's
    log samples into every metrics row and the summary."""
    run = trainer.cfg.run
    dashboard = None
    if getattr(args, "dashboard", False):
        from rlperf.run.dashboard import Dashboard

        run.progress = False  # the dashboard shows progress; the bar would scroll through it
        dashboard = Dashboard.for_trainer(trainer, trainer.telemetry)
        trainer.callbacks.append(dashboard)
    with ExitStack() as views:
        if dashboard is not None:
            views.enter_context(dashboard)
        yield trainer.telemetry


def _section_of(name: str) -> str:
    return field_index()[name][0]


def explicit_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Config fields the user set on the command line (env options parsed into a dict)."""
    given = {name: getattr(args, name) for name in field_index() if hasattr(args, name)}
    if "options" in given:
        given["options"] = parse_env_options(given["options"])
    return given


def config_from_args(args: argparse.Namespace) -> Config:
    """The preset with explicit flags applied, validated (ConfigError on bad values)."""
    given = explicit_overrides(args)
    cfg = configure(args.preset, given.get("env"), getattr(args, "preset_file", None))
    for name, value in given.items():
        if name == "options":
            # A preset's env options stay unless a flag names the same key (`--preset robots
            # --env-option max_depth=2` keeps its symbolic observations).
            value = {**cfg.env.options, **value}
        set_field(cfg, _section_of(name), name, value)
    cfg.validate()
    # Config.validate cannot see the number of ranks, and every rank's seed must fit.
    check_seed(cfg.run.seed, max(1, getattr(args, "nproc", 1) * getattr(args, "nnodes", 1)))
    if "kind" not in given:
        fit_policy_to_env(cfg)
    # The config cannot tell a given --num-workers from its default; the command line can.
    if "num_workers" in given and cfg.env.backend != "multiprocess":
        raise ConfigError(
            f"--num-workers needs --vec-backend multiprocess (the {cfg.env.backend} backend "
            "steps every env in the trainer's process)"
        )
    return cfg


def fit_policy_to_env(cfg: Config) -> None:
    """Without --policy: where the preset's policy cannot read the env's observations, the
    one that can (images: cnn, flat vectors: mlp), so ``--env grid`` trains instead of failing
    on the MLP. One env of one copy is built to see them (UnknownEnvError / EnvOptionError as
    the run would raise); an explicit --policy is never changed."""
    from rlperf.envs.backends import make_one
    from rlperf.envs.spec import EnvSpec, UnsupportedSpaceError
    from rlperf.policies.registry import FLAT, IMAGE, policy_entry

    wants = policy_entry(cfg.policy.kind).observations
    if wants not in (FLAT, IMAGE):
        return
    env = make_one(cfg.env)
    try:
        spec = EnvSpec.from_env(env)
    except UnsupportedSpaceError:
        return  # the trainer says why, as without this
    finally:
        env.close()
    if wants == FLAT and spec.image_obs:
        cfg.policy.kind = "cnn"
    elif wants == IMAGE and spec.flat_obs:
        cfg.policy.kind = "mlp"
    cfg.validate()


def resume_config(run_dir: Path, args: argparse.Namespace) -> tuple[Config, dict[str, Any]]:
    """Config and checkpoint of ``run_dir``; explicit flags must agree except resumable ones."""
    from rlperf.run.checkpoint import CheckpointError, load_checkpoint

    payload = load_checkpoint(run_dir)
    try:
        cfg = Config.from_dict(payload["config"])
    except (KeyError, TypeError, ConfigError) as e:
        raise CheckpointError(f"cannot resume: checkpoint config is unusable ({e})") from e
    for name, value in explicit_overrides(args).items():
        section = _section_of(name)
        saved = getattr(getattr(cfg, section), name)
        if name == "run_dir":
            if Path(value).resolve() != run_dir.resolve():
                raise CheckpointError(
                    f"mismatched --resume: --run-dir {value} differs from the resumed run {run_dir}"
                )
            continue
        if name in RESUMABLE_OVERRIDES:
            set_field(cfg, section, name, value)
        elif (tuple(value) if isinstance(value, list) else value) != saved:
            raise CheckpointError(
                f"mismatched --resume: checkpoint has {flag_name(name)} {saved}, "
                f"command line gives {value}"
            )
    cfg.run.run_dir = str(run_dir)
    cfg.validate()
    global_step = int(payload.get("global_step", 0))
    if cfg.run.total_steps < global_step:
        raise CheckpointError(
            f"cannot resume: total_steps {cfg.run.total_steps} is below the checkpoint's "
            f"global step {global_step}"
        )
    return cfg, payload


def check_room_to_continue(cfg: Config, payload: dict[str, Any], run_dir: Path) -> None:
    """CheckpointError when the resumed run has no room for another iteration in its
    total_steps: it would start and stop at once, rewriting its summary with nothing measured.
    (Checked after the number of ranks, which no --total-steps can fix.)"""
    global_step, iteration = int(payload.get("global_step", 0)), int(payload.get("iteration", 0))
    step = global_step // iteration if iteration else 0  # steps of one iteration, every rank
    if step and cfg.run.total_steps < global_step + step:
        raise CheckpointError(
            f"cannot resume: the run in {run_dir} has reached its total_steps "
            f"{cfg.run.total_steps} (global step {global_step}); to train it further give "
            f"--total-steps N larger than {global_step}, at least {global_step + step} "
            f"for one more iteration of {step} steps"
        )


def build_trainer(
    args: argparse.Namespace, profiler: Any = None, ranks: Ranks = SINGLE
) -> tuple[Any, bool]:
    """Trainer for parsed ``train``-style args, restored from ``--resume`` if given; on several
    ranks, rank 0 reads the config and checkpoint and the others take them from it.

    Returns (trainer, resumed). Raises ConfigError / CheckpointError / UnknownEnvError.
    """
    from rlperf.ppo.trainer import Trainer
    from rlperf.run.checkpoint import check_world_size

    cfg, payload = None, None
    if ranks.is_main:
        if args.resume:
            cfg, payload = resume_config(Path(args.resume), args)
            check_world_size(payload, ranks.world_size)
            check_room_to_continue(cfg, payload, Path(args.resume))
        else:
            cfg = config_from_args(args)
    if ranks.distributed:
        shared = (cast(Config, cfg).to_dict(), payload) if ranks.is_main else None
        cfg_dict, payload = ranks.broadcast_object(shared)
        cfg = Config.from_dict(cfg_dict)
        cfg.run.progress = cfg.run.progress and ranks.is_main
    # Every rank has its config now: the main one its own, the others the broadcast one.
    trainer = Trainer(cast(Config, cfg), profiler=profiler, ranks=ranks)
    # Start lines: the device chosen, CUDA graphs, bf16 on a CPU without native bf16.
    for note in trainer.notes if ranks.is_main else ():
        print(f"rlperf: {note}", file=sys.stderr)
    if payload is not None:
        trainer.load(payload)
    return trainer, payload is not None


# -- train -------------------------------------------------------------------------------
def print_summary(summary: dict[str, Any], rows_title: str = "Where the time went") -> None:
    """The end of a run on stdout: steps, time, SPS and return, then where the time went."""
    from rlperf.profiling import get_profiler
    from rlperf.timing.breakdown import build_rows, render

    ret = summary["mean_return_last_100"]
    print(
        f"\n{steps_line(summary)} in {summary['wall_s']:.2f}s | "
        f"SPS {summary['sps_cumulative']:,.0f} cumulative (after warm-up), "
        f"{summary['sps']:,.0f} windowed | mean return (last 100) "
        f"{'n/a' if ret is None else f'{ret:.1f}'} over {summary['episodes']} episodes\n"
    )
    print(render(build_rows(get_profiler().stats(), summary["wall_s"]), summary["wall_s"],
                 title=rows_title))  # fmt: skip
    if "telemetry" in summary:
        from rlperf.cores import usable_cores
        from rlperf.run.telemetry import contention_line, describe

        print("\n" + describe(summary["telemetry"]))
        contended = contention_line(summary["telemetry"], usable_cores())
        if contended:
            print(contended + one_thread_share(summary.get("threads_used")))


def steps_line(summary: dict[str, Any]) -> str:
    """``491,520 steps``, or after a resume ``8,192 steps this run (global step 499,712)``:
    the steps this process ran, which its wall time is the time of."""
    global_step = int(summary["global_step"])
    this_run = int(summary.get("steps_this_run", global_step))  # older summaries lack it
    if this_run == global_step:
        return f"{global_step:,} steps"
    return f"{this_run:,} steps this run (global step {global_step:,})"


def one_thread_share(threads_used: dict[str, Any] | None) -> str:
    """``; it ran 93% of its minibatches on one thread ...`` where the governor adapted."""
    if not threads_used or not threads_used.get("adaptive"):
        return ""
    units = threads_used["update"]["units_at_threads"]
    total = sum(units.values())
    if not total:
        return ""
    return (
        f"; --adapt-threads ran {100 * units.get('1', 0) / total:.0f}% of its minibatches on "
        "one thread, as more would have waited on those processes"
    )


def check_run_flags(args: argparse.Namespace, here: bool = True) -> tuple[Path | None, list[Path]]:
    """Output flags and the run directory, before any work: (target run dir, the earlier
    run's files ``--overwrite`` will remove).

    Args:
        here: also the checks that depend on where the command runs (a terminal for
            ``--dashboard``, a run already in the run directory); False: the command alone.
    """
    check_output_flags(args)
    if here:
        check_display_flags(args)
    target = target_run_dir(args)
    if args.tensorboard and target is None:
        fail(f"--tensorboard needs --run-dir: the scalars are written to RUN_DIR/{TENSORBOARD_DIR}")
    return target, refuse_existing_run(args, target) if here else []


def interrupted_line(trainer: Any, run_dir: str | None) -> str:
    """What a Ctrl-C left behind, in one line (``rlperf: `` not included)."""
    from rlperf.run.checkpoint import CHECKPOINT_NAME

    if not run_dir:
        return f"interrupted after iteration {trainer.iteration}; nothing saved (no --run-dir)"
    resume = f"continue with rlperf train --resume {run_dir}"
    if trainer.checkpointed_iteration == trainer.iteration:
        return (
            f"interrupted; summary written, iteration {trainer.iteration} (global step "
            f"{trainer.global_step:,}) checkpointed: {resume}"
        )
    # A second Ctrl-C stopped the iteration half-way: what a resume repeats is since the last.
    if (Path(run_dir) / CHECKPOINT_NAME).is_file():
        return (
            f"interrupted in iteration {trainer.iteration}; summary written, last checkpoint "
            f"kept: {resume}"
        )
    return f"interrupted in iteration {trainer.iteration}; summary written, no checkpoint yet"


def launch_ranks(args: argparse.Namespace) -> int:
    """``--nproc``/``--nnodes``: check what the ranks would check (the run directory only with
    one machine: with several, rank 0's machine is known after the rendezvous), then start
    them (``distributed/launch.py``)."""
    from rlperf.distributed import launch
    from rlperf.run.checkpoint import saved_world_size

    payload = None
    if args.nnodes == 1:
        check_run_flags(args)
    if args.resume:
        cfg, payload = resume_config(Path(args.resume), args)
    else:
        cfg = config_from_args(args)
    saved = saved_world_size(payload) if payload is not None else None
    problem = launch.check_flags(args, cfg.run.device, saved)
    if problem:
        fail(problem)
    if payload is not None:
        check_room_to_continue(cfg, payload, Path(args.resume))
    return launch.run(args, args.argv)


def join_ranks(args: argparse.Namespace) -> Ranks:
    """This process's place in a launched run (:data:`SINGLE` when not launched)."""
    from rlperf.distributed.group import join

    device = getattr(args, "device", None) or preset(args.preset).run.device
    return join(args.dist_backend, device, args.dist_timeout_s, args.gloo_io, args.grad_exchange)


def cmd_train(args: argparse.Namespace) -> int:
    from rlperf.distributed import launch

    if launch.requested(args):
        return launch_ranks(args)
    with launch.rank_errors(USAGE_ERRORS):
        ranks = join_ranks(args)
        try:
            return train_rank(args, ranks)
        finally:
            ranks.close()


def train_rank(args: argparse.Namespace, ranks: Ranks) -> int:
    """``rlperf train`` in one process: the whole run, or one rank of it."""
    from rlperf.distributed import launch
    from rlperf.envs.workers import WorkerError
    from rlperf.ppo.trainer import NonFiniteLossError
    from rlperf.run.checkpoint import CHECKPOINT_NAME

    target: Path | None = None
    stale: list[Path] = []
    if ranks.is_main:
        launch.continue_after_restart(args, target_run_dir(args))
        target, stale = check_run_flags(args)
    trainer, resumed = build_trainer(args, ranks=ranks)
    if stale:  # only the main rank has any, and its target
        remove_files(stale, cast(Path, target))
    run_dir = trainer.cfg.run.run_dir
    logger = None
    if args.tensorboard and ranks.is_main:
        logger = attach_tensorboard(trainer, cast(Path, target) / TENSORBOARD_DIR, resumed)
    try:
        with run_views(trainer, args):
            summary = trainer.train(run_dir, resumed=resumed)
    except (NonFiniteLossError, WorkerError) as e:  # a failed env worker: named, one line
        has_checkpoint = run_dir and (Path(run_dir) / CHECKPOINT_NAME).is_file()
        kept = f"; last good checkpoint kept in {run_dir}" if has_checkpoint else ""
        if ranks.is_main:  # every rank stops here at once: the statistics are averaged
            print(f"rlperf: error: {e}{kept}", file=sys.stderr)
            launch.record_failure(str(e), reported=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        if ranks.is_main:  # every rank stops at the same iteration; one says so
            print(f"\nrlperf: {interrupted_line(trainer, run_dir)}", file=sys.stderr)
        return launch.interrupted_status()
    finally:
        # Whatever ended the run, the scalars written so far reach the disk and env workers
        # are stopped.
        if logger is not None:
            logger.close()
        trainer.env.close()
    if not ranks.is_main:
        return EXIT_OK
    print_summary(summary)
    if run_dir:
        print(f"\nrun directory: {run_dir}")
    return EXIT_OK


def check_training(args: argparse.Namespace) -> None:
    """The configuration of a ``train``-style command (``train``, ``profile``) against the
    code, the env and the launch flags, as the run would check it (see
    :func:`rlperf.cli.check_command`)."""
    from rlperf.distributed import launch
    from rlperf.ppo.checks import check_config
    from rlperf.run.checkpoint import CHECKPOINT_NAME, saved_world_size

    payload = None
    # How many cores this machine has is the machine's, not the command's (--num-workers).
    args = argparse.Namespace(**{**vars(args), "oversubscribe": True})
    if args.resume and (Path(args.resume) / CHECKPOINT_NAME).is_file():
        cfg, payload = resume_config(Path(args.resume), args)
    else:  # no run to resume here: the flags alone
        cfg = config_from_args(args)
    world_size = 1
    if launch.requested(args):
        saved = saved_world_size(payload) if payload is not None else None
        problem = launch.check_flags(args, cfg.run.device, saved)
        if problem:
            fail(problem)
        world_size = args.nproc * args.nnodes
    check_config(cfg, world_size)


def check_train(args: argparse.Namespace) -> None:
    """``rlperf train``'s checks before any work (see :func:`rlperf.cli.check_command`)."""
    check_run_flags(args, here=False)
    check_training(args)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train``."""
    train = subparsers.add_parser("train", help="train PPO and print SPS and the phase breakdown")
    add_config_flags(train)
    add_output_flags(train)
    add_launch_flags(train)
    add_display_flags(train)
    train.set_defaults(func=cmd_train, check=check_train)
