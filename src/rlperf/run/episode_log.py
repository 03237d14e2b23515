"""The finished episodes of a run: how many, and the returns and lengths of the recent ones."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

RECENT_EPISODES = 100


class EpisodeLog:
    """Episode statistics read from a vector env's ``infos`` (``RecordEpisodeStatistics``'
    layout: ``infos["episode"]["r"|"l"]`` valid where ``infos["_episode"]``).

    Attributes:
        returns, lengths: the last :data:`RECENT_EPISODES` episodes' returns and lengths
            (deferred episodes included after :meth:`flush`).
    """

    def __init__(self) -> None:
        self._count = 0
        self.returns: deque[float] = deque(maxlen=RECENT_EPISODES)
        self.lengths: deque[int] = deque(maxlen=RECENT_EPISODES)
        self._pending: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def count(self) -> int:
        """Episodes finished in the whole run (resumes included)."""
        self.flush()
        return self._count

    def record(self, infos: dict[str, Any]) -> None:
        """Add the episodes a step finished (call only when ``"_episode" in infos``)."""
        done = infos["_episode"]
        returns = infos["episode"]["r"][done]
        self.returns.extend(returns.tolist())
        self.lengths.extend(infos["episode"]["l"][done].tolist())
        self._count += len(returns)

    def extend(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Add finished episodes given directly: returns and lengths (K,), in finishing order
        (the fused rollout reports them so, ``ppo/fused_rollout.py``)."""
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())
        self._count += len(returns)

    def defer(self, read: Callable[[], tuple[np.ndarray, np.ndarray]]) -> None:
        """Episodes finished on a device, added when first needed: ``read()`` gives their
        returns and lengths as :meth:`extend` takes them, and may wait for the device. The
        device rollout (``ppo/device_rollout.py``) reports so: its host read waits for the
        logging phase, after the iteration's one synchronisation."""
        self.flush()
        self._pending = read

    def flush(self) -> None:
        """Add the deferred episodes now (nothing when none wait)."""
        if self._pending is not None:
            read, self._pending = self._pending, None
            self.extend(*read())

    def mean_return(self) -> float | None:
        """Mean return of the recent episodes; None before the first one ends."""
        self.flush()
        return float(np.mean(self.returns)) if self.returns else None

    def mean_length(self) -> float | None:
        self.flush()
        return float(np.mean(self.lengths)) if self.lengths else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.count,
            "recent_returns": list(self.returns),
            "recent_lengths": list(self.lengths),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._count = int(state["episodes"])
        self.returns.extend(state["recent_returns"])
        self.lengths.extend(state["recent_lengths"])
