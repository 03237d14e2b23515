"""RolloutBuffer round trip: what goes in per step comes out once per epoch, columns aligned."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf.ppo.rollout import RolloutBuffer

T, N, OBS_DIM = 6, 4, 3


def key(t: int, i: int) -> float:
    """A unique, exactly representable tag for step t of env i."""
    return float(t * N + i)


def fill(buf: RolloutBuffer) -> None:
    """Every stored quantity of (t, i) is a distinct function of key(t, i)."""
    action_dim = buf.action_dim
    for t in range(T):
        keys = np.array([key(t, i) for i in range(N)])
        obs = np.stack([keys, -keys, keys + 0.5], axis=1).astype(np.float32)
        slot = buf.write_obs(t, obs)
        assert torch.equal(slot, torch.from_numpy(obs))
        if action_dim == 0:
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
        buf.advantages[t] = torch.tensor(keys + 300)
    buf.write_obs(T, np.full((N, OBS_DIM), -7.0, dtype=np.float32))


def make(action_dim: int) -> RolloutBuffer:
    buf = RolloutBuffer(T, N, OBS_DIM, action_dim, torch.device("cpu"))
    fill(buf)
    return buf


@pytest.mark.parametrize("action_dim", [0, 2], ids=["discrete", "continuous"])
def test_store_and_finish_keep_per_step_data(action_dim: int) -> None:
    buf = make(action_dim)
    rewards, terms, truncs = buf.finish()
    for t in range(T):
        keys = torch.tensor([key(t, i) for i in range(N)])
        assert torch.equal(rewards[t], keys + 200)
        assert torch.equal(terms[t], (keys % 5 == 0).float())
        assert torch.equal(truncs[t], (keys % 7 == 0).float())
        assert torch.equal(buf.obs[t, :, 0], keys)
        assert torch.equal(buf.values[t], keys + 100)
    assert torch.equal(buf.next_obs, torch.full((N, OBS_DIM), -7.0))
    assert buf.obs_slot(T) is buf.next_obs


@pytest.mark.parametrize("num_minibatches", [1, 2, 3, 4, 24])
@pytest.mark.parametrize("action_dim", [0, 2], ids=["discrete", "continuous"])
def test_every_sample_once_per_epoch_with_columns_aligned(
    action_dim: int, num_minibatches: int
) -> None:
    buf = make(action_dim)
    buf.build_table(buf.advantages + 1000.0)
    gen = torch.Generator().manual_seed(0)
    orders = []
    for epoch in range(3):
        buf.shuffle(gen)
        seen = []
        minibatches = list(buf.minibatches(num_minibatches))
        assert len(minibatches) == num_minibatches
        for mb in minibatches:
            assert len(mb.obs) == T * N // num_minibatches
            k = mb.obs[:, 0]
            t, i = (k // N).long(), (k % N).long()
            assert torch.equal(mb.obs[:, 1], -k) and torch.equal(mb.obs[:, 2], k + 0.5)
            if action_dim == 0:
                assert mb.actions.dtype == torch.int64 and mb.actions.shape == (len(k),)
                assert torch.equal(mb.actions, (t + i) % 3)
            else:
                assert mb.actions.shape == (len(k), 2)
                assert torch.equal(mb.actions, torch.stack([k * 2, k * 3], 1))
            torch.testing.assert_close(mb.logprobs, k / 1000)
            assert torch.equal(mb.values, k + 100)
            assert torch.equal(mb.advantages, k + 300)
            assert torch.equal(mb.returns, k + 1300)
            seen += k.long().tolist()
        assert sorted(seen) == list(range(T * N)), f"epoch {epoch}: each sample exactly once"
        orders.append(seen)
    assert orders[0] != orders[1] != orders[2], "each epoch is a new permutation"

    replay = make(action_dim)
    replay.build_table(replay.advantages + 1000.0)
    replay.shuffle(torch.Generator().manual_seed(0))
    again = [k for mb in replay.minibatches(num_minibatches) for k in mb.obs[:, 0].long().tolist()]
    assert again == orders[0], "the same generator seed gives the same order"


def test_a_second_rollout_overwrites_the_first() -> None:
    buf = make(0)
    buf.build_table(buf.advantages)
    for t in range(T):
        buf.write_obs(t, np.zeros((N, OBS_DIM), dtype=np.float32))
        buf.advantages[t] = 0.0
    buf.build_table(torch.zeros(T, N))
    buf.shuffle(torch.Generator().manual_seed(1))
    (mb,) = buf.minibatches(1)
    assert torch.all(mb.obs == 0) and torch.all(mb.advantages == 0) and torch.all(mb.returns == 0)
