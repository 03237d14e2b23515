"""A trainer's checkpoint: what it writes to continue exactly where an iteration ended.

Kept beside the trainer rather than in it, so ``ppo/trainer.py`` reads as the algorithm
(collect, advantages, update, log) and this reads as the list of what a resume needs. The file
format, the atomic write and the layout of several ranks' states are ``run/checkpoint.py``'s.

Shared by the ranks: the config, the iteration and global step, the policy's and the optimizer's
state, and the steps and seconds counted for SPS. Per rank (each has its own environments, so
rank 0 gathers and writes them all): the environments' state and their normalisation
statistics, the observation the next rollout starts from, the policy's recurrent state, the
RNGs, the episodes seen, the teacher's calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.run.checkpoint import (
    CheckpointError,
    first_line,
    rank_state,
    save_checkpoint,
    to_numpy,
    to_tensors,
    with_rank_states,
)

if TYPE_CHECKING:
    from rlperf.ppo.trainer import Trainer


def save_trainer(trainer: Trainer, path: Path) -> None:
    """Write everything needed to continue exactly where this iteration ended (call it on every
    rank: rank 0 writes its own and the other ranks' environments and RNGs)."""
    rank_states = trainer.ranks.gather(own_rank_state(trainer))
    if rank_states is None:
        return
    counted_steps, counted_s = trainer.prior_counted
    shared = {
        "config": trainer.cfg.to_dict(),
        "iteration": trainer.iteration,
        "global_step": trainer.global_step,
        "policy": trainer.policy.state_dict(),
        "optimizer": trainer.update_impl.state_dict(),
        "counted_steps": counted_steps,
        "counted_s": counted_s,
    }
    save_checkpoint(path, with_rank_states(shared, rank_states))


def own_rank_state(trainer: Trainer) -> dict[str, Any]:
    """What differs between ranks: the environments, the RNGs, the episodes seen."""
    # Environments without get_state/set_state resume with fresh episodes (a new reset).
    get_env_state = getattr(trainer.env, "get_state", None)
    buf, teacher = trainer.buffer, trainer.teacher_phase
    return {
        "sample_rng": trainer.sample_gen.get_state(),
        "shuffle_rng": trainer.shuffle_gen.get_state(),
        "env": to_tensors(get_env_state()) if get_env_state else None,
        "next_obs": buf.next_obs.cpu(),
        "next_done": None if buf.next_done is None else buf.next_done.cpu(),
        "next_mask": None if buf.next_mask is None else buf.next_mask.cpu(),
        "policy_state": [s.cpu() for s in trainer.state],
        **trainer.episodes.state_dict(),
        "teacher_calls": dict(teacher.calls) if teacher else {},
        "normalizer": None
        if trainer.normalizer is None
        else to_tensors(trainer.normalizer.state_dict()),
        "value_norm": None
        if trainer.value_norm is None
        else to_tensors(trainer.value_norm.state_dict()),
    }


def load_trainer(trainer: Trainer, payload: dict[str, Any]) -> None:
    """Restore a checkpoint made by :func:`save_trainer` into an identically configured trainer.

    Raises:
        CheckpointError: the checkpoint does not fit this run (one-line reason).
    """
    buf, ranks = trainer.buffer, trainer.ranks
    payload = rank_state(payload, ranks.rank, ranks.world_size)
    try:
        trainer.policy.load_state_dict(payload["policy"])
        trainer.update_impl.load_state_dict(payload["optimizer"])
        trainer.sample_gen.set_state(payload["sample_rng"])
        trainer.shuffle_gen.set_state(payload["shuffle_rng"])
        set_env_state = getattr(trainer.env, "set_state", None)
        if payload["env"] is not None and set_env_state is not None:
            set_env_state(to_numpy(payload["env"]))
            buf.next_obs.copy_(payload["next_obs"])
            if buf.next_mask is not None:
                buf.next_mask.copy_(payload["next_mask"])
            if buf.next_done is not None:
                buf.next_done.copy_(payload["next_done"])
            saved = payload["policy_state"]
            if len(saved) != len(trainer.state):
                raise ValueError("policy state does not match the policy")
            trainer.state = tuple(s.to(trainer.device) for s in saved)
        if trainer.normalizer is not None:
            saved_norm = payload.get("normalizer")
            if saved_norm is None:
                raise ValueError("the checkpoint has no normalisation statistics")
            trainer.normalizer.load_state_dict(to_numpy(saved_norm))
        if trainer.value_norm is not None:
            saved_values = payload.get("value_norm")
            if saved_values is None:
                raise ValueError("the checkpoint has no value normalisation statistics")
            trainer.value_norm.load_state_dict(to_numpy(saved_values))
        trainer.iteration = int(payload["iteration"])
        trainer.global_step = int(payload["global_step"])
        trainer.episodes.load_state_dict(payload)
        trainer.prior_counted = (int(payload["counted_steps"]), float(payload["counted_s"]))
        if trainer.teacher_phase is not None:
            trainer.teacher_phase.calls.update(payload.get("teacher_calls", {}))
    except (KeyError, RuntimeError, ValueError) as e:
        raise CheckpointError(
            f"cannot resume: checkpoint does not fit this run ({first_line(e)})"
        ) from e
