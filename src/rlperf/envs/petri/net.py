"""The place/transition net model shared by both environment implementations.

A :class:`Net` holds places, transitions, weighted arcs, an initial marking and a goal (a partial
marking: reached when every goal place holds at least its goal count). It carries the arcs in
two forms built from one source, so neither implementation derives its view from the other's:

- ``pre`` / ``post``: ``(P, T)`` int64 incidence matrices, for the batched numpy implementation;
- ``inputs`` / ``outputs``: per transition, a tuple of ``(place_index, weight)`` pairs, for the
  plain-Python reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

Arcs = Mapping[str, int]  # place name -> arc weight
TransitionArcs = Mapping[str, tuple[Arcs, Arcs]]  # transition -> (input arcs, output arcs)


@dataclass(frozen=True, eq=False)
class Net:
    """A P/T net with an initial marking and a goal; build one with :meth:`build`.

    Attributes:
        name: where the net came from (a built-in name or a PNML path), for messages.
        places, transitions: names (``P`` and ``T`` of them), in index order.
        pre, post: ``(P, T)`` int64; ``pre[p, t]`` tokens ``t`` takes from ``p``, ``post[p, t]``
            tokens it puts there.
        inputs, outputs: per transition, ``((place, weight), ...)`` with weights >= 1.
        initial: ``(P,)`` int64 initial marking.
        goal: ``(P,)`` int64 goal counts, 0 for places the goal does not name.
        goal_items: ``((place, count), ...)`` for the places the goal names.
        max_steps: default episode length limit for this net.
    """

    name: str
    places: tuple[str, ...]
    transitions: tuple[str, ...]
    pre: np.ndarray
    post: np.ndarray
    inputs: tuple[tuple[tuple[int, int], ...], ...]
    outputs: tuple[tuple[tuple[int, int], ...], ...]
    initial: np.ndarray
    goal: np.ndarray
    goal_items: tuple[tuple[int, int], ...]
    max_steps: int

    @property
    def num_places(self) -> int:
        return len(self.places)

    @property
    def num_transitions(self) -> int:
        return len(self.transitions)

    @staticmethod
    def build(
        name: str,
        places: list[str],
        transitions: TransitionArcs,
        initial: Arcs,
        goal: Arcs,
        max_steps: int,
    ) -> Net:
        """Validate and index a net given by names.

        Args:
            places: every place name, in index order.
            transitions: name -> (input arcs, output arcs), each ``{place: weight}``.
            initial: ``{place: tokens}``; unnamed places start empty.
            goal: ``{place: count}``, counts >= 1.

        Raises:
            ValueError: one line naming the net and the problem (no transitions, an unknown
                place, a weight < 1, an empty goal, a goal the initial marking already meets,
                an initial marking with no enabled transition, ...).
        """

        def fail(problem: str) -> ValueError:
            return ValueError(f"net {name}: {problem}")

        if not transitions:
            raise fail("has no transitions")
        if len(set(places)) != len(places):
            raise fail("has duplicate place names")
        index = {p: i for i, p in enumerate(places)}

        def place(p: str, where: str) -> int:
            if p not in index:
                raise fail(f"{where} names unknown place {p!r}")
            return index[p]

        def count(value: object, least: int, where: str) -> int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise fail(f"{where} must be an integer >= {least}, got {value!r}")
            return int(value)

        num_p, num_t = len(places), len(transitions)
        pre = np.zeros((num_p, num_t), dtype=np.int64)
        post = np.zeros((num_p, num_t), dtype=np.int64)
        inputs: list[tuple[tuple[int, int], ...]] = []
        outputs: list[tuple[tuple[int, int], ...]] = []
        for t, (tname, (ins, outs)) in enumerate(transitions.items()):
            for matrix, arcs, pairs, side in ((pre, ins, inputs, "input"),
                                              (post, outs, outputs, "output")):  # fmt: skip
                row = []
                for p, w in arcs.items():
                    i = place(p, f"transition {tname!r} {side} arc")
                    row.append((i, count(w, 1, f"arc weight {p!r}-{tname!r}")))
                    matrix[i, t] = row[-1][1]
                pairs.append(tuple(row))
        init = np.zeros(num_p, dtype=np.int64)
        for p, k in initial.items():
            init[place(p, "initial marking")] = count(k, 0, f"initial marking of {p!r}")
        if not goal:
            raise fail("has no goal (give a final marking or goal=place:count,...)")
        target = np.zeros(num_p, dtype=np.int64)
        for p, k in goal.items():
            target[place(p, "goal")] = count(k, 1, f"goal count of {p!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0:
            raise fail(f"max_steps must be a positive integer, got {max_steps!r}")
        if (init >= target).all():
            raise fail("the initial marking already reaches the goal")
        if not (init[:, None] >= pre).all(0).any():
            raise fail("no transition is enabled in the initial marking")
        for a in (pre, post, init, target):
            a.flags.writeable = False  # shared by every env built from this net
        return Net(
            name=name,
            places=tuple(places),
            transitions=tuple(transitions),
            pre=pre,
            post=post,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            initial=init,
            goal=target,
            goal_items=tuple((int(p), int(target[p])) for p in np.flatnonzero(target)),
            max_steps=max_steps,
        )


def parse_goal(text: str, where: str) -> dict[str, int]:
    """``"done:2,out:1"`` -> ``{"done": 2, "out": 1}``; ValueError (one line) if malformed."""
    goal: dict[str, int] = {}
    for item in str(text).split(","):
        p, sep, k = item.strip().rpartition(":")
        if not sep or not p or not k.strip().isdigit():
            raise ValueError(f"{where}: goal takes place:count,..., got {text!r}")
        goal[p] = int(k)
    return goal
