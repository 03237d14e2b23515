"""Policy registry: ``--policy NAME`` (config ``policy.kind``) to a policy built for an env.

Each entry says which observations it takes, so a mismatch is a one-line error before any
training, not a shape error in the first matmul. Each policy is one :func:`register_policy`
call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlperf.config import ConfigError, PolicyConfig
from rlperf.envs.spec import EnvSpec
from rlperf.policies.base import ActorCritic

FLAT, IMAGE, ANY = "flat", "image", "any"


@dataclass(frozen=True)
class PolicyEntry:
    """How to build a policy, and what it can take.

    Attributes:
        build: ``build(spec, policy_config) -> ActorCritic``.
        recurrent: carries state across steps (segment minibatches, BPTT).
        observations: ``"flat"`` (1-D), ``"image"`` ((C, H, W)) or ``"any"``.
        summary: one line for ``--help`` and error messages.
    """

    build: Callable[[EnvSpec, PolicyConfig], ActorCritic]
    recurrent: bool
    observations: str
    summary: str


def _mlp(spec: EnvSpec, cfg: PolicyConfig) -> ActorCritic:
    from rlperf.policies.mlp import MLPActorCritic

    return MLPActorCritic(spec, cfg.hidden_sizes)


def _lstm(spec: EnvSpec, cfg: PolicyConfig) -> ActorCritic:
    from rlperf.policies.lstm import LSTMActorCritic

    return LSTMActorCritic(
        spec, cfg.hidden_sizes, cfg.lstm_hidden_size, cfg.cnn_channels, cfg.cnn_features
    )


def _cnn(spec: EnvSpec, cfg: PolicyConfig) -> ActorCritic:
    from rlperf.policies.cnn import CNNActorCritic

    return CNNActorCritic(spec, cfg.cnn_channels, cfg.cnn_features)


def _convlstm(spec: EnvSpec, cfg: PolicyConfig) -> ActorCritic:
    from rlperf.policies.convlstm import ConvLSTMActorCritic

    return ConvLSTMActorCritic(
        spec,
        channels=cfg.convlstm_channels,
        layers=cfg.convlstm_layers,
        ticks=cfg.convlstm_ticks,
        features=cfg.cnn_features,
        sections=cfg.convlstm_sections,
        head=cfg.convlstm_head,
    )


_POLICIES: dict[str, PolicyEntry] = {
    "mlp": PolicyEntry(_mlp, False, FLAT, "stacked actor-critic MLP (analytic update)"),
    "lstm": PolicyEntry(_lstm, True, ANY, "MLP or CNN encoder, LSTM, actor and critic heads"),
    "cnn": PolicyEntry(_cnn, False, IMAGE, "convolutional encoder for (C, H, W) images"),
    "convlstm": PolicyEntry(
        _convlstm, True, IMAGE, "DRC ConvLSTM (Guez et al. 2019) for (C, H, W) images"
    ),
}


def register_policy(name: str, entry: PolicyEntry) -> None:
    """Make ``entry`` available as ``--policy name``."""
    _POLICIES[name] = entry


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def policy_entry(kind: str) -> PolicyEntry:
    """The entry for ``kind``; ConfigError naming the choices if there is none."""
    entry = _POLICIES.get(kind)
    if entry is None:
        raise ConfigError(f"unknown policy {kind!r}: choose one of {', '.join(policy_names())}")
    return entry


def check_policy_fit(kind: str, spec: EnvSpec) -> None:
    """ConfigError unless policy ``kind`` can take the observations of ``spec``."""
    entry = policy_entry(kind)
    if entry.observations == FLAT and not spec.flat_obs:
        hint = "--policy cnn or --policy lstm" if spec.image_obs else "--policy lstm"
        raise ConfigError(
            f"policy {kind!r} takes flat observations, the env gives "
            f"{spec.describe_obs()}: use {hint}"
        )
    if entry.observations == IMAGE and not spec.image_obs:
        raise ConfigError(
            f"policy {kind!r} takes (C, H, W) image observations, the env gives "
            f"{spec.describe_obs()}: use --policy mlp or --policy lstm"
        )
    if entry.observations == ANY and not (spec.flat_obs or spec.image_obs):
        raise ConfigError(
            f"policy {kind!r} takes flat or (C, H, W) observations, the env gives "
            f"{spec.describe_obs()}"
        )


def make_policy(cfg: PolicyConfig, spec: EnvSpec) -> ActorCritic:
    """Build policy ``cfg.kind`` for ``spec``, its Gaussian's log-std at ``cfg.init_log_std``
    for Box actions; ConfigError when it cannot take the observations."""
    check_policy_fit(cfg.kind, spec)
    policy = policy_entry(cfg.kind).build(spec, cfg)
    logstd = policy.logstd()
    if logstd is not None and cfg.init_log_std != 0.0:
        with torch.no_grad():
            logstd.fill_(cfg.init_log_std)
    return policy
