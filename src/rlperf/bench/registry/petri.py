"""The Petri-net workload: the jobshop net, masked MLP PPO."""

from __future__ import annotations

from typing import Any

from .core import HISTORY, QUICK, SEED, Case, Prepared, Workload, requires_env
from .policies import act_case, kind_policy
from .training import continued_training, trainer_config

PETRI_NET = "jobshop"  # the >= 20-transition built-in net the speed target is measured on
PETRI_RECORDED_STEPS = 128


def _petri_vec(num_envs: int, **options: Any) -> Any:
    from rlperf.envs import make_vec

    requires_env("petri")
    return make_vec("petri", num_envs, seed=SEED, net=PETRI_NET, **options)


def _petri_step(turbo: bool, num_envs: int) -> Prepared:
    """One step with random enabled transitions, recorded in setup by a turbo twin from the same
    start: every timed step fires valid transitions, as a masked policy would."""
    import numpy as np

    vec, twin = _petri_vec(num_envs, turbo=turbo), _petri_vec(num_envs)
    mask = twin.reset(seed=SEED)[1]["action_mask"]
    rng = np.random.default_rng(SEED)
    actions = []
    for _ in range(PETRI_RECORDED_STEPS):
        actions.append((rng.random(mask.shape) * mask).argmax(1))
        mask = twin.step(actions[-1])[4]["action_mask"]
    vec.reset(seed=SEED)
    start, calls = vec.get_state(), [0]

    def run() -> Any:
        k = calls[0] % PETRI_RECORDED_STEPS
        if k == 0 and calls[0]:
            vec.set_state(start)  # back to where the recording began: 1 call in 128
        calls[0] += 1
        return vec.step(actions[k])

    return Prepared(run, num_envs, "env_steps")


def _petri_reset(turbo: bool, num_envs: int) -> Prepared:
    vec = _petri_vec(num_envs, turbo=turbo)
    return Prepared(lambda: vec.reset(seed=SEED), num_envs, "env_resets")


def _petri_masked_act(num_envs: int) -> Prepared:
    """The MLP policy's act on the petri env's observations with its action mask."""
    _petri_vec(1)  # CaseSkipped on commits without the env
    policy, _, obs, infos = kind_policy("mlp", num_envs, ("petri", {"net": PETRI_NET}))
    return act_case(policy, obs, infos)


def _petri_e2e(num_envs: int, env_steps: int, threads: int) -> Prepared:
    """Continued training on the petri env (masked MLP PPO)."""
    _petri_vec(1)  # CaseSkipped on commits without the env
    cfg = trainer_config(num_envs, threads)
    cfg.env.env, cfg.env.options = "petri", {"net": PETRI_NET}
    return continued_training(cfg, env_steps)


_cases = [
    Case(f"petri_{what}", {"turbo": turbo, "num_envs": n}, fn,
         {HISTORY, QUICK} if what == "step" and turbo and n == 1024 else ())
    for turbo in (True, False)
    for n in (64, 1024)
    for what, fn in (("step", _petri_step), ("reset", _petri_reset))
]  # fmt: skip
# The jobshop net, masked MLP: one iteration of 96 envs x 32 steps, ~0.063 s a call.
WORKLOAD = Workload(
    "petri",
    "petri",
    e2e=Case("petri_e2e", {"num_envs": 96, "env_steps": 3072, "threads": 1}, _petri_e2e),
    cases=(
        *_cases,
        Case("petri_masked_act", {"num_envs": 64}, _petri_masked_act, {HISTORY}),
        Case("petri_e2e", {"num_envs": 64, "env_steps": 4096, "threads": 1}, _petri_e2e),
    ),
)
