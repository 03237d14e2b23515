"""PPO: rollout storage, GAE, the loss, the trainer, checkpoints."""

from rlperf.ppo.gae import gae
from rlperf.ppo.loss import LossCoefs, ppo_loss
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.trainer import NonFiniteLossError, Trainer

__all__ = ["LossCoefs", "NonFiniteLossError", "RolloutBuffer", "Trainer", "gae", "ppo_loss"]
