"""One nested configuration for a training run, its validation, and named presets.

Every command-line flag of ``rlperf train`` maps onto one field here (``--num-envs`` ->
``env.num_envs``); the field's docstring-like ``help`` metadata is the flag's help. Derived sizes
(``batch_size``, ``minibatch_size``, ``num_iterations``) are properties, never stored.

Presets live in ``presets.py`` (adding one is one entry in :data:`~rlperf.presets.PRESETS`);
:func:`preset` builds one for an env, :func:`configure` adds a preset file's settings.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, cast

from rlperf.cores import usable_cores
from rlperf.presets import LEFT_OUT as LEFT_OUT  # re-exported: importers take it from here
from rlperf.presets import PRESETS


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
        "the gym: ids it has; pip install 'rlperf[envpool]'), mujoco (gymnasium's eleven "
        "MuJoCo v5 envs on MuJoCo's batch threads, envs/mujoco_batch/), torch "
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
    init_log_std: float = _f(
        0.0,
        "initial log standard deviation of the Gaussian over Box actions (the RL Zoo's "
        "log_std_init; CleanRL's 0: std 1); discrete actions ignore it",
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
    anneal_with_wall: bool = _f(
        False,
        "with --anneal-lr and --max-wall-s: the run's progress is the further of its steps and "
        "its seconds, so a run the wall-clock budget ends also ends with the rate near 0 "
        "(--preset mujoco-fast's, rlperf tune's trials'; one rank only)",
    )
    lr_kl_target: float = _f(
        0.0,
        "adapt the learning rate to this approx KL instead of annealing it (rl_games' adaptive "
        "schedule, once an iteration: x1.5 when the update's mean KL is below half of it, /1.5 "
        "above twice it, within [1e-6, 1e-2]); 0: off",
    )
    final_std: float = _f(
        0.0,
        "cap the Gaussian's std after each update by a ceiling that falls log-linearly from "
        "the starting std (exp of --init-log-std) to this value over the run (its progress as "
        "the rate's anneal counts it): the sampled actions end near the policy's mean; "
        "discrete actions ignore it; 0: off",
    )
    final_std_from: float = _f(
        0.0,
        "with --final-std, the share of the run's progress in [0, 1) before the std ceiling "
        "starts to fall (until then it is the starting std; from there it falls log-linearly "
        "to --final-std at the end): a policy still searching for its gait keeps exploring",
    )
    gamma: float = _f(0.99, "discount factor")
    gae_lambda: float = _f(0.95, "GAE lambda")
    clip_coef: float = _f(0.2, "PPO ratio clip")
    clip_vloss: bool = _f(True, "clip the value loss around the rollout values")
    ent_coef: float = _f(0.01, "entropy bonus coefficient")
    vf_coef: float = _f(0.5, "value loss coefficient")
    max_grad_norm: float = _f(0.5, "gradient norm clip")
    norm_adv: bool = _f(True, "normalise advantages per minibatch")
    normalize_value: bool = _f(
        False,
        "the critic predicts returns normalised by their running mean and std (rl_games' "
        "normalize_value; ppo/value_norm.py); needs --norm-adv",
    )
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
    device: str = _f(
        "cpu",
        "cpu, cuda or auto: the faster of the two for this workload, from a few timed "
        "iterations on each (ppo/device_choice.py; cpu without probing where there is no CUDA)",
    )
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
    cuda_graphs: bool = _f(
        True,
        "CUDA only: capture the minibatch update (forward, loss, backward, clip, Adam) as a CUDA "
        "graph and replay it (ppo/cuda_graphs.py); --no-cuda-graphs runs it eagerly",
    )
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
        device = self.run.device
        if device not in ("cpu", "cuda", "auto") and not device.startswith("cuda:"):
            raise ConfigError(f"device must be cpu or cuda (cuda:N), or auto, got {device!r}")
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


# -- presets (rlperf/presets.py) and preset files ----------------------------------------
def preset(name: str, env: str | None = None) -> Config:
    """A fresh config for preset ``name``; with ``env`` (the run's ``--env``), for that env (a
    per-env preset, ``mujoco-fast``, takes that env's entry).

    Raises:
        ConfigError: an unknown preset, or ``env`` outside the envs the preset fits (one line
            naming them).
    """
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(sorted(PRESETS))}")
    entry = PRESETS[name]
    if env is not None and entry.envs is not None:
        if not any(fnmatchcase(env, pattern) for pattern in entry.envs):
            generic = ", ".join(n for n, p in PRESETS.items() if p.envs is None)
            raise ConfigError(
                f"--preset {name} fits {', '.join(entry.envs)}, not env {env!r}: train that "
                f"env with a preset for any env ({generic})"
            )
    cfg = Config()
    if env is None:
        return entry.build(cfg)
    cfg.env.env = env  # a per-env preset chooses by it
    cfg = entry.build(cfg)
    cfg.env.env = env
    return cfg


# Keys of a preset file besides the config's sections: the preset it starts from, and free
# text (or any JSON) about where its settings came from, which training ignores; a run's
# config.json, read as a preset file, also has what that run resolved (run/training_log.py).
PRESET_FILE_KEYS = ("preset", "about", "resolved")


@dataclass
class PresetFile:
    """A preset written as a JSON file (``rlperf train --preset-file FILE``): the preset it
    starts from (None: ``--preset``'s) and config overrides by section, as ``config.json``."""

    preset: str | None
    overrides: dict[str, dict[str, Any]]

    @property
    def env(self) -> str | None:
        """The env the file names (``{"env": {"env": ...}}``), if any."""
        return self.overrides.get("env", {}).get("env")


def read_preset_file(path: str | Path) -> PresetFile:
    """Parse and type-check a preset file.

    JSON rather than TOML: the standard library reads and writes it (``tomllib`` only reads, and
    ``rlperf tune`` writes these files), and a run's ``config.json`` has the same sections.

    Raises:
        ConfigError: one line naming the file and what is wrong (unreadable, not JSON, an
            unknown key, section or field, a value of the wrong type).
    """
    where = f"--preset-file {path}"
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"{where}: cannot read it ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{where}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must hold a JSON object, got {type(data).__name__}")
    sections = [f.name for f in dataclasses.fields(Config)]
    base = data.get("preset")
    if base is not None and base not in PRESETS:
        raise ConfigError(f"{where}: unknown preset {base!r}: one of {', '.join(sorted(PRESETS))}")
    overrides: dict[str, dict[str, Any]] = {}
    defaults = Config()
    for key, values in data.items():
        if key in PRESET_FILE_KEYS:
            continue
        if key not in sections:
            raise ConfigError(
                f"{where}: unknown key {key!r}: a preset file holds "
                f"{', '.join(PRESET_FILE_KEYS)} and the sections {', '.join(sections)}"
            )
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: section {key!r} must be an object of fields")
        for name, value in values.items():
            if not hasattr(getattr(defaults, key), name):
                raise ConfigError(f"{where}: unknown config field {key}.{name}")
            problem = _value_problem(getattr(getattr(defaults, key), name), value)
            if problem:
                raise ConfigError(f"{where}: {key}.{name} must be {problem}, got {value!r}")
        overrides[key] = dict(values)
    return PresetFile(base, overrides)


def _value_problem(default: Any, value: Any) -> str | None:
    """What ``value`` must be to replace a field whose default is ``default`` (None: it is)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        return None if number and float(value).is_integer() else "an integer"
    if isinstance(default, float):
        return None if number else "a number"
    if isinstance(default, tuple):
        ints = isinstance(value, list) and all(_value_problem(1, v) is None for v in value)
        return None if ints else "a list of integers"
    if isinstance(default, dict):
        return None if isinstance(value, dict) else "an object"
    return None if isinstance(value, str) or (default is None and value is None) else "a string"


def preset_file_text(base: str, overrides: dict[str, dict[str, Any]], about: Any = None) -> str:
    """A preset file's text (:func:`read_preset_file` reads it back): preset ``base`` with the
    ``overrides`` by section, and ``about`` (where the settings came from) if given."""
    data: dict[str, Any] = {"preset": base}
    if about is not None:
        data["about"] = about
    for section, values in overrides.items():
        data[section] = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
    return json.dumps(data, indent=2) + "\n"


def configure(name: str, env: str | None = None, preset_file: str | Path | None = None) -> Config:
    """The config a run starts from, before its own flags: preset ``name`` for ``env`` (the
    run's ``--env``, else the file's), then the preset file's settings.

    Raises:
        ConfigError: as :func:`preset` and :func:`read_preset_file`, or ``name`` other than
            ``default`` and the preset the file names.
    """
    if preset_file is None:
        return preset(name, env)
    file = read_preset_file(preset_file)
    if file.preset is not None and name not in ("default", file.preset):
        raise ConfigError(
            f"--preset {name} and --preset-file {preset_file} (which starts from preset "
            f"{file.preset!r}) disagree: give one of them"
        )
    cfg = preset(file.preset or name, env or file.env)
    for section, values in file.overrides.items():
        for key, value in values.items():
            set_field(cfg, section, key, value)
    return cfg
