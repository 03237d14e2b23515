"""``--vec-backend envpool``: EnvPool's pool as a gymnasium 1.x vector env with SAME_STEP
autoreset, held against EnvPool's own autoreset one env at a time; game episode statistics
across lives; batches (``--env-batch-size``) held against the synchronous pool; ``--preset
atari``'s settings as EnvPool's; one-line errors. Skipped without envpool (the ``envpool``
extra)."""

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
    assert "EpisodicLife" in by_name and ours["episodic_life"]
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


def test_batches_step_every_env_as_the_synchronous_pool() -> None:
    """``send``/``recv`` in batches of 2 of 6 envs give, row by row, what the synchronous pool
    gives for the same actions: observations, rewards, flags, final observations, infos and
    the games' returns, through lost lives and resets. A batch whose envs ended an episode
    yields once to the next one; which comes back depends on the data, not on EnvPool's
    threads (two runs, with 1 and 3 threads, return the same batches in the same order)."""
    n, b, steps = 6, 2, 400
    sync = make_envpool_vec(BREAKOUT, n, seed=SEED, **atari_options())
    runs = [make_envpool_vec(BREAKOUT, n, SEED, b, num_threads=t, **atari_options())
            for t in (1, 3)]  # fmt: skip
    assert all(v.asynchronous and v.batch_size == b for v in runs) and not sync.asynchronous
    rng = np.random.default_rng(2)
    actions = rng.integers(0, 4, (steps, n))
    expected = [sync.step(actions[t]) for t in range(steps)]  # expected[t][k][row]
    orders = []
    for vec in runs:
        position, order = np.zeros(n, dtype=np.int64), []
        vec.send(actions[0])
        in_flight = n
        while in_flight:
            obs, rew, term, trunc, info, rows = vec.recv()
            in_flight -= len(rows)
            order.append((int(rows[0]), int(position[rows[0]])))
            for j, row in enumerate(rows):
                t = position[row]
                e_obs, e_rew, e_term, e_trunc, e_info = expected[t]
                np.testing.assert_array_equal(obs[j], e_obs[row], err_msg=f"step {t} row {row}")
                assert (rew[j], term[j], trunc[j]) == (e_rew[row], e_term[row], e_trunc[row])
                assert info["lives"][j] == e_info["lives"][row]
                assert ("_final_obs" in info and info["_final_obs"][j]) == (
                    "_final_obs" in e_info and e_info["_final_obs"][row])  # fmt: skip
                if "_final_obs" in info and info["_final_obs"][j]:
                    np.testing.assert_array_equal(info["final_obs"][j], e_info["final_obs"][row])
                if "_episode" in info and info["_episode"][j]:
                    assert info["episode"]["r"][j] == e_info["episode"]["r"][row]
            position[rows] += 1
            more = rows[position[rows] < steps]
            if more.size:
                vec.send(actions[position[more[0]]][more], more)
                in_flight += len(more)
        orders.append(order)
    assert orders[0] == orders[1]
    # Without a yield the batches would come back round-robin: by step, then by row.
    round_robin = sorted(orders[0], key=lambda e: (e[1], e[0]))
    assert orders[0] != round_robin, "no batch yielded to the next: the run saw no episode end"


def test_batches_refuse_calls_out_of_order() -> None:
    from rlperf.envs.workers.pool import ApiUsageError

    vec = make_envpool_vec(BREAKOUT, 4, SEED, 2, **atari_options())
    with pytest.raises(ApiUsageError, match="no step in flight"):
        vec.recv()
    with pytest.raises(ApiUsageError, match="whole batches of 2 consecutive rows"):
        vec.send(np.zeros(2, np.int64), np.array([1, 2]))
    vec.send(np.zeros(2, np.int64), np.array([2, 3]))
    with pytest.raises(ApiUsageError, match="still stepping"):
        vec.send(np.zeros(2, np.int64), np.array([2, 3]))
    with pytest.raises(ApiUsageError, match="batches in flight"):
        vec.step(np.zeros(4, np.int64))
    obs, _ = vec.reset()  # drops the batch in flight
    assert obs.shape == (4, 4, 84, 84)
    assert vec.step(np.zeros(4, np.int64))[0].shape == (4, 4, 84, 84)
    with pytest.raises(ValueError, match="must divide"):
        make_envpool_vec(BREAKOUT, 4, SEED, 3, **atari_options())


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


def test_the_trainer_in_batches_is_deterministic() -> None:
    """``--env-batch-size``: the asynchronous collector over EnvPool's batches trains to the
    same parameters twice (its data do not hang on the threads' timing), on one rollout
    thread."""
    import torch

    from rlperf.ppo.trainer import Trainer

    params = []
    for _ in range(2):
        cfg = preset("atari")
        cfg.env.backend, cfg.env.env_batch_size = "envpool", 2
        cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 4, 16, 2
        cfg.run.total_steps, cfg.run.progress, cfg.run.telemetry = 128, False, False
        trainer = Trainer(cfg)
        trainer.train()
        assert trainer.rollout_threads == 1
        params.append(torch.cat([p.detach().flatten() for p in trainer.policy.parameters()]))
    assert torch.equal(params[0], params[1])


@pytest.mark.parametrize(
    "args, message",
    [
        # The preset's fit is checked first (#60): EnvPool never sees Atari options on CartPole.
        (["--env", "gym:CartPole-v1"], "--preset atari fits gym:ale_py:ALE/*"),
        (["--env", "gym:ale_py:ALE/Nope-v5"], "is not in EnvPool"),
        (["--env-option", "wrappers=ClipReward"], "takes no wrappers option"),
        (["--num-workers", "2"], "--num-workers needs --vec-backend multiprocess"),
        (["--env-batch-size", "3"], "--env-batch-size 3 must divide --num-envs 8"),
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
