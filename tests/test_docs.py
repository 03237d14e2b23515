"""The docs stay true: their commands run on today's code, their links resolve, and the counts
and defaults they state match the code.

Pages: README.md and docs/**/*.md, except docs/journal/ (dated entries: their commands are
history, run on the code of their day).

- Commands: every ``rlperf ...`` line of a fenced ``bash``/``sh``/``console`` (or unlabelled)
  block, and every inline code span starting ``rlperf ``, goes through
  :func:`rlperf.cli.check_command`: parsed and checked as the command checks itself before any
  work (the env and the policy's fit included), without training. A command that is a template
  may use ``...`` (more flags, or any value) and the metavariables in :data:`PLACEHOLDERS`.
- Links: every relative link (file and ``#anchor``, GitHub's anchor rules) resolves.
- Figures: the gate's default ``--max-rounds`` and threshold, the number of registry cases per
  set, and profile's default step count, wherever a page states them; every flag table's
  defaults and config fields.
- benchmarks/README.md names every script of benchmarks/.
"""

from __future__ import annotations

import argparse
import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from gymnasium.error import DependencyNotInstalled

from rlperf.bench.gate import Settings
from rlperf.bench.registry import HISTORY, QUICK, all_cases, tagged
from rlperf.cli import build_parser, check_command
from rlperf.commandline import UsageError, subcommand_parsers
from rlperf.profiling.profile_run import DEFAULT_STEPS

ROOT = Path(__file__).resolve().parents[1]
JOURNAL = ROOT / "docs" / "journal"
# Metavariables a template command may use, and the value it is checked with.
PLACEHOLDERS = {"N": "2", "ENV": "cartpole"}
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
ELLIPSIS = "..."


def pages() -> list[Path]:
    """README.md and the docs pages a user reads as today's (the journal left out)."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *(p for p in docs if JOURNAL not in p.parents)]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One ``rlperf`` command a page shows: where, and its arguments after ``rlperf``."""

    where: str  # "docs/page.md:LINE"
    text: str  # as written
    argv: tuple[str, ...] | None  # None: not valid shell
    inline: bool  # a code span in prose (else a line of a shell block)


def fenced_lines(text: str) -> list[tuple[int, str, str | None]]:
    """``(line number, line, fence language or None outside a fence)`` for every line."""
    out: list[tuple[int, str, str | None]] = []
    fence: str | None = None
    lang = ""
    for number, line in enumerate(text.splitlines(), 1):
        opening = re.match(r"\s*(```+|~~~+)\s*([\w+-]*)", line)
        if opening and fence is None:
            fence, lang = opening.group(1), opening.group(2).lower()
            continue
        if fence is not None and line.strip().startswith(fence):
            fence = None
            continue
        out.append((number, line, lang if fence is not None else None))
    return out


def shell_commands(page: Path) -> list[tuple[int, str, bool]]:
    """``(line, command, inline)`` of a page's shell blocks (continuations joined, ``$ ``
    prompts dropped) and inline ``rlperf ...`` spans (``inline`` True)."""
    found: list[tuple[int, str, bool]] = []
    pending: tuple[int, str] | None = None
    for number, line, lang in fenced_lines(page.read_text()):
        if lang is None:
            spans = re.finditer(r"`(rlperf [^`]*)`", line)
            found += [(number, m.group(1), True) for m in spans]
            continue
        if lang not in SHELL_LANGS:
            continue
        start, joined = pending if pending else (number, "")
        joined += " " + line.strip().removeprefix("$ ")
        if joined.endswith("\\"):
            pending = (start, joined[:-1])
            continue
        pending = None
        found.append((start, joined.strip(), False))
    return found


def rlperf_argv(command: str) -> list[tuple[str, ...]]:
    """The argument lists of every ``rlperf`` call in a shell line: ``rlperf ARGS``,
    ``python -m rlperf ARGS`` or ``torchrun ... -m rlperf ARGS``, split at ``&&``, ``|``,
    ``;`` and redirections, comments dropped."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    calls: list[tuple[str, ...]] = []
    segment: list[str] = []
    redirect = False  # the token after a redirection is its file, not an argument
    for token in [*lexer, "&&"]:
        operator = bool(token) and set(token) <= set("|&;<>")
        if operator and set(token) <= set("<>"):
            redirect = True
        elif operator:
            if "rlperf" in segment:
                at = segment.index("rlperf")
                if at == 0 or segment[at - 1] == "-m":
                    calls.append(tuple(segment[at + 1 :]))
            segment, redirect = [], False
        elif redirect:
            redirect = False
        else:
            segment.append(token)
    return calls


SUBCOMMANDS = subcommand_parsers(build_parser())


def value_options(argv: list[str]) -> set[str]:
    """The option strings of ``argv[0]``'s subcommand that take a value."""
    command = SUBCOMMANDS.get(argv[0]) if argv else None
    if command is None:
        return set()
    return {s for s, a in command._option_string_actions.items() if a.nargs != 0}


def fill_template(argv: tuple[str, ...]) -> list[str]:
    """A template's arguments as checked: each metavariable of :data:`PLACEHOLDERS` by its
    value, ``...`` as an option's value by '', and ``...`` for more flags dropped."""
    takes_value = value_options(list(argv))
    out: list[str] = []
    for word in argv:
        if word == ELLIPSIS:
            if out and out[-1] in takes_value:
                out.append("")
            continue
        out.append(PLACEHOLDERS.get(word, word))
    return out


# An rlperf call where a shell command starts (prose and program output have none).
CALL = re.compile(r"(?:^|[;&|]\s*|-m\s+)rlperf\s")


def doc_commands() -> list[Command]:
    """Every page's ``rlperf`` calls; a line that is not valid shell keeps its text alone
    (argv ``None``: :func:`test_command_is_accepted` reports it)."""
    commands = []
    for page in pages():
        for line, text, inline in shell_commands(page):
            if not CALL.search(text):
                continue
            try:
                calls: list[tuple[str, ...] | None] = list(rlperf_argv(text))
            except ValueError:  # an unclosed quote
                calls = [None]
            commands += [Command(f"{rel(page)}:{line}", text, a, inline) for a in calls]
    return commands


COMMANDS = doc_commands()


def test_the_docs_show_commands() -> None:
    """The extraction finds the README's commands (else every check below passes on nothing)."""
    readme = [c for c in COMMANDS if c.where.startswith("README.md")]
    assert ("train", "--total-steps", "200000") in {c.argv for c in readme}
    assert {c.argv[0] for c in readme if c.argv} >= {"train", "profile", "compare", "gate"}


# How rlperf's one-line errors say an extra is missing (ale-py, OpenCV, SB3 for --preset atari;
# envpool for --vec-backend envpool).
MISSING_PACKAGE = re.compile(
    r"no module named|ModuleNotFoundError|DependencyNotInstalled|pip install 'rlperf\[", re.I
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_command_is_accepted(command: Command) -> None:
    """The command parses and passes every check made before any work (``check_command``).

    In prose, `rlperf gate` alone names the command: it must exist, its flags need not be
    given. An env whose extra is not installed here (``gym:LunarLander-v3`` needs Box2D,
    ``--preset atari`` ale-py) is skipped, with the reason: its fit cannot be checked without
    it."""
    if command.argv is None:
        pytest.fail(f"{command.where}: `{command.text}` is not valid shell", pytrace=False)
    if command.inline and len(command.argv) == 1:
        assert command.argv[0] in SUBCOMMANDS, f"{command.where}: no command {command.argv[0]}"
        return
    argv = fill_template(command.argv)
    try:
        check_command(argv)
    except UsageError as e:
        if MISSING_PACKAGE.search(str(e)):  # an extra's env, through rlperf's one-line error
            pytest.skip(f"{command.where}: a package is not installed here ({e})")
        pytest.fail(f"{command.where}: `{command.text}` -> rlperf: error: {e}", pytrace=False)
    except DependencyNotInstalled as e:
        pytest.skip(f"{command.where}: the env needs a package not installed here ({e})")


def test_check_command_catches_what_the_run_would() -> None:
    """check_command fails as the run fails: the env/policy fit (the grid's image observations
    and the MLP), an unknown flag, a bad value; and it accepts a help request."""
    with pytest.raises(UsageError, match="use --policy cnn"):
        check_command(["train", "--env", "grid", "--policy", "mlp"])
    with pytest.raises(UsageError, match="unrecognized arguments: --num-env "):
        check_command(["train", "--num-env", "8"])
    with pytest.raises(UsageError, match="--a: unknown setting"):
        check_command(["compare", "--a", "no_such_field=1", "--b", ""])
    with pytest.raises(UsageError, match="max_rounds 3"):
        check_command(["gate", "--base", "HEAD", "--max-rounds", "3"])
    check_command(["train", "--help"])


def test_templates_are_filled() -> None:
    """``...`` drops out as more flags and stands for '' as a value; metavariables are filled."""
    assert fill_template(("train", ELLIPSIS, "--nproc", "N")) == ["train", "--nproc", "2"]
    assert fill_template(("compare", "--a", ELLIPSIS, "--b", "x=1")) == [
        "compare", "--a", "", "--b", "x=1"
    ]  # fmt: skip
    assert rlperf_argv("pip install -e . && rlperf train --seed 1  # a comment") == [
        ("train", "--seed", "1")
    ]
    assert rlperf_argv("torchrun --nproc-per-node 2 -m rlperf train --threads 1 > log") == [
        ("train", "--threads", "1")
    ]


# -- links -------------------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation other than ``-``
    and ``_`` removed, spaces as ``-``."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    kept = "".join(
        c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN" or c.isalnum()
    )
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub makes for ``page``'s headings (repeats as -1, -2 ...), and explicit
    ``id``/``name`` anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line, lang in fenced_lines(page.read_text()):
        if lang is not None:
            continue
        out |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = github_anchor(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every relative link of a page, outside code."""
    found = []
    for number, line, lang in fenced_lines(page.read_text()):
        if lang is not None:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        for target in [*LINK.findall(prose), *REFERENCE.findall(prose)]:
            if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto: ...
                found.append((number, target))
    return found


LINKS = [(page, line, target) for page in pages() for line, target in links(page)]


def test_the_docs_have_links() -> None:
    assert any(t.startswith("docs/") for page, _, t in LINKS if page.name == "README.md")


@pytest.mark.parametrize(
    ("page", "line", "target"), LINKS, ids=[f"{rel(p)}:{n}" for p, n, _ in LINKS]
)
def test_link_resolves(page: Path, line: int, target: str) -> None:
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    where = f"{rel(page)}:{line}: ({target})"
    assert resolved.exists(), f"{where}: no file {path}"
    if anchor and resolved.suffix == ".md":
        assert anchor.lower() in anchors(resolved), f"{where}: no heading #{anchor}"


# -- size and machine paths ---------------------------------------------------------------------
# A reference page says how things work today and stays readable top to bottom; dated narratives
# go to docs/journal/ (no limit there: it is append-only).
REFERENCE_PAGE_MAX_LINES = 250
README_MAX_LINES = 150
# A folder of the machine a figure was measured on (/work/runs/..., /tmp/x.py, /home/me/...):
# meaningless to a reader, and it names the box instead of the command. A path inside a word
# (docs/workers.md) or a system tool (/usr/bin/time) is not one.
MACHINE_PATH = re.compile(r"(?<![\w.~$-])/(?:work|tmp|root|home|Users|mnt|scratch)(?:/|\b)")


def every_doc() -> list[Path]:
    """Every Markdown file a reader of the repository meets, the journal included."""
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    found += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "benchmarks").rglob("*.md"))
    return [p for p in found if p.exists()]


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_reference_pages_are_short() -> None:
    """Every reference page in docs/ (the journal left out) is at most 250 lines."""
    reference = [p for p in pages() if p.parent == ROOT / "docs"]
    assert len(reference) > 10, "docs/*.md found"
    long = [f"{rel(p)}: {n}" for p in reference if (n := line_count(p)) > REFERENCE_PAGE_MAX_LINES]
    assert not long, f"over {REFERENCE_PAGE_MAX_LINES} lines (narratives: docs/journal/): {long}"


def test_readme_is_short() -> None:
    n = line_count(ROOT / "README.md")
    assert n <= README_MAX_LINES, f"README.md: {n} lines, over {README_MAX_LINES} (details: docs/)"


def test_no_machine_paths() -> None:
    """No doc names a folder of the machine it was written on."""
    found = [
        f"{rel(page)}:{number}: {m.group(0)}"
        for page in every_doc()
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for m in [MACHINE_PATH.search(line)]
        if m
    ]
    assert not found, "machine paths (write PATH, runs/NAME, a relative path):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("line", "is_machine_path"),
    [
        ("rlperf eval /work/runs/HalfCheetah-v5-s1", True),
        ("--cleanrl-script /tmp/ppo_continuous_action.py", True),
        ("(a script in /tmp, not kept)", True),
        ("cd /root && ls", True),
        ("see docs/workers.md and the /home/me/x.py copy", True),
        ("see docs/workers.md (the journal: journal/workers.md)", False),
        ("`/usr/bin/time -v python ...`", False),
        ("--cleanrl-script PATH/ppo_continuous_action.py --run-dir runs/tmp", False),
        ("~/.cache/rlperf/kernels or $TMPDIR/x", False),
    ],
)
def test_machine_path_pattern(line: str, is_machine_path: bool) -> None:
    """The pattern flags a machine's folders and leaves relative paths, placeholders and system
    tools alone."""
    assert bool(MACHINE_PATH.search(line)) == is_machine_path


# -- figures the docs state --------------------------------------------------------------------
def stated(pattern: str) -> list[tuple[str, str]]:
    """``(page:line, the figure)`` for every match of ``pattern`` (one group: the figure, digits
    and commas) across the pages."""
    found = []
    for page in pages():
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for m in re.finditer(pattern, line):
                found.append((f"{rel(page)}:{number}", m.group(1).replace(",", "")))
    return found


def test_gate_max_rounds_as_stated() -> None:
    """ "`--max-rounds` (25)", "default `--max-rounds` is 25", "the default `--max-rounds 25`"."""
    claims = stated(r"`--max-rounds`\s*\((\d+)\)")
    claims += stated(r"default `--max-rounds`(?: is)? \**(\d+)")
    claims += stated(r"default\s+`--max-rounds (\d+)`")
    wrong = [(where, n) for where, n in claims if int(n) != Settings.max_rounds]
    assert not wrong, f"the gate gives up after {Settings.max_rounds} rounds; pages say {wrong}"


def test_gate_threshold_as_stated() -> None:
    """The README's "no slowdown beyond 2%" is the gate's default threshold."""
    claims = stated(r"no slowdown beyond (\d+)%")
    assert claims, "README.md states the gate's threshold"
    wrong = [(w, n) for w, n in claims if int(n) != round(Settings.threshold * 100)]
    assert not wrong, f"the gate's threshold is {Settings.threshold:.0%}; pages say {wrong}"


def test_case_counts_as_stated() -> None:
    """ "every case (101, ...)", "one case per component (31 cases)" for the history set, "(18
    cases)" for the quick set: the registry's counts."""
    counts = {"all": len(all_cases()), "history": len(tagged(HISTORY)), "quick": len(tagged(QUICK))}
    claims = [("all", w, n) for w, n in stated(r"every case \((\d+)")]
    claims += [("history", w, n) for w, n in stated(r"`history`.*\((\d+) cases\)")]
    claims += [("quick", w, n) for w, n in stated(r"`quick`.*\((\d+) cases\)")]
    wrong = [(w, s, n) for s, w, n in claims if int(n) != counts[s]]
    assert not wrong, f"the registry has {counts}; pages say {wrong}"


def test_profile_default_steps_as_stated() -> None:
    """ "rlperf profile ... 100,000 steps" where a page gives profile's default step count."""
    claims = stated(r"default[^.`]*?([\d,]{5,}) steps")
    claims = [(w, n) for w, n in claims if "profile" in w or "profil" in w]
    claims += stated(r"`rlperf profile`[^.]*?defaults? to ([\d,]+)")
    claims += stated(r"--total-steps[^.]*?defaults to ([\d,]+) here")
    wrong = [(w, n) for w, n in claims if int(n) != DEFAULT_STEPS]
    assert not wrong, f"profile's default is {DEFAULT_STEPS} steps; pages say {wrong}"


# -- flag tables: "| flag | [config |] default | meaning |" -------------------------------------
def option_defaults() -> dict[str, list[object]]:
    """Every option string of every subcommand -> its defaults (one per subcommand that has it);
    a ``train``-style config flag's default is the default preset's value."""
    from rlperf.config import field_index, preset

    base = preset("default")
    fields = field_index()
    out: dict[str, list[object]] = {}
    for command in SUBCOMMANDS.values():
        for action in command._actions:
            default = action.default
            if default == argparse.SUPPRESS and action.dest in fields:
                default = getattr(getattr(base, fields[action.dest][0]), action.dest)
            for option in action.option_strings:
                out.setdefault(option, []).append(default)
    return out


def literal(cell: str) -> object:
    """A table cell's default as a value: a number, off/on, or a one-word code span; ``...``
    (not a literal: not checked) otherwise."""
    text = cell.strip()
    if text in ("off", "on"):
        return text == "on"
    if re.fullmatch(r"-?[\d,]*\.?\d+(e-?\d+)?", text):
        return float(text.replace(",", ""))
    code = re.fullmatch(r"`([\w.-]+)`", text)
    return code.group(1) if code else ELLIPSIS


def flag_rows() -> list[tuple[str, str, str, str | None]]:
    """``(page:line, --flag, default cell, config cell or None)`` of every table whose header
    has a ``flag`` column and a ``default`` column."""
    rows = []
    for page in pages():
        header: list[str] | None = None
        for number, line, lang in fenced_lines(page.read_text()):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if lang is not None or not line.lstrip().startswith("|"):
                header = None
                continue
            if header is None:
                header = [c.lower() for c in cells]
                continue
            if not {"flag", "default"} <= set(header) or set(line) <= set("|-: "):
                continue
            flag = re.fullmatch(r"`(--[\w-]+)(?: [A-Z_]+)?`", cells[header.index("flag")])
            if flag and len(cells) == len(header):
                config = cells[header.index("config")] if "config" in header else None
                rows.append((f"{rel(page)}:{number}", flag.group(1),
                             cells[header.index("default")], config))  # fmt: skip
    return rows


def test_flag_tables_match_the_code() -> None:
    """A flag table's default (a number, off/on or a one-word code span) is the parser's
    default for that flag, and its config column names the field the flag sets."""
    from rlperf.config import field_index, flag_name

    defaults = option_defaults()
    rows = flag_rows()
    assert rows, "docs/workers.md and docs/gate.md have flag tables"
    wrong = []
    for where, flag, cell, config in rows:
        if flag not in defaults:
            wrong.append(f"{where}: {flag} is no flag of any command")
            continue
        value = literal(cell)
        actual = defaults[flag]
        if value is not ELLIPSIS and value not in actual and str(value) not in map(str, actual):
            wrong.append(f"{where}: {flag} default {cell}, the code's {actual}")
        if config and (m := re.fullmatch(r"`(\w+)\.(\w+)`", config)):
            section, name = m.groups()
            if field_index().get(name, ("",))[0] != section or flag_name(name) != flag:
                wrong.append(f"{where}: {flag} sets no config field {config}")
    assert not wrong, "\n".join(wrong)


def test_every_benchmark_script_is_indexed() -> None:
    """benchmarks/README.md names every script of benchmarks/ (and asv/): the question each
    answers is written down before the script is run."""
    index = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = [p.name for p in (ROOT / "benchmarks").glob("*.py")] + ["asv/"]
    missing = [name for name in scripts if f"`{name}`" not in index]
    assert not missing, f"benchmarks/README.md does not name {missing}"
