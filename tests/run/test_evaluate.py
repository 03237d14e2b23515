"""``rlperf eval``: a checkpoint's returns are the env's own (the same as a hand loop over
gymnasium's env with the policy's argmax), the run's observation normalisation is applied and
stays frozen, the video holds env 0's frames and reads back, and every bad input is one line,
exit 2, with nothing written."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from rlperf.cli import check_command, main
from rlperf.commandline import EXIT_INTERRUPTED, EXIT_OK, UsageError
from rlperf.envs.normalize import RunningStats
from rlperf.envs.spec import EnvSpec
from rlperf.run import evaluate
from rlperf.run.checkpoint import to_numpy
from rlperf.run.evaluate import (
    build_policy,
    evaluate_run,
    frozen_normalizer,
    load_run,
    make_eval_env,
    pooled_stats,
    run_episodes,
)

TINY = ["--num-envs", "8", "--num-steps", "64", "--threads", "1", "--seed", "1", "--no-progress"]


def train(run: Path, *flags: str) -> Path:
    assert main(["train", *TINY, "--run-dir", str(run), *flags]) == EXIT_OK
    return run


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gymnasium's CartPole-v1, 8 iterations: episodes of a few hundred steps."""
    return train(tmp_path_factory.mktemp("cp") / "run", "--env", "gym:CartPole-v1",
                 "--total-steps", "4096")  # fmt: skip


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pendulum-v1 with observation and reward normalisation, 2 iterations."""
    return train(tmp_path_factory.mktemp("pd") / "run", "--env", "gym:Pendulum-v1",
                 "--normalize-obs", "--normalize-reward", "--total-steps", "1024")  # fmt: skip


@pytest.fixture(scope="module")
def robots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rlperf's own rendering env, RGB boards and a CNN, one short iteration."""
    return train(tmp_path_factory.mktemp("rb") / "run", "--env", "robots", "--policy", "cnn",
                 "--env-option", "max_depth=1", "--env-option", "max_steps=6", "--num-envs", "2",
                 "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1",
                 "--total-steps", "16")  # fmt: skip


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# -- returns ---------------------------------------------------------------------------------
def test_deterministic_returns_are_a_hand_loops_over_gymnasiums_env(cartpole: Path) -> None:
    """Episode by episode, the returns and lengths of gymnasium's own CartPole-v1 stepped by
    hand with the argmax of the policy's logits, from the same seed."""
    result = evaluate_run(cartpole, episodes=3, deterministic=True, seed=7)
    cfg, payload = load_run(cartpole)
    env = make_eval_env(cfg, 1)
    spec = EnvSpec.from_env(env)
    env.close()
    policy = build_policy(cfg, spec, payload)
    hand = gymnasium.make("CartPole-v1")
    returns, lengths = [], []
    obs, _ = hand.reset(seed=7)
    for _ in range(3):
        total, steps, ended = 0.0, 0, False
        while not ended:
            with torch.no_grad():
                logits = policy.heads(torch.as_tensor(obs).unsqueeze(0))[0]
            obs, reward, terminated, truncated, _ = hand.step(int(logits.argmax()))
            total, steps, ended = total + float(reward), steps + 1, terminated or truncated
        returns.append(total)
        lengths.append(steps)
        obs, _ = hand.reset()
    assert (result.returns, result.lengths) == (returns, lengths)
    assert result.deterministic and result.num_envs == 1 and not result.normalized_obs
    assert result.global_step == 4096


def test_sampled_returns_repeat_with_the_seed_and_several_envs_share_the_count(
    cartpole: Path,
) -> None:
    one = evaluate_run(cartpole, episodes=3, seed=2)
    assert evaluate_run(cartpole, episodes=3, seed=2).returns == one.returns
    shared = evaluate_run(cartpole, episodes=3, seed=2, num_envs=2)
    assert len(shared.returns) == len(shared.lengths) == 3 and shared.num_envs == 2
    assert shared.returns == [float(n) for n in shared.lengths]  # CartPole: +1 a step
    assert evaluate_run(cartpole, episodes=2, seed=2, num_envs=8).num_envs == 2  # no idle envs


# -- normalisation ---------------------------------------------------------------------------
def test_observation_normalisation_is_the_runs_frozen(pendulum: Path, monkeypatch) -> None:
    """The policy sees gymnasium's raw Pendulum observations normalised with the checkpoint's
    statistics (clipped as in training), the statistics never move, and the return is the raw
    rewards' sum (the run also normalised rewards)."""
    cfg, payload = load_run(pendulum)
    saved = to_numpy(payload["normalizer"]["obs"])
    env = make_eval_env(cfg, 1)
    _, infos = env.reset(seed=3)
    spec = EnvSpec.from_env(env, infos)
    policy = build_policy(cfg, spec, payload)
    normalizer = frozen_normalizer(cfg, payload, spec)
    assert normalizer is not None and not normalizer.training
    assert not np.allclose(saved["mean"], 0.0)  # trained statistics, not the prior
    seen, taken = [], []
    act_mode = policy.act_mode

    def recording(obs, state, done, mask=None):
        actions, state = act_mode(obs, state, done, mask)
        seen.append(obs.numpy().copy())
        taken.append(spec.action.to_env(actions.numpy())[0])
        return actions, state

    monkeypatch.setattr(policy, "act_mode", recording)
    returns, lengths = run_episodes(policy, env, spec, 1, 3, True, normalizer)
    env.close()
    stats = normalizer.obs_stats
    assert stats is not None
    for key in ("mean", "var", "count"):
        np.testing.assert_array_equal(getattr(stats, key), saved[key])

    hand = gymnasium.make("Pendulum-v1")
    raw, _ = hand.reset(seed=3)
    total = 0.0
    for t in range(lengths[0]):
        expected = (raw - saved["mean"]) / np.sqrt(saved["var"] + 1e-8)
        expected = np.clip(expected, -cfg.env.clip_obs, cfg.env.clip_obs).astype(np.float32)
        np.testing.assert_allclose(seen[t][0], expected, rtol=0, atol=1e-6, err_msg=f"step {t}")
        raw, reward, _, _, _ = hand.step(taken[t])
        total += float(reward)
    assert lengths == [200] and returns[0] == pytest.approx(total, rel=1e-12)
    again = evaluate_run(pendulum, episodes=1, deterministic=True, seed=3)
    assert again.normalized_obs and again.returns == returns


def test_pooled_statistics_are_those_of_every_sample() -> None:
    """Per-env (and per-rank) statistics merge into the statistics of all samples; one set
    comes back bit for bit."""
    rng = np.random.default_rng(0)
    samples = rng.normal(3.0, 2.0, size=(50, 4, 3))  # 50 steps of 4 envs
    per_env = RunningStats((3,), rows=4)
    shared = RunningStats((3,))
    for batch in samples:
        per_env.update(batch)
        shared.update(batch)
    merged = pooled_stats([per_env.state_dict()], (3,))
    flat = samples.reshape(-1, 3)
    np.testing.assert_allclose(merged["mean"], flat.mean(0), rtol=1e-5)
    np.testing.assert_allclose(merged["var"], flat.var(0), rtol=1e-5)
    two_ranks = pooled_stats([shared.state_dict(), shared.state_dict()], (3,))
    np.testing.assert_allclose(two_ranks["mean"], shared.mean, rtol=1e-12)
    np.testing.assert_allclose(two_ranks["var"], shared.var, rtol=1e-12)
    one = pooled_stats([shared.state_dict()], (3,))
    for key in ("mean", "var", "count"):
        np.testing.assert_array_equal(one[key], getattr(shared, key))


# -- video -----------------------------------------------------------------------------------
def test_mp4_holds_env_0s_episode(cartpole: Path, tmp_path: Path) -> None:
    """One frame a step of the first episode (SAME_STEP autoreset: its last state is the next
    episode's first frame, left out), playable by ffmpeg at the env's frame rate."""
    pytest.importorskip("imageio_ffmpeg", reason="an .mp4 needs imageio-ffmpeg (rlperf[video])")
    pytest.importorskip("pygame", reason="CartPole renders with pygame (rlperf[video])")
    import imageio.v2 as imageio

    video = tmp_path / "cp.mp4"
    result = evaluate_run(cartpole, episodes=2, deterministic=True, seed=7, video=video)
    assert result.video_frames == result.lengths[0]
    reader = imageio.get_reader(video)
    assert reader.count_frames() == result.video_frames
    assert reader.get_meta_data()["fps"] == 50  # CartPole's render_fps
    assert reader.get_data(0).shape == (400, 600, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["cp.mp4"]  # no temporary file left


def test_gif_of_rlperf_robots_shows_its_boards(robots: Path, tmp_path: Path) -> None:
    """rlperf's own env renders too: the GIF's first frame is env 0's board after the reset,
    and the video holds the frames of the first two episodes."""
    pytest.importorskip("imageio", reason="--video writes through imageio (rlperf[video])")
    import imageio.v3 as iio

    video = tmp_path / "robots.gif"
    result = evaluate_run(robots, episodes=3, seed=4, video=video, video_episodes=2)
    assert result.video_frames == sum(result.lengths[:2])
    frames = iio.imread(video, index=None)
    # Pillow merges identical consecutive frames into one longer one.
    assert 1 <= len(frames) <= result.video_frames and frames.shape[1:] == (64, 64, 3)
    cfg, _ = load_run(robots)
    env = make_eval_env(cfg, 1, render=True)
    env.reset(seed=4)
    # Env 0's frame, whether render() gives every env's (gymnasium's tuple) or one board.
    np.testing.assert_array_equal(frames[0], evaluate.env0_frame(env.render()))
    env.close()


def test_interrupted_eval_leaves_no_video(robots: Path, tmp_path: Path, monkeypatch, capsys):
    pytest.importorskip("imageio", reason="--video writes through imageio (rlperf[video])")
    add = evaluate.VideoWriter.add

    def interrupted(self, frame):
        add(self, frame)
        if self.frames == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(evaluate.VideoWriter, "add", interrupted)
    before = tree(tmp_path)
    assert main(["eval", str(robots), "--video", str(tmp_path / "r.gif")]) == EXIT_INTERRUPTED
    assert tree(tmp_path) == before
    assert "eval interrupted; nothing written" in capsys.readouterr().err


# -- the command -----------------------------------------------------------------------------
def test_prints_a_line_per_episode_and_the_summary(cartpole: Path, tmp_path: Path, capsys):
    out_file = tmp_path / "eval.json"
    argv = ["eval", str(cartpole), "--episodes", "2", "--deterministic", "--seed", "7"]
    assert main([*argv, "--json", str(out_file)]) == EXIT_OK
    lines = capsys.readouterr().out.strip().splitlines()
    expected = evaluate_run(cartpole, episodes=2, deterministic=True, seed=7)
    assert lines[0].startswith(f"{cartpole}: gym:CartPole-v1, policy mlp, global step 4,096")
    assert lines[1].split() == ["episode", "return", "length", "(agent", "steps)"]
    for i, line in enumerate(lines[2:4]):
        assert line.split() == [str(i + 1), f"{expected.returns[i]:.2f}", str(expected.lengths[i])]
    assert re.fullmatch(r"return \d+\.\d \+- \d+\.\d over 2 episodes \(deterministic\)", lines[4])
    assert json.loads(out_file.read_text()) == expected.to_dict()
    assert main([*argv, "--json", "-"]) == EXIT_OK
    printed = json.loads(capsys.readouterr().out)  # the JSON alone
    assert printed["returns"] == expected.returns and printed["episodes"] == 2
    assert printed["mean_return"] == pytest.approx(np.mean(expected.returns))


def test_each_episode_is_reported_as_it_ends(cartpole: Path):
    seen: list[tuple[list[float], list[int]]] = []

    def progress(result: evaluate.EvalResult) -> None:
        seen.append((list(result.returns), list(result.lengths)))

    result = evaluate_run(cartpole, episodes=3, deterministic=True, seed=7, progress=progress)
    assert seen[0] == ([], [])  # before the first episode: the header's moment
    assert seen[1:] == [(result.returns[:k], result.lengths[:k]) for k in (1, 2, 3)]


def test_atari_lengths_and_an_envpool_run_are_named():
    from rlperf.config import preset

    cfg = preset("atari")
    cfg.env.backend = "envpool"
    unit, notes = evaluate.describe_episodes(cfg)
    assert unit == "emulator frames"
    assert "4 per agent step" in notes[0] and "EnvPool" in notes[1]
    assert evaluate.describe_episodes(preset("default")) == ("agent steps", [])


@pytest.fixture
def runs(cartpole: Path, tmp_path: Path) -> Path:
    """A folder of broken runs: none, empty, a torn checkpoint, an env that cannot render
    (rlperf's CartPole, the gym run's checkpoint relabelled: the same spaces)."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "torn").mkdir()
    data = (cartpole / "checkpoint.pt").read_bytes()
    (tmp_path / "torn" / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    payload = torch.load(cartpole / "checkpoint.pt", weights_only=True)
    payload["config"]["env"]["env"] = "cartpole"
    (tmp_path / "native").mkdir()
    torch.save(payload, tmp_path / "native" / "checkpoint.pt")
    (tmp_path / "a_file").write_text("x")
    return tmp_path


BAD = {
    "missing": (["missing"], "cannot evaluate: run directory {root}/missing does not exist"),
    "a file": (["a_file"], "is not a directory"),
    "no checkpoint": (["empty"], "cannot evaluate: no checkpoint.pt in {root}/empty"),
    "corrupt": (["torn"], "is corrupt or truncated"),
    "no episodes": (["native", "--episodes", "0"], "--episodes must be at least 1, got 0"),
    "bad seed": (["native", "--seed", "-1"], "seed must be between 0 and"),
    "video format": (["native", "--video", "{root}/v.avi"], "the extension picks the format"),
    "video folder": (["native", "--video", "{root}/no/v.gif"], "does not exist"),
    "unwritable": (["native", "--video", "/proc/v.gif"], "--video /proc/v.gif: cannot create"),
    "json unwritable": (["native", "--json", "/proc/e.json"], "--json /proc/e.json: cannot"),
    "no render": (["native", "--video", "{root}/v.gif"], "env 'cartpole' has no rgb_array"),
    "video episodes": (["native", "--video-episodes", "2"], "give --video PATH"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_writes_nothing(case: str, runs: Path, usage_error) -> None:
    args, message = BAD[case]
    if case == "no render":
        pytest.importorskip("imageio", reason="--video writes through imageio (rlperf[video])")
    before = tree(runs)
    argv = [a.format(root=runs) for a in args]
    line = usage_error(["eval", str(runs / argv[0]), *argv[1:]])
    assert message.format(root=runs) in line
    assert tree(runs) == before


def test_check_command_checks_the_flags_not_the_files() -> None:
    """``check_command`` (the docs' commands) finds a bad flag, and leaves the run directory
    and the video's folder to the command: they belong to where it runs."""
    check_command(["eval", "no/such/run", "--deterministic", "--video", "no/such/v.mp4"])
    with pytest.raises(UsageError, match="--episodes must be at least 1"):
        check_command(["eval", "runs/x", "--episodes", "0"])
    with pytest.raises(UsageError, match="the extension picks the format"):
        check_command(["eval", "runs/x", "--video", "v.webm"])


def test_an_mp4_without_imageio_ffmpeg_names_the_extra(runs: Path, usage_error, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    before = tree(runs)
    line = usage_error(["eval", str(runs / "native"), "--video", str(runs / "v.mp4")])
    assert "needs imageio-ffmpeg" in line and "pip install 'rlperf[video]'" in line
    assert "or write a .gif" in line and tree(runs) == before


def test_the_camera_follows_a_mujoco_body() -> None:
    """gymnasium's MuJoCo renderer keeps its free camera where the first frame put it: the
    video's camera looks at the tracked body (the config's trackbodyid, else the root) in x and
    y each frame, its height kept."""
    from types import SimpleNamespace

    from rlperf.run.evaluate import follow_the_body

    def vector_env(config: dict) -> SimpleNamespace:
        cam = SimpleNamespace(lookat=np.array([0.0, 0.0, 1.15]))
        sim = SimpleNamespace(
            mujoco_renderer=SimpleNamespace(viewer=SimpleNamespace(cam=cam),
                                            default_cam_config=config),
            data=SimpleNamespace(subtree_com=np.array([[0, 0, 0], [20.0, 1.0, 0.5],
                                                       [30.0, 2.0, 0.7]])),
        )  # fmt: skip
        sim.unwrapped = sim
        return SimpleNamespace(unwrapped=SimpleNamespace(envs=[sim])), cam

    env, cam = vector_env({"distance": 4.0})
    follow_the_body(env)
    np.testing.assert_array_equal(cam.lookat, [20.0, 1.0, 1.15])
    env, cam = vector_env({"trackbodyid": 2})
    follow_the_body(env)
    np.testing.assert_array_equal(cam.lookat, [30.0, 2.0, 1.15])
    follow_the_body(SimpleNamespace(unwrapped=SimpleNamespace()))  # not MuJoCo: nothing to do
