"""rlperf's serial vector envs against gymnasium 1.x's vector-env contract (issue #38).

Every built-in env and the ``gym:`` adapter: seeds (``np_random_seed`` is the reset seed; reading
it or ``np_random`` never changes a trajectory), SAME_STEP infos as ``SyncVectorEnv`` +
``RecordEpisodeStatistics`` give them (keys, masks, dtypes), spaces (Dict/Tuple batched, Graph,
Sequence, OneOf and Text refused with one line), action batches checked for shape and dtype,
``closed``, and fresh arrays on every call. The references are gymnasium's own classes: its
CartPole-v1 stack for ``cartpole``, its ``RecordEpisodeStatistics`` (under another key) for the
episode statistics of every env, raw ``SyncVectorEnv`` for the adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gym_reference import gymnasium_stack  # tests/envs/, on sys.path under pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from rlperf.cli import main
from rlperf.envs import make_vec
from rlperf.envs.spec import EnvSpec, UnsupportedSpaceError

# (name, options, num_envs): small enough that episodes end within a few steps.
ENVS = [
    ("cartpole", {"max_episode_steps": 6}, 5),
    ("catch", {"rows": 4}, 5),
    ("petri", {"max_steps": 5}, 5),
    ("robots", {"board_size": 4, "max_depth": 1, "obs_mode": "symbolic"}, 5),
    ("robots", {"board_size": 4, "max_depth": 1}, 3),  # rgb_image
    ("grid", {"mission": "extractor_hub_12", "num_agents": 2, "max_steps": 4}, 2),
    ("gym:CartPole-v1", {}, 4),
    ("gym:FrozenLake-v1", {}, 4),  # extra info key: prob
    ("gym:Blackjack-v1", {}, 4),  # Tuple observations
]
IDS = [f"{name}-{'-'.join(map(str, opts.values())) or 'default'}" for name, opts, _ in ENVS]
BUILT_IN = [case for case in ENVS if not case[0].startswith("gym:")]
BUILT_IN_IDS = [i for i, case in zip(IDS, ENVS, strict=True) if case in BUILT_IN]
STEPS = 24
SEED = 11


def build(case: tuple[str, dict[str, Any], int], seed: int | None = SEED) -> VectorEnv:
    name, options, n = case
    return make_vec(name, n, seed=seed, **options)


def random_actions(env: VectorEnv, rng: np.random.Generator) -> np.ndarray:
    """One valid int64 action per row (every env here has a Discrete action space)."""
    return rng.integers(0, env.single_action_space.n, env.num_envs)


def without_time(infos: dict[str, Any]) -> dict[str, Any]:
    """``infos`` without the wall-clock ``t`` of episode statistics (never reproducible)."""
    out = dict(infos)
    for key in ("episode", "reference"):
        if key in out:
            out[key] = {k: v for k, v in out[key].items() if k != "t"}
    return out


def leaves(data: Any) -> Iterator[np.ndarray]:
    """Every numpy array inside a step's or reset's result (dicts and tuples walked)."""
    if isinstance(data, dict):
        for value in data.values():
            yield from leaves(value)
    elif isinstance(data, tuple | list):
        for value in data:
            yield from leaves(value)
    elif isinstance(data, np.ndarray):
        if data.dtype == object:
            for value in data.ravel():
                yield from leaves(value)
        else:
            yield data


def done_steps(env: VectorEnv, steps: int = STEPS) -> Iterator[tuple]:
    """``(step, actions, result)`` of ``steps`` random steps of ``env`` (seeded actions)."""
    rng = np.random.default_rng(SEED)
    for step in range(steps):
        actions = random_actions(env, rng)
        yield step, actions, env.step(actions)


# -- 1. seeds ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_np_random_seed_is_the_reset_seed(case: tuple) -> None:
    env = build(case)
    n = env.num_envs
    # SyncVectorEnv (the gym: adapter) reports its sub-envs' seeds, seed + i for env i.
    want = tuple(range(SEED, SEED + n)) if case[0].startswith("gym:") else SEED
    assert env.np_random_seed == want
    env.reset(seed=SEED + 100)
    again = tuple(range(SEED + 100, SEED + 100 + n)) if case[0].startswith("gym:") else SEED + 100
    assert env.np_random_seed == again
    env.reset()  # no seed: the generator goes on, and so does the seed it was made from
    assert env.np_random_seed == again


@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_reading_np_random_never_changes_a_trajectory(case: tuple) -> None:
    plain, read = build(case), build(case)
    rng = np.random.default_rng(SEED)
    for step in range(STEPS):
        # Every read, between every pair of steps, on one of two envs seeded alike.
        _ = read.np_random, read.np_random_seed
        actions = random_actions(plain, rng)
        want, got = plain.step(actions), read.step(actions)
        for a, b in zip(want[:4], got[:4], strict=True):
            assert data_equivalence(a, b, exact=True), f"step {step}"
        assert data_equivalence(without_time(want[4]), without_time(got[4]), exact=True), step


@pytest.mark.parametrize("case", BUILT_IN, ids=BUILT_IN_IDS)
def test_unseeded_env_keeps_its_generator_when_the_seed_is_read(case: tuple) -> None:
    env = build(case, seed=None)
    rng = env.np_random
    seed = env.np_random_seed
    assert isinstance(seed, int) and env.np_random is rng and env.np_random_seed == seed


# -- 2. infos ----------------------------------------------------------------------------------
def test_cartpole_infos_match_gymnasium_stack() -> None:
    """Keys, masks, values and dtypes of every info, state synced as in test_cartpole.py."""
    n = 6
    gym_vec = gymnasium_stack("CartPole-v1", n)
    gym_vec.reset(seed=3)
    env = make_vec("cartpole", n, seed=3)
    rng = np.random.default_rng(3)
    finished = 0
    for step in range(120):
        env.state = np.stack([sub.unwrapped.state for sub in gym_vec.env.envs])
        actions = rng.integers(0, 2, n)
        *_, infos = env.step(actions)
        *_, g_infos = gym_vec.step(actions)
        assert sorted(infos) == sorted(g_infos), f"step {step}"
        if "episode" not in g_infos:
            continue
        finished += 1
        for key in ("_final_obs", "_final_info", "_episode"):
            assert data_equivalence(infos[key], g_infos[key], exact=True), (step, key)
        assert infos["final_info"] == g_infos["final_info"] == {}
        for key in ("r", "l"):
            assert data_equivalence(infos["episode"][key], g_infos["episode"][key], exact=True)
        assert infos["episode"]["t"].dtype == g_infos["episode"]["t"].dtype
        for i in np.flatnonzero(g_infos["_final_obs"]):
            assert np.array_equal(infos["final_obs"][i], g_infos["final_obs"][i]), step
    assert finished > 3


@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_episode_statistics_match_record_episode_statistics(case: tuple) -> None:
    """gymnasium's RecordEpisodeStatistics, wrapped around the env under another key, is the
    reference: same returns and lengths to the bit, same dtypes, same mask."""
    env = RecordEpisodeStatistics(build(case), stats_key="reference")
    env.reset(seed=SEED)
    finished = 0
    for step, _, (_, _, terms, truncs, infos) in done_steps(env, 40):
        done = terms | truncs
        assert ("episode" in infos) == bool(done.any()) == ("reference" in infos), step
        if not done.any():
            continue
        finished += 1
        assert np.array_equal(infos["_episode"], done) and infos["_episode"].dtype == bool
        assert np.array_equal(infos["_reference"], infos["_episode"])
        for key in ("r", "l", "t"):
            got, want = infos["episode"][key], infos["reference"][key]
            assert got.dtype == want.dtype, (step, key, got.dtype, want.dtype)
            if key != "t":
                assert np.array_equal(got, want), (step, key)
        assert np.all(infos["episode"]["t"][done] >= 0) and not infos["episode"]["t"][~done].any()
    assert finished >= 2


@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_same_step_infos_have_final_obs_and_final_info(case: tuple) -> None:
    env = build(case)
    finished = 0
    for step, _, (_, _, terms, truncs, infos) in done_steps(env, 40):
        done = terms | truncs
        if not done.any():
            assert not {"final_obs", "final_info", "episode"} & set(infos), step
            continue
        finished += 1
        for key in ("_final_obs", "_final_info", "_episode"):
            assert np.array_equal(infos[key], done) and infos[key].dtype == bool, (step, key)
        assert isinstance(infos["final_info"], dict)
        for key, value in infos["final_info"].items():  # a dict of arrays, each with its mask
            if not key.startswith("_"):
                assert len(value) == env.num_envs and f"_{key}" in infos["final_info"]
        final = infos["final_obs"]
        if isinstance(env.single_observation_space, spaces.Tuple | spaces.Dict):
            # gymnasium's object array: each finished row's observation, None elsewhere.
            assert final.dtype == object and final.shape == (env.num_envs,), step
            assert all(final[i] is None for i in np.flatnonzero(~done)), step
            assert all(final[i] in env.single_observation_space for i in np.flatnonzero(done))
            continue
        # Dense final_obs, laid out as the batched observation; the gym: adapter's rows of the
        # envs that did not finish are zeros.
        assert env.observation_space.contains(final), step
        if case[0].startswith("gym:"):
            assert all(not leaf[~done].any() for leaf in leaves(final)), step
    assert finished >= 2


def test_petri_final_info_is_the_mask_of_the_final_observation() -> None:
    """Reference: the enabled transitions are also columns P..P+T of the observation."""
    env = make_vec("petri", 6, seed=0, max_steps=4)
    places, transitions = env.net.num_places, env.net.num_transitions
    for step, _, (_, _, terms, truncs, infos) in done_steps(env, 12):
        assert infos["_action_mask"].all() and infos["action_mask"].shape == (6, transitions)
        done = terms | truncs
        if not done.any():
            continue
        mask = infos["final_info"]["action_mask"]
        want = infos["final_obs"][:, places : places + transitions] > 0
        assert np.array_equal(mask[done], want[done]), step
        assert not mask[~done].any() and np.array_equal(infos["final_info"]["_action_mask"], done)


def test_gym_adapter_carries_every_info_key() -> None:
    """FrozenLake's ``prob`` (and its mask) on every step, and in ``final_info`` at the end of
    an episode, as gymnasium's own stack gives them."""
    env = make_vec("gym:FrozenLake-v1", 4, seed=1)
    raw = gymnasium_stack("FrozenLake-v1", 4)
    raw.reset(seed=1)
    saw_final = False
    for step, actions, (*result, infos) in done_steps(env, 40):
        *g_result, g_infos = raw.step(actions)
        assert sorted(infos) == sorted(g_infos), step
        assert {"prob", "_prob"} <= set(infos), step
        assert data_equivalence(infos["prob"], g_infos["prob"], exact=True)
        assert data_equivalence(tuple(result), tuple(g_result), exact=True), step
        if "final_info" in infos:
            saw_final = True
            assert data_equivalence(infos["final_info"], g_infos["final_info"], exact=True)
            assert "prob" in infos["final_info"]
    assert saw_final


# -- 3. spaces ---------------------------------------------------------------------------------
class StructuredEnv(gymnasium.Env):
    """Dict observations of every batchable leaf space, Dict actions; episodes of 3 steps."""

    observation_space = spaces.Dict(
        {
            "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "kind": spaces.Discrete(4),
            "bits": spaces.MultiBinary(3),
            "pair": spaces.Tuple((spaces.MultiDiscrete([2, 5]), spaces.Discrete(2))),
        }
    )
    action_space = spaces.Dict(
        {"move": spaces.Discrete(3), "force": spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"t": self.t}

    def _obs(self) -> dict[str, Any]:
        # From the env's own generator: a class-level space's sampler would be shared by every
        # instance, so two vector envs would not see the same observations.
        rng = self.np_random
        return {
            "pos": rng.uniform(-1, 1, 2).astype(np.float32),
            "kind": np.int64(self.t % 4),
            "bits": rng.integers(0, 2, 3).astype(np.int8),
            "pair": (rng.integers(0, [2, 5]), np.int64(rng.integers(2))),
        }

    def step(self, action: dict[str, Any]) -> tuple:
        self.t += 1
        reward = float(action["move"]) + float(np.sum(action["force"]))
        return self._obs(), reward, self.t == 3, False, {"t": self.t}


class VariableEnv(gymnasium.Env):
    """An env whose observation space is set per registration (Graph, Text, ...)."""

    action_space = spaces.Discrete(2)

    def __init__(self, observation_space: spaces.Space) -> None:
        self.observation_space = observation_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: int) -> tuple:
        return self.observation_space.sample(), 0.0, False, False, {}


VARIABLE = {
    "Graph": spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(2)),
    "Sequence": spaces.Sequence(spaces.Discrete(3)),
    "OneOf": spaces.OneOf((spaces.Discrete(2), spaces.Box(0, 1, (2,)))),
    "Text": spaces.Text(5),
    "DictText": spaces.Dict({"pos": spaces.Box(0, 1, (2,)), "name": spaces.Text(5)}),
}
# The wrapper each refusal names: FlattenObservation where it gives a Box.
HINT = {"Graph": "ObservationWrapper", "Sequence": "ObservationWrapper",
        "OneOf": "FlattenObservation", "Text": "FlattenObservation",
        "DictText": "FlattenObservation"}  # fmt: skip

if "RlperfTest/Structured-v0" not in gymnasium.registry:
    gymnasium.register("RlperfTest/Structured-v0", entry_point=StructuredEnv)
    for label, obs_space in VARIABLE.items():
        gymnasium.register(
            f"RlperfTest/{label}-v0",
            entry_point=VariableEnv,
            kwargs={"observation_space": obs_space},
        )


def structured_actions(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "move": rng.integers(0, 3, n),
        "force": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
    }


@pytest.mark.parametrize("env_id", ["Blackjack-v1", "RlperfTest/Structured-v0"])
def test_structured_spaces_match_sync_vector_env(env_id: str) -> None:
    """Tuple and Dict observations batched as batch_space lays them out, step for step equal
    to gymnasium's SyncVectorEnv; final_obs gymnasium's object array, each finished row equal
    to gymnasium's entry (the crash this replaces: a broadcast error at the first end)."""
    n = 4
    env = make_vec(f"gym:{env_id}", n, seed=2)
    raw = gymnasium_stack(env_id, n, statistics=False)
    raw.reset(seed=2)
    assert env.observation_space == raw.observation_space
    space = env.single_observation_space
    rng = np.random.default_rng(2)
    finished = 0
    for step in range(30):
        if env_id == "Blackjack-v1":
            actions: Any = rng.integers(0, 2, n)
        else:
            actions = structured_actions(rng, n)
        *result, infos = env.step(actions)
        *g_result, g_infos = raw.step(actions)
        assert data_equivalence(tuple(result), tuple(g_result), exact=True), step
        assert env.observation_space.contains(result[0])
        if "final_obs" not in infos:
            continue
        finished += 1
        rows = infos["final_obs"]
        assert rows.dtype == object and rows.shape == (n,), step
        # Reference: gymnasium's own batching (concatenate) of each of its final observations.
        for i in range(n):
            if not infos["_final_obs"][i]:
                assert rows[i] is None and g_infos["final_obs"][i] is None, (step, i)
                continue
            want = concatenate(space, [g_infos["final_obs"][i]], create_empty_array(space, 1))
            got = concatenate(space, [rows[i]], create_empty_array(space, 1))
            assert data_equivalence(got, want, exact=True), (step, i)
        assert data_equivalence(infos["final_info"], g_infos["final_info"], exact=True)
    assert finished >= 2


@pytest.mark.parametrize("label", list(VARIABLE))
def test_variable_size_spaces_are_refused_at_construction(label: str) -> None:
    with pytest.raises(UnsupportedSpaceError) as err:
        make_vec(f"gym:RlperfTest/{label}-v0", 2)
    message = str(err.value)
    assert "\n" not in message
    part = "Text" if label == "DictText" else label
    assert f"{part}(" in message and HINT[label] in message, message


def test_trainer_refuses_structured_observations_naming_flatten_observation(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    env = make_vec("gym:Blackjack-v1", 2, seed=0)
    with pytest.raises(UnsupportedSpaceError, match="FlattenObservation"):
        EnvSpec.from_env(env)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "gym:Blackjack-v1", "--total-steps", "4096"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlperf: error:") and "\n" not in err and "FlattenObservation" in err
    assert list(tmp_path.iterdir()) == [], "nothing written before the refusal"


def test_flattened_structured_env_trains_through_wrappers_option() -> None:
    """The fix the refusal names works: FlattenObservation gives the policies a Box."""
    env = make_vec("gym:Blackjack-v1", 2, seed=0, wrappers=[gymnasium.wrappers.FlattenObservation])
    spec = EnvSpec.from_env(env)
    assert spec.obs_shape == (45,)


# -- 4. actions --------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_bad_action_batches_raise_one_line_naming_shape_and_dtype(case: tuple) -> None:
    env, twin = build(case), build(case)
    n = env.num_envs
    good = np.zeros(n, dtype=np.int64)
    bad: list[tuple[Any, type[Exception]]] = [
        (np.int64(1), TypeError),  # a scalar used to step every env (cartpole, catch)
        (1, TypeError),  # as gymnasium: a scalar is no batch
        (np.zeros(n + 1, dtype=np.int64), ValueError),  # IndexError before (petri, robots)
        (np.zeros(max(n - 1, 1) if n > 2 else 1, dtype=np.int64), ValueError),
        (np.zeros((n, 1), dtype=np.int64), ValueError),
        (good.astype(np.float32), TypeError),
        (good.astype(bool), TypeError),
        (np.array(["0"] * n), TypeError),
    ]
    for actions, error in bad:
        with pytest.raises(error) as err:
            env.step(actions)
        message = str(err.value)
        assert "\n" not in message and f"({n},)" in message and "dtype" in message, message
    # A refused batch changed nothing: the env goes on as its twin that never saw one.
    for step in range(6):
        for a, b in zip(env.step(good)[:4], twin.step(good)[:4], strict=True):
            assert data_equivalence(a, b, exact=True), step


def test_structured_action_batches_are_checked() -> None:
    env = make_vec("gym:RlperfTest/Structured-v0", 3, seed=0)
    good = structured_actions(np.random.default_rng(0), 3)
    env.step(good)
    with pytest.raises(TypeError, match="dict"):
        env.step([good["move"], good["force"]])
    with pytest.raises(ValueError, match="keys"):
        env.step({"move": good["move"]})
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        env.step({**good, "force": good["force"][:, :1]})
    with pytest.raises(TypeError, match="float"):
        env.step({**good, "force": np.zeros((3, 2), dtype=np.int64)})


def test_integer_dtypes_other_than_int64_are_taken() -> None:
    for dtype in (np.int32, np.uint8, np.int16):
        a, b = make_vec("catch", 4, seed=0), make_vec("catch", 4, seed=0)
        actions = np.array([0, 1, 2, 1])
        assert data_equivalence(a.step(actions)[:4], b.step(actions.astype(dtype))[:4], exact=True)


# -- 5. close ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_close_is_idempotent_and_sets_closed(case: tuple) -> None:
    env = build(case)
    assert env.closed is False
    env.close()
    assert env.closed is True
    env.close()
    assert env.closed is True


# -- 6. fresh arrays ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", ENVS, ids=IDS)
def test_every_call_returns_fresh_arrays(case: tuple) -> None:
    """No array returned by one call shares memory with an array of another call, or with
    another array of the same call; what a call returned is unchanged by the calls after it."""
    env = build(case)
    rng = np.random.default_rng(SEED)
    calls = [env.reset(seed=SEED)]
    for _ in range(12):
        calls.append(env.step(random_actions(env, rng)))
    kept = [[a.copy() for a in leaves(call)] for call in calls]
    calls.append(env.reset(seed=SEED))
    arrays = [list(leaves(call)) for call in calls]
    for c, (now, before) in enumerate(zip(arrays, kept, strict=False)):
        assert all(np.array_equal(a, b) for a, b in zip(now, before, strict=True)), f"call {c}"
    flat = [(c, a) for c, call in enumerate(arrays) for a in call]
    for i, (c1, a) in enumerate(flat):
        for c2, b in flat[i + 1 :]:
            assert not np.shares_memory(a, b), f"call {c1} and call {c2} share memory"


def test_worker_info_types_recover_gymnasiums_batch_typing() -> None:
    """Reference: gymnasium's own ``_add_info``. A worker's lossless entries, cast to the type
    of their first row where :class:`InfoTypes` names one, equal gymnasium's (which casts every
    row into the first row's type: FrozenLake's 1/3 becomes 0 after an int row)."""
    from rlperf.envs.gym_adapter import InfoTypes

    rng = np.random.default_rng(0)
    n = 4
    reference = gymnasium.make_vec("FrozenLake-v1", n, vectorization_mode="sync").unwrapped
    types = InfoTypes(make_vec("gym:FrozenLake-v1", n))
    values = [1, 1 / 3, True, np.float32(0.5), np.int32(7), -0.5]
    casts = 0
    for trial in range(300):
        rows = [{"prob": values[rng.integers(len(values))]} if rng.random() < 0.8 else {}
                for _ in range(n)]  # fmt: skip
        want: dict[str, Any] = {}
        got: dict[str, Any] = {}
        for i, row in enumerate(rows):
            want = reference._add_info(want, {"final_info": row, **row}, i)
            got = types._add_info(got, {"final_info": row, **row}, i)
        promoted = types.take()
        for path in promoted:
            node = got
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = node[path[-1]].astype(promoted[path])
            casts += 1
        assert data_equivalence(got, want, exact=True), (trial, rows)
    assert casts > 50  # the mixed-type batches were exercised


# -- 7. a repeated seeded reset ----------------------------------------------------------------
class CountedResets(gymnasium.Wrapper):
    """Counts the resets that reach the sub-env."""

    resets = 0

    def reset(self, **kwargs: Any) -> Any:
        CountedResets.resets += 1
        return super().reset(**kwargs)


def test_repeated_seeded_reset_is_the_same_reset_without_resetting_again() -> None:
    """make_vec resets with its seed and the trainer resets again with the same one: the second
    returns what gymnasium's own stack gives for that seed (fresh arrays), and reaches no
    sub-env; a step, a call, another seed or options in between make it a real reset."""
    CountedResets.resets = 0
    env = make_vec("gym:CartPole-v1", 3, seed=SEED, wrappers=[CountedResets])
    assert CountedResets.resets == 3
    first = env.reset(seed=SEED)
    assert CountedResets.resets == 3
    raw = gymnasium_stack("CartPole-v1", 3, statistics=False)
    assert data_equivalence(first, raw.reset(seed=SEED), exact=True)
    again = env.reset(seed=SEED)
    assert data_equivalence(again, first, exact=True) and not np.shares_memory(again[0], first[0])
    actions = np.zeros(3, dtype=np.int64)
    assert data_equivalence(env.step(actions), raw.step(actions), exact=True)
    for between, seed, options in (
        (lambda: env.step(actions), SEED, None),  # a step
        (lambda: env.call("get_wrapper_attr", "spec"), SEED, None),  # anything else
        (lambda: None, SEED + 1, None),  # another seed
        (lambda: None, SEED + 1, {"reset_mask": np.array([True, False, True])}),  # options
    ):
        between()
        before = CountedResets.resets
        env.reset(seed=seed, options=options)
        assert CountedResets.resets > before
    env.close()
