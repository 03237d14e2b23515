"""``rlperf eval RUN_DIR``: a trained policy's return over N episodes, and a video of it.

The run's checkpoint plays ``--episodes`` whole episodes of the run's env (its env options
included) in a fresh serial vector env reset with ``--seed``, as CleanRL's ``evaluate``, SB3's
``evaluate_policy`` and the RL Zoo's ``enjoy`` do:

- **Returns are the env's own**: each episode's return and length come from the env's episode
  statistics (``infos["episode"]``), never from the rewards PPO learned from, which
  ``--normalize-reward`` and reward wrappers change (CleanRL's ``episodic_return``).
- **Observation normalisation is the run's, frozen**: a run trained with ``--normalize-obs``
  saw normalised observations, so its policy must see them too, normalised with the statistics
  saved in the checkpoint and not updated by the evaluation (SB3's ``VecNormalize`` with
  ``training = False``). Statistics kept per env (``--norm-per-env``) or per rank are pooled
  into one set, as if one had seen every sample; the reward's are not needed (no reward reaches
  the policy).
- **Actions**: sampled from the policy's distribution with a generator seeded by ``--seed``,
  or with ``--deterministic`` its mode (:meth:`~rlperf.policies.base.ActorCritic.act_mode`:
  the Gaussian's mean, the argmax of the allowed logits), clipped to a Box's bounds as in
  training.
- **Several envs** (``--num-envs``): env i counts the first ``(episodes + i) // num_envs``
  episodes it finishes (SB3's rule), so the envs whose episodes are short do not fill the
  count with short episodes.

**Video** (``--video PATH``): env 0's frames through gymnasium's ``rgb_array`` rendering
(``gym:`` ids are made with ``render_mode="rgb_array"``; rlperf's ``robots`` renders its
boards), its first ``--video-episodes`` episodes (default 1) one after the other; the other
episodes play unrendered, as a frame can cost far more than a step (a MuJoCo frame rendered
in software, where there is no GPU: ~0.1 s on a 2-core machine). In gymnasium's SAME_STEP
autoreset the frame after an episode's last step is already the next episode's first, so an
episode of L steps gives L frames and its last state is not shown, as gymnasium's vector
``RecordVideo`` defines it. ``.mp4`` is written by imageio's ffmpeg plugin (package
``imageio-ffmpeg``, the ``video`` extra) frame by frame; ``.gif`` by imageio's Pillow plugin,
which holds every frame until the end (short clips) and merges identical consecutive frames
into one longer frame. The file is written beside PATH under a temporary name and renamed over
PATH at the end, so an evaluation that fails or is interrupted leaves nothing behind.

Bad input (a missing run directory or checkpoint, a corrupt checkpoint, ``--episodes 0``, a
video that cannot be written or rendered) is one line ``rlperf: error: ...`` and exit 2 before
any episode is played.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.error import DependencyNotInstalled
from gymnasium.vector import VectorEnv

from rlperf.config import Config, ConfigError
from rlperf.envs.normalize import Normalizer
from rlperf.envs.registry import GYM_PREFIX, make_vec
from rlperf.envs.spec import EnvSpec, UnsupportedSpaceError, read_action_mask
from rlperf.policies.base import ActorCritic
from rlperf.policies.registry import make_policy
from rlperf.run.checkpoint import CheckpointError, first_line, load_checkpoint, to_numpy
from rlperf.run.run_dir import out_file_problem

PURPOSE = "evaluate"  # checkpoint errors read "cannot evaluate: ..."
# The video's format, by PATH's extension.
VIDEO_FORMATS = {".mp4": "FFMPEG", ".gif": "GIF"}
VIDEO_INSTALL = "pip install 'rlperf[video]'"
DEFAULT_FPS = 30  # where the env's metadata has no render_fps


class EvalError(ValueError):
    """Bad input for an evaluation that is not the checkpoint's (one line)."""


@dataclass
class EvalResult:
    """One evaluation: each episode's return and length in the order they finished.

    Attributes:
        run_dir, env, policy, global_step: the run evaluated (its env id and policy kind, and
            the step its checkpoint was saved at).
        deterministic, seed, num_envs: how it was evaluated.
        normalized_obs: the run's observation statistics normalised what the policy saw.
        returns: each episode's return, the env's own (undiscounted, unnormalised).
        lengths: each episode's length as the env counts it (``length_unit``).
        length_unit: what a length counts: ``agent steps``, or ``emulator frames`` for Atari
            (each agent step repeats the action on several frames; the video holds one frame
            per agent step).
        notes: what else a reader should know about how the run is evaluated (one line each).
        video, video_frames: the video written (None without one) and its number of frames.
    """

    run_dir: str
    env: str
    policy: str
    global_step: int
    deterministic: bool
    seed: int
    num_envs: int
    normalized_obs: bool
    returns: list[float]
    lengths: list[int]
    length_unit: str = "agent steps"
    notes: list[str] = field(default_factory=list)
    video: str | None = None
    video_frames: int = 0

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std_return(self) -> float:
        """The population standard deviation (``np.std``), as SB3's ``evaluate_policy``."""
        return float(np.std(self.returns))

    def to_dict(self) -> dict[str, Any]:
        """Everything, with ``episodes``, ``mean_return`` and ``std_return``: ``--json``."""
        out = asdict(self)
        out.update(
            episodes=len(self.returns), mean_return=self.mean_return, std_return=self.std_return
        )
        return out


# -- the pieces --------------------------------------------------------------------------
def load_run(run_dir: Path, purpose: str = PURPOSE) -> tuple[Config, dict[str, Any]]:
    """The config and checkpoint payload of ``run_dir``; errors read "cannot ``purpose``: ...".

    Raises:
        EvalError: ``run_dir`` is missing or not a directory.
        CheckpointError: no checkpoint, an unreadable or corrupt one, an unusable config.
    """
    if not run_dir.exists():
        raise EvalError(f"cannot {purpose}: run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise EvalError(
            f"cannot {purpose}: {run_dir} is not a directory (give the --run-dir of a run)"
        )
    payload = load_checkpoint(run_dir, purpose=purpose)
    try:
        cfg = Config.from_dict(payload["config"])
    except (KeyError, TypeError, ConfigError) as e:
        raise CheckpointError(
            f"cannot {purpose}: the checkpoint's config is unusable ({first_line(e)})"
        ) from e
    return cfg, payload


def make_eval_env(cfg: Config, num_envs: int, render: bool = False) -> VectorEnv:
    """``num_envs`` copies of the run's env, with its options, in this process (the serial
    backend); with ``render``, a ``gym:`` id is made with ``render_mode="rgb_array"``.

    Raises:
        UnknownEnvError, EnvOptionError: as ``rlperf train`` would (one line).
        EvalError: the env needs a package that is not installed here (``gym:HalfCheetah-v5``
            without ``mujoco``).
    """
    options = dict(cfg.env.options)
    # The MuJoCo batch's own option: its envs are gymnasium's, which evaluate here.
    options.pop("batch_threads", None)
    if render and cfg.env.env.startswith(GYM_PREFIX):
        options["render_mode"] = "rgb_array"
    try:
        return make_vec(cfg.env.env, num_envs, **options)
    except DependencyNotInstalled as e:
        raise EvalError(f"env {cfg.env.env!r}: {first_line(e)}") from e


def pooled_stats(states: list[dict[str, Any]], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """One set of running statistics (``RunningStats.state_dict``: ``mean``, ``var`` of
    ``shape`` and ``count``) from several, each for the batch or one per env
    (``--norm-per-env``): Chan's parallel merge of every set, the statistics of all their
    samples together. A single set comes back unchanged, bit for bit.

    Raises:
        ValueError: a set whose arrays do not have ``shape`` (per env or not).
    """
    ones = (1,) * len(shape)
    mean = np.concatenate([np.asarray(s["mean"], np.float64).reshape(-1, *shape) for s in states])
    var = np.concatenate([np.asarray(s["var"], np.float64).reshape(-1, *shape) for s in states])
    count = np.concatenate([np.asarray(s["count"], np.float64).reshape(-1, *ones) for s in states])
    if not len(mean) == len(var) == len(count):
        raise ValueError("normalisation statistics with different numbers of rows")
    if len(mean) == 1:
        return {"mean": mean[0], "var": var[0], "count": count[0]}
    total = count.sum(axis=0)
    merged = (count * mean).sum(axis=0) / total
    m2 = (count * var).sum(axis=0) + (count * np.square(mean - merged)).sum(axis=0)
    return {"mean": merged, "var": m2 / total, "count": total}


def frozen_normalizer(cfg: Config, payload: dict[str, Any], spec: EnvSpec) -> Normalizer | None:
    """The run's observation normalisation with its saved statistics, frozen (``training``
    False), for ``spec``'s envs; None where the run did not normalise observations.

    Raises:
        CheckpointError: the checkpoint lacks the statistics, or they do not fit the env.
    """
    if not cfg.env.normalize_obs:
        return None
    # Rank 0's at the top level, the other ranks' beside it (run/checkpoint.py).
    ranks = [payload, *(payload.get("other_ranks") or [])]
    try:
        saved = [(rank.get("normalizer") or {}).get("obs") for rank in ranks]
        if any(s is None for s in saved):
            raise ValueError("the checkpoint has no observation statistics")
        obs = pooled_stats([to_numpy(s) for s in saved], spec.obs_shape)
        normalizer = Normalizer(spec.num_envs, spec.obs_shape, cfg.ppo.gamma, obs=True,
                                reward=False, clip_obs=cfg.env.clip_obs)  # fmt: skip
        normalizer.load_state_dict({"obs": obs, "return": None, "returns": np.zeros(spec.num_envs)})
    except (AttributeError, KeyError, ValueError) as e:
        raise CheckpointError(
            f"cannot {PURPOSE}: the checkpoint's normalisation does not fit the env "
            f"({first_line(e)})"
        ) from e
    normalizer.training = False
    return normalizer


def build_policy(cfg: Config, spec: EnvSpec, payload: dict[str, Any]) -> ActorCritic:
    """The run's policy for ``spec`` with the checkpoint's parameters, on the CPU, in eval
    mode.

    Raises:
        ConfigError: the policy cannot take the env's observations.
        CheckpointError: the saved parameters do not fit the policy.
    """
    policy = make_policy(cfg.policy, spec)
    try:
        policy.load_state_dict(payload["policy"])
    except (KeyError, RuntimeError, ValueError) as e:
        raise CheckpointError(
            f"cannot {PURPOSE}: the checkpoint's policy does not fit {cfg.policy.kind!r} on "
            f"{cfg.env.env!r} ({first_line(e)})"
        ) from e
    return policy.eval()


def env0_frame(frames: Any) -> np.ndarray | None:
    """Env 0's frame of a vector env's ``render()``: gymnasium's tuple of every env's frames;
    a batch array (n, H, W, 3) or a lone frame (H, W, 3) is taken too. None: no frame."""
    if isinstance(frames, tuple | list):
        frames = frames[0] if frames else None
    if frames is None:
        return None
    frame = np.asarray(frames)
    return frame[0] if frame.ndim == 4 else frame


def run_episodes(
    policy: ActorCritic,
    env: VectorEnv,
    spec: EnvSpec,
    episodes: int,
    seed: int,
    deterministic: bool = False,
    normalizer: Normalizer | None = None,
    on_frame: Callable[[], None] | None = None,
    frame_episodes: int = 1,
    on_episode: Callable[[float, int], None] | None = None,
) -> tuple[list[float], list[int]]:
    """Play ``episodes`` whole episodes of ``env`` (reset here with ``seed``) with ``policy``.

    Args:
        episodes: how many; env i of the ``n`` counts its first ``(episodes + i) // n``.
        seed: the env's reset seed, and the seed of the generator actions are sampled with.
        deterministic: take the distribution's mode instead of sampling.
        normalizer: normalises each observation before the policy sees it (frozen).
        on_frame: called after the reset and after each step of env 0's first
            ``frame_episodes`` episodes, except the step that ends the last of them (its frame
            is the next episode's first).
        on_episode: called with each counted episode's return and length as it ends.

    Returns:
        Each counted episode's return and length, the env's own, in the order they ended
        (env order within a step).
    """
    n = int(env.num_envs)
    targets = np.array([(episodes + i) // n for i in range(n)])
    counted = np.zeros(n, dtype=np.int64)
    framed = min(frame_episodes, int(targets[0]))  # env 0's episodes on_frame sees
    returns: list[float] = []
    lengths: list[int] = []
    generator = torch.Generator().manual_seed(seed)
    obs, infos = env.reset(seed=seed)
    if normalizer is not None:
        obs = normalizer.reset(obs)
    mask = read_action_mask(env, infos) if spec.has_mask else None
    state = policy.initial_state(n)
    done = torch.ones(n)  # every observation is its episode's first
    if on_frame is not None:
        on_frame()
    with torch.inference_mode(), policy.acting():
        while (counted < targets).any():
            obs_t = torch.from_numpy(np.ascontiguousarray(obs, dtype=spec.obs_dtype))
            mask_t = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
            if deterministic:
                actions, state = policy.act_mode(obs_t, state, done, mask_t)
            else:
                actions, _, _, state = policy.act(obs_t, state, done, mask_t, generator)
            obs, rewards, terminations, truncations, infos = env.step(
                spec.action.to_env(actions.numpy())
            )
            if normalizer is not None:
                obs, _, infos = normalizer.step(obs, rewards, terminations, truncations, infos)
            if infos and "_episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    if counted[i] < targets[i]:
                        returns.append(float(infos["episode"]["r"][i]))
                        lengths.append(int(infos["episode"]["l"][i]))
                        counted[i] += 1
                        if on_episode is not None:
                            on_episode(returns[-1], lengths[-1])
            if on_frame is not None and counted[0] < framed:
                on_frame()
            done = torch.from_numpy(np.asarray(terminations | truncations, dtype=np.float32))
            if spec.has_mask:
                mask = read_action_mask(env, infos)
    return returns, lengths


# -- video -------------------------------------------------------------------------------
def video_format_problem(path: Path) -> str | None:
    """Why ``--video PATH`` names no format rlperf writes, or None (the command alone: no
    file or package looked at)."""
    if path.suffix.lower() not in VIDEO_FORMATS:
        return (
            f"--video {path}: the extension picks the format: .mp4 (needs imageio-ffmpeg: "
            f"{VIDEO_INSTALL}) or .gif"
        )
    return None


def video_problem(path: Path) -> str | None:
    """Why a video could not be written to ``path`` here, or None: its format, the packages
    that format needs, and the file (checked for real, nothing left behind)."""
    problem = video_format_problem(path)
    if problem:
        return problem
    if importlib.util.find_spec("imageio") is None:
        return f"--video needs imageio: {VIDEO_INSTALL}"
    if VIDEO_FORMATS[path.suffix.lower()] == "FFMPEG" and (
        importlib.util.find_spec("imageio_ffmpeg") is None
    ):
        return (
            f"--video {path}: an .mp4 needs imageio-ffmpeg (imageio's ffmpeg): "
            f"{VIDEO_INSTALL}; or write a .gif"
        )
    return out_file_problem("--video", path)


def headless_rendering() -> None:
    """Without a display, choose the offscreen back ends of gymnasium's renderers where the
    user has not: MuJoCo's EGL (its default, GLFW, needs a window system) and SDL's dummy video
    driver for pygame's (classic control; it complains on stderr without a runtime dir). Read
    when a renderer is made, so this precedes making the env."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


class VideoWriter:
    """RGB frames to ``path`` (.mp4 or .gif) at ``fps``, through a temporary file beside it:
    :meth:`finish` renames it over ``path``, :meth:`discard` removes it, so ``path`` is
    either untouched or the whole video."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path, self.fps = path, fps
        self.format = VIDEO_FORMATS[path.suffix.lower()]
        self.frames = 0
        self._tmp: Path | None = None
        self._writer: Any = None  # imageio's ffmpeg writer, opened at the first frame
        self._held: list[Any] = []  # a GIF's frames (arrays), written at the end

    def add(self, frame: np.ndarray) -> None:
        """One (H, W, 3) uint8 frame (all of the same size)."""
        if self._tmp is None:
            # Hidden, beside the video (the rename stays on one file system), its extension
            # last (imageio reads it); made by imageio, so with the usual permissions.
            name = f".{self.path.name}.{os.getpid()}.tmp{self.path.suffix}"
            self._tmp = self.path.with_name(name)
        if self.format == "FFMPEG":
            if self._writer is None:
                import imageio.v2 as imageio

                # macro_block_size=1: no rescaling to multiples of 16 (even sizes are padded).
                self._writer = imageio.get_writer(self._tmp, format="FFMPEG", fps=self.fps,
                                                  macro_block_size=1)  # fmt: skip
            self._writer.append_data(even_size(frame))
        else:
            self._held.append(frame)
        self.frames += 1

    def finish(self) -> None:
        """Write what is left and move the video to ``path``."""
        if self._tmp is None:
            raise EvalError("no frame was rendered: nothing to write to --video")
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._held:
            import imageio.v2 as imageio

            # Pillow's GIF durations are milliseconds per frame; loop=0 repeats for ever.
            imageio.mimwrite(self._tmp, self._held, format="GIF", duration=1000 / self.fps,
                             loop=0)  # fmt: skip
            self._held = []
        os.replace(self._tmp, self.path)
        self._tmp = None

    def discard(self) -> None:
        """Remove the temporary file (the video is not wanted after all)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):  # ffmpeg may already be gone (Ctrl-C)
                self._writer.close()
            self._writer = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        self._held = []


def even_size(frame: np.ndarray) -> np.ndarray:
    """``frame`` with an odd height or width padded by one edge row or column: H.264 in
    yuv420p takes even sizes only."""
    pad_h, pad_w = frame.shape[0] % 2, frame.shape[1] % 2
    if not (pad_h or pad_w):
        return frame
    return np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")


def check_renders(env: VectorEnv, name: str) -> None:
    """EvalError (one line) unless ``env`` declares gymnasium's ``rgb_array`` rendering, then
    renders a frame of env 0 (a renderer that fails, fails here, before any episode)."""
    modes = list(env.metadata.get("render_modes") or [])
    if "rgb_array" not in modes:
        raise EvalError(
            f"--video: env {name!r} has no rgb_array rendering (its render modes: "
            f"{', '.join(modes) or 'none'})"
        )
    render_env0(env, name)


def follow_the_body(env: VectorEnv) -> None:
    """Point env 0's camera at its body, where env 0 is a gymnasium MuJoCo env.

    gymnasium's MuJoCo renderer uses a free camera that stays where the first frame put it
    (HalfCheetah-v5's and Hopper-v5's configs name no tracking camera that it keeps): a trained
    cheetah runs out of the picture within a few seconds. Each frame, the camera's look-at
    point moves to the tracked body's subtree centre in x and y (the config's
    ``trackbodyid``, else body 1, the root), its height and angles as the env set them."""
    subs = getattr(env.unwrapped, "envs", None)
    sim = subs[0].unwrapped if subs else None
    renderer, data = getattr(sim, "mujoco_renderer", None), getattr(sim, "data", None)
    viewer = getattr(renderer, "viewer", None)
    if viewer is None or data is None:  # not MuJoCo, or before the first frame made the viewer
        return
    config = getattr(renderer, "default_cam_config", None) or {}
    body = int(config.get("trackbodyid", 1))
    if 0 < body < len(data.subtree_com):
        viewer.cam.lookat[:2] = data.subtree_com[body][:2]


def render_env0(env: VectorEnv, name: str) -> np.ndarray:
    """Env 0's current frame, (H, W, 3) uint8. EvalError (one line) where the env gives no RGB
    frame: no rgb_array rendering, or a renderer that fails (a missing package, no OpenGL)."""
    try:
        follow_the_body(env)
        frame = env0_frame(env.render())
    except Exception as e:  # renderers raise what they like: DependencyNotInstalled, GL errors
        raise EvalError(
            f"--video: env {name!r} cannot render: {type(e).__name__}: {first_line(e)}"
        ) from e
    if frame is None:
        raise EvalError(f"--video: env {name!r} rendered no frame (render_mode {env.render_mode})")
    if frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise EvalError(f"--video: env {name!r} rendered {frame.shape}, not (H, W, 3) RGB")
    return np.ascontiguousarray(frame[..., :3], dtype=np.uint8)


def policy_for_env(
    cfg: Config, payload: dict[str, Any], env: VectorEnv, seed: int
) -> tuple[EnvSpec, ActorCritic, Normalizer | None]:
    """The run's policy and frozen normaliser for ``env``, one of the run's envs
    (:func:`make_eval_env`), which is reset here with ``seed`` to read its spec.

    Raises:
        ConfigError: the env's spaces are ones rlperf does not take (one line).
        CheckpointError: the checkpoint does not fit the policy the run's config builds.
    """
    _, reset_infos = env.reset(seed=seed)
    try:
        spec = EnvSpec.from_env(env, reset_infos)
    except UnsupportedSpaceError as e:
        raise ConfigError(f"env {cfg.env.env!r}: {e}") from e
    return spec, build_policy(cfg, spec, payload), frozen_normalizer(cfg, payload, spec)


# -- the whole evaluation ----------------------------------------------------------------
def evaluate_run(
    run_dir: str | Path,
    episodes: int = 10,
    deterministic: bool = False,
    seed: int = 0,
    num_envs: int = 1,
    video: str | Path | None = None,
    video_episodes: int = 1,
    progress: Callable[[EvalResult], None] | None = None,
) -> EvalResult:
    """The return of ``run_dir``'s checkpoint over ``episodes`` episodes (module docstring).

    Args:
        run_dir: a run directory of ``rlperf train --run-dir``.
        episodes: episodes to play (>= 1).
        deterministic: the distribution's mode instead of samples.
        seed: the envs' reset seed and the action sampler's.
        num_envs: envs stepped together (at most ``episodes`` are used).
        video: write env 0's first ``video_episodes`` episodes here (.mp4 or .gif).
        progress: called with the result so far once before the first episode (no returns
            yet) and again as each episode ends (``rlperf eval``'s line per episode).

    Raises:
        EvalError, CheckpointError, ConfigError, UnknownEnvError, EnvOptionError: bad input,
            one line, found before any episode is played; nothing is written.
    """
    run_dir = Path(run_dir)
    video_path = None if video is None else Path(video)
    if episodes < 1:
        raise EvalError(f"--episodes must be at least 1, got {episodes}")
    if num_envs < 1:
        raise EvalError(f"--num-envs must be at least 1, got {num_envs}")
    if video_episodes < 1:
        raise EvalError(f"--video-episodes must be at least 1, got {video_episodes}")
    if video_path is not None:
        problem = video_problem(video_path)
        if problem:
            raise EvalError(problem)
        headless_rendering()
    cfg, payload = load_run(run_dir)
    env = make_eval_env(cfg, min(num_envs, episodes), render=video_path is not None)
    writer = None
    try:
        spec, policy, normalizer = policy_for_env(cfg, payload, env, seed)
        result = EvalResult(
            run_dir=str(run_dir),
            env=cfg.env.env,
            policy=cfg.policy.kind,
            global_step=int(payload.get("global_step", 0)),
            deterministic=deterministic,
            seed=seed,
            num_envs=int(env.num_envs),
            normalized_obs=normalizer is not None,
            returns=[],
            lengths=[],
            video=None if video_path is None else str(video_path),
        )
        result.length_unit, result.notes = describe_episodes(cfg)

        def on_episode(episode_return: float, length: int) -> None:
            result.returns.append(episode_return)
            result.lengths.append(length)
            if progress is not None:
                progress(result)

        if progress is not None:
            progress(result)
        on_frame = None
        if video_path is not None:
            check_renders(env, cfg.env.env)
            fps = env.metadata.get("render_fps") or DEFAULT_FPS
            video_writer = writer = VideoWriter(video_path, float(fps))

            def on_frame() -> None:
                video_writer.add(render_env0(env, cfg.env.env))

        run_episodes(policy, env, spec, episodes, seed, deterministic, normalizer, on_frame,
                     video_episodes, on_episode)  # fmt: skip
        if writer is not None:
            writer.finish()
            result.video_frames = writer.frames
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    finally:
        env.close()
    return result


def describe_episodes(cfg: Config) -> tuple[str, list[str]]:
    """What an episode's length counts in ``cfg``'s env, and notes on how it is evaluated.

    Atari's lengths come from below ``AtariPreprocessing`` (envs/atari.py): emulator frames,
    ``frame_skip`` of them per agent step, where the video holds one frame per agent step. A
    run trained on EnvPool plays here on gymnasium's wrappers, EnvPool's equivalent: the same
    game and preprocessing, frames that differ by a few grey levels (docs/atari.md)."""
    notes: list[str] = []
    unit = "agent steps"
    wrappers = str(cfg.env.options.get("wrappers", ""))
    if "AtariPreprocessing" in wrappers:
        unit = "emulator frames"
        skip = re.search(r"frame_skip\s*=\s*(\d+)", wrappers)
        per_step = skip.group(1) if skip else "several"
        notes.append(
            f"lengths count emulator frames ({per_step} per agent step); a video holds one "
            "frame per agent step"
        )
    if cfg.env.backend == "envpool":  # auto never picks EnvPool
        notes.append(
            "trained on EnvPool, evaluated on gymnasium's env and the run's wrappers (the same "
            "game and preprocessing; Atari frames may differ by a few grey levels)"
        )
    return unit, notes
