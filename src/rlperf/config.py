"""One nested configuration for a training run, its validation, and named presets.

Every command-line flag of ``rlperf train`` maps onto one field here (``--num-envs`` ->
``env.num_envs``); the field's docstring-like ``help`` metadata is the flag's help. Derived sizes
(``batch_size``, ``minibatch_size``, ``num_iterations``) are properties, never stored.

Adding a preset is one entry in :data:`PRESETS`: a function from the default config to the
preset's config (see ``PRESETS`` at the bottom).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """A configuration that cannot run; the message is one line naming what to change."""


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class EnvConfig:
    env: str = _f("cartpole", "environment name: a registered env or gym:<gymnasium id>")
    num_envs: int = _f(64, "parallel environments stepped as one batch")


@dataclass
class PolicyConfig:
    hidden_sizes: tuple[int, ...] = _f((64, 64), "hidden layer widths of actor and critic")
    fast_update: bool = _f(
        True,
        "analytic-gradient update for MLP + discrete actions (same math as autograd, fewer ops)",
    )


@dataclass
class PPOConfig:
    num_steps: int = _f(32, "steps per environment per rollout")
    num_minibatches: int = _f(4, "minibatches per update epoch")
    update_epochs: int = _f(4, "passes over the rollout per iteration")
    learning_rate: float = _f(2.5e-3, "Adam learning rate")
    anneal_lr: bool = _f(True, "decay the learning rate linearly to 0 over the run")
    gamma: float = _f(0.99, "discount factor")
    gae_lambda: float = _f(0.95, "GAE lambda")
    clip_coef: float = _f(0.2, "PPO ratio clip")
    clip_vloss: bool = _f(True, "clip the value loss around the rollout values")
    ent_coef: float = _f(0.01, "entropy bonus coefficient")
    vf_coef: float = _f(0.5, "value loss coefficient")
    max_grad_norm: float = _f(0.5, "gradient norm clip")
    norm_adv: bool = _f(True, "normalise advantages per minibatch")
    adam_eps: float = _f(1e-5, "Adam epsilon")


@dataclass
class RunConfig:
    total_steps: int = _f(500_000, "environment steps to train for")
    seed: int = _f(1, "seed for environments, policy init and sampling")
    device: str = _f("cpu", "cpu or cuda")
    threads: int = _f(2, "torch intra-op threads (0 leaves torch's default)")
    run_dir: str | None = _f(None, "directory for config, metrics, summary and checkpoint")
    checkpoint_every: int = _f(50, "iterations between checkpoints (0: only at the end)")
    sps_window_s: float = _f(10.0, "window of the windowed SPS figure, seconds")
    warmup_iters: int = _f(2, "first iterations left out of cumulative SPS")
    cuda_sync: bool = _f(True, "synchronise CUDA at section boundaries so sections are exact")
    progress: bool = _f(True, "show a progress bar on stderr")


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    run: RunConfig = field(default_factory=RunConfig)

    # -- derived sizes -------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self.env.num_envs * self.ppo.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.ppo.num_minibatches

    @property
    def num_iterations(self) -> int:
        return self.run.total_steps // self.batch_size

    # -- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        cfg = cls()
        for section_name, values in d.items():
            section = getattr(cfg, section_name, None)
            if section is None or not dataclasses.is_dataclass(section):
                raise ConfigError(f"unknown config section {section_name!r}")
            for key, value in values.items():
                set_field(cfg, section_name, key, value)
        return cfg

    # -- validation ----------------------------------------------------------------------
    def validate(self) -> Config:
        """Raise :class:`ConfigError` (one line) for any setting that cannot run."""
        for section in (self.env, self.policy, self.ppo, self.run):
            for f in dataclasses.fields(section):
                value = getattr(section, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ConfigError(f"{f.name} must be a finite number, got {value}")
        positive = {
            "num_envs": self.env.num_envs,
            "num_steps": self.ppo.num_steps,
            "num_minibatches": self.ppo.num_minibatches,
            "update_epochs": self.ppo.update_epochs,
            "total_steps": self.run.total_steps,
            "learning_rate": self.ppo.learning_rate,
            "adam_eps": self.ppo.adam_eps,
            "sps_window_s": self.run.sps_window_s,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        for name, value in {
            "threads": self.run.threads,
            "checkpoint_every": self.run.checkpoint_every,
            "warmup_iters": self.run.warmup_iters,
            "ent_coef": self.ppo.ent_coef,
            "vf_coef": self.ppo.vf_coef,
            "max_grad_norm": self.ppo.max_grad_norm,
            "clip_coef": self.ppo.clip_coef,
        }.items():
            if value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")
        for name, value in {"gamma": self.ppo.gamma, "gae_lambda": self.ppo.gae_lambda}.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {value}")
        if not self.policy.hidden_sizes or any(h <= 0 for h in self.policy.hidden_sizes):
            raise ConfigError(
                f"hidden_sizes must be positive widths, got {list(self.policy.hidden_sizes)}"
            )
        if self.batch_size % self.ppo.num_minibatches:
            raise ConfigError(
                f"batch size num_envs*num_steps = {self.env.num_envs}*{self.ppo.num_steps} = "
                f"{self.batch_size} must be divisible by num_minibatches "
                f"{self.ppo.num_minibatches}"
            )
        if self.minibatch_size < 2 and self.ppo.norm_adv:
            raise ConfigError(
                f"minibatch size {self.minibatch_size} is too small to normalise advantages: "
                "use fewer num_minibatches or --no-norm-adv"
            )
        if self.run.total_steps < self.batch_size:
            raise ConfigError(
                f"total_steps {self.run.total_steps} is less than one rollout "
                f"(num_envs*num_steps = {self.batch_size})"
            )
        if self.run.device not in ("cpu", "cuda") and not self.run.device.startswith("cuda:"):
            raise ConfigError(f"device must be cpu or cuda, got {self.run.device!r}")
        return self


def set_field(cfg: Config, section_name: str, key: str, value: Any) -> None:
    """Set ``cfg.<section>.<key>`` with the field's type, raising ConfigError if unknown."""
    section = getattr(cfg, section_name)
    names = {f.name: f for f in dataclasses.fields(section)}
    if key not in names:
        raise ConfigError(f"unknown config field {section_name}.{key}")
    if key == "hidden_sizes":
        value = tuple(int(v) for v in value)
    setattr(section, key, value)


def field_index() -> dict[str, tuple[str, dataclasses.Field]]:
    """Flat field name -> (section name, field), for building the command line."""
    index: dict[str, tuple[str, dataclasses.Field]] = {}
    for section_field in dataclasses.fields(Config):
        for f in dataclasses.fields(section_field.default_factory()):  # type: ignore[misc]
            index[f.name] = (section_field.name, f)
    return index


def _default(cfg: Config) -> Config:
    return cfg


# name -> transformation of the default config. ``ultra_fast`` (large batches, torch.compile,
# mixed precision) will be one more entry here.
PRESETS: dict[str, Callable[[Config], Config]] = {
    "default": _default,
}


def preset(name: str) -> Config:
    """A fresh config for preset ``name``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(sorted(PRESETS))}")
    return PRESETS[name](Config())
