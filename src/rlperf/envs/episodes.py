"""The ``infos`` a finished step reports, shared by rlperf's batched environments.

Every environment follows the same contract (see ``envs/cartpole.py``): on a step where some
sub-environments finish, ``infos["final_obs"]`` holds the last observation of each finished
episode (dense, valid where ``infos["_final_obs"]``) and ``infos["episode"]`` its return, length
and elapsed seconds (valid where ``infos["_episode"]``), as gymnasium's
``RecordEpisodeStatistics`` reports them. Built here once so the environments cannot drift.
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
) -> dict[str, Any]:
    """``infos`` for the rows where ``done`` (N,) is set, before those rows are reset.

    Args:
        obs: (N, ...) observations after the step (copied: the env overwrites finished rows
            with the first observation of their next episode).
        episode_returns, episode_steps, episode_start_s: (N,) running statistics, including
            this step.
    """
    return {
        "final_obs": obs.copy(),
        "_final_obs": done,
        "episode": {
            "r": np.where(done, episode_returns, 0.0).astype(np.float32),
            "l": np.where(done, episode_steps, 0),
            "t": np.where(done, time.perf_counter() - episode_start_s, 0.0),
        },
        "_episode": done,
    }
