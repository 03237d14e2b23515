"""The robots workload: 64x64 RGB boards, the ConvLSTM policy."""

from __future__ import annotations

from typing import Any

from .core import (
    HISTORY,
    QUICK,
    ROBOTS,
    SEED,
    Case,
    CaseSkipped,
    Prepared,
    Workload,
    requires_env,
)
from .policies import kind_act, recurrent_evaluate
from .training import e2e_train, update_epoch


def _robots_vec(num_envs: int, obs_mode: str) -> Any:
    requires_env("robots")
    from rlperf.envs import make_vec

    return make_vec("robots", num_envs, seed=SEED, obs_mode=obs_mode)


def _robots_step(obs_mode: str, num_envs: int) -> Prepared:
    """One step of every env with random moves (new puzzles for the envs that finish)."""
    import numpy as np

    vec = _robots_vec(num_envs, obs_mode)
    actions = np.random.default_rng(SEED).integers(0, vec.single_action_space.n, num_envs)
    return Prepared(lambda: vec.step(actions), num_envs, "env_steps")


def _robots_reset(obs_mode: str, num_envs: int) -> Prepared:
    vec = _robots_vec(num_envs, obs_mode)
    return Prepared(lambda: vec.reset(), num_envs, "env_resets")


def _robots_render(num_envs: int) -> Prepared:
    """The batched RGB observation of the current boards, as every step makes it."""
    vec = _robots_vec(num_envs, "rgb_image")
    return Prepared(vec._observe, num_envs, "images")


def _robots_render_reference(num_envs: int) -> Prepared:
    """The per-env Pillow reference renderer (draw on a larger canvas, resize) on the same
    boards: the speed baseline of the batched renderer."""
    vec = _robots_vec(num_envs, "rgb_image")
    try:
        from rlperf.envs.robots.reference import reference_image
    except ImportError as e:  # Pillow missing
        raise CaseSkipped(f"the reference renderer needs Pillow ({e})") from e
    walls, positions = vec.walls.copy(), vec.positions.copy()
    robot, cell = vec.target_robot.copy(), vec.target_cell.copy()
    size = vec.single_observation_space.shape[-1]

    def run() -> None:
        for i in range(num_envs):
            reference_image(walls[i], positions[i], int(robot[i]), int(cell[i]), size)

    return Prepared(run, num_envs, "images")


_history, _quick = {HISTORY}, {HISTORY, QUICK}
_seq = {"num_steps": 16, "num_envs": 16}
# 16 boards of 64x64 RGB: the ConvLSTM trains at a few hundred SPS on this CPU, so a call of
# two iterations (1024 steps) keeps a case to seconds.
_full = {"num_envs": 16, "threads": 1, "kind": "convlstm"}
WORKLOAD = Workload(
    "robots",
    "robots",
    # One iteration of 4 envs x 4 steps, 4 epochs of BPTT over one minibatch of the 4 envs (as
    # wide as a minibatch of the full 16 x 32 run), ~0.125 s a call; the update is 86% of it
    # (93% at 16 x 32). Short rollouts, not fewer envs: BPTT costs mostly per step (4 envs x 8
    # steps in 4 minibatches take 0.43 s).
    e2e=Case(
        "e2e_train",
        {
            "num_envs": 4,
            "env_steps": 16,
            "threads": 1,
            "kind": "convlstm",
            "num_steps": 4,
            "num_minibatches": 1,
        },
        e2e_train,
    ),  # fmt: skip
    cases=(
        *(
            Case(
                f"robots_{what}",
                {"obs_mode": mode, "num_envs": 1024},
                fn,
                _quick if (what, mode) == ("step", "rgb_image") else (),
            )
            for mode in ("rgb_image", "symbolic")
            for what, fn in (("step", _robots_step), ("reset", _robots_reset))
        ),  # fmt: skip
        Case("robots_render", {"num_envs": 256}, _robots_render, _history),
        Case(
            "robots_render_reference", {"num_envs": 16}, _robots_render_reference, needs=(ROBOTS,)
        ),  # fmt: skip
        Case("policy_act_kind", {"kind": "convlstm", "num_envs": 64}, kind_act, _history),
        Case(
            "recurrent_evaluate",
            {**_seq, "backward": False, "kind": "convlstm"},
            recurrent_evaluate,
        ),  # fmt: skip
        Case(
            "recurrent_evaluate", {**_seq, "backward": True, "kind": "convlstm"}, recurrent_evaluate
        ),  # fmt: skip
        Case("update_epoch", _full, update_epoch),
        Case("e2e_train", {**_full, "env_steps": 1024}, e2e_train),
    ),
)
