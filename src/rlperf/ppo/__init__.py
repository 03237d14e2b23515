"""PPO: rollout storage and samplers, GAE, the loss, the update, the trainer."""

from rlperf.ppo.gae import gae
from rlperf.ppo.loss import LossCoefs, ppo_loss
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.trainer import NonFiniteLossError, Trainer

__all__ = ["LossCoefs", "NonFiniteLossError", "RolloutBuffer", "Trainer", "gae", "ppo_loss"]
