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
- **Asynchronous batches** (``--env-batch-size B`` below ``--num-envs``): :meth:`send` and
  :meth:`recv` as the env workers' (``envs/workers/``), so the trainer's asynchronous collector
  (``ppo/async_rollout.py``) acts on one batch of ``B`` envs while EnvPool's threads step the
  others. The batches are fixed blocks of consecutive rows and come back in the order they
  were sent, whichever env EnvPool finishes first: a run's data do not depend on its threads'
  timing. The pool is then made with EnvPool's ``batch_size=1`` and its results kept per row
  until a batch is whole; its threads default to the cores left beside the trainer's one.
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
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.config import ConfigError
from rlperf.cores import usable_cores
from rlperf.envs.atari import ALE_OPTIONS, ATARI_WRAPPERS
from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.registry import GYM_PREFIX, EnvOptionError, UnknownEnvError
from rlperf.envs.workers.pool import ApiUsageError

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
# Where EnvPoolVecEnv._take keeps a step's own arrays beside its info keys.
_OBS, _REWARDS, _TERMINATED, _TRUNCATED = (" obs", " rewards", " terminated", " truncated")


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
    env: str, num_envs: int, seed: int | None = None, batch_size: int = 0, **options: Any
) -> EnvPoolVecEnv:
    """:class:`EnvPoolVecEnv` for rlperf env name ``env`` (``gym:<id>``), reset with ``seed``;
    ``batch_size`` envs per :meth:`~EnvPoolVecEnv.recv` (0: all, synchronous); ``options`` are
    rlperf's env options (:func:`envpool_options`).

    Raises:
        ConfigError: envpool is not installed.
        UnknownEnvError: ``env`` is not an id EnvPool has (:func:`envpool_id`).
        EnvOptionError: an option EnvPool does not take or refuses (one line).
    """
    task = envpool_id(env)
    vec = EnvPoolVecEnv(task, num_envs, envpool_options(task, options), env, batch_size)
    vec.reset(seed=seed)
    return vec


@dataclass
class _Step:
    """One step's results for ``rows``, whose entries ``at`` ended an agent episode and await
    their reset step."""

    obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: dict[str, Any]
    rows: np.ndarray
    at: np.ndarray


@dataclass
class _Batch:
    """A batch of rows in flight: ``step`` once its results are taken; ``held`` once the next
    batch has gone before it (it does so once)."""

    rows: np.ndarray
    step: _Step | None = None
    held: bool = False


class EnvPoolVecEnv(VectorEnv):
    """One EnvPool pool of ``num_envs`` envs of ``task`` as a gymnasium 1.x vector env with
    SAME_STEP autoreset and game episode statistics (module docstring); with ``batch_size`` below
    ``num_envs``, also :meth:`send`/:meth:`recv` of fixed batches.

    Args:
        task: EnvPool's task id (``Breakout-v5``).
        num_envs: envs in the pool.
        kwargs: ``envpool.make`` keywords (:func:`envpool_options`; ``num_threads``: EnvPool's
            threads, by default one per env, as CleanRL's ``ppo_atari_envpool.py`` runs, or with
            batches the cores beside the trainer's rollout thread).
        name: the env's rlperf name, for messages.
        batch_size: envs per :meth:`recv`, dividing ``num_envs`` (0: ``num_envs``).

    Raises:
        EnvOptionError: EnvPool refused ``kwargs`` (one line).
        ValueError: ``batch_size`` does not divide ``num_envs``.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self, task: str, num_envs: int, kwargs: dict[str, Any], name: str = "", batch_size: int = 0
    ) -> None:
        self.task, self.num_envs, self._name, self._kwargs = task, num_envs, name or task, kwargs
        self.batch_size = batch_size or num_envs
        if self.batch_size < 1 or num_envs % self.batch_size:
            raise ValueError(f"batch_size {batch_size} must divide num_envs {num_envs}")
        self.asynchronous = self.batch_size < num_envs
        if self.asynchronous and "num_threads" not in kwargs:
            # The trainer acts on one thread while the pool steps the other batches.
            self._kwargs = {**kwargs, "num_threads": max(1, min(num_envs, usable_cores() - 1))}
        self._seed = 0
        self._pool = self._make_pool(self._seed)
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._checks = {num_envs: ActionCheck(self.action_space)}
        # The action of an autoreset step, which EnvPool ignores.
        self._noop = np.zeros(self.action_space.shape or (), self.action_space.dtype)
        # Atari: the game's score and its end across lives; elsewhere the env's own.
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._starts = np.full(num_envs, time.perf_counter())
        self._rows = np.arange(num_envs)
        # EnvPool's results by row until the rows asked for are all in (_take).
        self._have = np.zeros(num_envs, dtype=bool)
        self._kept: dict[str, np.ndarray] = {}
        self._in_flight: deque[_Batch] = deque()  # batches sent, in order
        self.closed = False

    def _make_pool(self, seed: int) -> Any:
        import envpool

        try:
            return envpool.make(
                self.task, env_type="gymnasium", num_envs=self.num_envs,
                # Batches: results one env at a time, gathered here into fixed batches.
                batch_size=1 if self.asynchronous else self.num_envs, seed=seed, **self._kwargs,
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
        """Every env's first observation; a ``seed`` other than the pool's makes it again.
        Batches in flight are dropped."""
        if seed is not None and seed != self._seed:
            self._pool.close()
            self._seed = seed
            self._pool = self._make_pool(seed)
        else:  # results still owed by the pool: taken before it resets
            for batch in self._in_flight:
                owed = batch.rows if batch.step is None else batch.rows[batch.step.at]
                if owed.size:
                    self._take(owed)
        self._in_flight.clear()
        self._have[:] = False
        reseed(self, seed)
        self._pool.async_reset()
        obs, _, _, _, info = self._take(self._rows)
        self._returns[:], self._lengths[:], self._starts[:] = 0.0, 0, time.perf_counter()
        return obs, self._infos(info, self.num_envs)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._in_flight:
            raise ApiUsageError("step() with batches in flight: recv() them first")
        self._pool.send(self._checks[self.num_envs](actions), self._rows.astype(np.int32))
        return self._end_reset(self._start_step(self._rows))

    def send(self, actions: Any, env_ids: np.ndarray | None = None) -> None:
        """Actions ``(rows, *action_shape)`` for whole batches' rows (``env_ids``, in order;
        default all), which step while the caller goes on; :meth:`recv` returns them.

        Raises:
            ApiUsageError: ``env_ids`` are not whole batches of rows not already in flight.
            ValueError, TypeError: ``actions`` do not fit (nothing is sent).
        """
        rows = self._rows if env_ids is None else np.asarray(env_ids, dtype=np.int64)
        b = self.batch_size
        starts = rows[::b]
        whole = len(rows) % b == 0 and np.array_equal(
            rows, (starts[:, None] + np.arange(b)).ravel()
        ) and not (starts % b).any()  # fmt: skip
        if not whole:
            raise ApiUsageError(
                f"send() env_ids must be whole batches of {b} consecutive rows, as recv() "
                "returns them"
            )
        busy = {int(batch.rows[0]) for batch in self._in_flight}
        if any(int(r) in busy for r in starts):
            raise ApiUsageError("send() for envs still stepping: recv() them first")
        if len(rows) not in self._checks:
            self._checks[len(rows)] = ActionCheck(batch_space(self.single_action_space, len(rows)))
        self._pool.send(self._checks[len(rows)](actions), rows.astype(np.int32))
        self._in_flight.extend(_Batch(rows[i : i + b]) for i in range(0, len(rows), b))

    def recv(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        """A batch sent: as :meth:`step` returns for its rows, and the rows.

        The oldest, unless some of its envs ended an episode and the next batch's did not: it
        then waits for their reset step (behind the next batch in EnvPool's queue) while the
        next one is returned. Which batch comes back depends on the envs' data alone, never on
        their threads' timing.

        Raises:
            ApiUsageError: nothing is in flight.
        """
        if not self._in_flight:
            raise ApiUsageError("recv() with no step in flight: call send(actions) first")
        head = self._in_flight[0]
        if head.step is None:
            head.step = self._start_step(head.rows)
        if head.step.at.size and len(self._in_flight) > 1 and not head.held:
            head.held = True  # once: it goes first next time
            second = self._in_flight[1]
            second.step = self._start_step(second.rows)
            if not second.step.at.size:
                del self._in_flight[1]
                return (*self._end_reset(second.step), second.rows)
        self._in_flight.popleft()
        return (*self._end_reset(head.step), head.rows)

    def _take(
        self, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """EnvPool's results for ``rows`` (sent), in their order: whatever else arrives first
        is kept for its own turn."""
        while not self._have[rows].all():
            obs, rewards, terminated, truncated, info = self._pool.recv()
            ids = info["env_id"]
            if not self._kept and len(ids) == len(rows) and np.array_equal(ids, rows):
                return obs, rewards, terminated, truncated, info  # synchronous: as it came
            # The step's own arrays under names no info key has (EnvPool's Atari info has a
            # "terminated" of its own: the game's end).
            self._keep(ids, {**info, _OBS: obs, _REWARDS: rewards, _TERMINATED: terminated,
                             _TRUNCATED: truncated})  # fmt: skip
        self._have[rows] = False
        kept = {k: v[rows] for k, v in self._kept.items()}
        obs, rewards = kept.pop(_OBS), kept.pop(_REWARDS)
        return obs, rewards, kept.pop(_TERMINATED), kept.pop(_TRUNCATED), kept

    def _keep(self, ids: np.ndarray, arrays: dict[str, Any]) -> None:
        for key, value in arrays.items():
            if not isinstance(value, np.ndarray) or key == "env_id":
                continue
            if key not in self._kept:
                self._kept[key] = np.zeros((self.num_envs, *value.shape[1:]), value.dtype)
            self._kept[key][ids] = value
        self._have[ids] = True

    def _start_step(self, rows: np.ndarray) -> _Step:
        """Take the step's results for ``rows`` (sent): episode statistics of the games that
        ended; the envs whose agent episode ended get their reset step sent (the autoreset
        that :meth:`_end_reset` completes)."""
        obs, rewards, terminated, truncated, info = self._take(rows)
        game_reward = info.get("reward", rewards)  # Atari: before reward_clip
        self._returns[rows] += game_reward
        self._lengths[rows] += 1
        game_over = truncated | (info["terminated"].astype(bool) if "terminated" in info
                                 else terminated)  # fmt: skip
        infos = self._infos(info, len(rows))
        done = terminated | truncated
        if game_over.any():
            over = rows[game_over]
            infos["episode"] = {
                "r": np.where(game_over, self._returns[rows], 0.0),
                "l": np.where(game_over, self._lengths[rows], 0),
                "t": np.where(game_over, (time.perf_counter() - self._starts[rows]).round(6), 0.0),
            }
            infos["_episode"] = game_over
            self._returns[over], self._lengths[over] = 0.0, 0
            self._starts[over] = time.perf_counter()
        at = np.flatnonzero(done)
        if at.size:
            # The last observations and infos, before the reset step overwrites them.
            infos["final_obs"] = np.where(done.reshape(-1, *[1] * (obs.ndim - 1)), obs, 0)
            infos["_final_obs"] = done
            final = {k: v.copy() for k, v in infos.items() if k[0] != "_" and k != "final_obs"
                     and k != "episode"}  # fmt: skip
            infos["final_info"] = {**final, **{f"_{k}": done.copy() for k in final}}
            infos["_final_info"] = done.copy()
            # EnvPool's autoreset: the next step of a finished env resets it, its action ignored.
            self._pool.send(self._noop[: at.size], rows[at].astype(np.int32))
        return _Step(obs, rewards, terminated, truncated, infos, rows, at)

    def _end_reset(
        self, step: _Step
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The step as the contract returns it: the envs reset by their reset step (if any)
        show the first observation of their next episode, their infos the reset's."""
        if step.at.size:
            first, _, _, _, info = self._take(step.rows[step.at])
            step.obs[step.at] = first
            for key, value in info.items():
                if key in step.infos and key not in _INFO_SKIP:
                    step.infos[key][step.at] = value
        return step.obs, step.rewards, step.terminated, step.truncated, step.infos

    def _infos(self, info: dict[str, Any], n: int) -> dict[str, Any]:
        """EnvPool's per-env info keys, each with its all-True mask."""
        out: dict[str, Any] = {}
        for key, value in info.items():
            if key not in _INFO_SKIP:
                out[key], out[f"_{key}"] = value, np.ones(n, dtype=np.bool_)
        return out

    def close(self, **kwargs: Any) -> None:
        if not self.closed:
            self._pool.close()
            self.closed = True
