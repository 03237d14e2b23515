"""EnvPool's C++ thread pool as an rlperf vector env: ``--vec-backend envpool``.

EnvPool (``pip install 'rlperf[envpool]'``) steps a batch of Atari or MuJoCo envs on its own
threads, with its preprocessing in C++. :class:`EnvPoolVecEnv` gives it the contract every rlperf
env keeps (``envs/registry.py``), so the trainer takes it as it takes the others:

- **Autoreset SAME_STEP.** EnvPool resets a finished env on the *next* step, discarding that
  step's action (its docs, "Auto Reset"). Here the rows that finished are stepped once more, at
  once, through EnvPool's own ``step(actions, env_id)`` on those rows alone: the observation
  returned is then the first of their next episode, their last is in ``final_obs``. A step, not
  ``reset(env_id)``: EnvPool's reset is a forced one, which would restart the game where
  ``episodic_life`` only lost a life.
- **Episode statistics of the game.** ``infos["episode"]`` (``r``, ``l``, ``t``) with
  ``_episode``, where a game ends: on Atari where ``info["terminated"]`` (ALE's game over) or
  the step limit truncates, with ``r`` the sum of ``info["reward"]``, the unclipped score across
  every life, as CleanRL's ``ppo_atari_envpool.py`` sums it, and ``l`` the agent's steps (four
  frames each; the gymnasium path counts frames). Elsewhere (MuJoCo) where an episode ends, with
  the env's own rewards.
- **Seeds.** EnvPool seeds its envs when the pool is made (env ``i`` with ``seed + i``, as
  ``gym:`` ids are seeded); ``reset(seed=s)`` with another seed makes the pool again with ``s``.
- **Infos**: EnvPool's own keys (``lives``, ``reward``, ``terminated``, ``elapsed_step``, ...
  on Atari; ``x_position`` ... on MuJoCo) each with its all-True ``_key`` mask, and
  ``final_obs``/``final_info`` where an agent episode ended.

Ids: ``--env gym:<id>`` as for the other backends; EnvPool's id is the gymnasium id without a
module or namespace (``gym:ale_py:ALE/Breakout-v5`` -> ``Breakout-v5``, ``gym:HalfCheetah-v5``).

Options: ``--env-option`` keys are EnvPool's own (``episodic_life=true``, ``stack_num=4``, ...).
On an Atari id, ``--preset atari``'s options (``envs/atari.py``: ALE settings and the
wrappers' text) become EnvPool's equivalent, :data:`ATARI_SETTINGS`, so ``--preset atari
--vec-backend envpool`` runs the same preprocessing in C++. What differs from the gymnasium
path is EnvPool's: after a lost life it takes its random no-ops again and presses FIRE for one
frame (stable-baselines3's ``EpisodicLifeEnv`` takes one no-op step, its ``FireResetEnv`` FIRE
and action 2 for four frames each), so the two paths do not step the same frames.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.config import ConfigError
from rlperf.envs.atari import ALE_OPTIONS, ATARI_WRAPPERS
from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.registry import GYM_PREFIX, EnvOptionError, UnknownEnvError

# EnvPool's Atari settings equal to ``--preset atari``'s gymnasium wrappers: 30 no-ops, 4 frames
# an action max-pooled over the last 2, 84x84 gray (INTER_AREA, as gymnasium's), 4 stacked,
# a lost life ends the agent's episode, FIRE after a reset, rewards clipped to their sign.
# (Most are EnvPool's defaults too; written out so the match does not hang on its defaults.)
ATARI_SETTINGS: dict[str, Any] = {
    "noop_max": 30,
    "frame_skip": 4,
    "img_height": 84,
    "img_width": 84,
    "gray_scale": True,
    "use_inter_area_resize": True,
    "stack_num": 4,
    "episodic_life": True,
    "use_fire_reset": True,
    "reward_clip": True,
    "repeat_action_probability": 0.0,
}
# gymnasium ALE keyword -> EnvPool's name for it (the others have no counterpart).
_ALE_TO_ENVPOOL = {"repeat_action_probability": "repeat_action_probability",
                   "full_action_space": "full_action_space"}  # fmt: skip
_INFO_SKIP = ("env_id", "players")  # EnvPool's bookkeeping, not the env's


def envpool_available() -> bool:
    """Whether the ``envpool`` package is installed (not imported: it loads its C++ pools)."""
    return importlib.util.find_spec("envpool") is not None


def envpool_id(env: str) -> str:
    """EnvPool's task id for rlperf env name ``env``: ``gym:<module>:<ns>/<id>`` -> ``<id>``.

    Raises:
        ConfigError: envpool is not installed (one line, naming the extra).
        UnknownEnvError: ``env`` is not a ``gym:`` id, or EnvPool has no such task (one line,
            naming what to do).
    """
    if not envpool_available():
        raise ConfigError(
            "--vec-backend envpool needs the envpool package: pip install 'rlperf[envpool]' "
            "(Python >= 3.11)"
        )
    import envpool

    if not env.startswith(GYM_PREFIX):
        raise UnknownEnvError(
            f"--vec-backend envpool steps gymnasium ids that EnvPool has (gym:HalfCheetah-v5, "
            f"gym:ale_py:ALE/Pong-v5), not {env!r}"
        )
    task = env[len(GYM_PREFIX) :].rpartition(":")[2].rpartition("/")[2]
    if task not in envpool.list_all_envs():
        raise UnknownEnvError(
            f"env {env!r} is not in EnvPool (no task {task!r}; envpool.list_all_envs() lists "
            "them): use --vec-backend serial or multiprocess"
        )
    return task


def envpool_options(task: str, options: dict[str, Any]) -> dict[str, Any]:
    """``envpool.make`` keywords for EnvPool task ``task`` from rlperf's env options: on an
    Atari task the preset's ALE options and wrappers as :data:`ATARI_SETTINGS`, every other key
    passed on as EnvPool's own.

    Raises:
        EnvOptionError: a ``wrappers`` text other than ``--preset atari``'s (EnvPool has its
            preprocessing in C++), or an ALE setting EnvPool cannot take (one line).
    """
    options = dict(options)
    out: dict[str, Any] = {}
    wrappers = options.pop("wrappers", None)
    if wrappers is not None:
        if wrappers != ATARI_WRAPPERS:
            raise EnvOptionError(
                "--vec-backend envpool takes no wrappers option (EnvPool preprocesses in C++; "
                "--preset atari's wrappers become its Atari settings): set EnvPool's own "
                "options instead, e.g. --env-option episodic_life=true"
            )
        out.update(ATARI_SETTINGS)
    for key, value in list(options.items()):
        if key == "frameskip":  # the emulator's own skip; EnvPool's frame_skip does it instead
            if value != ALE_OPTIONS["frameskip"]:
                raise EnvOptionError(
                    f"--vec-backend envpool: frameskip={value} has no EnvPool setting (use "
                    "frame_skip, its wrapper's, with frameskip=1)"
                )
        elif key in _ALE_TO_ENVPOOL:
            out[_ALE_TO_ENVPOOL[key]] = value
        else:
            out[key] = value
    return out


def make_envpool_vec(
    env: str, num_envs: int, seed: int | None = None, **options: Any
) -> EnvPoolVecEnv:
    """:class:`EnvPoolVecEnv` for rlperf env name ``env`` (``gym:<id>``), reset with ``seed``;
    ``options`` are rlperf's env options (:func:`envpool_options`).

    Raises:
        ConfigError: envpool is not installed.
        UnknownEnvError: ``env`` is not an id EnvPool has (:func:`envpool_id`).
        EnvOptionError: an option EnvPool does not take or refuses (one line).
    """
    task = envpool_id(env)
    vec = EnvPoolVecEnv(task, num_envs, envpool_options(task, options), env)
    vec.reset(seed=seed)
    return vec


class EnvPoolVecEnv(VectorEnv):
    """One EnvPool pool of ``num_envs`` envs of ``task`` in synchronous mode, as a gymnasium 1.x
    vector env with SAME_STEP autoreset and game episode statistics (module docstring).

    Args:
        task: EnvPool's task id (``Breakout-v5``).
        num_envs: envs in the pool.
        kwargs: ``envpool.make`` keywords (:func:`envpool_options`; ``num_threads``: EnvPool's
            threads, by default one per env, as CleanRL's ``ppo_atari_envpool.py`` runs).
        name: the env's rlperf name, for messages.

    Raises:
        EnvOptionError: EnvPool refused ``kwargs`` (one line).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, task: str, num_envs: int, kwargs: dict[str, Any], name: str = "") -> None:
        self.task, self.num_envs, self._name, self._kwargs = task, num_envs, name or task, kwargs
        self._seed = 0
        self._pool = self._make_pool(self._seed)
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._check_actions = ActionCheck(self.action_space)
        # The action of an autoreset step, which EnvPool ignores.
        self._noop = np.zeros(self.action_space.shape or (), self.action_space.dtype)
        # Atari: the game's score and its end across lives; elsewhere the env's own.
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._starts = np.full(num_envs, time.perf_counter())
        self.closed = False

    def _make_pool(self, seed: int) -> Any:
        import envpool

        try:
            return envpool.make(
                self.task, env_type="gymnasium", num_envs=self.num_envs,
                batch_size=self.num_envs, seed=seed, **self._kwargs,
            )  # fmt: skip
        except (TypeError, ValueError, RuntimeError) as e:  # its config refused: one line
            text = str(e).strip().splitlines()
            raise EnvOptionError(
                f"env {self._name!r}: EnvPool's {self.task} refused an option: "
                f"{type(e).__name__}{': ' + text[0] if text else ''}"
            ) from e

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Every env's first observation; a ``seed`` other than the pool's makes it again."""
        if seed is not None and seed != self._seed:
            self._pool.close()
            self._seed = seed
            self._pool = self._make_pool(seed)
        reseed(self, seed)
        obs, info = self._pool.reset()
        self._returns[:], self._lengths[:], self._starts[:] = 0.0, 0, time.perf_counter()
        return obs, self._infos(info)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self._pool.step(self._check_actions(actions))
        game_reward = info.get("reward", rewards)  # Atari: before reward_clip
        self._returns += game_reward
        self._lengths += 1
        game_over = truncated | (info["terminated"].astype(bool) if "terminated" in info
                                 else terminated)  # fmt: skip
        infos = self._infos(info)
        done = terminated | truncated
        if game_over.any():
            infos["episode"] = {
                "r": np.where(game_over, self._returns, 0.0),
                "l": np.where(game_over, self._lengths, 0),
                "t": np.where(game_over, (time.perf_counter() - self._starts).round(6), 0.0),
            }
            infos["_episode"] = game_over
            self._returns[game_over], self._lengths[game_over] = 0.0, 0
            self._starts[game_over] = time.perf_counter()
        if done.any():
            self._autoreset(obs, done, infos)
        return obs, rewards, terminated, truncated, infos

    def _autoreset(self, obs: np.ndarray, done: np.ndarray, infos: dict[str, Any]) -> None:
        """``final_obs``/``final_info`` of the ``done`` rows, then each of them stepped once
        more (EnvPool's autoreset, its action ignored) so ``obs`` holds their first
        observation of the next episode; their infos become the reset's."""
        rows = np.flatnonzero(done).astype(np.int32)
        infos["final_obs"] = np.where(done.reshape(-1, *[1] * (obs.ndim - 1)), obs, 0)
        infos["_final_obs"] = done
        final = {k: v.copy() for k, v in infos.items() if k[0] != "_" and k != "final_obs"
                 and k != "episode"}  # fmt: skip
        infos["final_info"] = {**final, **{f"_{k}": done.copy() for k in final}}
        infos["_final_info"] = done.copy()
        first, _, _, _, info = self._pool.step(self._noop[: len(rows)], rows)
        at = info["env_id"]
        obs[at] = first
        for key, value in info.items():
            if key in infos and key not in _INFO_SKIP:
                infos[key][at] = value

    def _infos(self, info: dict[str, Any]) -> dict[str, Any]:
        """EnvPool's per-env info keys, each with its all-True mask."""
        out: dict[str, Any] = {}
        for key, value in info.items():
            if key not in _INFO_SKIP:
                out[key], out[f"_{key}"] = value, np.ones(self.num_envs, dtype=np.bool_)
        return out

    def close(self, **kwargs: Any) -> None:
        if not self.closed:
            self._pool.close()
            self.closed = True
