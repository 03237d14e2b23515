"""How long OpenMP's idle threads spin, set before torch loads it, for runs with env workers
(or EnvPool stepping batches beside the trainer: the same layout of cores).

torch's CPU kernels run on GNU OpenMP (libgomp). After each parallel region its idle threads spin
for ``GOMP_SPINCOUNT`` iterations before they sleep: 300,000 when the variable is unset, several
milliseconds on the 2-core development machine. With env workers the trainer runs its update on
``--threads`` threads while the workers sleep, and its rollout on one thread while they step
(``ppo/trainer.py``). At the default count the update's second thread went on spinning into
the next rollout, on the core a worker steps its envs on, every iteration.
``--vec-backend multiprocess --inline-worker --threads 2`` made 0.81x the serial backend's SPS
that way. With 10,000 it made 1.20x: the threads stay awake between the update's kernels and
fall asleep soon after it. ``docs/workers.md`` has the runs.

libgomp reads the variable once, when torch loads it, so :func:`tune` runs in the ``rlperf``
command's entry point (``rlperf/__main__.py``) before anything imports torch, on the command
line's own words. It never overrides a value the user set, and it leaves serial runs alone: there
the shorter spin measured no better (0.96x, inside the noise). A trainer built from Python with
env workers and no ``GOMP_SPINCOUNT`` warns and runs its update on one thread
(:func:`long_spin_problem`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

SPIN_VAR = "GOMP_SPINCOUNT"
WORKERS_SPIN_COUNT = "10000"


def uses_env_workers(argv: Sequence[str]) -> bool:
    """Whether the command line trains with envs that step beside the trainer: the
    multiprocess backend's workers, or EnvPool's threads with ``--env-batch-size`` below
    ``--num-envs`` (``EnvConfig.steps_beside_trainer``), from the flags, a ``--preset`` or the
    saved config of a ``--resume``, flags first. Any command line that cannot be read this way
    says False (the parser proper reports it)."""
    from rlperf.config import ConfigError, EnvConfig, flag_name, preset
    from rlperf.run.run_dir import CONFIG_NAME

    # allow_abbrev=False as the real parser: "--vec" must not read as --vec-backend here.
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    fields = ("backend", "env_batch_size", "num_envs")
    for field in fields:
        parser.add_argument(flag_name(field), dest=field)
    parser.add_argument("--preset")
    parser.add_argument("--resume")
    try:
        known, _ = parser.parse_known_args(list(argv))
    except SystemExit:
        return False
    env = EnvConfig()
    try:
        if known.resume:
            saved = json.loads((Path(known.resume) / CONFIG_NAME).read_text())["env"]
            env = EnvConfig(**{f: saved[f] for f in fields if f in saved})
        elif known.preset:
            env = preset(known.preset).env
        for field in fields:
            if getattr(known, field) is not None:
                value = getattr(known, field)
                setattr(env, field, value if field == "backend" else int(value))
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return False
    return env.steps_beside_trainer


def long_spin_problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why a run with env workers should not run its update on several threads here (one
    line), or None: OpenMP's spin was left at its default, as when the trainer is used from
    Python without the ``rlperf`` command. A ``GOMP_SPINCOUNT`` the user set is trusted."""
    if SPIN_VAR in environ:
        return None
    return (
        f"{SPIN_VAR} is not set: with env workers, set {SPIN_VAR}={WORKERS_SPIN_COUNT} before "
        "torch is imported (the rlperf command does)"
    )


def tune(argv: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``GOMP_SPINCOUNT`` for a run with env workers, unless it is set already; returns
    whether it set it. Call before torch is imported (later it changes nothing)."""
    if SPIN_VAR in environ or not uses_env_workers(argv):
        return False
    environ[SPIN_VAR] = WORKERS_SPIN_COUNT
    return True
