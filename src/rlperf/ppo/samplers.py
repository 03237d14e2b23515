"""Minibatches from a filled :class:`~rlperf.ppo.rollout.RolloutBuffer`, three ways.

Every minibatch has the same form, :class:`Minibatch`: ``(T, B, ...)`` sequences. Feed-forward
policies get ``T = 1`` rows; recurrent ones get segments of whole environments.

- :class:`PackedTableSampler`: flat float observations, no mask, feed-forward (CartPole's MLP).
  Every per-sample quantity is packed into one ``(T*N, C)`` float table, so shuffling an epoch
  is one ``index_select`` and each minibatch a contiguous slice of it: the fastest layout when a
  sample is a few floats.
- :class:`RowSampler`: any other feed-forward case (uint8 images, masks, MultiDiscrete actions):
  one permutation per epoch, each minibatch an ``index_select`` of each stored tensor, in its
  own dtype.
- :class:`SegmentSampler`: recurrent policies. The rollout is cut into segments of
  ``bptt_horizon`` steps of one environment (the whole rollout by default); a minibatch is a set
  of segments, a ``(H, S)`` slice each with the state recorded at its start during collection,
  as in CleanRL's ``ppo_atari_lstm.py``. Gradients flow back at most H steps (truncated BPTT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import torch

from rlperf.ppo.rollout import RolloutBuffer


@dataclass
class Minibatch:
    """One minibatch as ``(T, B, ...)`` sequences (``T = 1`` for feed-forward policies).

    ``dones`` and ``state0`` are for recurrent policies (None and ``()`` otherwise); ``masks``
    is None when the environment has no action mask.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    dones: torch.Tensor | None = None
    masks: torch.Tensor | None = None
    state0: tuple[torch.Tensor, ...] = ()
    # The scripted teacher's actions (supervised phase; None otherwise).
    teacher_actions: torch.Tensor | None = None
    # T = 1 minibatches of the packed table: the same fields as (B, ...) rows, for the analytic
    # update (obs, actions, logprobs, values, advantages, returns), made once.
    rows: tuple[torch.Tensor, ...] | None = None


def _perm(n: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    # randperm's generator must be a CPU one; the permutation then moves to the device.
    return torch.randperm(n, generator=generator, device="cpu").to(device)


@overload
def _rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor: ...
@overload
def _rows(x: None, idx: torch.Tensor) -> None: ...
def _rows(x: torch.Tensor | None, idx: torch.Tensor) -> torch.Tensor | None:
    """Rows ``idx`` of a ``(T, N, ...)`` tensor as a ``(1, B, ...)`` minibatch; None stays None."""
    return None if x is None else x.flatten(0, 1).index_select(0, idx).unsqueeze(0)


@overload
def _segments(
    x: torch.Tensor, seg: torch.Tensor | None, env: torch.Tensor, horizon: int
) -> torch.Tensor: ...
@overload
def _segments(x: None, seg: torch.Tensor | None, env: torch.Tensor, horizon: int) -> None: ...
def _segments(
    x: torch.Tensor | None, seg: torch.Tensor | None, env: torch.Tensor, horizon: int
) -> torch.Tensor | None:
    """``(H, S, ...)`` segments of a ``(T, N, ...)`` tensor: the (segment, env) pairs ``seg``,
    ``env``, or with ``seg`` None (one segment per rollout) the environments ``env`` whole.
    None stays None."""
    if x is None:
        return None
    if seg is None:
        # Whole rollouts: the minibatch's environments along dim 1, one op per field
        # (the general gather below is three: ~150 -> ~50 us a minibatch at 16 envs).
        return x.index_select(1, env)
    # (T, N, ...) -> (K, H, N, ...); pick (segment, env) pairs -> (S, H, ...) -> (H, S).
    picked = x.view(-1, horizon, *x.shape[1:])[seg, :, env]
    return picked.transpose(0, 1).contiguous()


class PackedTableSampler:
    """Shuffled rows of one packed float table (see the module docstring).

    The minibatches are fixed slices of one shuffled buffer, so their views are made once and
    the same :class:`Minibatch` objects are returned every epoch, refilled: at 64 x 32 a fresh
    set of views per epoch was ~20 small ops per minibatch, a few percent of the update.
    """

    @staticmethod
    def fits(buf: RolloutBuffer) -> bool:
        """Whether ``buf`` packs into one float table: flat float32 observations of a
        feed-forward policy, without action masks or a teacher's actions."""
        return (
            buf.spec.flat_obs
            and buf.obs.dtype == torch.float32
            and not buf.recurrent
            and buf.masks is None
            and buf.teacher_actions is None
        )

    def __init__(self, buf: RolloutBuffer) -> None:
        if not self.fits(buf):
            raise ValueError(
                "the packed table takes flat float32 observations of a feed-forward policy "
                "without masks or a teacher"
            )
        spec = buf.spec
        self.buf = buf
        n = buf.num_steps * buf.num_envs
        obs_dim = spec.obs_shape[0]
        act_cols = 1 if spec.action.kind == "discrete" else spec.action.dim
        self._table = torch.zeros((n, obs_dim + act_cols + 4), device=buf.device)
        self._shuffled = torch.zeros_like(self._table)
        c = obs_dim + act_cols
        self._cols: dict[str, slice | int] = {
            "obs": slice(0, obs_dim),
            "actions": slice(obs_dim, c),
            "logprobs": c,
            "values": c + 1,
            "advantages": c + 2,
            "returns": c + 3,
        }
        # Discrete actions are stored as floats in the table and used as int64 indices.
        self._actions = self._shuffled[:, self._cols["actions"]]
        self._actions_long: torch.Tensor | None
        if spec.action.discrete:
            self._actions_long = torch.zeros(self._actions.shape, dtype=torch.int64,
                                             device=buf.device)  # fmt: skip
        else:
            self._actions_long = None
        self._squeeze_actions = spec.action.kind == "discrete"
        self._minibatches: dict[int, list[Minibatch]] = {}

    def prepare(self) -> None:
        """Pack everything the update reads (after GAE wrote the advantages)."""
        buf, table, cols = self.buf, self._table, self._cols
        n = table.shape[0]
        table[:, cols["obs"]] = buf.obs.view(n, -1)
        table[:, cols["actions"]] = buf.actions.view(n, -1)
        table[:, cols["logprobs"]] = buf.logprobs.view(n)
        table[:, cols["values"]] = buf.values.view(n)
        table[:, cols["advantages"]] = buf.advantages.view(n)
        torch.add(buf.advantages.view(n), buf.values.view(n), out=table[:, cols["returns"]])

    def _views(self, num_minibatches: int) -> list[Minibatch]:
        size = self._table.shape[0] // num_minibatches
        cols, out = self._cols, []
        actions_all = self._actions if self._actions_long is None else self._actions_long
        for start in range(0, size * num_minibatches, size):
            mb = self._shuffled[start : start + size]
            actions = actions_all[start : start + size]
            if self._squeeze_actions:
                actions = actions.squeeze(1)
            rows = (mb[:, cols["obs"]], actions, mb[:, cols["logprobs"]], mb[:, cols["values"]],
                    mb[:, cols["advantages"]], mb[:, cols["returns"]])  # fmt: skip
            obs, acts, logprobs, values, advantages, returns = (r.unsqueeze(0) for r in rows)
            out.append(Minibatch(obs, acts, logprobs, values, advantages, returns, rows=rows))
        return out

    def epoch(self, num_minibatches: int, generator: torch.Generator | None) -> list[Minibatch]:
        """Shuffle once; the minibatches are contiguous slices of the shuffled table."""
        perm = _perm(self._table.shape[0], generator, self.buf.device)
        torch.index_select(self._table, 0, perm, out=self._shuffled)
        if self._actions_long is not None:
            self._actions_long.copy_(self._actions)
        views = self._minibatches.get(num_minibatches)
        if views is None:
            views = self._minibatches[num_minibatches] = self._views(num_minibatches)
        return views


class _GatheringSampler:
    """Samplers that gather from the buffer's own tensors; returns are kept beside them."""

    def __init__(self, buf: RolloutBuffer) -> None:
        self.buf = buf
        self._returns = torch.zeros_like(buf.advantages)

    def prepare(self) -> None:
        """Returns = advantages + values (after GAE wrote the advantages)."""
        torch.add(self.buf.advantages, self.buf.values, out=self._returns)


class RowSampler(_GatheringSampler):
    """Shuffled rows, gathered from each stored tensor in its own dtype."""

    def epoch(self, num_minibatches: int, generator: torch.Generator | None) -> list[Minibatch]:
        buf = self.buf
        n = buf.num_steps * buf.num_envs
        perm = _perm(n, generator, buf.device)
        size = n // num_minibatches

        out = []
        for start in range(0, size * num_minibatches, size):
            idx = perm[start : start + size]
            out.append(
                Minibatch(
                    obs=_rows(buf.obs, idx),
                    actions=_rows(buf.actions, idx),
                    logprobs=_rows(buf.logprobs, idx),
                    values=_rows(buf.values, idx),
                    advantages=_rows(buf.advantages, idx),
                    returns=_rows(self._returns, idx),
                    masks=_rows(buf.masks, idx),
                    teacher_actions=_rows(buf.teacher_actions, idx),
                )
            )
        return out


class SegmentSampler(_GatheringSampler):
    """Minibatches of whole ``(H, S)`` environment segments for recurrent policies."""

    def __init__(self, buf: RolloutBuffer) -> None:
        if not buf.recurrent:
            raise ValueError("segment minibatches need a recurrent policy's buffer")
        super().__init__(buf)

    def epoch(self, num_minibatches: int, generator: torch.Generator | None) -> list[Minibatch]:
        buf = self.buf
        h, n = buf.horizon, buf.num_envs
        k = buf.num_steps // h
        perm = _perm(k * n, generator, buf.device)
        size = (k * n) // num_minibatches

        out = []
        for start in range(0, size * num_minibatches, size):
            idx = perm[start : start + size]
            seg, env = (None, idx) if k == 1 else (idx // n, idx % n)
            out.append(
                Minibatch(
                    obs=_segments(buf.obs, seg, env, h),
                    actions=_segments(buf.actions, seg, env, h),
                    logprobs=_segments(buf.logprobs, seg, env, h),
                    values=_segments(buf.values, seg, env, h),
                    advantages=_segments(buf.advantages, seg, env, h),
                    returns=_segments(self._returns, seg, env, h),
                    dones=_segments(buf.dones, seg, env, h),
                    masks=_segments(buf.masks, seg, env, h),
                    teacher_actions=_segments(buf.teacher_actions, seg, env, h),
                    state0=tuple(
                        s[0].index_select(0, env) if k == 1 else s[seg, env] for s in buf.states
                    ),
                )
            )
        return out
