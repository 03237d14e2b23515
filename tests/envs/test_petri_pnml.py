"""PNML files: what loads to which matrices, markings and goals; what is refused, on one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlperf.envs import make_vec
from rlperf.envs.petri import load_pnml

NS = 'xmlns="http://www.pnml.org/version-2009/grammar/pnml"'
PT = 'type="http://www.pnml.org/version-2009/grammar/ptnet"'


def pnml(body: str, final: str = "", ns: str = NS, net_type: str = PT) -> str:
    return f'<?xml version="1.0"?><pnml {ns}><net id="n1" {net_type}>{body}{final}</net></pnml>'


def place(pid: str, tokens: int | None = None) -> str:
    marking = "" if tokens is None else f"<initialMarking><text>{tokens}</text></initialMarking>"
    return f'<place id="{pid}"><name><text>{pid} name</text></name>{marking}</place>'


def arc(aid: str, src: str, dst: str, weight: str | None = None) -> str:
    ins = "" if weight is None else f"<inscription><text>{weight}</text></inscription>"
    return f'<arc id="{aid}" source="{src}" target="{dst}">{ins}</arc>'


# p1(3) --2--> t1 --> p2 ; p2 --> t2 --3--> p3 ; p3 <-> t2 is not a loop: t3 loops on p1.
BODY = (
    '<page id="top">'
    + place("p1", 3) + place("p2") + '<transition id="t1"/>'
    + arc("a1", "p1", "t1", "2") + arc("a2", "t1", "p2")
    + '<page id="inner">' + place("p3", 0) + '<transition id="t2"/><transition id="t3"/>'
    + arc("a3", "p2", "t2") + arc("a4", "t2", "p3", "3")
    + arc("a5", "p1", "t3") + arc("a6", "t3", "p1") + "</page></page>"
)  # fmt: skip
FINAL = '<finalmarkings><marking><place idref="p3"><text>3</text></place></marking></finalmarkings>'


def write(tmp_path: Path, text: str, name: str = "net.pnml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("ns", [NS, ""])
def test_loads_places_arcs_weights_pages_and_the_final_marking(tmp_path: Path, ns: str) -> None:
    net = load_pnml(write(tmp_path, pnml(BODY, FINAL, ns=ns)))
    assert net.places == ("p1", "p2", "p3") and net.transitions == ("t1", "t2", "t3")
    assert net.pre.tolist() == [[2, 0, 1], [0, 1, 0], [0, 0, 0]]
    assert net.post.tolist() == [[0, 0, 1], [1, 0, 0], [0, 3, 0]]
    assert net.initial.tolist() == [3, 0, 0]
    assert net.goal.tolist() == [0, 0, 3]


def test_goal_option_without_a_final_marking(tmp_path: Path) -> None:
    path = write(tmp_path, pnml(BODY))
    with pytest.raises(ValueError, match="no final marking.*goal=") as info:
        load_pnml(path)
    assert str(path) in str(info.value)
    assert load_pnml(path, goal="p2:1,p3:2").goal.tolist() == [0, 1, 2]
    env = make_vec("petri", 2, net=str(path), goal="p3:3", max_steps=9)
    _, infos = env.reset()
    assert infos["action_mask"].tolist() == [[True, False, True]] * 2
    env.step(np.array([0, 0]))
    _, rewards, terms, _, _ = env.step(np.array([1, 1]))
    assert terms.all() and (rewards > 0).all()


def test_pnml_runs_the_same_in_both_implementations(tmp_path: Path) -> None:
    path = str(write(tmp_path, pnml(BODY, FINAL)))
    a, b = make_vec("petri", 8, net=path), make_vec("petri", 8, net=path, turbo=False)
    mask = a.reset()[1]["action_mask"]
    rng = np.random.default_rng(0)
    for step in range(300):
        actions = (rng.random(mask.shape) * mask).argmax(1)
        actions[rng.random(8) < 0.1] = 1
        out_a, out_b = a.step(actions), b.step(actions)
        for x, y in zip(out_a[:4], out_b[:4], strict=True):
            assert np.array_equal(x, y), f"step {step}"
        mask = out_a[4]["action_mask"]
        assert np.array_equal(mask, out_b[4]["action_mask"]), f"step {step}"


MALFORMED = [
    ("<pnml><net id='n'><place id='p'>", "not well-formed XML"),
    (pnml(place("p1", 1) + '<transition id="t"/>' + arc("a", "p1", "t9"), FINAL),
     "arc 'a' connects unknown node 't9'"),
    (pnml(place("p1", 1) + place("p2") + '<transition id="t"/>' + arc("a", "p1", "p2")),
     "arc 'a' is a place-to-place arc"),
    (pnml(place("p1", 1) + '<transition id="t"/><transition id="u"/>' + arc("a", "t", "u")),
     "transition-to-transition arc"),
    (pnml('<place><initialMarking><text>1</text></initialMarking></place><transition id="t"/>'),
     "a <place> has no id"),
    (pnml(place("p1", 1) + '<transition id="t"/>' + arc("a", "p1", "t", "x+1")),
     "non-integer inscription 'x+1'"),
    (pnml(place("p1", 1) + '<transition id="t"/>' + arc("a", "p1", "t", "0")),
     "inscription 0, need >= 1"),
    (pnml(place("p1", 1) + '<transition id="t"/>' + '<arc id="a" source="p1" target="t">'
          "<hlinscription><text>x</text></hlinscription></arc>"), "coloured/high-level"),
    (pnml(place("p1", 1) + '<transition id="t"/>',
          net_type='type="http://www.pnml.org/version-2009/grammar/symmetricnet"'),
     "unsupported net type"),
    (pnml(place("p1", 1)), "net has no transitions"),
    (pnml(place("p1", 1) + place("p1")), "duplicate id 'p1'"),
    (pnml(place("p1", 0) + place("p3", 0) + '<transition id="t"/>' + arc("a", "p1", "t"), FINAL),
     "no transition is enabled"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_files_are_one_line_value_errors(tmp_path: Path, text: str, message) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        load_pnml(path)
    line = str(info.value)
    assert len(line.splitlines()) == 1 and line.startswith(f"{path}: "), line
    assert message in line, line


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such PNML file"):
        load_pnml(tmp_path / "missing.pnml")
