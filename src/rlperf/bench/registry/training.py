"""Cases that run the real trainer: an update epoch, and end-to-end training."""

from __future__ import annotations

from typing import Any

from .core import SEED, CaseSkipped, Prepared, requires_env, requires_policy

# Policy kinds beyond the MLP and the workload each is timed on: (env, options).
POLICY_WORKLOADS = {
    "mlp": ("cartpole", {}),
    "lstm": ("cartpole", {"observe": "position"}),
    "cnn": ("catch", {}),
    "convlstm": ("robots", {}),
}


def trainer_config(num_envs: int, threads: int, kind: str = "mlp", env: str | None = None) -> Any:
    """The default config on ``kind``'s workload (or on ``env``), seeded, without progress
    output or LR annealing (every timed call does the same work)."""
    from rlperf.config import Config

    cfg = Config()
    cfg.env.num_envs = num_envs
    cfg.run.seed = SEED
    cfg.run.threads = threads
    cfg.run.progress = False
    cfg.ppo.anneal_lr = False
    if kind != "mlp":
        if not hasattr(cfg.policy, "kind"):  # before 5f4fdd4
            raise CaseSkipped(f"policy {kind!r}: this commit trains the MLP only")
        env_name, options = POLICY_WORKLOADS[kind]
        requires_env(env_name)
        requires_policy(kind)
        cfg.policy.kind, cfg.env.env, cfg.env.options = kind, env_name, dict(options)
    if env is not None:
        requires_env(env)
        cfg.env.env, cfg.env.options = env, {}
    return cfg


def update_epoch(num_envs: int, threads: int, kind: str = "mlp") -> Prepared:
    """``Trainer.update()`` with one epoch over one collected rollout."""
    from rlperf.ppo.trainer import Trainer

    cfg = trainer_config(num_envs, threads, kind)
    cfg.ppo.update_epochs = 1
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    return Prepared(trainer.update, cfg.ppo.num_steps * num_envs, "samples")


def e2e_train(
    num_envs: int,
    env_steps: int,
    threads: int,
    kind: str = "mlp",
    num_steps: int | None = None,
    num_minibatches: int | None = None,
    env: str | None = None,
) -> Prepared:
    """Continued training of a policy kind on its workload (or on ``env``: a new env's e2e
    case); ``num_steps`` (steps per env per rollout) and ``num_minibatches`` override the
    config's, to shrink an iteration."""
    cfg = trainer_config(num_envs, threads, kind, env)
    if num_steps is not None:
        cfg.ppo.num_steps = num_steps
    if num_minibatches is not None:
        cfg.ppo.num_minibatches = num_minibatches
    return continued_training(cfg, env_steps)


def continued_training(cfg: Any, env_steps: int) -> Prepared:
    """Each call trains the same run for ``env_steps`` more steps (train() stops at
    total_steps, so it is moved on before every call)."""
    from rlperf.ppo.trainer import Trainer

    cfg.run.warmup_iters = 0
    # Telemetry off: a call is a 30-150 ms stretch of one long run, and the telemetry's start
    # and last sample (~0.7 ms of CPU, once a run for a user) would be charged to every call,
    # 1-3% of the short cases, where a run pays one background sample a second. The
    # ``telemetry`` component case times those parts on their own.
    if hasattr(cfg.run, "telemetry"):  # commits before the telemetry have none
        cfg.run.telemetry = False
    # The config must hold a supervised phase as long as it asks for (the grid's: all of it).
    teacher = getattr(cfg, "teacher", None)  # configs before the teacher have none
    cfg.run.total_steps = max(env_steps, teacher.supervised_steps if teacher else 0)
    trainer = Trainer(cfg)

    def run() -> dict[str, Any]:
        cfg.run.total_steps = trainer.global_step + env_steps
        return trainer.train()

    return Prepared(run, env_steps, "env_steps")
