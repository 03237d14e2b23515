"""No import cycle among rlperf's modules, and no import from a lower layer to a higher one.

Run as a test, or as a script that lists the cycles and the imports that point up:
``python tests/test_import_cycles.py``.

The layers, lowest first (:data:`LAYERS`): what every module uses (cores, timing, the C
kernels' boundary); the config; the pieces of a run (envs, policies, the ranks, the run's
files and logs); PPO; the tools over runs (profiling, bench, tune); what every command shares
(``commandline.py``); the command modules (each package's ``commands.py``, and ``profile``'s
body); the CLI. A module imports its own layer or lower ones. The CLI reaches the command
modules only by name (``cli.COMMAND_MODULES``, ``importlib``): the one arrow up the drawing,
and not an import this check sees.

Every ``import`` / ``from ... import`` of an rlperf module counts, at module level or inside a
function (a lazy import only hides a cycle until the function runs), except those under
``if TYPE_CHECKING:``, which never run. ``from rlperf.a import b`` is an edge to ``rlperf.a.b``
when that is a module, else to ``rlperf.a``. An AST walk rather than ``grimp``: forty lines,
no dependency, and the rule above is visible here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import outside ``if TYPE_CHECKING:`` blocks."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """rlperf module -> the rlperf modules it imports at run time."""
    paths = sorted((SRC / "rlperf").rglob("*.py"))
    modules = {module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        edges = graph.setdefault(module_name(path), set())
        for module, names in runtime_imports(ast.parse(path.read_text())):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            if len(targets) < len(names) or not names:
                targets.append(module)
            edges.update(t for t in targets if t in modules)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(groups)


# Module prefixes per layer, lowest first; the longest prefix that matches a module places it.
LAYERS: list[tuple[str, ...]] = [
    ("rlperf.cores", "rlperf.cpu_features", "rlperf.threads", "rlperf.timing", "rlperf.native",
     # The Atari preset's settings (ids, ALE options, the wrappers' text), imported by the
     # presets and by nothing of rlperf itself.
     "rlperf.envs.atari"),
    ("rlperf.config", "rlperf.presets"),
    ("rlperf.envs", "rlperf.policies", "rlperf.distributed", "rlperf.run", "rlperf.openmp"),
    ("rlperf.ppo",),
    ("rlperf.profiling", "rlperf.bench", "rlperf.tune"),
    ("rlperf.commandline",),
    ("rlperf.ppo.commands", "rlperf.run.commands", "rlperf.profiling.commands",
     "rlperf.profiling.profile_run", "rlperf.bench.commands", "rlperf.tune.commands"),
    ("rlperf.cli", "rlperf.__main__"),
]  # fmt: skip
# The package itself is the public face (``rlperf.load_policy``), above every layer; modules
# import ``rlperf`` for ``__version__`` only.
PACKAGE = "rlperf"


def layer_of(module: str) -> int | None:
    """``module``'s layer (an index into :data:`LAYERS`); None for the package itself."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    if best is None and module != PACKAGE:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return None if best is None else best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a module to one in a higher layer, as ``a (layer) -> b (layer)``."""
    found = []
    for source in sorted(graph):
        for target in sorted(graph[source]):
            low, high = layer_of(source), layer_of(target)
            if low is not None and high is not None and high > low:
                found.append(f"{source} ({low}) -> {target} ({high})")
    return found


def test_no_import_points_up_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_an_import_that_points_up() -> None:
    planted = {"rlperf.run.evaluate": {"rlperf.cli", "rlperf.config"}, "rlperf.cli": {"rlperf"}}
    assert upward_imports(planted) == ["rlperf.run.evaluate (2) -> rlperf.cli (7)"]
    assert layer_of("rlperf.run.commands") == 6 and layer_of("rlperf.run.export") == 2


def test_rlperf_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_check_finds_a_cycle_and_ignores_type_checking_imports() -> None:
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rlperf import x\n"
        "def f():\n    import rlperf.y\n"
    )
    assert runtime_imports(tree) == [("typing", ["TYPE_CHECKING"]), ("rlperf.y", [])]


if __name__ == "__main__":
    graph = import_graph()
    found = cycles(graph)
    for group in found:
        print(" <-> ".join(group))
    print(f"{len(found)} import cycle(s) among rlperf's modules")
    up = upward_imports(graph)
    print("\n".join(up))
    print(f"{len(up)} import(s) from a lower layer to a higher one")
    sys.exit(1 if found or up else 0)
