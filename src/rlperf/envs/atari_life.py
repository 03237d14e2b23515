"""stable-baselines3's ``EpisodicLifeEnv``, with a seeded reset that starts the game anew.

SB3's wrapper ends the agent's episode at a lost life and, on the reset that follows, takes a
no-op step instead of resetting the game: CleanRL's semantics, kept. But ``FireResetEnv`` above
it steps FIRE through it on every reset, which marks the game as not over, so the *next* reset
never reaches the emulator either: ``reset(seed=5)`` after any earlier reset ignored the seed
and played on from wherever the game was. ``rlperf eval`` builds its env (one unseeded reset)
and then resets it with the eval seed, so the same policy, run and seed gave episodes of
different lengths from one call to the next. A reset that is given a seed asks for that seed's
game: here it always resets the emulator; the unseeded resets of training keep SB3's behaviour.

Imported by name from the ``wrappers`` option (``rlperf.envs.atari_life:EpisodicLife``), so
stable-baselines3 (the ``atari`` extra) is imported only where Atari runs.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.atari_wrappers import EpisodicLifeEnv


class EpisodicLife(EpisodicLifeEnv):
    """SB3's ``EpisodicLifeEnv`` whose ``reset(seed=...)`` resets the game (module docstring)."""

    def reset(self, **kwargs: Any) -> Any:
        if kwargs.get("seed") is not None:
            self.was_real_done = True
        return super().reset(**kwargs)
