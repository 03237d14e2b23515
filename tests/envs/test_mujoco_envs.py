"""gymnasium's MuJoCo envs through rlperf (the `mujoco` extra): MuJoCo's warnings become Python
warnings instead of lines printed per env and a MUJOCO_LOG.TXT left in the user's directory."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

# mujoco first: without it gymnasium.envs.mujoco raises DependencyNotInstalled, not ImportError.
pytest.importorskip("mujoco", reason="needs the mujoco extra: pip install 'rlperf[mujoco]'")
pytest.importorskip("gymnasium.envs.mujoco", reason="gymnasium's MuJoCo envs are not installed")

from rlperf.envs import make_vec  # noqa: E402


def test_no_log_file_is_left_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        env = make_vec("gym:HalfCheetah-v5", 2, seed=0)
        env.close()
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_a_mujoco_warning_is_a_python_warning() -> None:
    import mujoco

    make_vec("gym:HalfCheetah-v5", 1, seed=0).close()
    with pytest.warns(RuntimeWarning, match="MuJoCo: planted"):
        mujoco.get_mju_user_warning()("planted")  # the handler MuJoCo now calls


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [("Hopper-v5", {}), ("HalfCheetah-v5", {"max_episode_steps": 25})],
    ids=["terminates", "truncates"],
)
def test_gym_vec_env_steps_as_gymnasiums_own_stack(env_id: str, kwargs: dict) -> None:
    """The one-class ``gym:`` vector env (``GymVecEnv``) against gymnasium's SyncVectorEnv +
    RecordEpisodeStatistics, step for step across episode ends: observations, rewards, flags
    and every info the env gives to the bit; the final observations as rows of the dense
    batch; the episodes' returns and lengths."""
    from gym_reference import gymnasium_stack  # tests/envs/, on sys.path under pytest
    from gymnasium.utils.env_checker import data_equivalence

    n = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        env = make_vec(f"gym:{env_id}", n, **kwargs)
        reference = gymnasium_stack(env_id, n, **kwargs)
    obs, _ = env.reset(seed=4)
    want, _ = reference.reset(seed=4)
    assert np.array_equal(obs, want)
    rng = np.random.default_rng(4)
    ended = 0
    for step in range(150):
        actions = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        *got, infos = env.step(actions)
        *expect, ref = reference.step(actions)
        for a, b in zip(got, expect, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), step
        assert sorted(infos) == sorted(ref), step
        for key in set(ref) - {"final_obs", "episode"}:
            assert data_equivalence(infos[key], ref[key], exact=True), (step, key)
        if "episode" not in ref:
            continue
        ended += int(ref["_episode"].sum())
        done = ref["_final_obs"]
        assert infos["final_obs"].shape == obs.shape and not infos["final_obs"][~done].any()
        for i in np.flatnonzero(done):
            assert np.array_equal(infos["final_obs"][i], ref["final_obs"][i]), step
        for key in ("r", "l"):
            assert data_equivalence(infos["episode"][key], ref["episode"][key], exact=True)
    assert ended >= n
