"""A DRC-style ConvLSTM actor-critic for ``(C, H, W)`` images (Guez et al. 2019, "An
investigation of model-free planning"; AlignmentResearch ``learned-planner``'s ``convlstm.py``).

The network, for one environment step (``ch`` channels, ``D`` layers, ``N`` ticks)::

    obs (B, C, H, W) uint8 -> [0, 1]
    boundary padding   + a "fence" channel, 1 on the pixels of the core grid's border cells
    encoder            conv k=s stride=s (C+1 -> ch) + ReLU, conv 3x3 (ch -> ch) + ReLU:
                       the core grid, (gh, gw) = (H // s, W // s)
    skip connection    the encoded input goes into every layer's gates, every tick
    layers             N ticks x D ConvLSTM layers; layer l's gates are one 3x3 conv over
                       [encoded input, h_below, h_l, pool_l] (4 ch outputs, order i, f, g, o),
                       h_below the layer below's new h, for layer 0 the top layer's h of the
                       previous tick (DRC's top-down connection)
      pool_and_inject  pool_l: mean and max of h_l over the grid (B, 2 ch), projected to ch
                       (linear, no bias) and broadcast over the grid
    head               "pool" (default): mean and max over the grid of [top h, encoded
                       input], (B, 4 ch); "flatten": top h + encoded input, flattened,
                       (B, ch gh gw), as learned-planner's ``skip_final`` output
    projection         linear (-> features) + ReLU, then the actor and critic heads

The two heads: ``pool`` is the pipeline of the guide our users bring (its stage
"global pooling"); it keeps no position, so the network has to say *where* through channels
that a max picks up. ``flatten`` keeps the grid, as learned-planner's ``skip_final`` output and
the CNN policy's flattened features do (a robot's slide on the robots board depends on where
the walls are). docs/robots.md has the learning runs of both heads; neither reached its target
there yet, so the guide's head stays the default.

Encoder stride, the rule (:func:`encoder_stride`): ``s = min(H, W) // 8`` when
``min(H, W) > 16``, else ``s = 1`` (the first conv is then 1x1). A 64x64 RGB board with 8-pixel
cells is read one cell per patch into an 8x8 grid; symbolic ``(C, 8, 8)`` planes and small
images (Catch's 10x5) keep every pixel as a cell. Rows and columns past ``gh * s`` and
``gw * s`` are not read (none for 64x64).

State: per layer ``(h, c)``, each ``(B, ch, gh, gw)``, flattened into the state tuple as
``(h_0, c_0, h_1, c_1, ...)``; all of it is zeroed where an episode starts, before the step
that sees the episode's first observation (as :class:`~rlperf.policies.lstm.LSTMActorCritic`).

Sections: with ``sections=True`` each stage above is a section of the trainer's profiler (the
policy's ``profiler`` attribute; the process-wide one when unset), under one parent ``convlstm``,
so in training they nest as ``rollout/policy_forward/convlstm/...`` and
``update/loss/convlstm/...`` (``pool_and_inject`` under ``layers``). Eight sections a step plus
one pool-and-inject per layer per tick; with ``sections=False`` the profiler is never called.
Under ``torch.compile`` they are off (they would split the graph).

Where the time goes, and what is arranged for it. :mod:`rlperf.policies.convlstm_reference`
is the same network written plainly (one conv per gate and input, the fence concatenated, the
pooled vector broadcast and convolved, every stage step by step); the tests load one into the
other and compare outputs and gradients. Here:

- Everything that does not depend on the recurrence runs once over all ``T * B`` frames of a
  sequence in ``evaluate``: scaling, encoder, the encoded input's share of every layer's gates
  (one conv with ``D * 4 ch`` outputs, the gate biases included: the "skip" stage), and after
  the loop the global pooling and projection. Only the layers run step by step.
- A convolution over a concatenation is the sum of convolutions over its parts, so each part
  is computed where it is cheapest. The fence channel is a constant: its share of the first
  conv is a ``(1, ch, gh, gw)`` map computed once per call and added after the conv, instead of
  a channel concatenated to every frame; the 1/255 scaling is folded into that conv's weights.
  The pooled vector is constant over the grid, so its 3x3 conv is ``p @ K`` with
  ``K[c, (o, y, x)]`` the sum of the kernel taps that fall inside the grid at ``(y, x)`` (zero
  padding), one ``(ch, 4 ch gh gw)`` matrix per layer computed once per call. Per layer and
  tick that leaves one 3x3 conv over ``[h_below, h_l]`` (2 ch inputs instead of 4 ch), one
  ``addmm`` that adds the skip and the injected pool, and the gate arithmetic (one sigmoid over
  all four gates, one tanh on g).
- Per-step and per-layer pieces are made with ``unbind`` before the loop: indexing a tensor
  inside it (``skip[t]``, ``weight[layer]``) costs, in backward, a zero-filled gradient of the
  whole tensor per use; on Catch that was 58% of the update's CPU time.

What is left is mostly arithmetic: on Catch (16 envs x 16 steps, ch 32, D 2, N 1, one thread)
the per-step 3x3 convs run at about 80 GFLOP/s forward, and backward costs twice the forward,
as its FLOPs do. Batching every step's weight gradient into one call after the loop (what
``TorchRecurrence`` does for ``W_hh``) saved only ~2 ms of a ~14 ms conv backward per layer per
minibatch in a micro-benchmark, so the recurrence stays under autograd.

Tried, with ``benchmarks/convlstm_speed.py`` (preliminary: a 2-core machine shared with other
jobs, one torch thread, as 2 threads ran 10-20x slower under that load):

- fast / eager reference, end to end: ~3.0x on Catch, ~2.5x on the 64x64 RGB robots board.
- sections on / off: not resolvable end to end (+-30% run-to-run noise); counted, 810 stage
  sections per Catch iteration x ~0.8 us each is ~0.05% of an iteration.
- ``channels_last=True``: ~0.9x (the gate slices become strided; the grids are tiny).
- ``--precision bf16`` (autocast in the update only): ~0.66x on this CPU (AVX512-BF16, no AMX).
- ``--compile``: Dynamo unrolls the T x N x D loop into one graph; a 16-step sequence took over
  two minutes to compile, after which evaluate + backward ran ~1.3x faster. Compiling only the
  layer step (one small graph reused every step) was slower than eager.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import cast

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from rlperf.config import CONVLSTM_HEADS
from rlperf.envs.spec import EnvSpec
from rlperf.policies import distributions
from rlperf.policies.base import ActorCritic, ActorCriticHeads, State, orthogonal_
from rlperf.timing import names
from rlperf.timing.sections import NULL_SECTION, get_profiler

GRID_SIDE = 8  # large images are read into a grid this many cells across
DOWNSAMPLE_ABOVE = 16  # images whose smaller side is at most this keep one cell per pixel


def encoder_stride(height: int, width: int) -> int:
    """Kernel and stride of the first conv: ``min(H, W) // 8`` above 16 pixels, else 1."""
    side = min(height, width)
    return side // GRID_SIDE if side > DOWNSAMPLE_ABOVE else 1


def fence_map(height: int, width: int, stride: int) -> torch.Tensor:
    """(H, W): 1 on the pixels of the core grid's border cells (and any unread remainder)."""
    grid_h, grid_w = height // stride, width // stride
    rows = torch.arange(height) // stride
    cols = torch.arange(width) // stride
    border = ((rows == 0) | (rows >= grid_h - 1))[:, None] | ((cols == 0) | (cols >= grid_w - 1))
    return border.float()


def tap_validity(grid_h: int, grid_w: int) -> torch.Tensor:
    """(9, gh * gw): whether 3x3 tap ``(ky, kx)`` at output cell ``(y, x)`` reads a cell inside
    the grid (padding 1), i.e. ``0 <= y + ky - 1 < gh`` and ``0 <= x + kx - 1 < gw``."""
    ys, xs = torch.arange(grid_h), torch.arange(grid_w)
    taps = []
    for ky in range(3):
        for kx in range(3):
            y_in = ((ys + ky - 1) >= 0) & ((ys + ky - 1) < grid_h)
            x_in = ((xs + kx - 1) >= 0) & ((xs + kx - 1) < grid_w)
            taps.append((y_in[:, None] & x_in[None, :]).flatten())
    return torch.stack(taps).float()


def _no_section(name: str) -> AbstractContextManager[object]:
    return NULL_SECTION


def _traced_no_section(name: str) -> AbstractContextManager[object]:
    return nullcontext()  # the one context manager Dynamo enters without a graph break


class ConvLSTMActorCritic(ActorCritic):
    """Args: spec (image observations); ``channels`` (ch); ``layers`` (D); ``ticks`` (N);
    ``features``: width of the projection; ``sections``: time the stages (module docstring);
    ``channels_last``: run the convolutions in NHWC (slower here; module docstring); ``head``:
    ``"pool"`` or ``"flatten"`` (module docstring)."""

    recurrent = True
    # Constant maps (buffers registered in __init__; see the module docstring).
    fence: torch.Tensor
    taps: torch.Tensor

    def __init__(
        self,
        spec: EnvSpec,
        channels: int = 32,
        layers: int = 2,
        ticks: int = 1,
        features: int = 256,
        sections: bool = True,
        channels_last: bool = False,
        head: str = "pool",
    ) -> None:
        super().__init__(spec)
        for name, value in (("channels", channels), ("layers", layers), ("ticks", ticks)):
            if value < 1:
                raise ValueError(f"ConvLSTM {name} must be positive, got {value}")
        if head not in CONVLSTM_HEADS:
            raise ValueError(
                f"ConvLSTM head must be one of {', '.join(CONVLSTM_HEADS)}, got {head!r}"
            )
        self.head = head
        c_in, height, width = spec.obs_shape
        self.stride = encoder_stride(height, width)
        self.grid = (height // self.stride, width // self.stride)
        self.channels, self.layers, self.ticks = channels, layers, ticks
        self.sections, self.channels_last = sections, channels_last
        ch, d, gain = channels, layers, math.sqrt(2)
        self.embed = orthogonal_(nn.Conv2d(c_in + 1, ch, self.stride, self.stride), gain)
        self.conv = orthogonal_(nn.Conv2d(ch, ch, 3, padding=1), gain)
        # Layer l's gate weights, split by input (see the module docstring): the skip part of
        # every layer in one conv (rows l*4ch..(l+1)*4ch, with the gate biases), the [h_below,
        # h_l] part, the pooled part, and the pool projection.
        self.skip = nn.Conv2d(ch, d * 4 * ch, 3, padding=1)
        self.hidden_weight = nn.Parameter(torch.empty(d, 4 * ch, 2 * ch, 3, 3))
        self.inject_weight = nn.Parameter(torch.empty(d, 4 * ch, ch, 3, 3))
        self.pool_weight = nn.Parameter(torch.empty(d, ch, 2 * ch))
        with torch.no_grad():
            # LSTM init (as LSTMCore): orthogonal gate weights per layer and input, zero biases.
            nn.init.zeros_(cast(torch.Tensor, self.skip.bias))  # a Conv2d built with bias
            for layer in range(d):
                nn.init.orthogonal_(self.skip.weight[layer * 4 * ch : (layer + 1) * 4 * ch])
                nn.init.orthogonal_(self.hidden_weight[layer])
                nn.init.orthogonal_(self.inject_weight[layer])
                nn.init.orthogonal_(self.pool_weight[layer])
        head_width = 4 * ch if head == "pool" else ch * self.grid[0] * self.grid[1]
        self.proj = orthogonal_(nn.Linear(head_width, features), gain)
        self.out = ActorCriticHeads(features, spec)
        fence = fence_map(height, width, self.stride)
        self.register_buffer("fence", fence.view(1, 1, height, width), persistent=False)
        self.register_buffer("taps", tap_validity(*self.grid), persistent=False)

    # -- protocol ------------------------------------------------------------------------
    def logstd(self) -> torch.Tensor | None:
        return self.out.logstd

    def initial_state(self, num_envs: int) -> State:
        weight = self.skip.weight
        shape = (num_envs, self.channels, *self.grid)
        return tuple(weight.new_zeros(shape) for _ in range(2 * self.layers))

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        feats, state = self.features(obs.unsqueeze(0), state, _seq(done))
        out, value = self.out(feats)
        actions, logprob = distributions.sample(
            self.spec.action, out, action_mask, self.out.logstd, generator
        )
        return actions, logprob, value, state

    @torch.no_grad()
    def value(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> torch.Tensor:
        feats, _ = self.features(obs.unsqueeze(0), state, _seq(done))
        return self.out.value(feats)

    @torch.no_grad()
    def actor_output(
        self, obs: torch.Tensor, state: State, done: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        feats, state = self.features(obs.unsqueeze(0), state, _seq(done))
        return self.out(feats)[0], state

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t, b = obs_seq.shape[:2]
        feats, _ = self.features(obs_seq, state0, dones_seq)
        out, value = self.out(feats)
        mask = mask_seq.flatten(0, 1) if mask_seq is not None else None
        logprob, entropy = distributions.log_prob_entropy(
            self.spec.action, out, actions_seq.flatten(0, 1), mask, self.out.logstd
        )
        return logprob.view(t, b), entropy.view(t, b), value.view(t, b)

    # -- the network ---------------------------------------------------------------------
    def _section(self) -> Callable[[str], AbstractContextManager[object]]:
        if torch.compiler.is_compiling():
            return _traced_no_section
        if not self.sections:
            return _no_section
        return (self.profiler or get_profiler()).section

    def features(
        self, obs_seq: torch.Tensor, state: State, dones_seq: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        """Projected features (T * B, features) of ``obs_seq`` (T, B, C, H, W) from ``state``,
        the state zeroed before step t where ``dones_seq[t]`` (B,) is set; and the final state."""
        sec = self._section()
        t_len, b = obs_seq.shape[:2]
        d, four_ch = self.layers, 4 * self.channels
        with sec(names.CONVLSTM):
            with sec(names.CONVLSTM_BOUNDARY_PADDING):
                # The fence channel's share of the first conv (a constant map, see the module
                # docstring) and the image channels' weights with the 1/255 scaling folded in.
                weight = self.embed.weight
                c_img = weight.shape[1] - 1
                fence_term = F.conv2d(
                    self.fence, weight[:, c_img:], self.embed.bias, stride=self.stride
                )
                w_img = weight[:, :c_img]
                if obs_seq.dtype == torch.uint8:
                    w_img = w_img * (1.0 / 255.0)
            with sec(names.CONVLSTM_ENCODER):
                x = obs_seq.flatten(0, 1).to(_compute_dtype(weight))
                if self.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                x = F.conv2d(x, w_img, stride=self.stride).add_(fence_term).relu_()
                enc = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1).relu_()
            with sec(names.CONVLSTM_SKIP):
                skip = F.conv2d(enc, self.skip.weight, self.skip.bias, padding=1)
                # (T, B, D, 4 ch gh gw): a view, a copy in channels_last only.
                skip = skip.reshape(t_len, b, d, four_ch * self.grid[0] * self.grid[1])
            with sec(names.CONVLSTM_LAYERS):
                tops, state = self._unroll(skip, state, dones_seq, sec)
            if self.head == "pool":
                with sec(names.CONVLSTM_GLOBAL_POOL):
                    both = torch.cat((tops, enc), 1)
                    head_in = torch.cat((both.mean((2, 3)), both.amax((2, 3))), 1)
            else:
                with sec(names.CONVLSTM_FLATTEN):
                    head_in = (tops + enc).flatten(1)
            with sec(names.CONVLSTM_PROJECTION):
                feats = F.linear(head_in, self.proj.weight, self.proj.bias).relu_()
        return feats, state

    def inject_matrices(self) -> torch.Tensor:
        """(D, ch, 4 ch * gh * gw): layer l's 3x3 conv of a map constant over the grid, as a
        matrix: ``conv(p broadcast)[b].flatten() == p[b] @ K[l]`` (zero padding)."""
        d, four_ch, ch = self.inject_weight.shape[:3]
        w = self.inject_weight.view(d, four_ch, ch, 9).transpose(1, 2)  # (D, ch, 4ch, 9)
        return torch.matmul(w, self.taps).view(d, ch, -1)

    def _unroll(
        self,
        skip: torch.Tensor,
        state: State,
        dones: torch.Tensor | None,
        sec: Callable[[str], AbstractContextManager[object]],
    ) -> tuple[torch.Tensor, State]:
        """The layers over T steps: the top h of every step (T * B, ch, gh, gw), final state.

        ``skip`` (T, B, D, 4 ch gh gw): the encoded input's share of each layer's gates."""
        t_len, b = skip.shape[:2]
        ch = self.channels
        grid_shape = (b, 4 * ch, *self.grid)
        # Per-step and per-layer pieces made once with unbind: indexing (select) inside the loop
        # costs a zero-filled gradient of the whole tensor per use in backward.
        with sec(names.CONVLSTM_POOL_INJECT):
            kmats = self.inject_matrices().unbind(0)
            pool_ws = self.pool_weight.transpose(1, 2).unbind(0)
        hidden_ws = self.hidden_weight.unbind(0)
        hs, cs = list(state[0::2]), list(state[1::2])
        if self.channels_last:
            hs = [h.contiguous(memory_format=torch.channels_last) for h in hs]
            cs = [c.contiguous(memory_format=torch.channels_last) for c in cs]
        resets = _reset_steps(dones, t_len)
        # Without dones no step resets, so ``keep`` is never read and None stands in for it.
        keeps = (
            cast("list[torch.Tensor]", [None] * t_len)
            if dones is None
            else (1.0 - dones).view(t_len, b, 1, 1, 1).unbind(0)
        )
        tops = []
        for skip_t, keep, reset in zip(skip.unbind(0), keeps, resets, strict=True):
            if reset:
                hs = [h * keep for h in hs]
                cs = [c * keep for c in cs]
            skip_layers = skip_t.unbind(1)
            for _ in range(self.ticks):
                below = hs[-1]
                for layer in range(self.layers):
                    h, c = hs[layer], cs[layer]
                    with sec(names.CONVLSTM_POOL_INJECT):
                        pooled = torch.cat((h.mean((2, 3)), h.amax((2, 3))), 1)
                        p = torch.mm(pooled, pool_ws[layer])
                        pre = torch.addmm(skip_layers[layer], p, kmats[layer])
                    hb = torch.cat((below, h), 1)
                    gates = F.conv2d(hb, hidden_ws[layer], padding=1).add_(pre.view(grid_shape))
                    g = gates[:, 2 * ch : 3 * ch].tanh()
                    s_i, s_f, _, s_o = gates.sigmoid_().chunk(4, 1)
                    c = torch.addcmul(s_f * c, s_i, g)
                    h = torch.tanh(c) * s_o
                    hs[layer], cs[layer] = h, c
                    below = h
            tops.append(hs[-1])
        flat_state = tuple(x for pair in zip(hs, cs, strict=True) for x in pair)
        return torch.stack(tops).flatten(0, 1), flat_state


def _seq(done: torch.Tensor | None) -> torch.Tensor | None:
    return None if done is None else done.unsqueeze(0)


def _compute_dtype(weight: torch.Tensor) -> torch.dtype:
    """The dtype the first conv computes in: autocast's when it is on (one cast of the uint8
    frames, not two), else the weights'."""
    device = weight.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return weight.dtype


def _reset_steps(dones: torch.Tensor | None, t_len: int) -> list[bool]:
    """Per step, whether any state is reset. On the CPU reading the dones costs a few
    microseconds and saves 2 D multiplies on most steps; on CUDA it would be a sync (and under
    torch.compile a graph break), so assume every step resets."""
    if dones is None:
        return [False] * t_len
    if dones.device.type != "cpu" or torch.compiler.is_compiling():
        return [True] * t_len
    return (dones > 0).any(1).tolist()
