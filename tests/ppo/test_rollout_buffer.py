"""RolloutBuffer and its samplers: what goes in per step comes out once per epoch, aligned.

Every stored quantity of step t of env i is a distinct function of ``key(t, i)``, so a minibatch
row (or segment) can be traced back to where it came from and every field checked against it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.samplers import PackedTableSampler, RowSampler, SegmentSampler

T, N, OBS_DIM = 6, 4, 3
DISCRETE = ActionSpec("discrete", (3,), 1)
BOX = ActionSpec("box", (), 2, (-1.0, -1.0), (1.0, 1.0))


def key(t: int, i: int) -> float:
    """A unique, exactly representable tag for step t of env i."""
    return float(t * N + i)


def flat_spec(action: ActionSpec = DISCRETE, has_mask: bool = False) -> EnvSpec:
    return EnvSpec(N, (OBS_DIM,), np.dtype(np.float32), action, has_mask)


def fill(buf: RolloutBuffer) -> None:
    """Every stored quantity of (t, i) is a distinct function of key(t, i)."""
    spec = buf.spec
    for t in range(T):
        keys = np.array([key(t, i) for i in range(N)])
        if spec.flat_obs:
            obs = np.stack([keys, -keys, keys + 0.5], axis=1).astype(np.float32)
        else:  # uint8 images: every pixel of (t, i) is key(t, i)
            obs = np.broadcast_to(keys.reshape(N, 1, 1, 1), (N, *spec.obs_shape)).astype(np.uint8)
        slot = buf.write_obs(t, obs)
        assert torch.equal(slot, torch.from_numpy(obs))
        if spec.action.kind == "discrete":
            actions = torch.tensor([(t + i) % 3 for i in range(N)], dtype=torch.int64)
        else:
            actions = torch.tensor(np.stack([keys * 2, keys * 3], 1), dtype=torch.float32)
        buf.store_step(
            t,
            actions,
            torch.tensor(keys / 1000, dtype=torch.float32),
            torch.tensor(keys + 100, dtype=torch.float32),
            (keys + 200).astype(np.float32),
            (keys % 5 == 0),
            (keys % 7 == 0),
        )
        if buf.masks is not None:
            buf.write_mask(t, np.stack([keys % 2 == 0, keys % 3 == 0, keys >= 0], 1))
        if buf.recurrent:
            buf.write_done(t, keys % 5 == 0)
            buf.store_state(t, (torch.tensor(keys).view(N, 1).float().expand(N, 2),))
        buf.advantages[t] = torch.tensor(keys + 300)
    buf.write_obs(T, np.full((N, *spec.obs_shape), 7, dtype=spec.obs_dtype))


def make(spec: EnvSpec, recurrent: bool = False, horizon: int = 0) -> RolloutBuffer:
    template = (torch.zeros(N, 2),) if recurrent else ()
    buf = RolloutBuffer(T, N, spec, torch.device("cpu"), template, horizon)
    fill(buf)
    return buf


@pytest.mark.parametrize("action", [DISCRETE, BOX], ids=["discrete", "continuous"])
def test_store_and_finish_keep_per_step_data(action: ActionSpec) -> None:
    buf = make(flat_spec(action))
    rewards, terms, truncs = buf.finish()
    for t in range(T):
        keys = torch.tensor([key(t, i) for i in range(N)])
        assert torch.equal(rewards[t], keys + 200)
        assert torch.equal(terms[t], (keys % 5 == 0).float())
        assert torch.equal(truncs[t], (keys % 7 == 0).float())
        assert torch.equal(buf.obs[t, :, 0], keys)
        assert torch.equal(buf.values[t], keys + 100)
    assert torch.equal(buf.next_obs, torch.full((N, OBS_DIM), 7.0))
    assert buf.obs_slot(T) is buf.next_obs


def rows_of(mb) -> torch.Tensor:
    """The key of every row of a T = 1 minibatch."""
    assert mb.obs.shape[0] == 1
    obs = mb.obs[0]
    return obs[:, 0].float() if obs.dim() == 2 else obs[:, 0, 0, 0].float()


def check_rows(mb, spec: EnvSpec) -> torch.Tensor:
    k = rows_of(mb)
    t, i = (k // N).long(), (k % N).long()
    if spec.flat_obs:
        assert torch.equal(mb.obs[0, :, 1], -k) and torch.equal(mb.obs[0, :, 2], k + 0.5)
    if spec.action.kind == "discrete":
        assert mb.actions.dtype == torch.int64 and mb.actions.shape == (1, len(k))
        assert torch.equal(mb.actions[0], (t + i) % 3)
    else:
        assert mb.actions.shape == (1, len(k), 2)
        assert torch.equal(mb.actions[0], torch.stack([k * 2, k * 3], 1))
    torch.testing.assert_close(mb.logprobs[0], k / 1000)
    assert torch.equal(mb.values[0], k + 100)
    assert torch.equal(mb.advantages[0], k + 300)
    assert torch.equal(mb.returns[0], 2 * k + 400), "returns = advantages + values"
    if spec.has_mask:
        expected = torch.stack([k % 2 == 0, k % 3 == 0, k >= 0], 1)
        assert mb.masks.dtype == torch.bool and torch.equal(mb.masks[0], expected)
    return k


SAMPLERS = [
    (PackedTableSampler, flat_spec(DISCRETE)),
    (PackedTableSampler, flat_spec(BOX)),
    (RowSampler, flat_spec(DISCRETE)),
    (RowSampler, flat_spec(DISCRETE, has_mask=True)),
    (RowSampler, EnvSpec(N, (2, 3, 3), np.dtype(np.uint8), DISCRETE)),
]
SAMPLER_IDS = ["table-discrete", "table-box", "rows", "rows-mask", "rows-uint8"]


@pytest.mark.parametrize("num_minibatches", [1, 2, 3, 4, 24])
@pytest.mark.parametrize("sampler_cls, spec", SAMPLERS, ids=SAMPLER_IDS)
def test_every_sample_once_per_epoch_with_fields_aligned(
    sampler_cls, spec, num_minibatches
) -> None:
    buf = make(spec)
    sampler = sampler_cls(buf)
    sampler.prepare()
    gen = torch.Generator().manual_seed(0)
    orders = []
    for epoch in range(3):
        minibatches = sampler.epoch(num_minibatches, gen)
        assert len(minibatches) == num_minibatches
        seen = []
        for mb in minibatches:
            assert mb.obs.shape[1] == T * N // num_minibatches
            assert mb.obs.dtype == buf.obs.dtype, "observations keep their stored dtype"
            seen += check_rows(mb, spec).long().tolist()
        assert sorted(seen) == list(range(T * N)), f"epoch {epoch}: each sample exactly once"
        orders.append(seen)
    assert orders[0] != orders[1] != orders[2], "each epoch is a new permutation"

    replay = sampler_cls(make(spec))
    replay.prepare()
    again = [k for mb in replay.epoch(num_minibatches, torch.Generator().manual_seed(0))
             for k in rows_of(mb).long().tolist()]  # fmt: skip
    assert again == orders[0], "the same generator seed gives the same order"


def test_uint8_images_stay_uint8_in_the_buffer() -> None:
    spec = EnvSpec(N, (3, 8, 8), np.dtype(np.uint8), DISCRETE)
    buf = make(spec)
    assert buf.obs.dtype == torch.uint8 and buf.obs.shape == (T, N, 3, 8, 8)
    assert buf.next_obs.dtype == torch.uint8
    assert int(buf.obs[T - 1, N - 1, 2, 7, 7]) == key(T - 1, N - 1)


def test_rows_at_their_own_steps_are_writes_and_reads_of_those_slots() -> None:
    """The async collector's row access (numpy on the CPU) against torch's own indexing: a
    write lands where ``obs_slots[slots, rows]`` is, a read returns what it holds, a copy."""
    spec = EnvSpec(N, (3, 8, 8), np.dtype(np.uint8), DISCRETE)
    buf = make(spec)
    steps, rows = np.array([T, 0, 3, 3]), np.array([1, 2, 0, 3])
    frames = np.random.default_rng(0).integers(0, 256, (4, 3, 8, 8), dtype=np.uint8)
    buf.write_rows(torch.from_numpy(steps), torch.from_numpy(rows), frames)
    reference = buf.obs_slots[torch.from_numpy(steps), torch.from_numpy(rows)]
    np.testing.assert_array_equal(reference.numpy(), frames)
    got = buf.obs_rows(steps, rows)
    assert torch.equal(got, reference)
    got.zero_()
    assert torch.equal(buf.obs_rows(steps, rows), reference)


@pytest.mark.parametrize("horizon", [0, 1, 2, 3, 6])
@pytest.mark.parametrize("num_minibatches", [1, 2, 4])
def test_segments_are_whole_env_slices_with_their_recorded_start_state(
    horizon: int, num_minibatches: int
) -> None:
    spec = flat_spec(DISCRETE, has_mask=True)
    buf = make(spec, recurrent=True, horizon=horizon)
    sampler = SegmentSampler(buf)
    sampler.prepare()
    h = horizon or T
    seen = []
    for mb in sampler.epoch(num_minibatches, torch.Generator().manual_seed(3)):
        segments = N * (T // h) // num_minibatches
        assert mb.obs.shape == (h, segments, OBS_DIM)
        for s in range(segments):
            k = mb.obs[:, s, 0]
            t0, env = int(k[0]) // N, int(k[0]) % N
            assert t0 % h == 0, "segments start at multiples of the horizon"
            assert torch.equal(k, torch.tensor([key(t0 + j, env) for j in range(h)]))
            assert torch.equal(mb.dones[:, s], (k % 5 == 0).float())
            assert torch.equal(mb.actions[:, s], (torch.arange(t0, t0 + h) + env) % 3)
            assert torch.equal(mb.returns[:, s], 2 * k + 400)
            assert torch.equal(mb.masks[:, s, 1], k % 3 == 0)
            # store_state recorded key(t, i) at the segment's first step.
            assert torch.equal(mb.state0[0][s], torch.full((2,), key(t0, env)))
            seen += k.long().tolist()
    assert sorted(seen) == list(range(T * N))


def test_start_rollout_carries_the_last_slot_to_step_0() -> None:
    buf = make(flat_spec(DISCRETE, has_mask=True), recurrent=True)
    buf.write_done(T, np.ones(N))
    buf.write_mask(T, np.zeros((N, 3), dtype=bool))
    buf.start_rollout()
    assert torch.equal(buf.obs[0], buf.next_obs)
    assert torch.equal(buf.dones[0], torch.ones(N))
    assert not buf.masks[0].any()


def test_a_second_rollout_overwrites_the_first() -> None:
    buf = make(flat_spec())
    sampler = PackedTableSampler(buf)
    sampler.prepare()
    for t in range(T):
        buf.write_obs(t, np.zeros((N, OBS_DIM), dtype=np.float32))
        buf.advantages[t] = 0.0
        buf.values[t] = 0.0
    sampler.prepare()
    (mb,) = sampler.epoch(1, torch.Generator().manual_seed(1))
    assert torch.all(mb.obs == 0) and torch.all(mb.advantages == 0) and torch.all(mb.returns == 0)
