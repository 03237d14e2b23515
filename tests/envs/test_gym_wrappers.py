"""Gymnasium wrappers without Python (issue 46, issue 50 item 7): ``--env-option wrappers=...``
for ``gym:`` ids, applied inside each sub-env on both backends, and episode statistics that stay
the env's own return whatever the wrappers do to the rewards."""

from __future__ import annotations

import json
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import ClipAction, ClipReward, FlattenObservation, TimeLimit

from rlperf.cli import main
from rlperf.envs import EnvOptionError, make_vec
from rlperf.envs.gym_adapter import WrapperSpec, parse_wrappers
from rlperf.envs.workers import MultiprocessVecEnv


def test_text_names_gymnasium_wrappers_and_any_module() -> None:
    wrappers = parse_wrappers(
        "FlattenObservation, gymnasium.wrappers:TimeLimit(max_episode_steps=100),"
        "gymnasium.wrappers.ClipReward(-1, max_reward=1.5), RescaleAction(min_action=-1, "
        "max_action=[1.0, 2.0])"
    )
    assert all(isinstance(w, WrapperSpec) for w in wrappers)
    got = [(w.cls, w.args, w.kwargs) for w in cast_specs(wrappers)]
    assert got == [
        (FlattenObservation, (), {}),
        (TimeLimit, (), {"max_episode_steps": 100}),
        (ClipReward, (-1,), {"max_reward": 1.5}),
        (gymnasium.wrappers.RescaleAction, (), {"min_action": -1, "max_action": [1.0, 2.0]}),
    ]
    # A config file's list, callables from Python, and nothing.
    assert [w.cls for w in cast_specs(parse_wrappers(["ClipAction", "FlattenObservation"]))] == [
        ClipAction,
        FlattenObservation,
    ]
    assert parse_wrappers([FlattenObservation]) == [FlattenObservation]
    assert parse_wrappers(None) == parse_wrappers("") == parse_wrappers([]) == []


def cast_specs(wrappers: list[Any]) -> list[WrapperSpec]:
    assert all(isinstance(w, WrapperSpec) for w in wrappers)
    return wrappers


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("FlattenObs", ["unknown wrapper 'FlattenObs'", "did you mean FlattenObservation?"]),
        ("no_such_module_rlperf:Wrap", ["cannot import module 'no_such_module_rlperf'"]),
        ("gymnasium.wrappers:Nope", ["unknown wrapper 'Nope' in gymnasium.wrappers"]),
        ("TimeLimit(max_episode_steps=n)", ["arguments must be Python literals"]),
        ("TimeLimit(**{'a': 1})", ["arguments must be Python literals"]),
        ("TimeLimit(", ["is not of the form"]),
        ("ClipAction,,TimeLimit", ["empty name between commas"]),
        ("gymnasium.wrappers.vector:ClipReward", ["is a vector wrapper"]),
        ("TimeLimit(steps=5)", ["wrapper 'TimeLimit(steps=5)' failed", "TypeError"]),
        ("ClipAction", ["wrapper 'ClipAction' failed on CartPole-v1", "Box action space"]),
        ("gymnasium.wrappers:__name__", ["names str, not a wrapper"]),
    ],
)
def test_bad_wrappers_are_one_line_naming_them(text: str, words: list[str]) -> None:
    with pytest.raises(EnvOptionError) as err:
        make_vec("gym:CartPole-v1", 2, wrappers=text)
    message = str(err.value)
    assert "\n" not in message and message.startswith("env 'gym:CartPole-v1': ")
    for word in words:
        assert word in message


def episodes(env: Any, steps: int, seed: int = 0, rewards: list | None = None) -> list[tuple]:
    """(step, row, r, l) of every episode ``env`` reports in ``steps`` random steps (CartPole's
    or Pendulum's actions); the rewards it returned are appended to ``rewards``."""
    rng = np.random.default_rng(0)
    env.reset(seed=seed)
    discrete = isinstance(env.single_action_space, gymnasium.spaces.Discrete)
    found = []
    for t in range(steps):
        if discrete:
            actions = rng.integers(0, 2, env.num_envs)
        else:
            actions = rng.uniform(-2, 2, (env.num_envs, 1)).astype(np.float32)
        _, step_rewards, *_, infos = env.step(actions)
        if rewards is not None:
            rewards.append(step_rewards)
        if "_episode" in infos:
            ep = infos["episode"]
            assert ep["r"].dtype == np.float64 and ep["l"].dtype == np.int64
            assert ep["t"].dtype == np.float64
            found += [(t, int(i), float(ep["r"][i]), int(ep["l"][i]))
                      for i in np.flatnonzero(infos["_episode"])]  # fmt: skip
    return found


@pytest.mark.parametrize(
    ("env_id", "wrappers"),
    [
        ("CartPole-v1", "ClipReward(0, 0.5)"),
        ("Pendulum-v1", "NormalizeReward(gamma=0.99), ClipReward(-10, 10)"),
        ("Pendulum-v1", "ClipAction, NormalizeObservation, NormalizeReward, ClipReward(-1, 1)"),
    ],
)
def test_logged_return_is_the_envs_own_under_reward_wrappers(env_id: str, wrappers: str) -> None:
    """The episode return the trainer logs is the unwrapped env's for the same seed and actions,
    bit for bit, not the normalised or clipped rewards' sum (CleanRL's episodic_return)."""
    plain = make_vec(f"gym:{env_id}", 3, seed=0)
    wrapped = make_vec(f"gym:{env_id}", 3, seed=0, wrappers=wrappers)
    plain_rewards: list[np.ndarray] = []
    wrapped_rewards: list[np.ndarray] = []
    want = episodes(plain, 420, rewards=plain_rewards)
    got = episodes(wrapped, 420, rewards=wrapped_rewards)
    assert want and got == want
    # ...while the rewards the trainer learns from are the wrappers'.
    assert not np.array_equal(np.array(plain_rewards), np.array(wrapped_rewards))


def test_an_outer_time_limit_ends_the_episodes_it_truncates() -> None:
    """A wrapper that resets the env before it ends (TimeLimit above it): the episode it cut
    short is reported, its length the limit."""
    env = make_vec("gym:Pendulum-v1", 2, seed=0, wrappers="TimeLimit(max_episode_steps=7)")
    found = episodes(env, 21)
    assert [(t, i, length) for t, i, _, length in found] == [
        (t, i, 7) for t in (6, 13, 20) for i in (0, 1)
    ]


def test_a_frame_skip_wrapper_reports_whole_episodes_in_env_steps() -> None:
    """MaxAndSkipObservation (Atari's frame skip) steps the env several times a step: the
    return and length count every env step, as CleanRL's RecordEpisodeStatistics placed first."""
    env = make_vec("gym:Pendulum-v1", 1, seed=0, wrappers="MaxAndSkipObservation(skip=4)")
    found = episodes(env, 60)
    assert [length for *_, length in found] == [200]


def test_workers_take_the_same_wrappers_option(no_orphans: None) -> None:
    options = {"wrappers": "ClipReward(0, 0.5), TimeLimit(max_episode_steps=30)"}
    workers = MultiprocessVecEnv("gym:CartPole-v1", 4, 2, seed=0, options=options)
    serial = make_vec("gym:CartPole-v1", 4, seed=0, **options)
    try:
        rng = np.random.default_rng(1)
        workers.reset(seed=0)
        serial.reset(seed=0)
        ended = 0
        for t in range(70):
            actions = rng.integers(0, 2, 4)
            got, want = workers.step(actions), serial.step(actions)
            for g, w in zip(got[:4], want[:4], strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"step {t}")
            assert set(got[4]) == set(want[4]), f"step {t}"
            if "_episode" in want[4]:
                ended += int(want[4]["_episode"].sum())
                np.testing.assert_array_equal(got[4]["_episode"], want[4]["_episode"])
                for key in ("r", "l"):
                    np.testing.assert_array_equal(got[4]["episode"][key], want[4]["episode"][key])
        assert ended and np.all(want[1] == 0.5)
    finally:
        workers.close()
        serial.close()


def test_train_takes_wrappers_from_the_command_line(tmp_path, monkeypatch) -> None:
    """Blackjack's Tuple observation is refused without FlattenObservation; with it given as an
    env option the run trains, and the option is kept in the run's config."""
    monkeypatch.chdir(tmp_path)
    args = ["train", "--env", "gym:Blackjack-v1", "--env-option", "wrappers=FlattenObservation",
            "--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2",
            "--update-epochs", "1", "--threads", "1", "--total-steps", "64", "--no-progress",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["env"]["options"] == {"wrappers": "FlattenObservation"}


def test_train_logs_the_envs_return_under_clip_reward(tmp_path) -> None:
    """The first iteration's episodes come from the same initial policy and seed with and
    without ClipReward (rewards do not change which actions are sampled): the logged returns
    are equal."""

    def first_returns(run: str, *options: str) -> list[Any]:
        args = ["train", "--env", "gym:CartPole-v1", "--num-envs", "4", "--num-steps", "64",
                "--num-minibatches", "2", "--update-epochs", "1", "--threads", "1",
                "--total-steps", "256", "--seed", "3", "--no-progress",
                "--run-dir", str(tmp_path / run), *options]  # fmt: skip
        assert main(args) == 0
        rows = (tmp_path / run / "metrics.jsonl").read_text().splitlines()
        return [json.loads(rows[0])["mean_return"]]

    want = first_returns("plain")
    assert want[0] is not None and want[0] > 1
    assert first_returns("clipped", "--env-option", "wrappers=ClipReward(0, 0.01)") == want


def test_train_refuses_a_bad_wrapper_with_one_line(usage_error, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = usage_error(["train", "--env", "gym:CartPole-v1", "--env-option",
                        "wrappers=FlattenObs", "--total-steps", "4096"])  # fmt: skip
    assert "unknown wrapper 'FlattenObs'" in line and "did you mean FlattenObservation?" in line
    assert list(tmp_path.iterdir()) == []
