"""The worker backend against gymnasium 1.x's vector-env contract, as the serial envs give it.

The reference for ``W`` workers is ``W`` serial envs of ``num_envs / W`` each (the workers'
shares, reset with the seeds the workers use), their ``infos`` put together row by row: the
slow, obviously right form of what the pool does. Compared: observations (Tuple and Dict too),
rewards (dtype too), flags and every ``infos`` entry with its dtype, nested ``final_info``
included; ``final_obs`` where ``_final_obs`` (its other rows are not part of the contract) and
``episode["t"]`` by dtype (it is wall-clock time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from structured_envs import SequenceObs, blackjack  # tests/envs/, on sys.path under pytest

from rlperf.envs import make_vec, register, unregister
from rlperf.envs.spec import UnsupportedSpaceError
from rlperf.envs.workers import MultiprocessVecEnv
from rlperf.envs.workers.pool import combine_infos

SEED = 3
STEPS = 60
# name -> (num_envs, options)
ENVS = {
    "gym:CartPole-v1": (4, {}),
    "gym:FrozenLake-v1": (4, {}),
    "cartpole": (4, {"max_episode_steps": 12}),
    "catch": (4, {}),
    "blackjack_tuple": (4, {}),
    "blackjack_dict": (4, {"as_dict": True}),
}
SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(autouse=True)
def _no_orphans(no_orphans):
    """Every test here leaves exactly the child processes it found."""


@pytest.fixture(scope="module", autouse=True)
def _structured_envs():
    register("blackjack_tuple", blackjack)
    register("blackjack_dict", blackjack)
    yield
    unregister("blackjack_tuple")
    unregister("blackjack_dict")


def rows_of(batch, rows):
    """A batch (array, or tuple/dict of arrays) at ``rows``."""
    if isinstance(batch, tuple):
        return tuple(rows_of(b, rows) for b in batch)
    if isinstance(batch, dict):
        return {k: rows_of(b, rows) for k, b in batch.items()}
    return np.asarray(batch)[rows]


def concat(parts):
    if isinstance(parts[0], tuple):
        return tuple(concat([p[i] for p in parts]) for i in range(len(parts[0])))
    if isinstance(parts[0], dict):
        return {k: concat([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def put_rows(out, infos, per, first, total):
    """Row by row, the shard's entries into the batch ``out``: an entry's array takes the dtype
    of the first shard that has it, zeros (None for objects) where a shard lacks it."""
    for key, value in infos.items():
        if isinstance(value, dict):
            put_rows(out.setdefault(key, {}), value, per, first, total)
            continue
        if isinstance(value, tuple):  # a Tuple space's final_obs
            value = {i: v for i, v in enumerate(value)}
            parts = out.get(key)
            parts = dict(enumerate(parts)) if isinstance(parts, tuple) else {}
            put_rows(parts, value, per, first, total)
            out[key] = tuple(parts[i] for i in range(len(value)))
            continue
        value = np.asarray(value)
        if key not in out:
            out[key] = (np.full((total, *value.shape[1:]), None, object) if value.dtype == object
                        else np.zeros((total, *value.shape[1:]), value.dtype))  # fmt: skip
        for i in range(per):
            out[key][first + i] = value[i]


class Shards:
    """The workers' shares as serial envs, stepped one after another."""

    def __init__(self, name, num_envs, workers, options):
        self.per = num_envs // workers
        self.envs = [make_vec(name, self.per, **options) for _ in range(workers)]
        self.total = num_envs

    def _combine(self, infos_list):
        out = {}
        for w, infos in enumerate(infos_list):
            put_rows(out, infos, self.per, w * self.per, self.total)
        return out

    def reset(self, seed):
        outs = [e.reset(seed=seed + w * self.per) for w, e in enumerate(self.envs)]
        return concat([o[0] for o in outs]), self._combine([o[1] for o in outs])

    def step(self, actions):
        outs = [e.step(actions[w * self.per : (w + 1) * self.per])
                for w, e in enumerate(self.envs)]  # fmt: skip
        obs = concat([o[0] for o in outs])
        rew, term, trunc = (np.concatenate([o[i] for o in outs]) for i in (1, 2, 3))
        return obs, rew, term, trunc, self._combine([o[4] for o in outs])

    def close(self):
        for e in self.envs:
            e.close()


def assert_same_tree(got, want, where):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_tree(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: {set(got)} {set(want)}"
        for k in want:
            assert_same_tree(got[k], want[k], f"{where}[{k!r}]")
    else:
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, want {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=where)


def assert_same_infos(got, want, t):
    """Equal infos: keys, dtypes, values; final_obs on its flagged rows, episode t by dtype."""
    got, want = dict(got), dict(want)
    if "final_obs" in want:
        flags = want["_final_obs"]
        assert_same_tree(rows_of(got.pop("final_obs"), flags), rows_of(want.pop("final_obs"),
                         flags), f"step {t} final_obs")  # fmt: skip
    if "episode" in want:
        got["episode"], want["episode"] = dict(got["episode"]), dict(want["episode"])
        # RecordEpisodeStatistics' dtype; rlperf's serial built-ins gave float32 until the
        # serial side of issue #38 (the workers carry float64 in any case).
        want["episode"]["r"] = want["episode"]["r"].astype(np.float64)
        g, w = got["episode"].pop("t"), want["episode"].pop("t")
        assert g.dtype == w.dtype and g.shape == w.shape and (g >= 0).all(), f"step {t}"
    assert_same_tree(got, want, f"step {t} infos")


def actions_for(env, rng):
    return np.stack([env.single_action_space.sample() for _ in range(env.num_envs)])


@pytest.mark.parametrize("name", list(ENVS))
def test_workers_equal_their_serial_shares(name):
    """Every output, infos included (extra keys such as FrozenLake's prob, final_info), equal
    to the serial shares' step for step; at least one episode ends. A ``gym:`` id's reference is
    the serial env of all rows (row i seeded seed + i either way): its infos are typed by the
    batch's first row that has the entry, as gymnasium's SyncVectorEnv types them."""
    num_envs, options = ENVS[name]
    env = MultiprocessVecEnv(name, num_envs, 2, seed=SEED, options=options)
    ref = Shards(name, num_envs, 1 if name.startswith("gym:") else 2, options)
    try:
        obs, infos = env.reset(seed=SEED)
        w_obs, w_infos = ref.reset(SEED)
        assert_same_tree(obs, w_obs, "reset obs")
        assert_same_infos(infos, w_infos, "reset")
        env.single_action_space.seed(0)
        ended = 0
        for t in range(STEPS):
            actions = actions_for(env, None)
            got, want = env.step(actions), ref.step(actions)
            assert_same_tree(got[0], want[0], f"step {t} obs")
            for i, what in ((1, "rewards"), (2, "terminations"), (3, "truncations")):
                assert_same_tree(got[i], want[i], f"step {t} {what}")
            assert_same_infos(got[4], want[4], t)
            ended += int(np.logical_or(want[2], want[3]).sum())
        assert ended, "no episode ended: final_obs/final_info/episode went untested"
    finally:
        env.close()
        ref.close()


def test_frozenlake_extra_keys_are_carried():
    """The serial env's prob/_prob (and final_info's) come through the workers."""
    env = MultiprocessVecEnv("gym:FrozenLake-v1", 4, 2, seed=SEED)
    try:
        _, infos = env.reset(seed=SEED)
        assert {"prob", "_prob"} <= set(infos)
        seen_final = False
        for t in range(STEPS):
            _, _, _, _, infos = env.step(np.full(4, t % 4, np.int64))
            assert {"prob", "_prob"} <= set(infos), f"step {t}"
            if "final_info" in infos:
                seen_final = True
                assert {"prob", "_prob"} <= set(infos["final_info"])
                np.testing.assert_array_equal(infos["_final_info"], infos["_final_obs"])
        assert seen_final
    finally:
        env.close()


def test_gym_cartpole_equals_the_serial_backend_with_infos():
    """gym ids seed sub-env i with seed + i on both backends: the whole serial env's infos."""
    env = MultiprocessVecEnv("gym:CartPole-v1", 4, 2, seed=SEED)
    serial = make_vec("gym:CartPole-v1", 4, seed=SEED)
    try:
        assert_same_tree(env.reset(seed=SEED)[0], serial.reset(seed=SEED)[0], "reset")
        rng = np.random.default_rng(2)
        for t in range(STEPS):
            a = rng.integers(0, 2, 4)
            got, want = env.step(a), serial.step(a)
            for i in range(4):
                assert_same_tree(got[i], want[i], f"step {t} output {i}")
            assert_same_infos(got[4], want[4], t)
        assert env.np_random_seed == serial.np_random_seed
    finally:
        env.close()
        serial.close()


def test_combine_infos_follows_the_first_block_with_an_entry():
    a = {"prob": np.array([1, 1]), "_prob": np.array([True, True])}
    b = {"prob": np.array([0.5, 0.25]), "_prob": np.array([True, False]), "x": np.array(["u", 1],
         dtype=object), "final_info": {"k": np.array([2.0, 0.0])}}  # fmt: skip
    out = combine_infos([a, b], 2)
    want: dict = {}
    put_rows(want, a, 2, 0, 4)
    put_rows(want, b, 2, 2, 4)
    assert_same_tree(out, want, "combined")
    assert out["prob"].dtype == np.int64 and list(out["x"]) == [None, None, "u", 1]


@pytest.mark.parametrize("copy", [True, False])
def test_copy_gives_fresh_arrays_or_views(copy):
    env = MultiprocessVecEnv("gym:CartPole-v1", 4, 2, seed=0, copy=copy)
    try:
        obs, _ = env.reset(seed=0)
        first = env.step(np.ones(4, np.int64))
        for _ in range(30):  # until an episode ends: infos hold arrays too
            nxt = env.step(np.ones(4, np.int64))
            if "final_obs" in nxt[4]:
                break
        assert "final_obs" in nxt[4]
        for i in range(4):
            assert np.shares_memory(first[i], nxt[i]) is not copy, f"output {i}"
        assert np.shares_memory(obs, nxt[0]) is not copy
        again = env.step(np.ones(4, np.int64))
        assert np.shares_memory(nxt[4]["_final_obs"], again[0]) is False
        if copy:
            assert not np.array_equal(obs, nxt[0])
    finally:
        env.close()


def test_default_copy_on_the_trainers_env_is_off():
    from rlperf.config import EnvConfig
    from rlperf.envs.backends import make_env

    cfg = EnvConfig(env="cartpole", num_envs=4, backend="multiprocess", num_workers=2)
    env = make_env(cfg, seed=0)
    try:
        assert env.copy is False
    finally:
        env.close()


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (np.ones(3, np.int64), ValueError, r"\(4,\) array of integer dtype.*got shape \(3,\)"),
        (np.int64(1), TypeError, r"got a scalar"),
        (np.ones((4, 1), np.int64), ValueError, r"got shape \(4, 1\)"),
        (np.ones(4), TypeError, r"\(4,\) array of integer dtype.*got dtype float64"),
        (np.array(["a"] * 4), TypeError, "got dtype <U1"),
    ],
)
def test_bad_action_batches_name_the_expected_shape_and_dtype(actions, error, match):
    env = MultiprocessVecEnv("cartpole", 4, 2, seed=0)
    try:
        with pytest.raises(error, match=match):
            env.step(actions)
        env.step(np.zeros(4, np.int64))  # nothing was sent: the env still steps
    finally:
        env.close()


def test_tuple_actions_are_checked_per_part():
    from gymnasium import spaces

    from rlperf.envs.workers.layout import leaf_name, space_leaves
    from rlperf.envs.workers.pool import ActionRows

    space = spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (2,))))
    leaves = space_leaves(space, "action")
    views = {leaf_name("actions", (0,)): np.full(5, -1, np.int64),
             leaf_name("actions", (1,)): np.zeros((5, 2), np.float32)}  # fmt: skip
    writer = ActionRows(space, leaves, views)
    writer.write((np.ones(3, np.int64), np.full((3, 2), 0.5, np.float32)), slice(1, 4), 3)
    assert views["actions/0"].tolist() == [-1, 1, 1, 1, -1]
    assert views["actions/1"][1:4].tolist() == [[0.5, 0.5]] * 3
    with pytest.raises(ValueError, match=r"actions\[1\] must be a \(3, 2\) array of float"):
        writer.write((np.zeros(3, np.int64), np.zeros((3, 3), np.float32)), slice(0, 3), 3)
    with pytest.raises(TypeError, match="tuple of 2 batches"):
        writer.write(np.zeros(3, np.int64), slice(0, 3), 3)
    assert views["actions/0"].tolist() == [-1, 1, 1, 1, -1]  # a refused batch writes nothing


def test_close_sets_closed_and_is_idempotent():
    env = MultiprocessVecEnv("cartpole", 2, 2)
    assert env.closed is False
    env.close()
    assert env.closed is True
    env.close()
    assert env.closed is True


def _sub_env_seeds(seed):
    return tuple(range(seed, seed + 4))  # SyncVectorEnv's: one per sub-env


SEEDS_OF = [("cartpole", lambda s: s), ("gym:CartPole-v1", _sub_env_seeds)]


@pytest.mark.parametrize(("name", "seed_of"), SEEDS_OF)
def test_np_random_seed_is_the_reset_seed_and_reading_it_changes_nothing(name, seed_of):
    runs = []
    for read in (False, True):
        env = MultiprocessVecEnv(name, 4, 2)
        try:
            env.reset(seed=11)
            if read:
                assert env.np_random_seed == seed_of(11)
                env.np_random.random()
            runs.append([env.step(np.ones(4, np.int64))[0].copy() for _ in range(5)])
            env.reset(seed=12)
            assert env.np_random_seed == seed_of(12)
            env.reset()  # no seed: the last one stays
            assert env.np_random_seed == seed_of(12)
        finally:
            env.close()
    np.testing.assert_array_equal(runs[0], runs[1])


def test_a_variable_size_space_is_refused_at_construction():
    register("sequence_obs", SequenceObs)
    try:
        with pytest.raises(UnsupportedSpaceError, match="Sequence.*ObservationWrapper"):
            MultiprocessVecEnv("sequence_obs", 2, 2)
    finally:
        unregister("sequence_obs")


SCRIPT = """
import numpy as np
from rlperf.envs.workers import MultiprocessVecEnv
def main():
    env = MultiprocessVecEnv("cartpole", 2, 2, seed=0)
    env.step(np.zeros(2, np.int64))
    env.close()
    print("stepped")
"""


def run_script(path, text):
    """``text`` run as a script in a fresh interpreter importing this checkout's rlperf."""
    path.write_text(text)
    environ = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=120, env=environ, cwd=path.parent)  # fmt: skip


def test_a_script_without_the_main_guard_is_told_so(tmp_path):
    run = run_script(tmp_path / "no_guard.py", SCRIPT + "main()\n")
    assert run.returncode != 0 and "stepped" not in run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("rlperf.envs.workers.faults.WorkerError: env worker"), run.stderr
    assert "no 'if __name__ == \"__main__\":' guard" in last, run.stderr


def test_the_same_script_with_the_guard_runs(tmp_path):
    run = run_script(tmp_path / "guard.py", SCRIPT + 'if __name__ == "__main__":\n    main()\n')
    assert run.returncode == 0 and "stepped" in run.stdout, run.stderr


def test_render_gives_every_rows_frame_and_keeps_the_workers() -> None:
    """render() on workers: gymnasium's tuple of every env's frame, each equal to the serial
    env of its worker's share; frames larger than a socket's buffer (256x256 boards, ~0.4 MB a
    worker) come back too; an env that cannot render raises as its serial form does (cartpole:
    NotImplementedError), and the workers go on stepping."""
    seed, per = 2, 2
    env = MultiprocessVecEnv("robots", 4, 2, seed=seed, options={"image_size": 256})
    try:
        assert env.render_mode == "rgb_array" and env.metadata["render_modes"] == ["rgb_array"]
        env.step(env.action_space.sample())
        frames = env.render()
        assert len(frames) == 4
        for w in range(2):
            shard = make_vec("robots", per, seed=seed + w * per, image_size=256)
            shard.set_state(env.get_state()["workers"][w])  # the worker's boards, to draw
            for i, want in enumerate(shard.render()):
                np.testing.assert_array_equal(frames[w * per + i], want)
    finally:
        env.close()
    env = MultiprocessVecEnv("cartpole", 4, 2, seed=seed, inline=True)
    try:
        assert env.render_mode is None and env.metadata["render_modes"] == []
        with pytest.raises(NotImplementedError, match="could not render"):
            env.render()
        env.step(np.zeros(4, dtype=np.int64))
    finally:
        env.close()
