"""A recurrent actor-critic: encoder -> LSTM -> actor and critic heads (CleanRL ``ppo_atari_lstm``).

The encoder is an MLP for flat observations and a CNN for images (``policies/encoders.py``).
The LSTM is one layer with ``nn.LSTM``'s parameters and gate order (input, forget, cell, output),
with the two biases folded into one (``nn.LSTM``'s ``bias_ih + bias_hh``; the tests load one
into the other). Its state ``(h, c)``, each ``(B, H)``, is zeroed where an episode starts, before
the step that sees the episode's first observation.

Where the time goes, and why the unroll looks the way it does: at 16 environments a minibatch
of 32 steps is dominated by per-op overhead, not arithmetic, so the work is arranged to issue as
few operations per step as possible. The recurrence has three implementations, one math:

- **The compiled CPU path** (``policies/lstm_cpu.py`` through ``rlperf/native/``), float32 on
  the CPU with the kernel built: all T steps in one C call, forward and backward
  (:class:`~rlperf.policies.lstm_cpu.CompiledRecurrence`, an autograd node for
  :meth:`LSTMActorCritic.evaluate`). With a flat observation and one categorical action the
  whole network (encoder, projection, recurrence, heads) is one C call per minibatch forward,
  one backward (the analytic path of ``policies/base.py``: :meth:`LSTMActorCritic.forward_train`
  / ``backward``), and one per rollout step with its sample: the ~35 small torch ops left
  around the recurrence were each a dispatch and a two-thread fork/join
  (``docs/performance.md``); with it position-only CartPole's LSTM PPO went from ~21,000 to
  ~57,000 SPS.
- **The torch path** elsewhere (CUDA, bf16/fp16 autocast, float64, an install without a C
  compiler): :class:`TorchRecurrence`, one autograd node with a hand-written backward through
  time: about 10 ops a step instead of autograd's ~2 nodes per forward op with their
  bookkeeping, the gate derivatives computed once for the whole sequence, and ``dW_hh`` as one
  matmul over all steps after the loop (position-only CartPole, 64x32, 16-env minibatches: the
  update went from ~13 ms to ~4 ms per minibatch, ``docs/performance.md``). Over a ``(T, B)``
  sequence the input projection ``x @ W_ih^T + b`` of every step is one matmul over ``T * B``
  rows; only ``h @ W_hh^T`` and the gate arithmetic run step by step.
- **The reference**, :meth:`LSTMCore.unroll_reference`: plain autograd step by step, what the
  tests check both against.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn

from rlperf import native
from rlperf.envs.spec import EnvSpec
from rlperf.native import CompiledNet, CompiledStep, NetForward, NetWeights
from rlperf.policies import distributions, lstm_cpu
from rlperf.policies.base import ActorCritic, ActorCriticHeads, State
from rlperf.policies.encoders import MLPEncoder, make_encoder
from rlperf.policies.lstm_cpu import CompiledRecurrence


class TorchRecurrence(torch.autograd.Function):
    """The LSTM recurrence over T steps as one autograd node (see the module docstring).

    Inputs: ``xproj`` (T, B, 4H) input part of the gates; ``keep`` (T, B, 1): 0 where the state
    is reset before step t; ``h0``, ``c0`` (B, H); ``w_hh`` (4H, H). Output: h (T, B, H).
    Gate order i, f, g, o, as ``nn.LSTM``.

    Per step the forward issues 7 ops and the backward 5 (plus 2 and 2 on the rare steps where
    some state is reset): everything that does not depend on the running gradient (each gate's
    derivative times what it multiplies) is computed for all T steps at once before the loop,
    ``dh`` is accumulated into the next step's incoming gradient by the same ``addmm`` that
    backpropagates through ``W_hh``, and the states before resets are rebuilt from the outputs
    instead of being stored step by step.
    """

    @staticmethod
    def forward(
        ctx: Any,
        xproj: torch.Tensor,
        keep: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        w_hh: torch.Tensor,
    ) -> torch.Tensor:
        t_len, b, four_h = xproj.shape
        hid = four_h // 4
        g_block = slice(2 * hid, 3 * hid)
        resets = _reset_steps(keep)
        # tanh(z) = 2 sigmoid(2 z) - 1: with the g block of the inputs and of W_hh doubled, one
        # sigmoid over all four gates serves the cell gate too. (tanh on the g block, a strided
        # view, takes ~25 us at 16 x 128 on this CPU against ~3 us for the affine fix-up.)
        # The input part of every step's gates goes into the gate buffer in one copy; each step
        # then adds h @ W_hh^T in place (an out= addmm would copy its input first, every step).
        acts = xproj.detach().clone()  # after each step: sigmoid of every gate (g: of 2 z_g)
        acts[:, :, g_block] *= 2.0
        w2 = w_hh.clone()
        w2[g_block] *= 2.0
        w_t = w2.T
        gs = xproj.new_empty(t_len, b, hid)  # tanh(z_g)
        cs, tc, hs = torch.empty_like(gs), torch.empty_like(gs), torch.empty_like(gs)
        neg_one = xproj.new_tensor(-1.0)
        h, c = h0, c0
        # Per-step views made once (unbind): a slice inside the loop costs 1.5-3.5 us each.
        steps = zip(
            keep.unbind(0), acts.unbind(0), acts[:, :, :hid].unbind(0),
            acts[:, :, hid : 2 * hid].unbind(0), acts[:, :, g_block].unbind(0),
            acts[:, :, 3 * hid :].unbind(0), gs.unbind(0), cs.unbind(0), tc.unbind(0),
            hs.unbind(0), resets, strict=True,
        )  # fmt: skip
        for k_t, a, i_t, f_t, sg_t, o_t, g_t, c_t, tc_t, hs_t, reset in steps:
            if reset:
                h, c = h * k_t, c * k_t
            a.addmm_(h, w_t).sigmoid_()
            torch.add(neg_one, sg_t, alpha=2.0, out=g_t)
            c = torch.addcmul(f_t * c, i_t, g_t, out=c_t)
            torch.tanh(c, out=tc_t)
            h = torch.mul(o_t, tc_t, out=hs_t)
        ctx.resets = resets
        ctx.save_for_backward(acts, gs, cs, tc, hs, keep, h0, c0, w_hh)
        return hs

    @staticmethod
    def backward(ctx: Any, grad_hs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        acts, gs, cs, tc, hs, keep, h0, c0, w_hh = ctx.saved_tensors
        resets = ctx.resets
        t_len, b, four_h = acts.shape
        hid = four_h // 4
        i, f, o = acts[:, :, :hid], acts[:, :, hid : 2 * hid], acts[:, :, 3 * hid :]
        # The state each step started from, after its reset.
        hr = torch.cat((h0.unsqueeze(0), hs[:-1])).mul_(keep)
        cr = torch.cat((c0.unsqueeze(0), cs[:-1])).mul_(keep)
        # d z / d(running gradient) for all steps at once: dz_i = dc g i(1-i),
        # dz_f = dc c_{t-1} f(1-f), dz_g = dc i (1-g^2), dz_o = dh tanh(c) o(1-o).
        mult = acts.new_empty(t_len, b, 4, hid)
        torch.mul(gs, i * (1.0 - i), out=mult[:, :, 0])
        torch.mul(cr, f * (1.0 - f), out=mult[:, :, 1])
        torch.mul(i, 1.0 - gs.square(), out=mult[:, :, 2])
        torch.mul(tc, o * (1.0 - o), out=mult[:, :, 3])
        o_dtanh = o * (1.0 - tc.square())  # dc_t += dh_t * o (1 - tanh(c)^2)
        f_keep = f * keep  # dc_{t-1} = dc_t * f_t * keep_t
        grad_z = torch.empty_like(acts)
        gz4 = grad_z.view(t_len, b, 4, hid)
        # Incoming gradient of every step's h; each step adds what flows back from the next one
        # into it in place (addmm_), so no copy is made per step.
        grad_h = grad_hs.clone(memory_format=torch.contiguous_format)
        steps = list(zip(
            grad_h.unbind(0), o_dtanh.unbind(0), mult[:, :, :3].unbind(0),
            mult[:, :, 3].unbind(0), gz4[:, :, :3].unbind(0), gz4[:, :, 3].unbind(0),
            grad_z.unbind(0), keep.unbind(0), f_keep.unbind(0), resets, strict=True,
        ))  # fmt: skip
        dc = torch.zeros_like(grad_h[0])
        for t in range(t_len - 1, -1, -1):
            dh, odt_t, m3_t, mo_t, gz3_t, gzo_t, gz_t, k_t, fk_t, reset = steps[t]
            dc = torch.addcmul(dc, dh, odt_t)
            torch.mul(dc.unsqueeze(1), m3_t, out=gz3_t)
            torch.mul(dh, mo_t, out=gzo_t)
            # d h_{t-1} += keep_t * (dz_t @ W_hh); keep is per row, so it can scale dz_t's rows.
            gz_kept = gz_t * k_t if reset or t == 0 else gz_t
            if t == 0:
                dh0 = torch.mm(gz_kept, w_hh)
            else:
                steps[t - 1][0].addmm_(gz_kept, w_hh)
            dc = dc.mul_(fk_t)
        grad_w_hh = torch.mm(grad_z.view(-1, four_h).T, hr.view(-1, hid))
        return grad_z, None, dh0, dc, grad_w_hh


def keep_mask(dones: torch.Tensor | None, xproj: torch.Tensor) -> torch.Tensor:
    """(T, B) in ``xproj``'s dtype: 0 where ``dones`` (T, B) zeroes the state before step t,
    else 1 (all ones without ``dones``); ``xproj`` is the (T, B, 4H) input projection."""
    if dones is None:
        return xproj.new_ones(xproj.shape[:2])
    return 1.0 - dones.to(xproj.dtype)


def _reset_steps(keep: torch.Tensor) -> list[bool]:
    """Per step, whether any state is reset. On the CPU reading it costs a few microseconds and
    saves the two reset multiplies on most steps; on CUDA it would be a sync, so assume all."""
    if keep.device.type != "cpu":
        return [True] * keep.shape[0]
    return (keep[:, :, 0] < 1.0).any(1).tolist()


class LSTMCore(nn.Module):
    """One LSTM layer stepped with resets. Parameters: ``weight_ih`` (4H, in),
    ``weight_hh`` (4H, H), ``bias`` (4H,)."""

    def __init__(self, in_features: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden, in_features))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden, hidden))
        self.bias = nn.Parameter(torch.zeros(4 * hidden))
        # CleanRL's LSTM init: orthogonal weights (gain 1), zero biases.
        nn.init.orthogonal_(self.weight_ih, 1.0)
        nn.init.orthogonal_(self.weight_hh, 1.0)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Input part of the gates for every row of ``x`` (N, in): (N, 4H)."""
        return torch.addmm(self.bias, x, self.weight_ih.T)

    def unroll(self, x: torch.Tensor, state: State, dones: torch.Tensor | None) -> torch.Tensor:
        """Hidden outputs (T, B, H) for inputs (T, B, in) from ``state`` = (h0, c0), each (B, H).

        ``dones[t]`` (B,) zeroes the state before step t where set. Differentiable with respect to
        ``x``, the parameters and the initial state (one :class:`CompiledRecurrence` node on the
        CPU in float32 with the kernel built, else one :class:`TorchRecurrence` node).
        """
        t_len, b = x.shape[:2]
        xproj = self.project(x.flatten(0, 1)).view(t_len, b, -1)
        keep = keep_mask(dones, xproj)
        h0, c0 = state
        dtype = xproj.dtype  # bf16 / fp16 under autocast: the whole recurrence runs in it
        h0, c0, w_hh = h0.to(dtype), c0.to(dtype), self.weight_hh.to(dtype)
        if lstm_cpu.usable(w_hh, xproj, h0, c0):
            return CompiledRecurrence.apply(xproj, keep, h0, c0, w_hh)
        return TorchRecurrence.apply(xproj, keep.unsqueeze(-1), h0, c0, w_hh)

    def unroll_reference(
        self, x: torch.Tensor, state: State, dones: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        """:meth:`unroll` step by step under plain autograd, the obviously-right version the
        tests check the others against; also returns the final state."""
        t_len, b = x.shape[:2]
        hid = self.hidden
        xproj = self.project(x.flatten(0, 1)).view(t_len, b, -1)
        keep = None if dones is None else (1.0 - dones).unsqueeze(-1)
        h, c = state
        outs = []
        for t in range(t_len):
            if keep is not None:
                h, c = h * keep[t], c * keep[t]
            gates = torch.addmm(xproj[t], h, self.weight_hh.T)
            i, f = gates[:, :hid].sigmoid(), gates[:, hid : 2 * hid].sigmoid()
            g, o = gates[:, 2 * hid : 3 * hid].tanh(), gates[:, 3 * hid :].sigmoid()
            c = f * c + i * g
            h = o * c.tanh()
            outs.append(h)
        return torch.stack(outs), (h, c)


class LSTMActorCritic(ActorCritic):
    """Args: spec; encoder widths (flat obs); LSTM size; CNN settings (image obs).

    Two ways to get gradients, the same math: :meth:`evaluate` under autograd (any observation
    and action space, autocast, ``--compile``), and the analytic path of ``policies/base.py``
    (:class:`~rlperf.policies.base.AnalyticPolicy`) for flat observations and one unmasked
    categorical action on the CPU in float32 with the compiled kernel built (:attr:`analytic`):
    :meth:`forward_train`, the loss's closed-form gradient with respect to the heads' outputs,
    and :meth:`backward` through heads, recurrence and encoder, each one call of the compiled
    network. At 16 environments x 32 steps autograd's graph around the recurrence (encoder,
    heads, distribution, loss: ~100 small nodes) cost more than the recurrence itself. Under
    the same conditions :meth:`act` and :meth:`value` are one call of the compiled network
    (the sample included); otherwise they are torch ops.
    """

    recurrent = True

    def __init__(
        self,
        spec: EnvSpec,
        hidden_sizes: tuple[int, ...] = (64,),
        lstm_hidden_size: int = 128,
        cnn_channels: tuple[int, ...] = (32, 64, 64),
        cnn_features: int = 256,
    ) -> None:
        super().__init__(spec)
        self.encoder = make_encoder(spec, hidden_sizes, cnn_channels, cnn_features)
        self.lstm = LSTMCore(self.encoder.features, lstm_hidden_size)
        self.out = ActorCriticHeads(lstm_hidden_size, spec)
        self._widths = [math.prod(spec.obs_shape), *hidden_sizes]  # the MLP encoder's
        self._steps: dict[tuple[int, int], CompiledStep] | None = None  # inside acting()
        self._nets: dict[tuple[int, int, int], CompiledNet] = {}  # by (T, B, obs_dim)

    @property
    def analytic(self) -> bool:
        w = self.lstm.weight_hh
        return (
            self.spec.action.kind == "discrete"
            and not self.spec.has_mask
            and isinstance(self.encoder, MLPEncoder)
            and lstm_cpu.usable(w)
            and lstm_cpu.network_fits(self._widths, self.lstm.hidden)
        )

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Lay out the compiled rollout step's weights once for a stretch of :meth:`act` and
        :meth:`value` calls with unchanged parameters (the trainer's rollout and its GAE's last
        value: making the step is ~0.25 ms at 4 envs); a stretch inside another is the outer
        one."""
        if self._steps is not None:
            yield
            return
        self._steps = {}
        try:
            yield
        finally:
            self._steps = None

    def compiled_step(self, batch: int, obs_dim: int) -> CompiledStep:
        """The compiled rollout step for this batch (the current weights; requires
        :attr:`analytic`): made once per :meth:`acting` stretch, else per call."""
        step = None if self._steps is None else self._steps.get((batch, obs_dim))
        if step is None:
            step = CompiledStep(batch, obs_dim, self._net_weights())
            if self._steps is not None:
                self._steps[(batch, obs_dim)] = step
        return step

    def logstd(self) -> torch.Tensor | None:
        return self.out.logstd

    def initial_state(self, num_envs: int) -> State:
        device = self.lstm.weight_hh.device
        h = torch.zeros(num_envs, self.lstm.hidden, device=device)
        return (h, torch.zeros_like(h))

    def _compiled_act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        generator: torch.Generator | None,
        sample: bool,
    ) -> tuple[torch.Tensor, State, torch.Tensor | None, torch.Tensor | None]:
        """One step of the whole network in one call of the compiled step (the encoder, cell
        and heads as torch ops cost ~150 us a step at 64 envs, mostly dispatch). Returns the
        heads' outputs (B, K + 1), the next state, and with ``sample`` actions and their
        log-probabilities."""
        h, c = state
        keep = h.new_ones(h.shape[0]) if done is None else 1.0 - done
        noise = None
        if sample:
            k = self.out.num_outputs
            noise = h.new_empty(h.shape[0], k).exponential_(generator=generator)
        obs = obs.to(h.dtype).flatten(1)
        step = self.compiled_step(obs.shape[0], obs.shape[1])
        h, c, out, actions, logprob = step(obs, keep, h, c, noise)
        return out, (h, c), actions, logprob

    def _torch_step(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> State:
        """One step as torch ops, without autograd (called under ``act``'s and ``value``'s
        ``no_grad``): the encoder as a few ops written out (module calls cost more than the
        64-wide matmuls here), then the projection and the cell."""
        lstm, hid = self.lstm, self.lstm.hidden
        h, c = state
        x = self.encoder.infer(obs)
        gates = torch.addmm(lstm.bias, x, lstm.weight_ih.T)
        if done is not None:
            keep = (1.0 - done).unsqueeze(-1)
            h, c = h * keep, c * keep
        gates.addmm_(h, lstm.weight_hh.T)
        g = gates[:, 2 * hid : 3 * hid].contiguous().tanh_()
        s = gates.sigmoid_()
        c = torch.addcmul(s[:, hid : 2 * hid] * c, s[:, :hid], g)
        h = c.tanh().mul_(s[:, 3 * hid :])
        return h, c

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        k = self.out.num_outputs
        if self.analytic and action_mask is None:
            out, state, actions, logprob = self._compiled_act(obs, state, done, generator, True)
            return cast(torch.Tensor, actions), cast(torch.Tensor, logprob), out[:, k], state
        h, c = self._torch_step(obs, state, done)
        out = torch.addmm(self.out.linear.bias, h, self.out.linear.weight.T)
        actions, logprob = distributions.sample(
            self.spec.action, out[:, :k], action_mask, self.out.logstd, generator
        )
        return actions, logprob, out[:, k], (h, c)

    @torch.no_grad()
    def actor_output(
        self, obs: torch.Tensor, state: State, done: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        k = self.out.num_outputs
        if self.analytic:  # act's own arithmetic, as value's: the same states step by step
            out, state, _, _ = self._compiled_act(obs, state, done, None, False)
            return out[:, :k], state
        h, c = self._torch_step(obs, state, done)
        out = torch.addmm(self.out.linear.bias, h, self.out.linear.weight.T)
        return out[:, :k], (h, c)

    @torch.no_grad()
    def value(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> torch.Tensor:
        if self.analytic:  # the rollout's own arithmetic, so bootstrap values match act's
            out, _, _, _ = self._compiled_act(obs, state, done, None, False)
            return out[:, self.out.num_outputs]
        h, _ = self._torch_step(obs, state, done)
        return self.out.value(h)

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t, b = obs_seq.shape[:2]
        x = self.encoder(obs_seq.flatten(0, 1)).view(t, b, -1)
        hs = self.lstm.unroll(x, state0, dones_seq)
        out, value = self.out(hs.flatten(0, 1))
        mask = mask_seq.flatten(0, 1) if mask_seq is not None else None
        logprob, entropy = distributions.log_prob_entropy(
            self.spec.action, out, actions_seq.flatten(0, 1), mask, self.out.logstd
        )
        return logprob.view(t, b), entropy.view(t, b), value.view(t, b)

    # -- the analytic path (AnalyticPolicy, policies/base.py) ---------------------------------
    def _net_weights(self) -> NetWeights:
        """The parameters as the compiled network reads them."""
        lstm, heads = self.lstm, self.out.linear
        return NetWeights(
            # The compiled network exists for the MLP encoder only (see ``analytic``).
            [(linear.weight, linear.bias) for linear in cast(MLPEncoder, self.encoder).linears],
            lstm.weight_ih, lstm.weight_hh, lstm.bias, heads.weight, heads.bias,
        )  # fmt: skip

    def _grads(self) -> list[torch.Tensor] | None:
        """The parameters' gradients in :class:`~rlperf.native.CompiledNet`'s order, or None
        while any is missing."""
        grads = []
        for _, t in self._net_weights().named():
            if t.grad is None:
                return None
            grads.append(t.grad)
        return grads

    def _bind_net(self, key: tuple[int, int, int]) -> CompiledNet:
        net = self._nets[key] = CompiledNet(*key, self._net_weights(), self._grads())
        return net

    @torch.no_grad()
    def forward_train(
        self, obs_seq: torch.Tensor, state0: State, dones_seq: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, NetForward]:
        """Logits (N, K) and values (N,) of ``(T, B, obs_dim)`` sequences, ``N = T * B``, and
        the activations :meth:`backward` needs (views of the compiled network's buffers: valid
        until the next ``forward_train`` of the same shape). Same arguments as
        :meth:`evaluate`. One call of the compiled network (``native.CompiledNet``), bound to
        the parameters' and gradients' storage and made again when that moved
        (``flatten_parameters`` moves both; a deep copy has its own)."""
        t_len, b = obs_seq.shape[:2]
        obs = obs_seq.to(self.lstm.weight_ih.dtype)
        key = (t_len, b, obs[0, 0].numel())
        net = self._nets.get(key)
        if net is None or (not net.has_grads and self._grads() is not None):
            net = self._bind_net(key)
        h0, c0 = state0
        keep = keep_mask(dones_seq, obs)
        try:
            fw = net.forward(obs, keep, h0, c0)
        except native.StorageMoved:
            fw = self._bind_net(key).forward(obs, keep, h0, c0)
        k = self.out.num_outputs
        return fw.out[:, :k], fw.out[:, k], fw

    @staticmethod
    def output_grad_views(cache: NetForward) -> tuple[torch.Tensor, torch.Tensor]:
        """Where :meth:`backward` reads d loss / d logits (N, K) and d loss / d value (N,): a
        loss that writes there saves a concatenation."""
        k = cache.grad_out.shape[1] - 1
        return cache.grad_out[:, :k], cache.grad_out[:, k]

    @torch.no_grad()
    def backward(self, cache: NetForward, max_grad_norm: float = 0.0) -> None:
        """Write d loss / d parameters into every parameter's ``.grad`` (overwritten, not
        accumulated) from the output gradients in :meth:`output_grad_views`, and with
        ``max_grad_norm > 0`` clip them together to that norm: one call of the compiled
        network's backward, clipping included (a separate norm, clamp and scale over the flat
        gradient were ~50 us of torch ops per minibatch here)."""
        net = cache.net
        if net.has_grads:
            net.backward(cache, max_grad_norm)
            return
        grads = self._grads()
        if grads is None:
            for _, t in self._net_weights().named():
                if t.grad is None:
                    t.grad = torch.zeros_like(t)
            grads = self._grads()
        net.backward(cache, max_grad_norm, grads)
