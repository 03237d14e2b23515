"""The torch envs (``envs/device/``, ``--vec-backend torch``) against the numpy envs they
reproduce, and the backend's selection.

The equivalence runs: both envs take the same action stream for 10,000 steps of 8 envs, and
every step's observations, rewards, terminations, truncations, final observations and episode
statistics (``infos`` whole, but for the wall-clock ``t``) are compared. The reset draws come
from different generators (torch's against numpy's), so where a row resets the reference's new
state is copied into the torch env. CartPole's state is copied before every step as well: torch's
and numpy's float64 ``sin``/``cos`` differ in the last bit for a few arguments in a thousand
(``envs/device/cartpole.py``), and the pole's instability grows such an ulp over an episode, so
each step is compared from the same state; the difference a step makes is bounded and reported.
Catch is integer arithmetic: only its reset columns are copied, and it runs freely otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from rlperf.config import EnvConfig
from rlperf.envs import CartPoleVec, CatchVec
from rlperf.envs.backends import make_one, resolve_backend
from rlperf.envs.device import CartPoleTorch, CatchTorch, make_device_vec
from rlperf.envs.registry import EnvOptionError

STEPS, NUM_ENVS = 10_000, 8
RESET_BOUND = 0.05


def same(got: np.ndarray, want: np.ndarray, what: str, step: int) -> None:
    """``got`` equals ``want`` in dtype and every element (numpy's report only on a failure:
    its assertion costs ~40 us, and these tests make ~10 a step for 10,000 steps)."""
    if got.dtype != want.dtype or not np.array_equal(got, want):
        assert got.dtype == want.dtype, f"step {step}: {what} dtype"
        np.testing.assert_array_equal(got, want, err_msg=f"step {step}: {what}")


def close(got: np.ndarray, want: np.ndarray, what: str, step: int, atol: float = 1e-6) -> None:
    if got.size and not np.abs(got - want).max() <= atol:
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=f"step {step}: {what}")


def assert_same_step(got: tuple, want: tuple, step: int) -> None:
    """Two ``step`` results equal in rewards, terminations, truncations and ``infos``, but for
    the observations and ``final_obs`` (compared by the caller, within its tolerance) and the
    wall-clock ``episode["t"]`` (the two envs' clocks differ)."""
    for what, i in (("rewards", 1), ("terminated", 2), ("truncated", 3)):
        same(got[i], want[i], what, step)
    got, want = got[4], want[4]
    assert set(got) == set(want), f"step {step}: info keys"
    for key in ("_final_obs", "_final_info", "_episode"):
        if key in want:
            same(got[key], want[key], key, step)
    if "episode" in want:
        for k in ("r", "l"):
            same(got["episode"][k], want["episode"][k], f"episode {k}", step)
        assert got["final_info"] == want["final_info"] == {}


def balancing_actions(state: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Push toward the pole's fall (long episodes that reach the time limit), with one action
    in three random (episodes that fall or leave the track too)."""
    push = (3.0 * state[:, 2] + state[:, 3] + 0.05 * state[:, 1] > 0).astype(np.int64)
    random = rng.integers(0, 2, len(state))
    return np.where(rng.random(len(state)) < 1 / 3, random, push)


@pytest.mark.parametrize(
    "options, steps",
    [({}, STEPS), ({"max_episode_steps": 60, "observe": "position"}, 2_000)],
    ids=["default", "limit60-position"],
)
def test_cartpole_steps_as_the_numpy_env(options: dict[str, Any], steps: int) -> None:
    ref = CartPoleVec(NUM_ENVS, **options)
    env = CartPoleTorch(NUM_ENVS, **options, device="cpu")
    ref_obs, _ = ref.reset(seed=1)
    env.reset(seed=2)
    env.state.copy_(torch.from_numpy(ref.state))
    rng = np.random.default_rng(3)
    counts = {"terminated": 0, "truncated": 0, "bit_identical_steps": 0}
    worst_state_diff = 0.0
    for step in range(steps):
        actions = balancing_actions(ref.state, rng)
        env.state.copy_(torch.from_numpy(ref.state))  # the same state (module docstring)
        want, got = ref.step(actions), env.step(actions)
        assert_same_step(got, want, step)
        (obs, _, term, trunc, infos), (ref_obs, *_, ref_infos) = got, want
        done = term | trunc
        if done.any():
            close(infos["final_obs"][done], ref_infos["final_obs"][done], "final_obs", step)
            new = env.state.numpy()[done]
            assert np.all((new >= -RESET_BOUND) & (new < RESET_BOUND)), f"step {step}: reset"
        kept = ~done
        diff = np.abs(env.state.numpy()[kept] - ref.state[kept]).max(initial=0.0)
        worst_state_diff = max(worst_state_diff, float(diff))
        identical = diff == 0.0 and np.array_equal(obs[kept], ref_obs[kept])
        counts["bit_identical_steps"] += int(identical)
        close(obs[kept], ref_obs[kept], "obs", step)
        counts["terminated"] += int(term.sum())
        counts["truncated"] += int(trunc.sum())
    # One step from one state: an ulp or two of sin/cos, never more.
    assert worst_state_diff < 1e-12, worst_state_diff
    assert counts["bit_identical_steps"] > 0.9 * steps, counts
    assert counts["terminated"] >= 10 and counts["truncated"] >= 10, counts


def test_catch_steps_as_the_numpy_env_for_10000_steps() -> None:
    ref, env = CatchVec(NUM_ENVS, rows=6, columns=4), CatchTorch(NUM_ENVS, 6, 4)
    ref_obs, _ = ref.reset(seed=1)
    obs = env.reset(seed=2)[0]
    env.ball_col.copy_(torch.from_numpy(ref.ball_col))  # the first episodes' columns
    np.testing.assert_array_equal(env.observe().numpy(), ref_obs)
    rng = np.random.default_rng(3)
    episodes = 0
    for step in range(STEPS):
        actions = rng.integers(0, 3, NUM_ENVS)
        want, got = ref.step(actions), env.step(actions)
        assert_same_step(got, want, step)
        (obs, _, term, _, infos), (ref_obs, *_, ref_infos) = got, want
        if term.any():
            same(infos["final_obs"], ref_infos["final_obs"], "final_obs", step)
            episodes += int(term.sum())
            # The new balls' columns: the reference's draws (module docstring).
            env.ball_col[torch.from_numpy(term)] = torch.from_numpy(ref.ball_col[term])
            obs = env.observe().numpy()
        same(obs, ref_obs, "obs", step)
    assert episodes == STEPS // 5 * NUM_ENVS  # every episode is rows - 1 = 5 steps


def test_cartpole_resets_land_in_the_numpy_envs_distribution() -> None:
    stats = pytest.importorskip("scipy.stats", reason="needs scipy (dev extra)")
    n = 20_000
    torch_states = CartPoleTorch(n).reset(seed=4)[0]
    numpy_states = CartPoleVec(n).reset(seed=4)[0]
    for column in range(4):
        ours, theirs = torch_states[:, column], numpy_states[:, column]
        assert ours.min() >= -RESET_BOUND and ours.max() < RESET_BOUND
        assert stats.ks_2samp(ours, theirs).pvalue > 1e-3, column
        assert stats.kstest(ours, stats.uniform(-RESET_BOUND, 2 * RESET_BOUND).cdf).pvalue > 1e-3
    # Autoreset draws: rows that fall at once (the limit of 1 step) start from the same law.
    env = CartPoleTorch(n, max_episode_steps=1)
    env.reset(seed=5)
    env.step(np.zeros(n, dtype=np.int64))
    ks = stats.kstest(env.state[:, 2].numpy(), stats.uniform(-RESET_BOUND, 2 * RESET_BOUND).cdf)
    assert ks.pvalue > 1e-3


def test_catch_resets_land_in_the_numpy_envs_distribution() -> None:
    stats = pytest.importorskip("scipy.stats", reason="needs scipy (dev extra)")
    n, columns = 20_000, 5
    env = CatchTorch(n, rows=2, columns=columns)  # every step ends an episode
    env.reset(seed=6)
    env.step(np.ones(n, dtype=np.int64))
    fresh = CatchTorch(n, columns=columns)
    fresh.reset(seed=7)
    for cols in (env.ball_col.numpy(), fresh.ball_col.numpy()):
        counts = np.bincount(cols, minlength=columns)
        assert stats.chisquare(counts).pvalue > 1e-3, counts
    assert (env.ball_row == 0).all() and (env.paddle_col == columns // 2).all()


@pytest.mark.parametrize("name", ["cartpole", "catch"])
def test_seeds_checkpoints_and_options(name: str) -> None:
    a, b = make_device_vec(name, 6, seed=7), make_device_vec(name, 6, seed=7)
    assert a.np_random_seed == 7
    np.testing.assert_array_equal(a.reset(seed=8)[0], b.reset(seed=8)[0])
    assert not np.array_equal(a.reset(seed=9)[0], b.reset(seed=10)[0])
    actions = np.ones((40, 6), dtype=np.int64)
    saved = a.get_state()
    first = [a.step(x)[:4] for x in actions]
    b.set_state({k: v.numpy() for k, v in saved.items()})  # as a checkpoint gives them back
    for step, (want, x) in enumerate(zip(first, actions, strict=True)):
        for got_part, want_part in zip(b.step(x)[:4], want, strict=True):
            np.testing.assert_array_equal(got_part, want_part, err_msg=f"step {step}")
    with pytest.raises(EnvOptionError, match="has no option 'colour'"):
        make_device_vec(name, 2, colour="red")


def test_bad_option_values_are_the_numpy_envs_messages() -> None:
    with pytest.raises(EnvOptionError, match="observe must be one of full, position"):
        make_device_vec("cartpole", 2, observe="velocity")
    with pytest.raises(EnvOptionError, match="rows must be an integer >= 2"):
        make_device_vec("catch", 2, rows=1)


def test_auto_takes_the_torch_envs_on_cuda_only() -> None:
    cfg = EnvConfig(env="cartpole", backend="auto")
    assert resolve_backend(cfg, "cuda") == "torch"
    assert resolve_backend(cfg, torch.device("cuda", 1)) == "torch"
    assert resolve_backend(cfg, "cpu") == "serial"
    assert resolve_backend(EnvConfig(env="grid", backend="auto"), "cuda") == "serial"
    assert isinstance(make_one(EnvConfig(env="catch", backend="torch"), 3), CatchTorch)


def test_torch_backend_without_a_torch_env_is_one_line_exit_2(
    capsys: pytest.CaptureFixture, tmp_path: Any
) -> None:
    from rlperf.cli import main
    from rlperf.commandline import EXIT_USAGE

    run_dir = tmp_path / "run"
    argv = ["train", "--env", "grid", "--vec-backend", "torch", "--num-envs", "2",
            "--total-steps", "1000", "--run-dir", str(run_dir)]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == EXIT_USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlperf: error: "), lines
    assert "--vec-backend torch" in lines[0] and "cartpole, catch" in lines[0], lines[0]
    assert not run_dir.exists()
