"""Built-in nets, by name: ``manufacturing``, ``jobshop`` and ``random:SEED``.

Each is a small planning problem with irreversible mistakes (docs/petri.md describes them, with
their optimal episode lengths): a policy has to learn which enabled transition to fire, not just
which ones are enabled.
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.petri.net import Arcs, Net

RANDOM_PREFIX = "random:"


def manufacturing(parts: int = 3, products: int = 1) -> Net:
    """A four-station line: cut, weld, paint, inspect, then assemble two parts into a product.

    Each station is a machine with one ``idle`` token: ``start_<s>`` takes a part and the
    machine, ``finish_<s>`` returns the machine and passes the part on. Assembly takes two
    inspected parts at once (arc weight 2). Scrapping a part (``scrap_weld``, ``scrap_paint``)
    is always allowed and never needed: with ``parts`` raw parts and ``products`` goods to make,
    scrapping more than ``parts - 2 * products`` makes the goal unreachable and ends in a dead
    marking. A failed inspection (``fail_inspect``) sends the part back to the paint queue:
    legal, never fatal, four wasted steps.
    """
    t: dict[str, tuple[Arcs, Arcs]] = {
        "start_cut": ({"raw": 1, "cut_idle": 1}, {"cut_busy": 1}),
        "finish_cut": ({"cut_busy": 1}, {"q_weld": 1, "cut_idle": 1}),
        "start_weld": ({"q_weld": 1, "weld_idle": 1}, {"weld_busy": 1}),
        "finish_weld": ({"weld_busy": 1}, {"q_paint": 1, "weld_idle": 1}),
        "start_paint": ({"q_paint": 1, "paint_idle": 1}, {"paint_busy": 1}),
        "finish_paint": ({"paint_busy": 1}, {"q_inspect": 1, "paint_idle": 1}),
        "start_inspect": ({"q_inspect": 1, "inspect_idle": 1}, {"inspect_busy": 1}),
        "pass_inspect": ({"inspect_busy": 1}, {"q_assemble": 1, "inspect_idle": 1}),
        "fail_inspect": ({"inspect_busy": 1}, {"q_paint": 1, "inspect_idle": 1}),
        "assemble": ({"q_assemble": 2}, {"finished": 1}),
        "scrap_weld": ({"q_weld": 1}, {}),
        "scrap_paint": ({"q_paint": 1}, {}),
    }
    places = ["raw", "q_weld", "q_paint", "q_inspect", "q_assemble", "finished"]
    for station in ("cut", "weld", "paint", "inspect"):
        places += [f"{station}_idle", f"{station}_busy"]
    initial = {"raw": parts, "cut_idle": 1, "weld_idle": 1, "paint_idle": 1, "inspect_idle": 1}
    return Net.build("manufacturing", places, t, initial, {"finished": products}, max_steps=64)


# Machines each job needs, in no fixed order: every pair twice, so circular waits exist.
JOBSHOP_NEEDS = (("m1", "m2"), ("m2", "m3"), ("m3", "m1"), ("m1", "m2"), ("m2", "m3"),
                 ("m3", "m1"))  # fmt: skip


def jobshop() -> Net:
    """Six jobs on three single machines; each job needs two of them at once, in either order.

    Job ``j`` may grab either of its machines first (``j_take_<m>``), then the other
    (``j_then_<m>``), then ``j_work`` releases both and marks it done. Grabbing a machine
    while another job holds the one you still need risks a circular wait: once every machine is
    held by a job waiting for another, no transition is enabled (a dead marking). 30
    transitions, 33 places: the net the speed target is measured on.
    """
    places = ["m1", "m2", "m3"]
    t: dict[str, tuple[Arcs, Arcs]] = {}
    for j, (a, b) in enumerate(JOBSHOP_NEEDS):
        ready, done, both = f"j{j}_ready", f"j{j}_done", f"j{j}_both"
        holds = {a: f"j{j}_holds_{a}", b: f"j{j}_holds_{b}"}
        places += [ready, holds[a], holds[b], both, done]
        for first in (a, b):
            t[f"j{j}_take_{first}"] = ({ready: 1, first: 1}, {holds[first]: 1})
        for first, second in ((a, b), (b, a)):
            t[f"j{j}_then_{second}"] = ({holds[first]: 1, second: 1}, {both: 1})
        t[f"j{j}_work"] = ({both: 1}, {done: 1, a: 1, b: 1})
    initial = {"m1": 1, "m2": 1, "m3": 1, **{f"j{j}_ready": 1 for j in range(len(JOBSHOP_NEEDS))}}
    goal = {f"j{j}_done": 1 for j in range(len(JOBSHOP_NEEDS))}
    return Net.build("jobshop", places, t, initial, goal, max_steps=64)


def random_net(seed: int) -> Net:
    """A random net with a guaranteed path to the goal, plus distractors and dead ends.

    The path ``p0 -> p1 -> ... -> pk`` (``k`` in 4..7) is fireable from the initial marking in
    order; some path steps also need a catalyst token from a side place (a self-loop). Around it:
    random distractor transitions (1-2 inputs, 0-2 outputs, weights 1-2, some producing tokens)
    and sinks that consume path or catalyst tokens and produce nothing, so dead markings and
    unreachable goals exist. Goal: one token in ``pk``. Optimal length: at most ``k``.
    """
    rng = np.random.default_rng(seed)
    k = int(rng.integers(4, 8))
    path = [f"p{i}" for i in range(k + 1)]
    side = [f"x{i}" for i in range(int(rng.integers(3, 7)))]
    places = path + side
    initial: dict[str, int] = {"p0": 1}
    for x in side:
        initial[x] = int(rng.integers(0, 3))
    t: dict[str, tuple[Arcs, Arcs]] = {}
    for i in range(k):
        ins, outs = {path[i]: 1}, {path[i + 1]: 1}
        if rng.random() < 0.4:
            x = side[int(rng.integers(len(side)))]
            initial[x] = max(initial[x], 1)  # the catalyst is there at the start
            ins[x], outs[x] = 1, 1
        t[f"step{i}"] = (ins, outs)
    # Distractors never feed the goal place, so the path alone makes the goal reachable.
    others = path[:-1] + side
    for i in range(int(rng.integers(6, 11))):
        ins = {str(p): int(rng.integers(1, 3)) for p in rng.choice(others, rng.integers(1, 3))}
        outs = {str(p): int(rng.integers(1, 3)) for p in rng.choice(others, rng.integers(0, 3))}
        t[f"d{i}"] = (ins, outs)
    for i in range(int(rng.integers(2, 4))):
        victim = str(rng.choice(others))
        t[f"sink{i}"] = ({victim: 1}, {})
    return Net.build(f"random:{seed}", places, t, initial, {path[-1]: 1}, max_steps=4 * k + 16)


BUILTIN = {"manufacturing": manufacturing, "jobshop": jobshop}


def builtin_net(name: str) -> Net:
    """The built-in net ``name`` (``manufacturing``, ``jobshop`` or ``random:SEED``).

    Raises:
        ValueError: one line for an unknown name or a malformed seed.
    """
    if name in BUILTIN:
        return BUILTIN[name]()
    if name.startswith(RANDOM_PREFIX):
        seed = name[len(RANDOM_PREFIX) :]
        if not seed.isdigit():
            raise ValueError(f"net {name!r}: random:SEED takes a non-negative integer seed")
        return random_net(int(seed))
    known = ", ".join([*BUILTIN, "random:SEED"])
    raise ValueError(f"unknown net {name!r}: choose one of {known}, or a .pnml file")
