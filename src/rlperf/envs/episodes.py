"""The ``infos`` a finished step reports, shared by rlperf's batched environments.

Every environment follows the same contract (see ``envs/cartpole.py``): on a step where some
sub-environments finish, ``infos["final_obs"]`` holds the last observation of each finished
episode (dense, valid where ``infos["_final_obs"]``), ``infos["final_info"]`` the infos of that
last step (a dict of arrays, valid where ``infos["_final_info"]``), and ``infos["episode"]`` its
return, length and elapsed seconds (valid where ``infos["_episode"]``), as gymnasium's
``SyncVectorEnv`` with ``RecordEpisodeStatistics`` reports them. Built here once so the
environments cannot drift.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def finished_infos(
    obs: np.ndarray,
    done: np.ndarray,
    episode_returns: np.ndarray,
    episode_steps: np.ndarray,
    episode_start_s: np.ndarray,
    final_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``infos`` for the rows where ``done`` (N,) is set, before those rows are reset: the keys,
    dtypes and masks gymnasium's ``SyncVectorEnv(autoreset_mode=SAME_STEP)`` wrapped in
    ``RecordEpisodeStatistics`` gives, except that ``final_obs`` is one dense array with zeros
    in the rows that did not finish.

    Args:
        obs: (N, ...) observations after the step (the finished rows are copied: the env
            overwrites them with the first observation of their next episode).
        episode_returns: (N,) float64 running returns, including this step.
        episode_steps: (N,) int64 running lengths, including this step.
        episode_start_s: (N,) ``time.perf_counter()`` seconds at each episode's start.
        final_info: the finished episodes' last-step infos, a dict of (N, ...) arrays each
            with its ``_key`` mask (zeros where not done); ``{}`` when the env gives none.

    Each mask is its own array (a caller may keep or change one without touching the others
    or the env's flags). ``episode``: ``r`` float64, ``l`` int64, ``t`` float64 seconds rounded
    to microseconds, 0 where not done.
    """
    elapsed_s = np.round(time.perf_counter() - episode_start_s, 6)
    # Zeros where not done, as the gym: adapter gives them (gymnasium: None); copying only the
    # finished rows is also cheaper than copying the batch (calloc'd zeros cost no writes).
    final_obs = np.zeros_like(obs)
    final_obs[done] = obs[done]
    return {
        "final_obs": final_obs,
        "_final_obs": done.copy(),
        "final_info": {} if final_info is None else final_info,
        "_final_info": done.copy(),
        "episode": {
            "r": np.where(done, episode_returns, 0.0).astype(np.float64, copy=False),
            "l": np.where(done, episode_steps, 0).astype(np.int64, copy=False),
            "t": np.where(done, elapsed_s, 0.0),
        },
        "_episode": done.copy(),
    }
