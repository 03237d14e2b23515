"""ppo/build.py: the recurrent size check counts the rollout's rows (grid: maps x agents) and
its BPTT segments, which is what the segment sampler splits into minibatches."""

from __future__ import annotations

import pytest

from rlperf.config import Config, ConfigError
from rlperf.ppo.checks import check_recurrent_sizes, check_total_steps
from rlperf.ppo.samplers import SegmentSampler
from rlperf.ppo.trainer import Trainer


def grid_lstm(
    num_maps: int, num_minibatches: int, bptt_horizon: int = 0, num_steps: int = 8
) -> Config:
    """An LSTM on the small grid mission: 4 agents per map, one thread, two iterations."""
    cfg = Config()
    cfg.env.env, cfg.env.num_envs = "grid", num_maps
    cfg.env.options = {"mission": "extractor_hub_12"}
    cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features = "lstm", (4,), 16
    cfg.policy.lstm_hidden_size = 8
    cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.update_epochs = (
        num_steps,
        num_minibatches,
        1,
    )
    cfg.ppo.bptt_horizon = bptt_horizon
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 2 * num_maps * 4 * num_steps, 1, False
    return cfg.validate()


def test_grid_minibatches_are_agent_rows_not_maps() -> None:
    """2 maps x 4 agents = 8 agent rows split into 8 minibatches of one row each: the check on
    maps (2 % 8) refused this run, though every minibatch holds one whole segment."""
    trainer = Trainer(grid_lstm(num_maps=2, num_minibatches=8))
    assert trainer.rows == 8 and isinstance(trainer.sampler, SegmentSampler)
    summary = trainer.train()
    assert summary["iterations"] == 2
    trainer.compute_advantages()
    minibatches = trainer.sampler.epoch(8, trainer.shuffle_gen)
    assert [mb.obs.shape[:2] for mb in minibatches] == [(8, 1)] * 8


def test_bptt_segments_count_towards_the_minibatches() -> None:
    """1 map x 4 agents x (16 steps / horizon 4) = 16 segments in 8 minibatches of 2."""
    trainer = Trainer(grid_lstm(num_maps=1, num_minibatches=8, bptt_horizon=4, num_steps=16))
    trainer.train()
    shapes = [mb.obs.shape[:2] for mb in trainer.sampler.epoch(8, trainer.shuffle_gen)]
    assert shapes == [(4, 2)] * 8


@pytest.mark.parametrize(
    ("rows", "num_minibatches", "bptt_horizon", "message"),
    [
        (4, 3, 0, r"its 4 segments \(4 rows x 1 of 8 steps\) must be divisible by "
                  r"num_minibatches 3"),
        (4, 16, 4, r"its 8 segments \(4 rows x 2 of 4 steps\) must be divisible by "
                   r"num_minibatches 16"),
        (4, 2, 3, r"num_steps 8 must be divisible by bptt_horizon 3"),
    ],
)  # fmt: skip
def test_sizes_that_leave_segments_over_are_refused(
    rows: int, num_minibatches: int, bptt_horizon: int, message: str
) -> None:
    cfg = grid_lstm(num_maps=1, num_minibatches=1, bptt_horizon=0)
    cfg.ppo.num_minibatches, cfg.ppo.bptt_horizon = num_minibatches, bptt_horizon
    with pytest.raises(ConfigError, match=message):
        check_recurrent_sizes(cfg, rows)


def test_the_trainer_refuses_a_grid_whose_agent_rows_do_not_divide() -> None:
    """3 maps x 4 agents = 12 segments in 8 minibatches: refused before any training (the
    config's own check, on 3 maps x 8 steps = 24, lets it through)."""
    with pytest.raises(ConfigError, match=r"its 12 segments \(12 rows x 1 of 8 steps\)"):
        Trainer(grid_lstm(num_maps=3, num_minibatches=8))


def test_total_steps_must_cover_one_rollout_of_every_rank() -> None:
    """Exactly one rollout (rows x num_steps x ranks) is enough; one step less is refused."""
    cfg = Config()
    cfg.ppo.num_steps = 8
    cfg.run.total_steps = 12 * 8 * 2
    check_total_steps(cfg, rows=12, world_size=2)
    cfg.run.total_steps -= 1
    with pytest.raises(
        ConfigError, match=r"total_steps 191 .* \(12 rows x 8 steps x 2 ranks = 192\)"
    ):
        check_total_steps(cfg, rows=12, world_size=2)
