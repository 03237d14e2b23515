"""``--vec-backend mujoco`` (envs/mujoco_batch/) against gymnasium's own MuJoCo v5 envs, all
eleven: the same seeds and actions give the same observations, rewards, flags, final
observations and infos (keys, dtypes and values), bit for bit, across terminations,
truncations and resets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco.batch", reason="needs mujoco >= 4 (pip install 'rlperf[mujoco]')")
gymnasium = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode  # noqa: E402

from rlperf.envs.gym_adapter import quiet_mujoco  # noqa: E402
from rlperf.envs.mujoco_batch import make_mujoco_vec  # noqa: E402
from rlperf.envs.registry import EnvOptionError, UnknownEnvError  # noqa: E402


def gymnasium_vec(task: str, n: int, seed: int, **kwargs):
    quiet_mujoco(task)  # else MuJoCo's own handler leaves MUJOCO_LOG.TXT in the directory
    env = gymnasium.make_vec(task, num_envs=n, vectorization_mode="sync",
                             vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                             **kwargs)  # fmt: skip
    obs, info = env.reset(seed=seed)
    return env, obs, info


# (gymnasium id, steps, max_episode_steps): each crosses terminations where the env has them,
# truncations (the short time limits) and the resets after both, in rows out of step.
CASES = [
    ("HalfCheetah-v5", 160, 70),
    ("Hopper-v5", 200, 30),
    ("Walker2d-v5", 200, 30),
    ("Swimmer-v5", 160, 70),
    ("Ant-v5", 250, 120),
    ("Humanoid-v5", 100, 20),
    ("HumanoidStandup-v5", 90, 40),
    ("InvertedPendulum-v5", 60, 8),
    ("InvertedDoublePendulum-v5", 60, 6),
    ("Reacher-v5", 120, None),  # gymnasium's own 50 steps
    ("Pusher-v5", 110, 50),
]
NEVER_TERMINATE = {"HalfCheetah-v5", "Swimmer-v5", "HumanoidStandup-v5", "Reacher-v5", "Pusher-v5"}


# Checked apart (final_*), or rlperf's own (the episode statistics, as RecordEpisodeStatistics').
APART = {"final_obs", "_final_obs", "final_info", "_final_info"}
OURS = {"episode", "_episode"}


def assert_infos_equal(got: dict, want: dict, where: str) -> None:
    """The same keys, dtypes and values, bit for bit."""
    assert set(got) - APART - OURS == set(want) - APART, where
    for key in set(want) - APART:
        assert got[key].dtype == want[key].dtype, f"{key} dtype {where}"
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} {where}")


def lockstep(task: str, steps: int, options: dict, dtype: type = np.float32) -> tuple[int, int]:
    """Steps 3 envs of ``task`` here and in gymnasium's vector env, with the same seeds and
    random actions of ``dtype``, asserting equal results at every step; returns the number of
    terminations and truncations crossed."""
    n, seed = 3, 7
    ref, ref_obs, ref_info = gymnasium_vec(task, n, seed, **options)
    env = make_mujoco_vec(f"gym:{task}", n, seed=seed, batch_threads=2, **options)
    obs, info = env.reset(seed=seed)
    np.testing.assert_array_equal(obs, ref_obs)
    assert_infos_equal(info, ref_info, "at reset")
    rng = np.random.default_rng(0)
    terminations = truncations = 0
    for t in range(steps):
        actions = rng.uniform(-1, 1, env.action_space.shape).astype(dtype)
        got = env.step(actions)
        want = ref.step(actions)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), got[:4], want[:4],
                              strict=True):  # fmt: skip
            np.testing.assert_array_equal(a, b, err_msg=f"{name} at step {t}")
            assert a.dtype == b.dtype, f"{name} dtype at step {t}"
        info, ref_info = got[4], want[4]
        done = got[2] | got[3]
        terminations, truncations = terminations + got[2].sum(), truncations + got[3].sum()
        if done.any():
            np.testing.assert_array_equal(info["_final_obs"], ref_info["_final_obs"])
            for i in np.flatnonzero(done):
                np.testing.assert_array_equal(info["final_obs"][i], ref_info["final_obs"][i])
            assert_infos_equal(info["final_info"], ref_info["final_info"], f"final at step {t}")
        assert_infos_equal(info, ref_info, f"at step {t}")
    env.close()
    ref.close()
    return terminations, truncations


@pytest.mark.parametrize(("task", "steps", "limit"), CASES, ids=[c[0] for c in CASES])
def test_equals_gymnasium_step_for_step(task: str, steps: int, limit: int | None) -> None:
    options = {} if limit is None else {"max_episode_steps": limit}
    terminations, truncations = lockstep(task, steps, options)
    assert truncations > 0, "the test must cross a time limit"
    assert (terminations > 0) != (task in NEVER_TERMINATE), terminations


@pytest.mark.parametrize(
    ("task", "options"),
    [
        ("HalfCheetah-v5", {"ctrl_cost_weight": 0.5, "max_episode_steps": 20}),
        ("Swimmer-v5", {"exclude_current_positions_from_observation": False}),
        ("Ant-v5", {"include_cfrc_ext_in_observation": False, "main_body": "torso",
                    "exclude_current_positions_from_observation": False,
                    "contact_force_range": (-0.5, 0.5)}),
        ("Ant-v5", {"terminate_when_unhealthy": False, "healthy_z_range": (0.5, 0.6)}),
        ("Humanoid-v5", {"include_cinert_in_observation": False, "contact_cost_weight": 1e-3,
                         "include_cvel_in_observation": False, "max_episode_steps": 20}),
        ("HumanoidStandup-v5", {"include_qfrc_actuator_in_observation": False,
                                "impact_cost_range": (-1.0, 1.0)}),
        ("InvertedDoublePendulum-v5", {"healthy_reward": 5}),  # an int: reward_survive stays int
        ("InvertedPendulum-v5", {"reset_noise_scale": 0.1}),
        ("Reacher-v5", {"reward_control_weight": 0.5, "reward_dist_weight": 2}),
        ("Pusher-v5", {"reward_near_weight": 1.0, "max_episode_steps": 20}),
    ],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_options_and_action_dtypes_reach_gymnasium(task: str, options: dict, dtype: type) -> None:
    """gymnasium's keywords mean what they mean to gymnasium.make, and float64 actions keep
    the control costs in float64 as there."""
    lockstep(task, 40, options, dtype)


@pytest.mark.parametrize("task", ["Hopper-v5", "Ant-v5"])  # Ant: one MjData per env (contacts)
def test_seeds_per_env_and_thread_counts_agree(task: str) -> None:
    one = make_mujoco_vec(f"gym:{task}", 4, seed=3, batch_threads=1)
    two = make_mujoco_vec(f"gym:{task}", 4, seed=3, batch_threads=2)
    listed = make_mujoco_vec(f"gym:{task}", 4, seed=None)
    listed.reset(seed=[3, 4, 5, 6])
    a = np.zeros(one.action_space.shape, dtype=np.float32)
    for _ in range(50):
        r1, r2, r3 = one.step(a), two.step(a), listed.step(a)
        np.testing.assert_array_equal(r1[0], r2[0])
        np.testing.assert_array_equal(r1[0], r3[0])


@pytest.mark.parametrize(
    ("env", "options", "error", "text"),
    [
        ("gym:Pendulum-v1", {}, UnknownEnvError, "--vec-backend mujoco steps"),
        ("gym:Ant-v4", {}, UnknownEnvError, "MuJoCo v5 envs"),
        ("gym:HalfCheetah-v5", {"wrappers": "ClipAction"}, EnvOptionError, "no wrappers"),
        ("gym:HalfCheetah-v5", {"batch_threads": 0}, EnvOptionError, "batch_threads"),
        ("gym:HalfCheetah-v5", {"no_such_option": 1}, EnvOptionError, "no_such_option"),
    ],
)
def test_bad_input_is_one_line(env: str, options: dict, error: type, text: str) -> None:
    with pytest.raises(error, match=text) as caught:
        make_mujoco_vec(env, 2, seed=0, **options)
    assert "\n" not in str(caught.value)


def test_the_preset_trains_as_on_gymnasiums_envs() -> None:
    """Two iterations of ``--preset mujoco`` on the batch and on gymnasium's serial envs: the
    same parameters and normalisation statistics, bit for bit."""
    import torch

    from rlperf.config import preset
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    states = []
    for backend in ("mujoco", "serial"):
        cfg = preset("mujoco")
        cfg.env.backend, cfg.run.total_steps, cfg.run.seed = backend, 2 * 2048, 5
        cfg.run.threads, cfg.run.progress, cfg.run.telemetry = 1, False, False
        trainer = Trainer(cfg.validate(), profiler=Profiler(enabled=False))
        trainer.train()
        states.append({k: v.clone() for k, v in trainer.policy.state_dict().items()})
        trainer.env.close()
    for key, value in states[0].items():
        assert torch.equal(value, states[1][key]), key


def test_the_cli_names_the_backend_for_an_id_it_does_not_step() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "rlperf", "train", "--vec-backend", "mujoco", "--env", "gym:Ant-v4",
         "--total-steps", "4096"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--vec-backend serial" in lines[0], done.stderr


def test_mujoco_before_4_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from rlperf.config import ConfigError

    real = importlib.util.find_spec

    def find_spec(name: str, *args):
        return None if name == "mujoco.batch" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError, match="MuJoCo >= 4.0.*--vec-backend serial") as caught:
        make_mujoco_vec("gym:HalfCheetah-v5", 2, seed=0)
    assert "\n" not in str(caught.value)


def test_threads_default_to_the_cores_a_rank_has(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert make_mujoco_vec("gym:HalfCheetah-v5", 8, seed=0).threads == 4
    assert make_mujoco_vec("gym:HalfCheetah-v5", 2, seed=0).threads == 2  # one per env at most
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert make_mujoco_vec("gym:HalfCheetah-v5", 8, seed=0).threads == 2


def test_reset_mask_resets_those_rows_only() -> None:
    env = make_mujoco_vec("gym:Hopper-v5", 3, seed=1)
    ref = make_mujoco_vec("gym:Hopper-v5", 3, seed=1)
    a = np.full(env.action_space.shape, 0.3, dtype=np.float32)
    for _ in range(5):
        obs = env.step(a)[0]
        ref.step(a)
    mask = np.array([False, True, False])
    again, info = env.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(again[~mask], obs[~mask])
    assert not np.array_equal(again[mask], obs[mask])
    np.testing.assert_array_equal(info["_x_position"], mask)
    # Row 1's next episode is its generator's next draw: a full reset draws the same for it.
    ref.reset()
    np.testing.assert_array_equal(again[1], ref.task.observe(ref.physics)[1])


@pytest.mark.parametrize(
    ("env", "options", "batch"),
    [
        ("gym:Hopper-v5", {}, True),
        ("gym:Ant-v5", {}, True),
        ("gym:Pendulum-v1", {}, False),  # an id the batch does not step: gymnasium's serial envs
        ("gym:HalfCheetah-v5", {"wrappers": "ClipAction"}, False),
        ("cartpole", {}, False),
    ],
)
def test_auto_takes_the_batch_where_it_steps_the_env(env: str, options: dict, batch: bool) -> None:
    from rlperf.config import EnvConfig
    from rlperf.envs.backends import make_env, resolve_backend
    from rlperf.envs.mujoco_batch import MujocoBatchVecEnv

    cfg = EnvConfig(env=env, num_envs=2, backend="auto", options=options)
    assert resolve_backend(cfg) == ("mujoco" if batch else "serial")
    vec = make_env(cfg, seed=0)
    assert isinstance(vec, MujocoBatchVecEnv) == batch
    vec.close()


def test_auto_is_serial_before_mujoco_4(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlperf.config import EnvConfig
    from rlperf.envs.backends import resolve_backend
    from rlperf.envs.mujoco_batch import make

    monkeypatch.setattr(make, "batch_available", lambda: False)
    assert resolve_backend(EnvConfig(env="gym:Hopper-v5", backend="auto")) == "serial"
