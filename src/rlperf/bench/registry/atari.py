"""The Atari workload: ``--preset atari`` (CleanRL's ``ppo_atari.py``) on Breakout, 4x84x84 uint8
frames, the Nature CNN.

The env cases step the preprocessed env (gymnasium's wrappers, or EnvPool's C++); the network
cases time the Nature CNN on random frames (no emulator needed); the trainer cases run the preset
scaled down. A case whose package is missing skips, naming the extra to install: each declares
its backend's extra (:data:`NEEDS`), checked before its setup.
"""

from __future__ import annotations

from typing import Any

from .core import (
    ATARI,
    ENVPOOL,
    HISTORY,
    QUICK,
    SEED,
    Case,
    CaseSkipped,
    Extra,
    Prepared,
    Workload,
)
from .training import continued_training

ENV = "gym:ale_py:ALE/Breakout-v5"
ACTIONS = 4  # Breakout's
FRAMES = (4, 84, 84)
# What each env backend needs beyond rlperf's core.
NEEDS: dict[str, tuple[Extra, ...]] = {"gymnasium": (ATARI,), "envpool": (ENVPOOL,)}


def _requires_preset() -> None:
    """CaseSkipped (one line) on commits without the preset. The backend's packages are the
    case's ``needs``, checked by the registry before its setup."""
    try:
        from rlperf.config import PRESETS
    except ImportError as e:
        raise CaseSkipped(f"no presets in this commit ({e})") from e
    if "atari" not in PRESETS:
        raise CaseSkipped("no atari preset in this commit")


def atari_config(backend: str, num_envs: int, threads: int, num_steps: int) -> Any:
    """``--preset atari`` on ``num_envs`` envs of ``num_steps`` steps, seeded, no annealing."""
    _requires_preset()
    from rlperf.config import preset

    cfg = preset("atari")
    cfg.env.num_envs, cfg.ppo.num_steps = num_envs, num_steps
    if backend == "envpool":
        cfg.env.backend = "envpool"
    cfg.run.seed, cfg.run.threads, cfg.run.progress = SEED, threads, False
    cfg.ppo.anneal_lr = False
    return cfg


def _atari_step(backend: str, num_envs: int) -> Prepared:
    """One step of every preprocessed env (4 emulator frames, gray 84x84, the stack of 4) with
    random actions; finished envs reset."""
    import numpy as np

    from rlperf.envs.backends import make_env

    cfg = atari_config(backend, num_envs, 1, 128)
    vec = make_env(cfg.env, SEED)
    actions = np.random.default_rng(SEED).integers(0, ACTIONS, num_envs)
    return Prepared(lambda: vec.step(actions), num_envs, "env_steps")


def _nature_cnn(batch: int) -> tuple[Any, Any, Any]:
    """(the preset's policy, ``batch`` random uint8 frames, random actions)."""
    import numpy as np
    import torch

    from rlperf.config import PolicyConfig
    from rlperf.envs.spec import ActionSpec, EnvSpec
    from rlperf.policies.registry import make_policy

    spec = EnvSpec(batch, FRAMES, np.dtype(np.uint8), ActionSpec("discrete", (ACTIONS,), 1))
    torch.manual_seed(SEED)
    policy = make_policy(PolicyConfig(kind="cnn", cnn_channels=(32, 64, 64), cnn_features=512),
                         spec)  # fmt: skip
    gen = torch.Generator().manual_seed(SEED)
    frames = torch.randint(0, 256, (batch, *FRAMES), dtype=torch.uint8, generator=gen)
    return policy, frames, torch.randint(0, ACTIONS, (batch,), generator=gen)


def _nature_cnn_act(num_envs: int, threads: int) -> Prepared:
    """The rollout's forward: ``act`` on one step's frames of ``num_envs`` envs, inside the
    policy's ``acting()`` stretch as the rollout runs it (entered once, left open)."""
    import contextlib

    import torch

    policy, frames, _ = _nature_cnn(num_envs)
    gen = torch.Generator().manual_seed(SEED)
    stretch = contextlib.ExitStack()  # collected, it would end the stretch: run() holds it
    stretch.enter_context(policy.acting())

    def run(_stretch: contextlib.ExitStack = stretch) -> Any:  # holds the stretch open
        torch.set_num_threads(threads)
        with torch.inference_mode():
            return policy.act(frames, (), None, None, gen)

    return Prepared(run, num_envs, "samples")


def _nature_cnn_evaluate(batch: int, backward: bool, threads: int) -> Prepared:
    """One update minibatch through the Nature CNN: ``evaluate`` (log-probabilities, entropy,
    values) and with ``backward`` the gradients of a loss of them, as the update computes."""
    import torch

    policy, frames, actions = _nature_cnn(batch)

    def run() -> Any:
        torch.set_num_threads(threads)
        logprob, entropy, value = policy.evaluate(frames[None], actions[None], (), None)
        if backward:
            (logprob.sum() + entropy.sum() + value.sum()).backward()
        return value

    return Prepared(run, batch, "samples")


def _atari_update_epoch(num_envs: int, num_steps: int, threads: int) -> Prepared:
    """``Trainer.update()``, one epoch over one collected rollout of the preset (4 minibatches)."""
    from rlperf.ppo.trainer import Trainer

    cfg = atari_config("gymnasium", num_envs, threads, num_steps)
    cfg.ppo.update_epochs = 1
    cfg.run.telemetry = False
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    return Prepared(trainer.update, trainer.batch_size, "samples")


def _atari_e2e(
    backend: str, num_envs: int, num_steps: int, env_steps: int, threads: int,
    num_minibatches: int = 4, update_epochs: int = 4, env_batch_size: int = 0,
) -> Prepared:  # fmt: skip
    """Continued training of the preset, scaled to ``num_envs`` x ``num_steps`` (EnvPool in
    batches of ``env_batch_size`` envs where set)."""
    cfg = atari_config(backend, num_envs, threads, num_steps)
    cfg.ppo.num_minibatches, cfg.ppo.update_epochs = num_minibatches, update_epochs
    cfg.env.env_batch_size = env_batch_size
    return continued_training(cfg, env_steps)


_history = {HISTORY}
# CleanRL's minibatch: 8 envs x 128 steps / 4 minibatches.
_minibatch = 256
# One iteration of 4 envs x 8 steps, one minibatch, one epoch: ~0.07 s a call on this 2-core box
# (32 emulator steps of 4 frames, 8 forward calls, one forward and backward of 32 frames). The
# preset's own iteration (1,024 samples, 4 epochs of 4 minibatches) takes ~10 s here.
_small = {"num_envs": 4, "num_steps": 8, "env_steps": 32, "threads": 1, "num_minibatches": 1,
          "update_epochs": 1}  # fmt: skip


def _on(backend: str, component: str, params: dict[str, Any], setup: Any, tags: Any = ()) -> Case:
    """A case that steps the emulator on ``backend``, declaring that backend's extra."""
    return Case(component, {"backend": backend, **params}, setup, tags, NEEDS[backend])


WORKLOAD = Workload(
    "atari",
    ENV,
    e2e=_on("gymnasium", "atari_e2e", _small, _atari_e2e),
    cases=(
        _on("gymnasium", "atari_step", {"num_envs": 8}, _atari_step, {HISTORY, QUICK}),
        _on("envpool", "atari_step", {"num_envs": 8}, _atari_step, _history),
        Case("nature_cnn_act", {"num_envs": 8, "threads": 1}, _nature_cnn_act, _history),
        *(
            Case(
                "nature_cnn_evaluate",
                {"batch": _minibatch, "backward": backward, "threads": 2},
                _nature_cnn_evaluate,
                _history,
            )
            for backward in (False, True)
        ),
        Case(
            "atari_update_epoch",
            {"num_envs": 8, "num_steps": 32, "threads": 2},
            _atari_update_epoch,
            needs=NEEDS["gymnasium"],
        ),
        _on("envpool", "atari_e2e", _small, _atari_e2e, _history),
        _on("envpool", "atari_e2e", {"env_batch_size": 2, **_small}, _atari_e2e, _history),
    ),
)
