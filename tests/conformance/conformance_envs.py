"""The envs gymnasium's ported vector tests run on, and the references their rows are compared to.

gymnasium's tests build their vector envs from lists of env functions (``SyncVectorEnv([...])``,
``AsyncVectorEnv([...])``); the ports in this folder build rlperf's instead, by name, as a user
does: ``make_vec(name, n)`` (serial) or ``MultiprocessVecEnv(name, n, 2)`` (2 workers). That
construction is the only change; where a test cannot apply to an env built by name it skips
saying why (see :data:`SKIP_NEXT_STEP` and friends).

A trajectory is checked row by row against a *reference* that must give the same rows:

- ``gym:<id>``: gymnasium's own ``SyncVectorEnv`` in SAME_STEP mode under its vector
  ``RecordEpisodeStatistics``: what a gymnasium user would have built. Sub-env ``i`` is seeded
  ``seed + i`` on both sides, so the rows agree exactly (serial and workers).
- rlperf's own envs, serial: a second instance with the same seed (determinism).
- rlperf's own envs on W workers: W serial envs of ``num_envs / W`` envs each, worker ``w``'s
  seeded ``seed + w * num_envs / W`` (the seeding ``MultiprocessVecEnv`` documents).

Infos are compared as :func:`per_row` gives them: one dict per row holding the keys whose mask
is set on that row, so a dense ``final_obs`` (rlperf) and gymnasium's object array of
observations and ``None`` compare equal where episodes ended, and nowhere else.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from rlperf.envs import GYM_PREFIX, make_vec
from rlperf.envs.workers import MultiprocessVecEnv

BUILTIN_ENVS = ["cartpole", "catch", "petri", "robots", "grid"]
# Gymnasium ids that need no extra package: Box/Discrete obs (CartPole), Discrete obs with an
# extra info key "prob" (FrozenLake), a Tuple observation space (Blackjack), a Box action space
# and only truncations (Pendulum, 200 steps).
GYM_ENVS = ["gym:CartPole-v1", "gym:FrozenLake-v1", "gym:Blackjack-v1", "gym:Pendulum-v1"]
ENV_NAMES = BUILTIN_ENVS + GYM_ENVS
BACKENDS = ["serial", "workers"]
NUM_WORKERS = 2
# Envs in the env's own units (the grid: maps of 16 agents each); small, so the suite stays fast.
NUM_ENVS = 4
# Long enough for an episode to end on every env (Pendulum truncates at 200 steps).
EPISODE_STEPS = 210
# Env options (part of the construction): the grid's default missions outlast EPISODE_STEPS.
OPTIONS: dict[str, dict[str, Any]] = {"grid": {"max_steps": 100}}

SKIP_NEXT_STEP = (
    "rlperf's vector envs run AutoresetMode.SAME_STEP only (the trainer bootstraps truncated "
    "episodes from infos['final_obs']); NEXT_STEP does not apply"
)
SKIP_DISABLED = (
    "rlperf's vector envs run AutoresetMode.SAME_STEP only; AutoresetMode.DISABLED and "
    "reset(options={'reset_mask': ...}) do not apply"
)
SKIP_CALL = (
    "call/get_attr/set_attr reach gymnasium's per-env objects; rlperf's envs are one batched "
    "object (serial) or live in worker processes, and have no such per-env attributes"
)
SKIP_ENV_FNS = (
    "builds its sub-envs from env functions (GenericTestEnv, custom spaces); rlperf builds envs "
    "by name in each worker, so an env function cannot be handed over"
)
SKIP_NO_ENV = "tests a gymnasium helper on hand-made data; it constructs no env"
SAME_STEP_REFUSED = "Expected autoreset_mode to be NEXT_STEP or DISABLED"


def check_render(build: Any, name: str, options: dict[str, Any]) -> None:
    """gymnasium's render test (``test_render_sync_vector``/``_async_vector``) on the envs
    ``build(name, options)`` makes: one rendering ``rgb_array`` frames, then ``gym:CartPole-v1``
    made without a render mode."""
    envs = build(name, options)
    assert envs.render_mode == "rgb_array"
    envs.reset()
    rendered_frames = envs.render()
    assert isinstance(rendered_frames, tuple)
    assert len(rendered_frames) == envs.num_envs
    assert all(isinstance(frame, np.ndarray) for frame in rendered_frames)
    envs.close()

    envs = build("gym:CartPole-v1", {})
    assert envs.render_mode is None
    envs.close()


def wrap_observations(wrapper_class: Any, env: VectorEnv, /, **kwargs: Any) -> Any:
    """``wrapper_class(env, **kwargs)`` for a gymnasium vector observation wrapper; skips the test
    where gymnasium refuses the env for being SAME_STEP (1.4.0's VectorObservationWrapper
    does: it would not transform ``infos["final_obs"]``)."""
    try:
        return wrapper_class(env, **kwargs)
    except ValueError as e:
        if SAME_STEP_REFUSED not in str(e):
            raise
        pytest.skip(
            f"gymnasium {gym.__version__}'s VectorObservationWrapper refuses AutoresetMode."
            "SAME_STEP envs (it would not transform infos['final_obs']), and rlperf's envs are "
            "SAME_STEP only"
        )


def case_id(name: str, backend: str) -> str:
    return f"{backend}-{name}"


def make(
    name: str, backend: str, num_envs: int = NUM_ENVS, seed: int | None = 0, **kwargs: Any
) -> VectorEnv:
    """rlperf's env ``name`` as a user builds it: serial (``make_vec``) or on 2 workers."""
    options = OPTIONS.get(name, {})
    if backend == "serial":
        return make_vec(name, num_envs, seed=seed, **options)
    return MultiprocessVecEnv(name, num_envs, NUM_WORKERS, seed=seed, options=options, **kwargs)


def gymnasium_reference(env_id: str, num_envs: int) -> VectorEnv:
    """gymnasium's own vector env for ``env_id`` as rlperf's ``gym:`` adapter promises to be."""
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    return RecordEpisodeStatistics(env)


def references(name: str, backend: str, num_envs: int, seed: int,
               per_worker: bool = False) -> list[tuple[slice, Any, int]]:  # fmt: skip
    """``(rows, env, seed)``: envs whose rows, reset with their seed, are ``rows`` of
    ``make(name, backend, num_envs)`` reset with ``seed`` (see the module docstring).
    ``per_worker``: a ``gym:`` id's reference for each worker's rows too (the asynchronous API
    returns one worker's rows at a time, and gymnasium types an info entry by the first row of
    the batch it returns)."""
    if name.startswith(GYM_PREFIX) and not per_worker:
        env = gymnasium_reference(name[len(GYM_PREFIX) :], num_envs)
        return [(slice(0, env.num_envs), env, seed)]
    options = OPTIONS.get(name, {})
    if name.startswith(GYM_PREFIX):
        share = num_envs // NUM_WORKERS
        return [(slice(w * share, (w + 1) * share),
                 gymnasium_reference(name[len(GYM_PREFIX) :], share), seed + w * share)
                for w in range(NUM_WORKERS)]  # fmt: skip
    if backend == "serial":
        env = make_vec(name, num_envs, seed=seed, **options)
        return [(slice(0, env.num_envs), env, seed)]
    share = num_envs // NUM_WORKERS
    refs = []
    for w in range(NUM_WORKERS):
        env = make_vec(name, share, seed=seed + w * share, **options)
        rows = env.num_envs
        refs.append((slice(w * rows, (w + 1) * rows), env, seed + w * share))
    return refs


def take(batch: Any, rows: Any) -> Any:
    """Rows ``rows`` of a batch (an array, or a tuple/dict of them as ``batch_space`` makes)."""
    if isinstance(batch, tuple):
        return tuple(take(b, rows) for b in batch)
    if isinstance(batch, dict):
        return {k: take(v, rows) for k, v in batch.items()}
    return batch[rows]


def leaf(value: Any) -> Any:
    """One row's value in a comparable form: tuples and dicts kept, everything else an array
    (so a Python int from an object array equals a numpy scalar from a dense one)."""
    if isinstance(value, tuple):
        return tuple(leaf(v) for v in value)
    if isinstance(value, dict):
        return {k: leaf(v) for k, v in value.items()}
    return np.asarray(value)


def per_row(infos: dict[str, Any], num_rows: int) -> list[dict[str, Any]]:
    """Vector ``infos`` as one dict per row (as gymnasium's ``DictInfoToList`` would), holding
    the keys whose ``_key`` mask is set on that row (all keys without a mask), without the
    episodes' elapsed seconds ``t`` (a timing)."""
    rows: list[dict[str, Any]] = [{} for _ in range(num_rows)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        nested = per_row(value, num_rows) if isinstance(value, dict) else None
        for i in range(num_rows):
            if mask is not None and not mask[i]:
                continue
            if nested is not None:
                item = nested[i]
                if key == "episode":
                    item.pop("t", None)
            else:
                item = leaf(take(value, i))
            rows[i][key] = item
    return rows


def action_sampler(env: VectorEnv, seed: int) -> gym.Space:
    """A batched action space of ``env``'s, seeded, so sampling never touches ``env``."""
    space = batch_space(env.single_action_space, env.num_envs)
    space.seed(seed)
    return space


def assert_same_rows(got: tuple, want: tuple, rows: slice, what: str) -> None:
    """``got`` (a step's or reset's results, rows of the whole env) equal ``want`` (a reference's
    results) on ``rows``; infos compared with :func:`per_row`."""
    *got_arrays, got_infos = got
    *want_arrays, want_infos = want
    names = ["obs", "rewards", "terminations", "truncations"]
    for name, g, w in zip(names, got_arrays, want_arrays, strict=False):
        part = take(g, rows)
        assert data_equivalence(leaf(part), leaf(w), exact=True), f"{what}: {name} differ"
    num_rows = rows.stop - rows.start
    got_rows = per_row(got_infos, rows.stop)[rows]
    want_rows = per_row(want_infos, num_rows)
    for i, (g, w) in enumerate(zip(got_rows, want_rows, strict=True)):
        assert sorted(g) == sorted(w), (
            f"{what}: row {rows.start + i} infos keys {sorted(g)} != {sorted(w)}"
        )
        assert data_equivalence(g, w, exact=True), f"{what}: row {rows.start + i} infos {g} != {w}"


def compare_with_references(
    env: VectorEnv, name: str, backend: str, seed: int = 0, steps: int = EPISODE_STEPS
) -> None:
    """Reset ``env`` and its references with ``seed``, step all with the same random actions for
    ``steps`` steps, and check every row of every result equals its reference's."""
    refs = references(name, backend, NUM_ENVS, seed)
    try:
        got = env.reset(seed=seed)
        for rows, ref, ref_seed in refs:
            assert_same_rows(got, ref.reset(seed=ref_seed), rows, "reset")
        sampler = action_sampler(env, seed)
        for t in range(steps):
            actions = sampler.sample()
            got = env.step(actions)
            for rows, ref, _ in refs:
                assert_same_rows(got, ref.step(take(actions, rows)), rows, f"step {t}")
    finally:
        for _, ref, _ in refs:
            ref.close()


def concat(parts: list[Any]) -> Any:
    """Batches (arrays, or tuples/dicts of them) joined along rows."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(concat([p[i] for p in parts]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: concat([p[k] for p in parts]) for k in first}
    return np.concatenate(parts)


class ReferenceEnv(VectorEnv):
    """The references of ``make(name, backend, NUM_ENVS)`` as one vector env: its rows are the
    env's rows (on the same seed and actions), its infos empty; wrappers put over both must
    give the same results. ``reset(seed=s)`` resets each reference as :func:`references` does."""

    def __init__(self, name: str, backend: str, seed: int = 0) -> None:
        self.refs = references(name, backend, NUM_ENVS, seed)
        self.offsets = [ref_seed - seed for _, _, ref_seed in self.refs]
        first = self.refs[0][1]
        self.num_envs = self.refs[-1][0].stop
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        parts = []
        for (_, ref, _), offset in zip(self.refs, self.offsets, strict=True):
            parts.append(ref.reset(seed=None if seed is None else seed + offset)[0])
        return concat(parts), {}

    def step(self, actions: Any) -> tuple:
        results = [ref.step(take(actions, rows)) for rows, ref, _ in self.refs]
        return (*(concat([r[k] for r in results]) for k in range(4)), {})

    def close_extras(self, **kwargs: Any) -> None:
        for _, ref, _ in self.refs:
            ref.close()


# Where rlperf gives other data than gymnasium on purpose or not yet: (env, backend, topic) ->
# why. Each is listed in docs/workers.md; a test that meets one skips, naming it.
