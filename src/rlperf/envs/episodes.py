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
    ``RecordEpisodeStatistics`` gives, except that ``final_obs`` is one dense array.

    Args:
        obs: (N, ...) observations after the step (copied: the env overwrites finished rows
            with the first observation of their next episode).
        episode_returns: (N,) float64 running returns, including this step.
        episode_steps: (N,) int64 running lengths, including this step.
        episode_start_s: (N,) ``time.perf_counter()`` seconds at each episode's start.
        final_info: the finished episodes' last-step infos, a dict of (N, ...) arrays each
            with its ``_key`` mask (zeros where not done); ``{}`` when the env gives none.

    ``done`` itself becomes ``_final_obs``: pass an array the env does not return otherwise
    (``terminated | truncated``, or a copy), so that no two returned arrays share memory.
    ``final_obs`` rows that did not finish hold this step's observation (gymnasium: None): read
    them where ``_final_obs``. ``episode``: ``r`` float64, ``l`` int64, ``t`` float64 seconds
    (gymnasium rounds ``t`` to microseconds; this hot path does not), 0 where not done.
    """
    # Runs on every step where some episode ended (most steps of a 64-env cartpole): no
    # per-row work, one copy per returned array.
    return {
        "final_obs": obs.copy(),
        "_final_obs": done,
        "final_info": {} if final_info is None else final_info,
        "_final_info": done.copy(),
        "episode": {
            "r": np.where(done, episode_returns, 0.0),
            "l": np.where(done, episode_steps, 0),
            "t": np.where(done, time.perf_counter() - episode_start_s, 0.0),
        },
        "_episode": done.copy(),
    }
