"""``--vec-backend envpool``: EnvPool's pool as a gymnasium 1.x vector env with SAME_STEP
autoreset, held against EnvPool's own autoreset one env at a time; game episode statistics
across lives; ``--preset atari``'s settings as EnvPool's; one-line errors. Skipped without
envpool (the ``envpool`` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlperf.config import ConfigError, preset
from rlperf.envs.atari import ATARI_WRAPPERS, atari_options
from rlperf.envs.registry import EnvOptionError, UnknownEnvError

envpool = pytest.importorskip("envpool", reason="the envpool extra is not installed")

from rlperf.envs.envpool_backend import (  # noqa: E402 (after the skip)
    ATARI_SETTINGS,
    envpool_id,
    envpool_options,
    make_envpool_vec,
)

BREAKOUT = "gym:ale_py:ALE/Breakout-v5"
SEED = 5


def test_ids_are_gymnasiums_without_module_or_namespace() -> None:
    assert envpool_id(BREAKOUT) == "Breakout-v5"
    assert envpool_id("gym:ALE/Pong-v5") == "Pong-v5"
    assert envpool_id("gym:HalfCheetah-v5") == "HalfCheetah-v5"
    with pytest.raises(UnknownEnvError, match="not in EnvPool .*'Nope-v5'"):
        envpool_id("gym:ale_py:ALE/Nope-v5")
    with pytest.raises(UnknownEnvError, match="steps gymnasium ids that EnvPool has"):
        envpool_id("cartpole")


def test_the_presets_preprocessing_becomes_envpools_settings() -> None:
    """``--preset atari``'s options give EnvPool's equivalent, and those settings are the
    gymnasium wrappers' own arguments (30 no-ops, a skip of 4, 84x84, 4 frames)."""
    from rlperf.envs.gym_adapter import parse_wrappers

    assert envpool_options("Breakout-v5", atari_options()) == ATARI_SETTINGS
    by_name = {w.cls.__name__: w for w in parse_wrappers(ATARI_WRAPPERS)}  # type: ignore[attr-defined]
    pre = by_name["AtariPreprocessing"].kwargs
    ours = ATARI_SETTINGS
    assert (pre["noop_max"], pre["frame_skip"], pre["screen_size"]) == (
        ours["noop_max"], ours["frame_skip"], ours["img_height"])  # fmt: skip
    assert by_name["FrameStackObservation"].args == (ours["stack_num"],)
    assert by_name["ClipReward"].args == (-1, 1) and ours["reward_clip"]
    assert "EpisodicLifeEnv" in by_name and ours["episodic_life"]
    assert ours["repeat_action_probability"] == atari_options()["repeat_action_probability"]
    # Other keys are EnvPool's own; ALE's sticky actions keep their name.
    assert envpool_options("Pong-v5", {"repeat_action_probability": 0.25, "stack_num": 2}) == {
        "repeat_action_probability": 0.25, "stack_num": 2}  # fmt: skip
    with pytest.raises(EnvOptionError, match="takes no wrappers option"):
        envpool_options("Pong-v5", {"wrappers": "ClipReward(-1, 1)"})
    with pytest.raises(EnvOptionError, match="frameskip=4 has no EnvPool setting"):
        envpool_options("Pong-v5", {"frameskip": 4})


def step_alone(pools: list, rows: np.ndarray, actions: np.ndarray) -> list[tuple]:
    """Each row's one-env EnvPool pool stepped with its action: its own NEXT_STEP autoreset."""
    return [pools[i].step(actions[i : i + 1].astype(np.int32)) for i in rows]


def test_same_step_autoreset_equals_envpools_own_one_env_at_a_time() -> None:
    """Env ``i`` of the pool steps as a one-env pool seeded ``seed + i``: where an agent episode
    ends, its last observation is ``final_obs`` and the returned one is what EnvPool's own
    autoreset gives on the next step; the game's return (unclipped, across lives) is reported
    where the game ends, not where a life is lost."""
    n, steps = 3, 700
    vec = make_envpool_vec(BREAKOUT, n, seed=SEED, **atari_options())
    assert vec.metadata["autoreset_mode"].value == "SameStep"
    alone = [envpool.make("Breakout-v5", env_type="gymnasium", num_envs=1, seed=SEED + i,
                          **ATARI_SETTINGS) for i in range(n)]  # fmt: skip
    for pool in alone:  # as make_envpool_vec resets once
        pool.reset()
    first = np.concatenate([pool.reset()[0] for pool in alone])
    obs, _ = vec.reset()  # the seed it was made with: a plain reset of every env
    np.testing.assert_array_equal(obs, first)
    rng = np.random.default_rng(0)
    score, lives_lost, games = np.zeros(n), 0, 0
    for step in range(steps):
        actions = rng.integers(0, 4, n)
        obs, rew, term, trunc, info = vec.step(actions)
        for i, (o, r, te, tr, inf) in enumerate(step_alone(alone, np.arange(n), actions)):
            score[i] += inf["reward"][0]
            np.testing.assert_array_equal(rew[i], r[0], err_msg=f"step {step}")
            assert (term[i], trunc[i]) == (te[0], tr[0]), step
            if te[0] or tr[0]:
                np.testing.assert_array_equal(info["final_obs"][i], o[0])
                assert info["_final_obs"][i]
                # EnvPool's autoreset: the next step resets (its action ignored).
                o = alone[i].step(np.zeros(1, np.int32))[0]
            np.testing.assert_array_equal(obs[i], o[0], err_msg=f"step {step} env {i}")
            if inf["terminated"][0] or tr[0]:  # the game is over
                assert info["_episode"][i] and info["episode"]["r"][i] == score[i]
                score[i], games = 0.0, games + 1
            elif "episode" in info:
                assert not info["_episode"][i]
        lives_lost += int(term.sum())
    assert lives_lost > games > 0


def test_arrays_are_fresh_and_seeds_reproduce() -> None:
    a = make_envpool_vec(BREAKOUT, 2, seed=SEED, **atari_options())
    b = make_envpool_vec(BREAKOUT, 2, seed=SEED + 1, **atari_options())
    b.reset(seed=SEED)  # another seed than the pool's: made again
    kept = a.step(np.zeros(2, np.int64))[0]
    b.step(np.zeros(2, np.int64))
    copy = kept.copy()
    rng = np.random.default_rng(1)
    for _ in range(50):
        actions = rng.integers(0, 4, 2)
        x, y = a.step(actions), b.step(actions)
        np.testing.assert_array_equal(x[0], y[0])
        assert not np.shares_memory(x[0], kept)
    np.testing.assert_array_equal(kept, copy)
    with pytest.raises(ValueError, match="shape"):
        a.step(np.zeros(3, np.int64))
    a.close()
    a.close()
    assert a.closed


def test_mujoco_truncation_gives_final_obs_and_the_episode() -> None:
    vec = make_envpool_vec("gym:HalfCheetah-v5", 2, seed=SEED)
    assert vec.single_action_space.shape == (6,)
    for step in range(1000):
        obs, rew, term, trunc, info = vec.step(np.zeros((2, 6)))
        assert ("episode" in info) == (step == 999)
    assert trunc.all() and not term.any()
    assert (info["episode"]["l"] == 1000).all()
    assert not np.allclose(info["final_obs"], obs)  # the returned row starts the next episode


def test_the_trainer_trains_on_envpool_with_uint8_frames() -> None:
    import torch

    from rlperf.ppo.trainer import Trainer

    cfg = preset("atari")
    cfg.env.backend = "envpool"
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 2, 8, 2
    cfg.run.total_steps, cfg.run.progress, cfg.run.telemetry = 32, False, False
    trainer = Trainer(cfg)
    summary = trainer.train()
    assert summary["global_step"] == 32
    assert trainer.buffer.obs.dtype == torch.uint8


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env", "gym:CartPole-v1"], "refused an option: TypeError"),
        (["--env", "gym:ale_py:ALE/Nope-v5"], "is not in EnvPool"),
        (["--env-option", "wrappers=ClipReward"], "takes no wrappers option"),
        (["--num-workers", "2"], "--num-workers needs --vec-backend multiprocess"),
        (["--env-batch-size", "4"], "--env-batch-size needs --vec-backend multiprocess"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    from rlperf.cli import main

    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--preset", "atari", "--vec-backend", "envpool", "--total-steps", "1024",
              "--no-progress", "--run-dir", str(run), *args])  # fmt: skip
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlperf: error:") and message in lines[0]
    assert not run.exists()


def test_without_envpool_the_backend_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import rlperf.envs.envpool_backend as backend

    monkeypatch.setattr(backend, "envpool_available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'rlperf\[envpool\]'"):
        backend.envpool_id(BREAKOUT)
