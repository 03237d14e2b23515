"""The learning gate's workloads: a config trained up to a return threshold, with a step cap.

``rlperf gate --learning`` (``bench/learning_gate.py``), ``rlperf bisect --learning`` and the
asv ``track_`` benchmarks train these. Each :class:`LearningWorkload` is a config as a user
runs it (a preset, its env options), a return threshold on the mean return of the last 100
episodes (the trainer's own ``mean_return``, checked after every iteration) and a cap on env
steps: a run that has not reached the threshold by the cap stops there and is *censored* (it
would have needed more than ``cap`` steps; how many is unknown). The config's ``total_steps``
is left as the user's run has it, so the learning-rate schedule is the user's; the cap only
stops the run early.

:func:`learn` trains one seed and reports steps to the threshold (what the algorithm learned)
and CPU seconds to it (what the user pays). The thresholds and caps were chosen from learning
curves of 12 seeds each (docs/gate.md, "Learning gate"): a threshold the default code reaches
in a second or two of CPU with a small spread of steps across seeds, a cap about twice the
slowest seed's steps.

This module is loaded by path, on its own, from the gate's checkout (``bench/worker.py``'s
``load_registry``) and run against another commit's ``rlperf``: it imports ``rlperf`` only
inside functions, by public names, and nothing relative.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

RECENT_EPISODES = 100  # the trainer's mean_return window (run/episode_log.py)


class WorkloadSkipped(Exception):
    """This workload cannot run on this commit or machine; the message says why."""


class UnknownWorkloadError(ValueError):
    """A requested learning workload is not defined here."""


@dataclass(frozen=True)
class LearningWorkload:
    """A config trained until the mean return of the last 100 episodes reaches ``threshold``.

    Attributes:
        name: the workload's id (``--workloads``).
        what: one line for the report (env, policy, what it exercises).
        threshold: mean return of the last 100 episodes that counts as learned.
        cap: env steps after which a run that has not reached the threshold stops (censored).
        best_return: the most any episode can return (a threshold above it is bad input).
        configure: turns a fresh ``rlperf.config.Config`` into the workload's config (raises
            WorkloadSkipped on a commit that lacks what it needs).
        default: in the gate's default set.
        runs_per_round: runs per side in each gate round (the looks count rounds): more for a
            workload whose steps spread widely across seeds and whose runs are cheap.
    """

    name: str
    what: str
    threshold: float
    cap: int
    best_return: float
    configure: Callable[[Any], Any] = field(repr=False, compare=False)
    default: bool = True
    runs_per_round: int = 1

    def with_threshold(self, threshold: float) -> LearningWorkload:
        """The same workload to another return threshold (``--workloads NAME=RETURN``)."""
        return replace(self, threshold=threshold)


def _requires_env(name: str) -> None:
    from rlperf.envs import registered

    if name not in registered():
        raise WorkloadSkipped(f"no {name} environment in this commit")


def _preset(name: str) -> Any:
    from rlperf.config import preset

    try:
        return preset(name)
    except ValueError as e:  # ConfigError: a commit without the preset
        raise WorkloadSkipped(f"no {name} preset in this commit ({e})") from e


def _cartpole_mlp(cfg: Any) -> Any:
    """``rlperf train`` as it comes: CartPole, the MLP, the fused rollout and native update."""
    return cfg


def _cartpole_lstm(cfg: Any) -> Any:
    """``--preset lstm --env-option observe=position``: only the cart position is observed, so
    the policy must remember to balance (the LSTM, its kernels and truncated BPTT)."""
    cfg = _preset("lstm")
    cfg.env.options = {"observe": "position"}
    return cfg


def _petri(cfg: Any) -> Any:
    """The jobshop Petri net with its action mask (masked sampling and loss, the MLP)."""
    _requires_env("petri")
    cfg.env.env, cfg.env.options = "petri", {"net": "jobshop", "mask": True}
    return cfg


def _catch(cfg: Any) -> Any:
    """Catch from its 10x5 uint8 pixels with a small CNN (the image path and the autograd
    update): one 3x3 layer of 16 channels and 64 features, 16 envs (the default CNN costs ~10x
    more a step and took ~15 s to learn Catch)."""
    _requires_env("catch")
    cfg.env.env, cfg.env.num_envs = "catch", 16
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "cnn", (16,), 64
    cfg.run.total_steps = 100_000
    return cfg


def _pendulum(cfg: Any) -> Any:
    """gymnasium's Pendulum-v1 (a continuous action: the Gaussian head, the normalisation of
    observations and rewards): 16 envs, learning rate 1e-3, no entropy bonus, 200k steps."""
    try:
        import gymnasium

        gymnasium.spec("Pendulum-v1")
    except Exception as e:  # noqa: BLE001  # gymnasium missing or without the env
        raise WorkloadSkipped(f"gymnasium's Pendulum-v1 is not available ({e})") from e
    if not hasattr(cfg.env, "normalize_reward"):
        raise WorkloadSkipped("this commit has no observation and reward normalisation")
    cfg.env.env, cfg.env.num_envs = "gym:Pendulum-v1", 16
    cfg.env.normalize_obs = cfg.env.normalize_reward = True
    cfg.ppo.learning_rate, cfg.ppo.ent_coef = 1e-3, 0.0
    cfg.run.total_steps = 200_000
    return cfg


WORKLOADS: list[LearningWorkload] = [
    # Two runs a side a round: its steps spread the widest (sd of log 0.21 over 48 seeds) and a
    # run costs ~1 CPU s; one a round caught a 1.35x slowdown (an off-by-one done mask in GAE)
    # in 4 of 7 gate runs.
    LearningWorkload("cartpole_mlp", "CartPole, MLP (rlperf train's defaults)", 475.0, 300_000,
                     500.0, _cartpole_mlp, runs_per_round=2),
    LearningWorkload("cartpole_lstm_position", "position-only CartPole, --preset lstm", 100.0,
                     150_000, 500.0, _cartpole_lstm),
    LearningWorkload("petri_masked", "Petri net (jobshop), action masks, MLP", 0.75, 60_000,
                     0.82, _petri),
    LearningWorkload("catch_cnn", "Catch, 10x5 pixels, small CNN", 0.9, 30_000, 1.0, _catch),
    LearningWorkload("pendulum", "Pendulum-v1, continuous action, normalised", -400.0, 200_000,
                     0.0, _pendulum),
]  # fmt: skip


def workloads() -> list[LearningWorkload]:
    """Every learning workload, in the gate's order."""
    return list(WORKLOADS)


def default_names() -> list[str]:
    """The gate's default set."""
    return [w.name for w in WORKLOADS if w.default]


def get(name: str) -> LearningWorkload:
    """The workload called ``name``; UnknownWorkloadError naming the known ones otherwise."""
    for workload in WORKLOADS:
        if workload.name == name:
            return workload
    known = ", ".join(w.name for w in WORKLOADS)
    raise UnknownWorkloadError(f"unknown learning workload {name!r}; known: {known}")


def make_config(workload: LearningWorkload, seed: int) -> Any:
    """The workload's config for one run: seeded, one thread, quiet, no telemetry."""
    from rlperf.config import Config

    cfg = workload.configure(Config())
    cfg.run.seed, cfg.run.threads, cfg.run.progress = seed, 1, False
    if hasattr(cfg.run, "telemetry"):  # a background thread's samples would cost CPU time
        cfg.run.telemetry = False
    if hasattr(cfg.run, "adapt_threads"):
        cfg.run.adapt_threads = False
    if cfg.run.total_steps < workload.cap:
        cfg.run.total_steps = workload.cap
    return cfg


def learn(name: str, seed: int, threshold: float | None = None) -> dict[str, Any]:
    """Train one seed of workload ``name`` until its threshold or its cap.

    Returns:
        ``reached`` (bool), ``steps`` (env steps at the first iteration whose mean return of
        the last 100 episodes was >= the threshold; the steps trained when not reached),
        ``cpu_s`` and ``wall_s`` (seconds from building the trainer to that iteration: this
        process's CPU time, and wall time), ``final_return`` (the mean return then, None before
        any episode ended), ``sps`` (env steps per CPU second after the first iteration: the
        building and the first iteration's warm-up, a fixed cost, would make a longer run look
        faster; over the whole run when it had one iteration).

    Raises:
        WorkloadSkipped: the commit lacks what the workload needs.
    """
    workload = get(name)
    if threshold is not None:
        workload = workload.with_threshold(threshold)
    cfg = make_config(workload, seed)
    from rlperf.ppo.trainer import Trainer

    cpu0, wall0 = time.process_time(), time.perf_counter()
    trainer = Trainer(cfg)
    out: dict[str, Any] = {"reached": False}

    first: list[tuple[int, float]] = []  # (steps, CPU s) at the end of the first iteration

    def check(trainer: Any, row: dict[str, Any]) -> None:
        if not first:
            first.append((trainer.global_step, time.process_time()))
        episodes = getattr(trainer, "episodes", None)  # older commits: the row only
        mean = episodes.mean_return() if episodes is not None else row.get("mean_return")
        out["final_return"] = mean
        if mean is not None and mean >= workload.threshold:
            out["reached"] = True
        if out["reached"] or trainer.global_step >= workload.cap:
            # total_steps is read every iteration: this ends train() after this one, as its
            # last, with the summary written as at any end.
            trainer.cfg.run.total_steps = trainer.global_step

    trainer.callbacks.append(check)
    trainer.train()
    out["cpu_s"] = time.process_time() - cpu0
    out["wall_s"] = time.perf_counter() - wall0
    out["steps"] = int(trainer.global_step)
    warm_steps, warm_cpu = first[0] if first else (0, cpu0)
    if out["steps"] > warm_steps and time.process_time() > warm_cpu:
        out["sps"] = (out["steps"] - warm_steps) / (cpu0 + out["cpu_s"] - warm_cpu)
    else:
        out["sps"] = out["steps"] / out["cpu_s"]
    return out
