"""P/T nets from PNML files (ISO/IEC 15909-2), with the standard library's ElementTree.

Read: every ``place`` (``initialMarking/text``, default 0), ``transition`` and ``arc``
(``inscription/text`` weight, default 1) of the first ``net``, at any depth of nested ``page``
elements, with or without the PNML namespace. The goal is the file's first final marking
(pm4py's ``finalmarkings/marking/place[@idref]/text``) unless a ``goal`` string
(``place_id:count,...``) is given, which takes precedence. Places and transitions are named by
their ids.

Anything else is refused with a one-line ValueError naming the file: XML errors, a node without
an id, duplicate ids, arcs to unknown nodes, place-to-place or transition-to-transition arcs,
non-integer or non-positive inscriptions, coloured / high-level nets (``hlinscription``,
``hlinitialMarking``, a place ``type``), reference nodes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import cast

from rlperf.envs.petri.net import Arcs, Net, parse_goal

DEFAULT_MAX_STEPS = 200
# Elements that only occur in coloured (symmetric, high-level) nets.
HIGH_LEVEL = ("hlinscription", "hlinitialMarking", "type", "declaration")


def _local(tag: object) -> str:
    """Tag without its ``{namespace}`` (PNML files come with and without one)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child(element: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in element if _local(c.tag) == name), None)


def _text_int(element: ET.Element, name: str, default: int, least: int, fail, what: str) -> int:
    """The integer in ``element/<name>/text`` (``default`` without ``<name>``)."""
    holder = _child(element, name)
    if holder is None:
        return default
    text_el = _child(holder, "text")
    text = (text_el.text or "").strip() if text_el is not None else ""
    try:
        value = int(text)
    except ValueError:
        raise fail(f"{what} has non-integer {name} {text!r}") from None
    if value < least:
        raise fail(f"{what} has {name} {value}, need >= {least}")
    return value


def load_pnml(path: str | Path, goal: str | None = None, max_steps: int | None = None) -> Net:
    """Parse the P/T net in ``path``.

    Args:
        goal: ``place_id:count,...``; overrides the file's final marking.
        max_steps: the net's default episode limit (default :data:`DEFAULT_MAX_STEPS`).

    Raises:
        ValueError: one line, ``"<path>: <problem>"``.
    """
    where = str(path)

    def fail(problem: str) -> ValueError:
        return ValueError(f"{where}: {problem}")

    if not Path(path).is_file():
        raise fail("no such PNML file")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise fail(f"not well-formed XML ({e})") from None
    except OSError as e:
        raise fail(f"cannot read ({e.strerror})") from None
    net = next((e for e in root.iter() if _local(e.tag) == "net"), None)  # root included
    if net is None:
        raise fail("no <net> element")
    if any(w in net.get("type", "").lower() for w in ("symmetric", "hlpn", "colo")):
        raise fail(f"unsupported net type {net.get('type')!r}: only P/T nets")

    places: list[str] = []
    initial: dict[str, int] = {}
    transitions: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    arcs: list[ET.Element] = []
    ids: set[str] = set()
    for el in net.iter():
        kind = _local(el.tag)
        if kind in HIGH_LEVEL:
            raise fail(f"coloured/high-level element <{kind}> is not supported: only P/T nets")
        if kind in ("referencePlace", "referenceTransition"):
            raise fail(f"<{kind}> is not supported")
        if kind not in ("place", "transition", "arc") or _is_marking_entry(el):
            continue
        node_id = el.get("id")
        if not node_id:
            raise fail(f"a <{kind}> has no id")
        if node_id in ids:
            raise fail(f"duplicate id {node_id!r}")
        ids.add(node_id)
        if kind == "place":
            places.append(node_id)
            initial[node_id] = _text_int(el, "initialMarking", 0, 0, fail, f"place {node_id!r}")
        elif kind == "transition":
            transitions[node_id] = ({}, {})
        else:
            arcs.append(el)
    nodes = set(places) | set(transitions)
    for arc in arcs:
        arc_id, src, dst = arc.get("id"), arc.get("source"), arc.get("target")
        for end in (src, dst):
            if end not in nodes:
                raise fail(f"arc {arc_id!r} connects unknown node {end!r}")
        src, dst = cast(str, src), cast(str, dst)  # both are nodes' ids now
        weight = _text_int(arc, "inscription", 1, 1, fail, f"arc {arc_id!r}")
        if (src in transitions) == (dst in transitions):
            kind = "transition-to-transition" if src in transitions else "place-to-place"
            raise fail(f"arc {arc_id!r} is a {kind} arc")
        side: Arcs
        if src in transitions:
            side, place = transitions[src][1], dst
        else:
            side, place = transitions[dst][0], src
        side[place] = side.get(place, 0) + weight  # parallel arcs add up
    if not transitions:
        raise fail("net has no transitions")

    target = _final_marking(net, set(places), fail) if goal is None else parse_goal(goal, where)
    if not target:
        raise fail("no final marking in the file: give the goal option, goal=place_id:count,...")
    try:
        return Net.build(where, places, transitions, initial, target,
                         DEFAULT_MAX_STEPS if max_steps is None else max_steps)  # fmt: skip
    except ValueError as e:
        raise fail(str(e).removeprefix(f"net {where}: ")) from None


def _is_marking_entry(el: ET.Element) -> bool:
    """True for the ``<place idref=...>`` entries inside ``finalmarkings`` (not nodes)."""
    return el.get("idref") is not None and el.get("id") is None


def _final_marking(net: ET.Element, places: set[str], fail) -> dict[str, int]:
    """The first ``finalmarkings/marking`` as ``{place: count}`` (empty if there is none).

    Places with count 0 are left out: the goal is a partial marking of at-least counts.
    """
    markings = next((e for e in net.iter() if _local(e.tag) == "finalmarkings"), None)
    marking = None if markings is None else _child(markings, "marking")
    if marking is None:
        return {}
    goal: dict[str, int] = {}
    for entry in marking:
        ref = entry.get("idref")
        if ref not in places:
            raise fail(f"final marking names unknown place {ref!r}")
        text_el = _child(entry, "text")
        text = (text_el.text or "").strip() if text_el is not None else ""
        if not text.isdigit():
            raise fail(f"final marking of {ref!r} is not a non-negative integer: {text!r}")
        if int(text) > 0:
            goal[ref] = int(text)
    return goal
