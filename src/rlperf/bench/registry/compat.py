"""Shims for older commits: where an API changed, call the current one, else the one before.

They let the component cases of the history (asv) and of ``rlperf bisect`` time commits from
before the change on the same work. Every shim here serves the same range: the first 60
commits, 969c068 (core skeleton) up to 5f4fdd4^, the commit before "One trainer for every
policy" (5f4fdd4), which introduced the policy protocol, ``EnvSpec``, the spec-built
``RolloutBuffer``, ``PackedTableSampler`` and keyword-only ``gae``. The end-to-end cases need no
shim: ``Config`` and ``Trainer.train`` kept their shape since 969c068. Commits before a
component existed are not shimmed: its case raises CaseSkipped saying so.
"""

from __future__ import annotations

from typing import Any

from .core import NUM_ACTIONS, OBS_DIM, SEED


def mlp_policy(hidden: tuple[int, ...] = (64, 64)) -> Any:
    """CartPole's MLP actor-critic, seeded."""
    import torch

    from rlperf.policies.mlp import MLPActorCritic

    torch.manual_seed(SEED)
    if hasattr(MLPActorCritic, "from_sizes"):
        return MLPActorCritic.from_sizes(OBS_DIM, NUM_ACTIONS, hidden)
    # Before 5f4fdd4; mypy checks against the current signature, hence the ignore.
    return MLPActorCritic(OBS_DIM, NUM_ACTIONS, hidden)  # type: ignore[call-arg, arg-type]


def act(policy: Any, obs: Any, gen: Any) -> tuple[Any, Any, Any]:
    """actions, logprobs, values of one rollout step."""
    if hasattr(policy, "initial_state"):
        state = policy.initial_state(obs.shape[0])
        return policy.act(obs, state, None, None, gen)[:3]
    return policy.act(obs, gen)  # before 5f4fdd4


def empty_buffer(num_steps: int, num_envs: int) -> Any:
    """A CPU rollout buffer of flat float observations and one discrete action."""
    import numpy as np
    import torch

    from rlperf.ppo.rollout import RolloutBuffer

    try:
        from rlperf.envs.spec import ActionSpec, EnvSpec
    except ImportError:  # before 5f4fdd4: flat float observations, action_dim 0 = discrete
        # The signature of then; mypy checks against the current one, hence the ignore.
        return RolloutBuffer(num_steps, num_envs, OBS_DIM, 0, torch.device("cpu"))  # type: ignore[arg-type]
    spec = EnvSpec(num_envs, (OBS_DIM,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    return RolloutBuffer(num_steps, num_envs, spec, torch.device("cpu"))


def minibatch_epoch(buf: Any, gen: Any) -> Any:
    """A callable that runs one epoch of 4 shuffled minibatches over a filled buffer."""
    try:
        from rlperf.ppo.samplers import PackedTableSampler
    except ImportError:  # before 5f4fdd4: the table lived in the buffer
        buf.build_table(buf.advantages + buf.values)

        def run_old() -> list:
            buf.shuffle(gen)
            return list(buf.minibatches(4))

        return run_old
    sampler = PackedTableSampler(buf)
    sampler.prepare()
    return lambda: sampler.epoch(4, gen)


def gae_call(gae: Any, arrays: tuple[Any, ...], out: Any) -> Any:
    """A callable of ``gae`` on (rewards, values, last_value, terminations, truncations,
    bootstrap_values) writing into ``out``."""
    names = ("rewards", "values", "last_value", "terminations", "truncations", "bootstrap_values")
    kwargs = dict(zip(names, arrays, strict=True))

    def run() -> Any:
        return gae(**kwargs, gamma=0.99, gae_lambda=0.95, out=out)

    try:
        run()
    except TypeError:  # before 5f4fdd4: nine positional arguments, the last one `advantages`

        def run() -> Any:
            return gae(*arrays, 0.99, 0.95, out)

    return run
