"""Observation and reward normalisation over a whole batch of environments (``--normalize-obs``,
``--normalize-reward``), as SB3's ``VecNormalize`` and gymnasium's vector
``NormalizeObservation``/``NormalizeReward`` do, plus CleanRL's clips to +-10.

Why it is rlperf's own and not a wrapper around each env: PPO on MuJoCo needs it to reach the
published returns (CleanRL wraps every env in NormalizeObservation, an observation clip,
NormalizeReward and a reward clip), but four per-env Python wrappers are four calls a step per
env, and a reward wrapper inside the env changes the return that the episode statistics record.
Here it is a handful of numpy ops over the ``(num_envs, ...)`` batch, applied by the trainer
after the vector env's step (``ppo/build.py``'s ``make_env_step``, section
``rollout/normalize``), so:

- the episode statistics (``infos["episode"]``) are the env's own returns, as CleanRL's
  ``episodic_return``, never the normalised or clipped reward's sum;
- it works the same for every backend (serial, env workers);
- ``infos["final_obs"]`` (the observation a truncated episode ended on) is normalised with the
  same statistics, without updating them, so the critic's bootstrap sees what it was trained on
  (SB3 does this for ``terminal_observation``; gymnasium's wrappers leave it raw).

The statistics are gymnasium's :class:`~gymnasium.wrappers.utils.RunningMeanStd` arithmetic
(Chan et al.'s parallel update, float64), shared over the batch, or one per env
(``--norm-per-env``). The reward is divided by the standard deviation of the discounted return.
The two layouts follow the two gymnasium stacks step for step, episode ends included:

- shared: gymnasium 1.x's vector ``NormalizeObservation`` and ``NormalizeReward`` (SB3's
  VecNormalize): the return restarts after a termination or a truncation; the final
  observation is normalised but not counted (as SB3 does for ``terminal_observation``);
- per env: CleanRL's stack, ``NormalizeObservation`` and ``NormalizeReward`` inside each env of
  a SAME_STEP ``SyncVectorEnv``: the return restarts only at a termination, from the terminal
  step's own reward, and runs on across a truncation; an episode's final observation counts
  into its env's statistics before the next episode's first one does, and is normalised with
  them then. CleanRL's published returns were learned with these quirks; ``--norm-per-env``
  keeps them (``--preset mujoco`` at 8 envs shares one set: docs/continuous.md).

Tested against gymnasium's wrappers in ``tests/envs/test_normalize.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf import native


class RunningStats:
    """Running mean and variance of rows of shape ``shape``: one set for the whole batch, or
    with ``rows`` one set per row (each row's samples only).

    ``count`` starts at ``epsilon`` as gymnasium's and SB3's do, so the first update already
    weighs the prior (mean 0, var 1) by almost nothing.
    """

    def __init__(self, shape: tuple[int, ...], rows: int | None = None, epsilon: float = 1e-4):
        lead = () if rows is None else (rows,)
        self.per_row = rows is not None
        self.mean = np.zeros(lead + shape, dtype=np.float64)
        self.var = np.ones(lead + shape, dtype=np.float64)
        self.count = np.full(lead + (1,) * len(shape), epsilon, dtype=np.float64)

    def update(self, x: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Take a batch ``x`` (B, *shape); per row: each row of ``x`` is that row's one new
        sample, and only ``rows`` (a bool mask (B,)) are taken when given. The arrays are
        written in place: the normalisation kernel holds their addresses."""
        if self.per_row:
            # Chan's update with a batch of one sample per row: batch mean x, batch var 0.
            take = slice(None) if rows is None else rows
            mean, var, count = self.mean[take], self.var[take], self.count[take]
            delta = x[take] - mean
            total = count + 1.0
            new_mean = mean + delta / total
            m2 = var * count + np.square(delta) * count / total
            self.mean[take], self.var[take], self.count[take] = new_mean, m2 / total, total
            return
        if rows is not None:
            x = x[rows]
        if len(x) == 0:
            return
        batch_mean, batch_var, batch_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        m2 = self.var * self.count + batch_var * batch_count
        m2 = m2 + np.square(delta) * self.count * batch_count / total
        self.mean[...] = self.mean + delta * batch_count / total
        self.var[...], self.count[...] = m2 / total, total

    def flat(self, features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, var, count) as views with the feature axes flattened to ``features`` (the
        normalisation kernel's layout: per row (R, F), (R, F), (R, 1); shared (F,), (F,), (1,);
        a set of scalars as it is)."""
        lead = self.mean.shape[:1] if self.per_row else ()
        if self.mean.ndim == len(lead):  # scalars: (R,) or ()
            return self.mean, self.var, self.count
        shape = lead + (features,)
        return self.mean.reshape(shape), self.var.reshape(shape), self.count.reshape(lead + (1,))

    def state_dict(self) -> dict[str, np.ndarray]:
        # np.array: a 0-d statistic becomes a numpy scalar after an update; a checkpoint takes
        # arrays (run/checkpoint.py turns them into tensors).
        return {key: np.array(getattr(self, key)) for key in ("mean", "var", "count")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("mean", "var", "count"):
            value = np.asarray(state[key], dtype=np.float64)
            if value.shape != getattr(self, key).shape:
                raise ValueError(
                    f"normalisation {key} has shape {value.shape}, this run needs "
                    f"{getattr(self, key).shape}"
                )
            getattr(self, key)[...] = value  # in place: see update()


class Normalizer:
    """Normalises a vector env's observations and rewards, batch by batch (module docstring).

    Args:
        num_envs: rows of each batch.
        obs_shape: one observation's shape.
        gamma: the discount of the return whose spread scales the reward (the run's gamma).
        obs, reward: which of the two to normalise.
        clip_obs, clip_reward: the normalised values are clipped to +-these (0: no clip).
        per_env: one set of statistics per env instead of one for the batch.
        epsilon: added to the variance before its square root (gymnasium's 1e-8).

    Attributes:
        training: update the statistics with each batch (False: frozen, for evaluation).
    """

    def __init__(
        self,
        num_envs: int,
        obs_shape: tuple[int, ...],
        gamma: float,
        obs: bool = True,
        reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        per_env: bool = False,
        epsilon: float = 1e-8,
    ) -> None:
        rows = num_envs if per_env else None
        self.num_envs, self.gamma, self.epsilon = num_envs, gamma, epsilon
        self.clip_obs, self.clip_reward = clip_obs, clip_reward
        self.obs_stats = RunningStats(tuple(obs_shape), rows) if obs else None
        self.return_stats = RunningStats((), rows) if reward else None
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.training = True
        self.per_env = per_env
        self.features = int(np.prod(obs_shape))
        # The one-call step (envs/_normalize_cpu.c) where it is built: ~25 us of numpy
        # operations a step at one env, against a few. ``kernel = False`` keeps numpy's.
        self.kernel = native.normalize_available()
        self._bound: native.NormalizeKernel | None = None

    def normalize_obs(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """``obs`` (num_envs, ...) normalised as float32 (the statistics updated first when
        ``update`` and training, as gymnasium's wrapper does)."""
        stats = self.obs_stats
        if stats is None:
            return obs
        if update and self.training:
            stats.update(obs)
        out = (obs - stats.mean) / np.sqrt(stats.var + self.epsilon)
        if self.clip_obs > 0:
            np.clip(out, -self.clip_obs, self.clip_obs, out=out)
        return out.astype(np.float32, copy=False)

    def reset(self, obs: np.ndarray) -> np.ndarray:
        """The first observations of a reset env, normalised; the discounted returns restart."""
        self.returns[:] = 0.0
        return self.normalize_obs(obs, update=True)

    def step(
        self,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
        infos: dict[str, Any],
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """One step's observations and rewards normalised; ``infos["final_obs"]`` too: shared,
        with the statistics as this step's update left them (not counted); per env, counted
        first (the module docstring)."""
        final_done = self.per_env and self._count_final_obs(infos)
        if self.kernel:
            obs, rewards = self._step_native(obs, rewards, terminations, truncations)
        else:
            stats = self.return_stats
            if stats is not None:
                self.returns[...] = self.returns * self.gamma * (1.0 - terminations) + rewards
                if self.training:
                    stats.update(self.returns)
                rewards = rewards / np.sqrt(stats.var + self.epsilon)
                if self.clip_reward > 0:
                    rewards = np.clip(rewards, -self.clip_reward, self.clip_reward)
                if not self.per_env:  # the vector wrapper restarts at either end (docstring)
                    self.returns[terminations | truncations] = 0.0
            obs = self.normalize_obs(obs, update=True)
        if not final_done:
            self._normalize_final_obs(infos)
        return obs, rewards, infos

    def _count_final_obs(self, infos: dict[str, Any]) -> bool:
        """Per env: each ended env's final observation into its statistics, then normalised
        with them, before the reset observation is counted (the per-env wrapper's order).
        Whether ``infos["final_obs"]`` was normalised here."""
        final = infos.get("final_obs") if infos else None
        ended = infos.get("_final_obs") if infos else None
        if self.obs_stats is None or final is None or ended is None or final.dtype == object:
            return False
        if self.training and ended.any():
            self.obs_stats.update(final, rows=ended)
        infos["final_obs"] = self.normalize_obs(final, update=False)
        return True

    def _normalize_final_obs(self, infos: dict[str, Any]) -> None:
        """``infos["final_obs"]`` (a dense batch) normalised in place of the raw one, with the
        statistics as this step left them, not updated by it."""
        final = infos.get("final_obs") if infos else None
        if self.obs_stats is not None and final is not None and final.dtype != object:
            infos["final_obs"] = self.normalize_obs(final, update=False)

    def _step_native(
        self,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`step`'s observations and rewards in one kernel call (envs/_normalize_cpu.c):
        the same arithmetic. The arrays returned are the kernel's buffers, valid until the next
        step (the trainer copies them into its rollout buffer first, as it does the env
        workers' views)."""
        bound = self._bound
        if bound is None:
            obs_stats, ret_stats = self.obs_stats, self.return_stats
            bound = self._bound = native.NormalizeKernel(
                self.num_envs, self.features, self.per_env,
                None if obs_stats is None else obs_stats.flat(self.features),
                None if ret_stats is None else ret_stats.flat(1), self.returns,
            )  # fmt: skip
        obs_out, rewards = bound.step(
            obs, rewards, terminations, truncations, self.training, self.gamma, self.epsilon,
            self.clip_obs, self.clip_reward,
        )  # fmt: skip
        if self.obs_stats is None:
            return obs, rewards
        return obs_out.reshape(obs.shape), rewards

    def state_dict(self) -> dict[str, Any]:
        """The statistics and the running discounted returns (a checkpoint's ``normalizer``)."""
        return {
            "obs": None if self.obs_stats is None else self.obs_stats.state_dict(),
            "return": None if self.return_stats is None else self.return_stats.state_dict(),
            "returns": np.array(self.returns),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; ValueError when it does not fit these settings."""
        for name, stats in (("obs", self.obs_stats), ("return", self.return_stats)):
            saved = state.get(name)
            if (saved is None) != (stats is None):
                raise ValueError(f"the checkpoint's {name} normalisation does not match this run")
            if stats is not None and saved is not None:
                stats.load_state_dict(saved)
        returns = np.asarray(state["returns"], dtype=np.float64)
        if returns.shape != self.returns.shape:
            raise ValueError(f"normalisation returns have shape {returns.shape}")
        self.returns[...] = returns  # in place: the kernel holds its address
