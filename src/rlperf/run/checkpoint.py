"""Checkpoints: written atomically, loaded with ``torch.load(..., weights_only=True)``.

A checkpoint holds only tensors and plain Python values (numpy arrays are converted to tensors),
so loading it never runs pickled code. It is written to a temporary file in the same directory,
flushed to disk, then renamed over the old one: a crash at any moment leaves either the previous
checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlperf.run.run_dir import CHECKPOINT_NAME  # one name, where the run's files are listed

CHECKPOINT_FORMAT = "rlperf.checkpoint/3"  # 3: any policy, its recurrent state, env options


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or does not match the run; one-line message."""


def to_tensors(value: Any) -> Any:
    """Recursively turn numpy arrays into tensors so ``weights_only`` loading accepts them."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, dict):
        return {k: to_tensors(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_tensors(v) for v in value)
    return value


def to_numpy(value: Any) -> Any:
    """Inverse of :func:`to_tensors`."""
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_numpy(v) for v in value)
    return value


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically (temp file, fsync, rename)."""
    payload = {"format": CHECKPOINT_FORMAT, **payload}
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(run_dir: Path, purpose: str = "resume") -> dict[str, Any]:
    """Load ``run_dir/checkpoint.pt``; raise :class:`CheckpointError` with a one-line reason
    that starts ``cannot <purpose>:`` (``resume``; ``evaluate`` for ``rlperf eval``)."""
    path = Path(run_dir) / CHECKPOINT_NAME
    cannot = f"cannot {purpose}"
    if not path.is_file():
        raise CheckpointError(f"{cannot}: no {CHECKPOINT_NAME} in {run_dir}")
    try:
        file = path.open("rb")  # opened apart from torch.load: its errors are the content's
    except OSError as e:  # the file, not its content (permissions)
        raise CheckpointError(f"{cannot}: cannot read {path} ({first_line(e)})") from e
    with file:
        try:
            payload = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many types for a corrupt or foreign file
            # (a torn zip archive: OSError EINVAL). Not torch's own message: it advises
            # loading with weights_only=False, which would run whatever the file's pickle
            # holds, and cannot make a torn file whole anyway.
            afresh = ", or start the run afresh with --overwrite" if purpose == "resume" else ""
            raise CheckpointError(
                f"{cannot}: {path} is corrupt or truncated (torch cannot read it as a "
                f"checkpoint): restore it from a copy{afresh}"
            ) from e
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{cannot}: {path} is not an {CHECKPOINT_FORMAT} checkpoint")
    return payload


def with_rank_states(shared: dict[str, Any], rank_states: list[dict[str, Any]]) -> dict[str, Any]:
    """A checkpoint payload of a run on ``len(rank_states)`` ranks: rank 0's state at the top
    level beside ``shared`` (so a one-rank checkpoint keeps its layout), the others' in
    ``other_ranks`` (rank order), and ``world_size``."""
    return {
        **shared,
        **rank_states[0],
        "world_size": len(rank_states),
        "other_ranks": rank_states[1:],
    }


def saved_world_size(payload: dict[str, Any]) -> int:
    """How many ranks made the checkpoint (1 for checkpoints from before several ranks)."""
    return int(payload.get("world_size", 1))


def check_world_size(payload: dict[str, Any], world_size: int) -> None:
    """CheckpointError unless the checkpoint was made by ``world_size`` ranks: each rank's
    environments continue where they were, so the number of ranks cannot change."""
    saved = saved_world_size(payload)
    if saved != world_size:
        raise CheckpointError(
            f"mismatched --resume: the run was made by {saved} rank(s), this one has "
            f"{world_size}; resume it with --nproc {saved}"
        )


def rank_state(payload: dict[str, Any], rank: int, world_size: int) -> dict[str, Any]:
    """The payload as rank ``rank`` of ``world_size`` restores it: the shared part with its own
    environments and RNGs. CheckpointError if the run was saved with another world size."""
    check_world_size(payload, world_size)
    if rank == 0:
        return payload
    return {**payload, **payload["other_ranks"][rank - 1]}
