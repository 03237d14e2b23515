"""The section primitive: nesting, the decorator and context manager, enable/disable/reset."""

from __future__ import annotations

import rlperf
from rlperf.timing.sections import NULL_SECTION, Profiler


def names_and_calls(prof: Profiler) -> dict[str, tuple[str | None, int]]:
    return {s.name: (s.parent, s.calls) for s in prof.stats()}


def test_sections_nest_under_the_open_section():
    prof = Profiler()
    for _ in range(3):
        with prof.section("rollout"):
            with prof.section("env_step"):
                with prof.section("physics"):
                    pass
            with prof.section("env_step"):
                pass
    with prof.section("env_step"):  # same leaf name at top level is a different section
        pass
    assert names_and_calls(prof) == {
        "rollout": (None, 3),
        "rollout/env_step": ("rollout", 6),
        "rollout/env_step/physics": ("rollout/env_step", 3),
        "env_step": (None, 1),
    }


def test_timings_are_consistent_per_section():
    prof = Profiler()
    for _ in range(5):
        with prof.section("outer"):
            with prof.section("inner"):
                sum(range(1000))
    stats = {s.name: s for s in prof.stats()}
    outer, inner = stats["outer"], stats["outer/inner"]
    assert 0 < inner.min_ns <= inner.mean_ms * 1e6 <= inner.max_ns
    assert inner.total_ns <= outer.total_ns  # a child never outlasts its parent
    assert prof.totals_s() == {"outer": outer.total_ns / 1e9, "outer/inner": inner.total_ns / 1e9}


def test_decorator_and_context_manager_share_the_global_profiler():
    prof = rlperf.get_profiler()
    prof.reset()

    @rlperf.profile_function("decorated")
    def work(x: int) -> int:
        with rlperf.profile("inside"):
            return x + 1

    with rlperf.profile("user_block"):
        assert work(1) == 2
    assert work(2) == 3
    assert work.__name__ == "work"  # functools.wraps keeps the identity
    calls = names_and_calls(prof)
    assert calls["user_block"] == (None, 1)
    assert calls["user_block/decorated"] == ("user_block", 1)
    assert calls["user_block/decorated/inside"] == ("user_block/decorated", 1)
    assert calls["decorated"] == (None, 1)
    assert calls["decorated/inside"] == ("decorated", 1)
    prof.reset()


def test_decorator_defaults_to_the_qualified_name():
    prof = Profiler()

    @prof.function()
    def helper() -> None:
        pass

    helper()
    assert list(names_and_calls(prof)) == [helper.__wrapped__.__qualname__]


def test_disable_records_nothing_and_enable_resumes():
    prof = Profiler(enabled=False)
    assert prof.section("x") is NULL_SECTION
    with prof.section("x"):
        pass
    assert list(prof.stats()) == []
    prof.enable()
    with prof.section("x"):
        pass
    prof.disable()
    with prof.section("x"):
        pass
    assert names_and_calls(prof) == {"x": (None, 1)}


def test_reset_forgets_timings_but_keeps_working():
    prof = Profiler()
    with prof.section("a"):
        pass
    prof.reset()
    assert list(prof.stats()) == []
    with prof.section("a"):
        pass
    (s,) = prof.stats()
    assert s.calls == 1 and s.total_ns == s.min_ns == s.max_ns > 0


def test_hooks_see_full_paths_in_order():
    prof = Profiler()
    events: list[str] = []
    enter, leave = (lambda p: events.append(f"+{p}")), (lambda p: events.append(f"-{p}"))
    prof.add_hooks(enter, leave)
    with prof.section("a"):
        with prof.section("b"):
            pass
    prof.remove_hooks(enter, leave)
    with prof.section("c"):
        pass
    assert events == ["+a", "+a/b", "-a/b", "-a"]


def test_an_exception_still_closes_the_section():
    prof = Profiler()
    try:
        with prof.section("a"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert prof.current_path is None
    assert names_and_calls(prof) == {"a": (None, 1)}


def test_report_renders_the_nested_table():
    prof = Profiler()
    with prof.section("outer"):
        with prof.section("inner"):
            pass
    text = prof.report(title="mine")
    lines = text.splitlines()
    assert lines[0] == "mine"
    assert any(line.startswith("outer ") for line in lines)
    assert any(line.startswith("  inner ") for line in lines)
    assert lines[-1].startswith("wall")
