"""Atari as CleanRL's ``ppo_atari.py`` runs it, from well-kept libraries' own wrappers.

``--preset atari`` (``config.py``) trains ``gym:ale_py:ALE/Breakout-v5`` with the env options
here: :data:`ALE_OPTIONS` and the ``wrappers`` text :data:`ATARI_WRAPPERS`, applied to each
sub-env by the gym adapter (``envs/gym_adapter.py``), in this order:

1. ``gymnasium.wrappers.AtariPreprocessing(noop_max=30, frame_skip=4, screen_size=84)``: CleanRL's
   ``NoopResetEnv(30)`` and ``MaxAndSkipEnv(4)`` (up to 30 no-ops after a reset, each action
   repeated on 4 frames, rewards summed, the last two frames max-pooled), then the 84x84
   grayscale frame (CleanRL's ``ResizeObservation`` and ``GrayscaleObservation``). On a v5 id it
   needs the env's own frame skip off, ``frameskip=1``. ``terminal_on_life_loss`` stays off:
   gymnasium's resets the game when a life is lost, CleanRL's ``EpisodicLifeEnv`` goes on with it.
2. stable-baselines3's ``EpisodicLifeEnv``: a lost life ends the agent's episode (PPO stops
   bootstrapping there) while the game goes on; gymnasium has no wrapper for it, and CleanRL's
   ``cleanrl_utils/atari_wrappers.py`` is a copy of SB3's. Taken as
   :class:`~rlperf.envs.atari_life.EpisodicLife`, whose seeded reset resets the game.
3. :func:`fire_reset`: SB3's ``FireResetEnv`` on games whose second action is FIRE (Breakout,
   Pong), as CleanRL applies it; others unchanged. Neither gymnasium nor ale-py has one.
4. ``gymnasium.wrappers.ClipReward(-1, 1)``: CleanRL's ``ClipRewardEnv`` takes the reward's sign;
   ALE's rewards are integers (summed over 4 frames, still integers), whose clip is their sign.
5. ``gymnasium.wrappers.FrameStackObservation(4)``: the last 4 frames, ``(4, 84, 84)`` uint8,
   channels first as the CNN takes them; the first observation of an episode repeated.

The returns rlperf logs are the game's: the gym adapter records each sub-env's episodes below
these wrappers (``EnvEpisodes``), so a return is the whole game's unclipped score across its
lives, and its length counts the emulator's frames, as CleanRL's ``RecordEpisodeStatistics``,
placed first, counts them.

Where the frames differ from CleanRL's stack: gymnasium's wrapper takes ALE's own grayscale of
each frame and max-pools and resizes it; CleanRL max-pools the RGB frames, resizes them and
converts to gray with OpenCV. The same emulator steps under both, so rewards, terminations and
truncations are equal step for step; pixels differ by a few levels where two frames' colours
differ (``tests/envs/test_atari.py`` bounds it).
"""

from __future__ import annotations

from typing import Any

import gymnasium

# The preset's game; any ALE v5 id takes the same options (``--env gym:ale_py:ALE/Pong-v5``).
ATARI_ENV = "gym:ale_py:ALE/Breakout-v5"

# The ALE settings of CleanRL's ``BreakoutNoFrameskip-v4`` on a v5 id: no frame skip inside the
# emulator (AtariPreprocessing skips), and no sticky actions. v5's own default is 0.25 (Machado
# et al. 2018); CleanRL's table (docs/atari.md) was measured without them, on v4, as EnvPool's
# default is too. ``--env-option repeat_action_probability=0.25`` gives v5's.
ALE_OPTIONS: dict[str, Any] = {"frameskip": 1, "repeat_action_probability": 0.0}

# Each sub-env's wrappers, innermost first (module docstring).
ATARI_WRAPPERS = ",".join(
    (
        "AtariPreprocessing(noop_max=30, frame_skip=4, screen_size=84, "
        "terminal_on_life_loss=False, grayscale_obs=True)",
        "rlperf.envs.atari_life:EpisodicLife",
        "rlperf.envs.atari:fire_reset",
        "ClipReward(-1, 1)",
        "FrameStackObservation(4)",
    )
)


def atari_options() -> dict[str, Any]:
    """A fresh copy of the preset's env options: :data:`ALE_OPTIONS` and the wrappers."""
    return {**ALE_OPTIONS, "wrappers": ATARI_WRAPPERS}


def fire_reset(env: gymnasium.Env) -> gymnasium.Env:
    """``env`` in stable-baselines3's ``FireResetEnv`` where its game's action 1 is FIRE (after
    a reset, FIRE then action 2, so the game starts), else ``env`` itself: CleanRL's
    ``if "FIRE" in env.unwrapped.get_action_meanings()``."""
    from stable_baselines3.common.atari_wrappers import FireResetEnv

    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]  # ALE's envs
    return FireResetEnv(env) if "FIRE" in meanings else env
