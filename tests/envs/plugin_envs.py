"""A package module that registers gymnasium ids when it is imported, as ale-py (``ALE/...``) and
minigrid do: ``gym:plugin_envs:RlperfPlugin/CartPole-v0`` reaches them (importable by env
workers: tests/envs is on their path under pytest). :func:`register_entry_point_envs` is the
same for the ``gymnasium.envs`` entry-point group (test_gym_ids)."""

from __future__ import annotations

import gymnasium

PLUGIN_ID = "RlperfPlugin/CartPole-v0"
ENTRY_POINT_NAMESPACE = "RlperfEntryPoint"
ENTRY_POINT_ID = f"{ENTRY_POINT_NAMESPACE}/PluginCartPole-v0"
MAX_STEPS = 40


def _register(env_id: str, full_id: str) -> None:
    """Register ``env_id`` (``full_id`` once gymnasium's namespace context has added its
    namespace) unless it is registered already."""
    if full_id not in gymnasium.registry:
        gymnasium.register(
            env_id,
            entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
            max_episode_steps=MAX_STEPS,
        )


def register_entry_point_envs() -> None:
    """What a package's ``gymnasium.envs`` entry point runs: registers its ids without their
    namespace, which the entry point's name gives (gymnasium's ``namespace`` context)."""
    _register("PluginCartPole-v0", ENTRY_POINT_ID)


_register(PLUGIN_ID, PLUGIN_ID)
