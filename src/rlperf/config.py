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
from typing import Any, cast

from rlperf.cores import usable_cores


class ConfigError(ValueError):
    """A configuration that cannot run; the message is one line naming what to change."""


def _f(default: Any, help: str, **kw: Any) -> Any:
    """A config field; ``flag=`` names its command-line flag when not ``--<field-name>``."""
    if isinstance(default, (list, tuple, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


PRECISIONS = ("fp32", "bf16", "fp16")
BACKENDS = ("serial", "multiprocess", "envpool", "mujoco", "torch", "auto")  # envs/backends.py
CONVLSTM_HEADS = ("pool", "flatten")  # what the ConvLSTM's projection reads (policies/convlstm.py)


def parse_option_value(text: str) -> Any:
    """``--env-option`` value: int, then float, then bool (true/false), else the string."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def parse_env_options(items: list[str] | dict[str, Any]) -> dict[str, Any]:
    """``["observe=position", "max_episode_steps=200"]`` -> dict; ConfigError if malformed."""
    if isinstance(items, dict):
        return dict(items)
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--env-option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = parse_option_value(value.strip())
    return options


@dataclass
class EnvConfig:
    env: str = _f("cartpole", "environment name: a registered env or gym:<gymnasium id>")
    num_envs: int = _f(64, "parallel environments stepped as one batch")
    options: dict[str, Any] = _f(
        {},
        "keyword option for the environment's factory, KEY=VALUE (repeatable; VALUE is an "
        "int, float, true/false or a string)",
        flag="env-option",
    )
    backend: str = _f(
        "serial",
        "where the envs step: serial (in the trainer's process), multiprocess (worker "
        "processes over shared memory, envs/workers/), envpool (EnvPool's C++ threads, for "
        "the gym: ids it has; pip install 'rlperf[envpool]'), mujoco (gym:HalfCheetah-v5, "
        "Hopper-v5 and Walker2d-v5 on MuJoCo's batch threads, envs/mujoco_batch.py), torch "
        "(cartpole and catch as torch code on --device, envs/device/) or auto (mujoco where "
        "it steps the env, torch on --device cuda where the env has a torch version, else "
        "serial; --preset mujoco's)",
        flag="vec-backend",
    )
    num_workers: int = _f(2, "worker processes of the multiprocess backend")
    env_batch_size: int = _f(
        0,
        "multiprocess and envpool: envs per send/recv batch (0: all envs, synchronous; fewer: "
        "the trainer acts on one batch while the others step); multiprocess: whole workers, "
        "the ready ones; envpool: fixed blocks of rows, in the order sent",
    )
    oversubscribe: bool = _f(
        False,
        "allow more env workers, or --nproc ranks, than this machine's cores (CUDA ranks: "
        "GPUs); they will share them",
    )
    inline_worker: bool = _f(
        False,
        "multiprocess: the trainer's process is worker 0 and steps its share of the envs "
        "while the other workers step theirs (num_workers - 1 processes are started); on few "
        "cores a synchronous trainer otherwise sleeps through the step (docs/workers.md)",
    )
    worker_spin_us: float = _f(
        -1.0,
        "multiprocess: microseconds the trainer and each worker poll shared memory before "
        "sleeping on a pipe (a sleeping process's core halts, and waking it costs tens of "
        "microseconds a step); -1: 300 where the worker processes and the trainer (one thread "
        "in the rollout) fit the cores this process may use, else 0 (a spinner would take a "
        "core from one with work)",
    )
    pin_workers: bool = _f(
        False,
        "multiprocess, Linux: pin env worker w to the w-th core this process may use, so the "
        "scheduler never stacks two workers on one core (docs/workers.md); off on a machine "
        "busy with other work, where a pinned worker cannot move to an idle core",
    )

    normalize_obs: bool = _f(
        False,
        "normalise observations by their running mean and std over the batch (VecNormalize's "
        "and CleanRL's MuJoCo setting), then clip them to +-clip_obs (envs/normalize.py)",
    )
    normalize_reward: bool = _f(
        False,
        "divide rewards by the running std of the discounted return, then clip them to "
        "+-clip_reward; episode returns are still logged as the env's own",
    )
    clip_obs: float = _f(10.0, "bound of normalised observations (0: no clip)")
    clip_reward: float = _f(10.0, "bound of normalised rewards (0: no clip)")
    norm_per_env: bool = _f(
        False,
        "normalisation statistics per env (CleanRL's per-env wrappers) instead of one set for "
        "the whole batch (SB3's VecNormalize)",
    )

    @property
    def normalizes(self) -> bool:
        """Observations or rewards are normalised (``--normalize-obs``/``--normalize-reward``)."""
        return self.normalize_obs or self.normalize_reward

    def validate_backend(self) -> None:
        """The vector backend's settings: ConfigError (one line) unless they can run here."""
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"--vec-backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}"
            )
        if self.backend != "multiprocess":  # every other backend steps the envs in-process
            batch = self.env_batch_size
            if batch and self.backend != "envpool":
                raise ConfigError(
                    f"--env-batch-size needs --vec-backend multiprocess or envpool (the "
                    f"{self.backend} backend steps every env together)"
                )
            if batch < 0 or (batch and self.num_envs % batch):
                raise ConfigError(
                    f"--env-batch-size {batch} must divide --num-envs {self.num_envs} "
                    "(0: all envs together)"
                )
            if self.pin_workers:
                raise ConfigError("--pin-workers needs --vec-backend multiprocess")
            if self.inline_worker:
                raise ConfigError("--inline-worker needs --vec-backend multiprocess")
            if self.worker_spin_us != -1:
                raise ConfigError("--worker-spin-us needs --vec-backend multiprocess")
            return
        if self.worker_spin_us < 0 and self.worker_spin_us != -1:
            raise ConfigError(
                f"--worker-spin-us must be >= 0, or -1 for automatic, got {self.worker_spin_us:g}"
            )
        cores = usable_cores()
        if self.num_workers < 1:
            raise ConfigError(f"--num-workers must be >= 1, got {self.num_workers}")
        if self.num_workers > cores and not self.oversubscribe:
            raise ConfigError(
                f"--num-workers {self.num_workers} is more than the {cores} cores this process "
                "may use: use fewer workers, or --oversubscribe to share cores"
            )
        if self.num_envs % self.num_workers:
            raise ConfigError(
                f"--num-envs {self.num_envs} must be divisible by --num-workers {self.num_workers}"
            )
        per_worker = self.num_envs // self.num_workers
        batch = self.env_batch_size
        if batch < 0 or batch % per_worker or (batch and self.num_envs % batch):
            raise ConfigError(
                f"--env-batch-size {batch} must be a multiple of the envs per worker "
                f"(num_envs/num_workers = {self.num_envs}/{self.num_workers} = {per_worker}) "
                f"that divides --num-envs {self.num_envs}"
            )

    @property
    def asynchronous(self) -> bool:
        """The trainer receives batches of envs while others step (``env_batch_size <
        num_envs``: ready workers, or EnvPool's fixed batches)."""
        in_batches = self.backend in ("multiprocess", "envpool")
        return in_batches and 0 < self.env_batch_size < self.num_envs

    @property
    def steps_beside_trainer(self) -> bool:
        """The envs step on cores of their own while the trainer acts: env worker processes,
        or EnvPool's threads stepping the other batches (the rollout's policy then takes one
        thread)."""
        return self.backend == "multiprocess" or (self.backend == "envpool" and self.asynchronous)


@dataclass
class PolicyConfig:
    kind: str = _f("mlp", "policy: mlp, lstm, cnn or convlstm", flag="policy")
    hidden_sizes: tuple[int, ...] = _f(
        (64, 64), "hidden layer widths of the MLP (actor and critic; lstm: its encoder)"
    )
    lstm_hidden_size: int = _f(64, "LSTM state size (lstm)")
    cnn_channels: tuple[int, ...] = _f((32, 64, 64), "conv channels per layer (cnn, image lstm)")
    cnn_features: int = _f(
        256, "width of the linear layer after the convolutions (convlstm: after its head)"
    )
    convlstm_channels: int = _f(32, "ConvLSTM channels: encoder output, each layer's h and c")
    convlstm_layers: int = _f(2, "stacked ConvLSTM layers D (DRC: 3)")
    convlstm_ticks: int = _f(1, "ConvLSTM ticks N: passes through the D layers per step (DRC: 3)")
    convlstm_head: str = _f(
        "pool",
        "ConvLSTM head: pool (mean and max over the grid, the guide's) or flatten (top h + "
        "encoded input, the grid kept, as learned-planner's DRC)",
    )
    convlstm_sections: bool = _f(
        True, "time the ConvLSTM's stages as sections under policy_forward and update/loss"
    )
    analytic: bool = _f(
        True,
        "the analytic update (closed-form gradients, no autograd graph) where the policy "
        "offers it: mlp and lstm on flat observations, one unmasked discrete action, fp32 "
        "without --compile; the lstm's on the CPU with the kernel built (same math, fewer ops)",
    )
    fused_rollout: bool = _f(
        True,
        "the fused rollout: the analytic mlp or lstm on cartpole on the CPU runs each rollout "
        "(policy, sampling, env step, buffer writes) in one native call where the kernel is "
        "built; the mlp on other envs one call per step for the policy's part",
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
    bptt_horizon: int = _f(
        0, "recurrent policies: steps per truncated-BPTT segment (0: the whole rollout)"
    )
    precision: str = _f("fp32", "fp32, bf16 (autocast, CPU or CUDA) or fp16 (CUDA only)")
    compile: bool = _f(False, "torch.compile the policy's evaluate (autograd update)")


@dataclass
class TeacherConfig:
    """Supervised-then-PPO with the environment's scripted teacher (``grid``; docs/grid.md)."""

    supervised_steps: int = _f(
        0,
        "env steps (agent rows x steps) trained by cross-entropy to the scripted teacher's "
        "actions plus the value loss, before PPO takes over with the teacher switched off",
    )
    teacher_lead: float = _f(
        0.5,
        "probability that an agent executes the teacher's action instead of the student's, "
        "annealed linearly to 0 over the supervised phase",
    )


@dataclass
class RunConfig:
    total_steps: int = _f(500_000, "environment steps to train for")
    seed: int = _f(1, "seed for environments, policy init and sampling")
    device: str = _f("cpu", "cpu or cuda")
    threads: int = _f(
        2,
        "torch intra-op threads at most (0 leaves torch's default); with --vec-backend "
        "multiprocess the update's only: the rollout runs the policy on one thread beside the "
        "workers",
    )
    adapt_threads: bool = _f(
        True,
        "run each phase (rollout, update) on 1 or --threads threads, whichever its measured "
        "time per step or minibatch says is faster now: a busy machine stalls extra threads "
        "(threads.py); --no-adapt-threads keeps --threads throughout",
    )
    run_dir: str | None = _f(None, "directory for config, metrics, summary and checkpoint")
    checkpoint_every: int = _f(50, "iterations between checkpoints (0: only at the end)")
    sps_window_s: float = _f(10.0, "window of the windowed SPS figure, seconds")
    warmup_iters: int = _f(2, "first iterations left out of cumulative SPS")
    cuda_sync: bool = _f(True, "synchronise CUDA at section boundaries so sections are exact")
    progress: bool = _f(True, "show a progress bar on stderr")
    max_wall_s: float = _f(
        0.0,
        "wall-clock budget in seconds: stop after the iteration during which it ran out, with "
        "the summary and checkpoint written as at the end (0: none)",
    )
    telemetry: bool = _f(
        True,
        "sample CPU use and memory of the trainer and its worker processes, and NVIDIA GPU use "
        "(with nvidia-ml-py), in a background thread, into metrics.jsonl and summary.json",
    )
    telemetry_interval_s: float = _f(1.0, "seconds between two telemetry samples")
    keep_freed_memory: bool = _f(
        True,
        "keep memory the trainer frees in its process (glibc's mallopt: no trimming, no mmap "
        "per large block), so each iteration reuses its temporaries instead of page-faulting "
        "them in again (Linux with glibc; elsewhere nothing changes)",
    )
    summary_every: int = _f(
        0,
        "print the rollout timing block (ms per rollout: student forward, teacher and its "
        "parts, env step, replay store) every K rollouts, and log it in metrics.jsonl (0: off)",
    )


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
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
        for section in (self.env, self.policy, self.ppo, self.teacher, self.run):
            for f in dataclasses.fields(section):
                value = getattr(section, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ConfigError(f"{f.name} must be a finite number, got {value}")
        self.env.validate_backend()
        positive = {
            "num_envs": self.env.num_envs,
            "num_steps": self.ppo.num_steps,
            "num_minibatches": self.ppo.num_minibatches,
            "update_epochs": self.ppo.update_epochs,
            "total_steps": self.run.total_steps,
            "learning_rate": self.ppo.learning_rate,
            "adam_eps": self.ppo.adam_eps,
            "sps_window_s": self.run.sps_window_s,
            "telemetry_interval_s": self.run.telemetry_interval_s,
            "lstm_hidden_size": self.policy.lstm_hidden_size,
            "cnn_features": self.policy.cnn_features,
            "convlstm_channels": self.policy.convlstm_channels,
            "convlstm_layers": self.policy.convlstm_layers,
            "convlstm_ticks": self.policy.convlstm_ticks,
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
            "bptt_horizon": self.ppo.bptt_horizon,
            "supervised_steps": self.teacher.supervised_steps,
            "summary_every": self.run.summary_every,
            "max_wall_s": self.run.max_wall_s,
            "clip_obs": self.env.clip_obs,
            "clip_reward": self.env.clip_reward,
        }.items():
            if value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")
        for name, value in {
            "gamma": self.ppo.gamma,
            "gae_lambda": self.ppo.gae_lambda,
            "teacher_lead": self.teacher.teacher_lead,
        }.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {value}")
        if not self.policy.hidden_sizes or any(h <= 0 for h in self.policy.hidden_sizes):
            raise ConfigError(
                f"hidden_sizes must be positive widths, got {list(self.policy.hidden_sizes)}"
            )
        if not self.policy.cnn_channels or any(c <= 0 for c in self.policy.cnn_channels):
            raise ConfigError(
                f"cnn_channels must be positive, got {list(self.policy.cnn_channels)}"
            )
        if self.policy.convlstm_head not in CONVLSTM_HEADS:
            raise ConfigError(
                f"convlstm_head must be one of {', '.join(CONVLSTM_HEADS)}, "
                f"got {self.policy.convlstm_head!r}"
            )
        if self.ppo.precision not in PRECISIONS:
            raise ConfigError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.ppo.precision!r}"
            )
        if self.ppo.precision == "fp16" and not self.run.device.startswith("cuda"):
            raise ConfigError(
                "--precision fp16 needs --device cuda (CPU autocast computes in bf16): "
                "use --precision bf16"
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
        if self.teacher.supervised_steps > self.run.total_steps:
            raise ConfigError(
                f"--supervised-steps {self.teacher.supervised_steps} is longer than the run "
                f"(--total-steps {self.run.total_steps})"
            )
        if self.env.asynchronous and self.teacher.supervised_steps:
            raise ConfigError(
                "--supervised-steps needs every env in each step: drop --env-batch-size "
                "(the teacher runs on the synchronous multiprocess backend)"
            )
        if self.env.normalizes and self.env.asynchronous:
            raise ConfigError(
                "--normalize-obs/--normalize-reward need every env in each step: drop "
                "--env-batch-size (normalisation runs on the synchronous backends)"
            )
        if self.run.device not in ("cpu", "cuda") and not self.run.device.startswith("cuda:"):
            raise ConfigError(f"device must be cpu or cuda, got {self.run.device!r}")
        return self


# Fields renamed since runs were first written: (section, old name) -> new name, so that a
# run directory of an older version still resumes.
RENAMED_FIELDS = {("policy", "fast_update"): "analytic"}


def set_field(cfg: Config, section_name: str, key: str, value: Any) -> None:
    """Set ``cfg.<section>.<key>`` with the field's type, raising ConfigError if unknown."""
    section = getattr(cfg, section_name)
    key = RENAMED_FIELDS.get((section_name, key), key)
    names = {f.name: f for f in dataclasses.fields(section)}
    if key not in names:
        raise ConfigError(f"unknown config field {section_name}.{key}")
    if key in ("hidden_sizes", "cnn_channels"):
        value = tuple(int(v) for v in value)
    elif key == "options":
        value = parse_env_options(value)
    setattr(section, key, value)


def field_index(config_cls: type | None = None) -> dict[str, tuple[str, dataclasses.Field]]:
    """Flat field name -> (section name, field), for building the command line.

    Raises:
        RuntimeError: a field name appears in two sections (checked at import, below).
    """
    index: dict[str, tuple[str, dataclasses.Field]] = {}
    for section_field in dataclasses.fields(config_cls or Config):
        # Every section is a field with a default_factory (its dataclass).
        section_factory = cast(Callable[[], Any], section_field.default_factory)
        for f in dataclasses.fields(section_factory()):
            if f.name in index:
                # One flag per name: a clash would silently make one field unreachable.
                raise RuntimeError(
                    f"config field name {f.name!r} is in both {index[f.name][0]} and "
                    f"{section_field.name}: field names must be unique across sections"
                )
            index[f.name] = (section_field.name, f)
    return index


# Fail at import, not when a flag silently shadows another.
field_index()


def flag_name(name: str) -> str:
    """The command-line flag of config field ``name`` (e.g. ``kind`` -> ``--policy``)."""
    f = field_index()[name][1]
    return "--" + f.metadata.get("flag", name.replace("_", "-"))


def _default(cfg: Config) -> Config:
    return cfg


def _lstm(cfg: Config) -> Config:
    """The LSTM policy with the PPO settings it learns with. On position-only CartPole
    (benchmarks/learning.py, docs/performance.md) the default PPO settings left it at 340-350
    after 1M steps; a shorter horizon (gamma = GAE lambda = 0.98), no entropy bonus and 8
    minibatches of 8 environments reached a last-100 mean of 450 in every seed tried.

    Value loss coefficient 0.005, not 0.5: returns reach 50 at gamma 0.98, so the critic's
    squared error (up to ~2,500 where an episode fails) outweighed the policy's term in the
    shared LSTM's gradient (median 14x over the first 300k steps of seed 1), the 0.5 norm clip
    cut the policy's step to ~7% of itself, and every failure's value spike moved the shared
    LSTM after the policy had solved: at 0.5 seeds 1-3 reached 450 at 426k/408k/600k steps and
    ended at 448/500/489 (seeds 4-8: 3 of 5 ended below 450); at 0.005 they reach it at
    319k/170k/141k and end at 500/500/499 (seeds 1-12: 11 of 12 end >= 483). 0.005 is about
    0.5 over the variance of those returns, what --normalize-reward (which turns the fused
    rollout off) does with the reward instead (docs/gate.md, "The LSTM preset's drift")."""
    cfg.policy.kind = "lstm"
    cfg.ppo.gamma, cfg.ppo.gae_lambda, cfg.ppo.ent_coef = 0.98, 0.98, 0.0
    cfg.ppo.num_minibatches = 8
    cfg.ppo.vf_coef = 0.005
    return cfg


def _grid(cfg: Config) -> Config:
    """The grid workload (``extractor_hub_30``): 16 maps x 16 agents = 256 agent rows, a small
    CNN on the 11x11 windows (one 3x3 layer of 16 channels, 128 features: at these sizes the
    default (32, 64, 64) stack costs ~5x more per sample), supervised by the scripted teacher for
    the first quarter of the run (docs/grid.md has the measurements behind these numbers)."""
    cfg.env.env, cfg.env.num_envs = "grid", 16
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "cnn", (16,), 128
    cfg.run.total_steps = 2_000_000
    cfg.teacher.supervised_steps, cfg.teacher.teacher_lead = 500_000, 0.5
    return cfg


def _robots(cfg: Config) -> Config:
    """Ricochet Robots from its symbolic planes (``obs_mode=symbolic``): two 3x3 conv layers of
    32 channels and 128 features (the board is 8x8: the default (32, 64, 64) stack and 256
    features cost ~4x more a step) at learning rate 2e-3, annealed over 5M steps. On 1,000 fresh
    puzzles, greedy, it passed 80% solved in seeds 1-3 (docs/robots.md); at 5e-4 it stayed below
    80% after 5M steps and at 1e-3 it was behind 2e-3 at every evaluation of seed 1."""
    cfg.env.env = "robots"
    cfg.env.options = {"obs_mode": "symbolic"}
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "cnn", (32, 32), 128
    cfg.ppo.learning_rate = 2e-3
    cfg.run.total_steps = 5_000_000
    return cfg


def _robots_rgb(cfg: Config) -> Config:
    """Ricochet Robots from its 64x64 RGB image with the DRC ConvLSTM, sized for a CPU: one
    layer of 32 channels, one tick, the flattened head, 64 envs x 16 steps at learning rate 5e-4,
    1M steps. Greedy on 200 fresh puzzles it passed twice a random policy's solve rate after
    4.4 minutes (seed 1) and 8.9 minutes (seed 2) and kept rising (docs/robots.md); at 1e-3 and
    2e-3 the ConvLSTM fell below a random policy, and the pooled head stayed below it."""
    cfg.env.env, cfg.env.num_envs = "robots", 64
    cfg.policy.kind, cfg.policy.convlstm_head = "convlstm", "flatten"
    cfg.policy.convlstm_channels, cfg.policy.convlstm_layers = 32, 1
    cfg.ppo.num_steps, cfg.ppo.learning_rate = 16, 5e-4
    cfg.run.total_steps = 1_000_000
    return cfg


def _original(cfg: Config) -> Config:
    """The "original" column of ``guide-optimisation-10-20x.md`` on the grid workload with a
    recurrent policy, scaled to a 2-core CPU (``rlperf ablate``, docs/ablation.md).

    The guide's workload (MettaGrid) is many agents on grid maps with a recurrent policy; here
    the grid env (``extractor_hub_30``: 16 agents a map, an agent row is an environment of the
    guide) and the LSTM on a CNN encoder (the grid preset's encoder: one 3x3 layer of 16
    channels, 128 features; no teacher phase, since the guide's optimised run has none either:
    "Kickstart: Disabled"). Batch sizes are scaled by 1/8: at the few thousand SPS this machine
    trains the LSTM at, the guide's 16,384-step batch would be one update every ~10 s.

    - envs: guide 64 -> 32 agent rows (2 maps x 16 agents; 1/2, so that 64 steps a row make
      the scaled batch);
    - batch: guide 16,384 -> 2,048 (32 rows x 64 steps, 1/8);
    - minibatch: guide 512 -> 64 (32 minibatches of one 64-step segment, 1/8);
    - BPTT horizon: guide 64 -> 64;
    - update epochs: guide 1 -> 1 (the guide keeps one epoch in both columns: not a knob);
    - workers 4, async factor 2 -> the serial vector env: the env step is ~5% of this
      preset's wall time (Amdahl: at most ~1.06x from any env speedup), and on 2 cores a worker
      process takes its core from the learner; ``+workers`` in ``rlperf ablate`` measures it;
    - torch.compile and precision: off and fp32, as the guide's original.
    """
    cfg.env.env, cfg.env.num_envs = "grid", 2
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "lstm", (16,), 128
    cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.bptt_horizon = 64, 32, 64
    cfg.ppo.update_epochs = 1
    cfg.run.total_steps = 2_000_000
    return cfg


def _ultra_fast(cfg: Config) -> Config:
    """The "optimized" column of ``guide-optimisation-10-20x.md`` scaled as :func:`_original`
    (batch sizes 1/8, envs 1/2), each knob one ablation row of ``rlperf ablate``:

    - envs: guide 512 -> 256 agent rows (16 maps x 16 agents, 8x original as in the guide);
    - batch: guide 262,144 -> 32,768 (256 rows x 128 steps, 16x original as in the guide);
    - minibatch: guide 32,768 -> 4,096 (8 minibatches of 128 segments of 32 steps, 64x);
    - BPTT horizon: guide 32 -> 32;
    - update epochs: guide 1 -> 1;
    - workers 16, async factor 8 -> 2 workers, batches of one worker's maps (async factor 2):
      left off. The env step is 5.4% of ``original``'s wall time, so by Amdahl's law no env
      speedup can buy more than 1.06x, and on 2 cores worker processes take the trainer's CPU;
      it stays a row of the ablation, which measures what it costs;
    - torch.compile (guide: on) and bf16 (guide: "next step", FP16 on CUDA): left off, both
      measured slower here (docs/ablation.md); they stay rows of the ablation.
    """
    cfg = _original(cfg)
    cfg.env.num_envs = 16
    cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.bptt_horizon = 128, 8, 32
    return cfg


def _atari(cfg: Config) -> Config:
    """CleanRL's ``ppo_atari.py`` on an ALE v5 game (Breakout unless ``--env`` names another,
    ``gym:ale_py:ALE/<Game>-v5``): 8 envs x 128 steps, 4 minibatches x 4 epochs, learning rate
    2.5e-4 annealed, clip 0.1 (the value clip too), entropy 0.01, 10M steps, and the Nature CNN
    (32 8x8/4, 64 4x4/2, 64 3x3/1, 512 features; policies/encoders.py) on 4 stacked 84x84 gray
    uint8 frames, preprocessed by gymnasium's and stable-baselines3's wrappers as CleanRL's
    (envs/atari.py; with --vec-backend envpool, EnvPool's equivalent; docs/atari.md)."""
    from rlperf.envs.atari import ATARI_ENV, atari_options

    cfg.env.env, cfg.env.num_envs, cfg.env.options = ATARI_ENV, 8, atari_options()
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "cnn", (32, 64, 64), 512
    cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.update_epochs = 128, 4, 4
    cfg.ppo.learning_rate, cfg.ppo.clip_coef = 2.5e-4, 0.1
    cfg.run.total_steps = 10_000_000
    return cfg


def _mujoco(cfg: Config) -> Config:
    """CleanRL's ``ppo_continuous_action.py`` on a MuJoCo env (HalfCheetah-v5 unless ``--env``
    names another): 2048 steps an iteration, 32 minibatches x 10 epochs, learning rate 3e-4
    annealed, no entropy bonus, 1M steps, the 64x64 Tanh actor-critic with a state-independent
    log-std, and CleanRL's wrappers as rlperf's batched normalisation: observations normalised
    and clipped to +-10, rewards divided by the discounted return's std and clipped to +-10.

    Where CleanRL steps 1 env x 2048, the preset steps 8 envs x 256 on MuJoCo's batch threads
    (``--vec-backend auto``: gymnasium's envs bit for bit, every core on the physics), with
    one set of normalisation statistics for the batch, as SB3's VecNormalize keeps them: per
    env, each of the 8 sets saw an eighth of the data and Hopper learned less (docs/continuous.md
    "Learning"). ``--num-envs 1 --num-steps 2048 --norm-per-env`` is CleanRL's shape and
    arithmetic exactly. The backend is ``auto``: MuJoCo's batch for the ids it steps, gymnasium's
    serial envs for the others (``gym:Ant-v5``) and before MuJoCo 4.0."""
    cfg.env.env, cfg.env.num_envs, cfg.env.backend = "gym:HalfCheetah-v5", 8, "auto"
    cfg.env.normalize_obs = cfg.env.normalize_reward = True
    cfg.env.clip_obs = cfg.env.clip_reward = 10.0
    cfg.env.norm_per_env = False
    cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.update_epochs = 256, 32, 10
    cfg.ppo.learning_rate, cfg.ppo.ent_coef = 3e-4, 0.0
    cfg.run.total_steps = 1_000_000
    return cfg


# name -> transformation of the default config.
PRESETS: dict[str, Callable[[Config], Config]] = {
    "default": _default,
    "lstm": _lstm,
    "grid": _grid,
    "robots": _robots,
    "robots-rgb": _robots_rgb,
    "original": _original,
    "ultra_fast": _ultra_fast,
    "mujoco": _mujoco,
    "atari": _atari,
}


# preset -> knobs of its guide that it leaves out because they were measured slower here, each
# knob's settings. ``rlperf ablate --target NAME`` still measures each alone on the base, so
# the table shows what the knob would have cost.
LEFT_OUT: dict[str, dict[str, dict[str, Any]]] = {
    "ultra_fast": {
        "compile": {"compile": True},
        "precision": {"precision": "bf16"},
        "workers": {"backend": "multiprocess", "num_workers": 2, "env_batch_size": 1},
    },
}


def preset(name: str) -> Config:
    """A fresh config for preset ``name``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(sorted(PRESETS))}")
    return PRESETS[name](Config())
