"""Plan mode's pure rules: phases, slugs and paths, the template, emptiness, the checklist."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workq.domain.plan import (
    MAX_GOAL_CHARS,
    MAX_PLAN_CHARS,
    MAX_TASKS,
    MAX_TEAMMATES,
    PHASE_SECTIONS,
    REQUIRED_SECTIONS,
    SLUG_MAX,
    TASK_TITLE_MAX,
    PlanPhase,
    PlanTask,
    assign_agents,
    empty_sections,
    guidance,
    next_phase,
    parse_phase,
    parse_tasks,
    plan_path,
    render_template,
    require_content,
    validate_goal,
    validate_slug,
)
from workq.errors import InvalidInput, InvalidTransition, PlanEmpty

# --- phases ---------------------------------------------------------------------------------


def test_phases_run_explore_to_exit() -> None:
    phase = PlanPhase.EXPLORE
    seen = [phase]
    while phase is not PlanPhase.EXIT:
        phase = next_phase(phase)
        seen.append(phase)
    assert [p.display for p in seen] == ["Explore", "Design", "Review", "Final", "Exit"]
    assert [p.value for p in seen] == ["explore", "design", "review", "final", "exit"]
    assert [p.name for p in seen] == ["EXPLORE", "DESIGN", "REVIEW", "FINAL", "EXIT"]


def test_advancing_past_exit_is_a_clear_error() -> None:
    with pytest.raises(InvalidTransition) as info:
        next_phase(PlanPhase.EXIT)
    err = info.value
    assert err.code == "INVALID_TRANSITION"
    assert "after Exit" in err.message
    assert "exit_plan_mode" in (err.hint or "")
    assert err.facts == {"reason": "no_next_phase", "phase": "exit"}


@pytest.mark.parametrize("text", ["explore", "EXPLORE", "Explore", " explore "])
def test_parse_phase_accepts_any_case(text: str) -> None:
    assert parse_phase(text) is PlanPhase.EXPLORE


@pytest.mark.parametrize("bad", ["", "plan", "explored", None, 1])
def test_parse_phase_rejects_unknown_names(bad: object) -> None:
    with pytest.raises(InvalidInput, match="unknown plan phase"):
        parse_phase(bad)


@pytest.mark.parametrize("phase", list(PlanPhase))
def test_every_phase_has_guidance_saying_what_to_do_and_not(phase: PlanPhase) -> None:
    text = guidance(phase)
    assert text.startswith(phase.display + ":")
    assert "Do not" in text
    assert "Next:" in text
    if phase in PHASE_SECTIONS:
        assert f"## {PHASE_SECTIONS[phase]}" in text
        assert "advance_plan_phase" in text
    else:
        assert "exit_plan_mode" in text
    assert len(text) < 800


def test_guidance_differs_by_phase() -> None:
    assert len({guidance(p) for p in PlanPhase}) == len(PlanPhase)


# --- slugs ----------------------------------------------------------------------------------

SLUG_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


@pytest.mark.parametrize(
    "slug", ["a", "7", "auth-refactor", "vim-mode", "a--b", "x" * SLUG_MAX, "2026-plan-v2"]
)
def test_valid_slugs_are_returned_unchanged(slug: str) -> None:
    assert validate_slug(slug) == slug


@pytest.mark.parametrize(
    "slug",
    [
        "",
        "-a",
        "a-",
        "-",
        "A",
        "Auth",
        "a_b",
        "a.b",
        "a.md",
        ".",
        "..",
        "../x",
        "..%2fx",
        "/abs",
        "a/b",
        "a\\b",
        "a\x00b",
        "a\n",
        "\na",
        " a",
        "a b",
        "é",
        "\uff41",  # fullwidth a
        "a\u200b",
        "x" * (SLUG_MAX + 1),
        "~",
        "$HOME",
        None,
        5,
        b"abc",
        ["a"],
    ],
)
def test_invalid_slugs_are_refused_with_a_clear_message(slug: object) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_slug(slug)
    assert "lowercase" in info.value.message
    assert info.value.facts == {"field": "slug"}
    assert len(info.value.message) < 300


@given(st.text(max_size=80))
def test_a_slug_is_accepted_only_when_it_matches_the_pattern(slug: str) -> None:
    try:
        accepted = validate_slug(slug)
    except InvalidInput:
        assert not SLUG_RE.fullmatch(slug)
    else:
        assert accepted == slug
        assert SLUG_RE.fullmatch(slug)
        assert slug.isascii() and "/" not in slug and "." not in slug


@given(st.from_regex(SLUG_RE, fullmatch=True))
def test_every_slug_matching_the_pattern_is_accepted(slug: str) -> None:
    assert validate_slug(slug) == slug


# --- paths ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared")


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_plan_path_is_inside_the_resolved_folder(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    path = plan_path(plans, "auth-refactor")
    assert path == plans.resolve() / "auth-refactor.md"
    assert path.is_absolute()
    assert not plans.exists(), "plan_path writes nothing"


def test_plan_path_accepts_an_existing_plan_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Plan: a\n")
    assert plan_path(tmp_path, "a") == tmp_path.resolve() / "a.md"


def test_plan_path_resolves_a_relative_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert plan_path(Path("plans"), "x") == tmp_path.resolve() / "plans" / "x.md"


@pytest.mark.parametrize("slug", ["../x", "/etc/passwd", "..", "a/../../b", "x\x00", ""])
def test_plan_path_refuses_escapes(tmp_path: Path, slug: str) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    with pytest.raises(InvalidInput):
        plan_path(plans, slug)
    assert listing(tmp_path) == ["plans"]


def test_plan_path_refuses_a_symlinked_plan_file(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    (plans / "evil.md").symlink_to(outside)
    with pytest.raises(InvalidInput, match="symlink") as info:
        plan_path(plans, "evil")
    assert info.value.facts["path"].endswith("evil.md")
    assert outside.read_text() == "secret\n"


def test_plan_path_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "ghost.md").symlink_to(tmp_path / "would-be-created.md")
    with pytest.raises(InvalidInput, match="symlink"):
        plan_path(plans, "ghost")
    assert not (tmp_path / "would-be-created.md").exists()


def test_plan_path_refuses_a_symlink_to_a_file_inside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real.md")
    with pytest.raises(InvalidInput, match="symlink"):
        plan_path(tmp_path, "alias")


def test_plan_path_refuses_a_directory_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(InvalidInput, match="not a regular file"):
        plan_path(tmp_path, "dir")


def test_a_symlinked_plans_folder_is_followed_once(tmp_path: Path) -> None:
    real = tmp_path / "real-plans"
    real.mkdir()
    link = tmp_path / "plans"
    link.symlink_to(real, target_is_directory=True)
    assert plan_path(link, "p") == real.resolve() / "p.md"


def test_a_plans_folder_in_a_symlink_loop_is_invalid_input(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    with pytest.raises(InvalidInput):
        plan_path(loop / "plans", "p")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slug=st.text(max_size=80))
def test_no_accepted_slug_escapes_the_plans_folder(shared_dir: Path, slug: str) -> None:
    plans = shared_dir / "plans"
    try:
        path = plan_path(plans, slug)
    except InvalidInput:
        return
    root = plans.resolve()
    assert path.parent == root
    assert path.resolve().is_relative_to(root)
    assert path.name == f"{slug}.md"
    assert os.path.normpath(path) == str(path)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    slug=st.one_of(
        st.builds(lambda a, b: f"{a}/{b}", st.text(max_size=10), st.text(max_size=10)),
        st.builds(lambda a: f"../{a}", st.text(max_size=20)),
        st.builds(lambda a: f"/{a}", st.text(max_size=20)),
        st.builds(lambda a: f"{a}\x00", st.text(max_size=20)),
    )
)
def test_separators_parents_and_nul_are_always_refused(shared_dir: Path, slug: str) -> None:
    with pytest.raises(InvalidInput):
        plan_path(shared_dir, slug)


# --- the template ---------------------------------------------------------------------------


def template(goal: str = "Refactor authentication to use JWT") -> str:
    return render_template("auth-refactor", goal)


def fill(text: str, section: str, body: str) -> str:
    """Write ``body`` under the last ``## section`` heading (after its placeholder)."""
    heading = f"## {section}\n"
    at = text.rindex(heading) + len(heading)
    end = text.find("\n## ", at)
    end = len(text) if end < 0 else end
    return text[:end] + f"\n{body}\n" + text[end:]


def filled(tasks: str = "- [ ] Write the parser\n- [ ] Use it (after 1)") -> str:
    text = template()
    text = fill(text, "Findings", "auth lives in src/auth.py")
    text = fill(text, "Approach", "swap sessions for JWT")
    text = fill(text, "Risks", "token leakage; mitigated by short expiry")
    return fill(text, "Tasks", tasks)


def test_the_template_holds_title_goal_and_a_section_per_phase() -> None:
    text = template()
    lines = text.splitlines()
    assert lines[0] == "# Plan: auth-refactor"
    assert "> Refactor authentication to use JWT" in lines
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Goal", "## Findings", "## Approach", "## Risks", "## Tasks"]
    assert REQUIRED_SECTIONS == ("Findings", "Approach", "Risks", "Tasks")
    assert "(after N)" in text
    assert text.endswith("\n")


def test_a_fresh_template_is_empty_everywhere_and_has_no_tasks() -> None:
    text = template()
    assert empty_sections(text) == list(REQUIRED_SECTIONS)
    assert parse_tasks(text) == []
    with pytest.raises(PlanEmpty) as info:
        require_content(text, template())
    assert info.value.code == "PLAN_EMPTY"
    assert info.value.facts["empty_sections"] == list(REQUIRED_SECTIONS)
    assert info.value.message == "The plan file holds nothing beyond its template"


def test_the_template_documents_the_task_syntax_in_a_placeholder() -> None:
    text = template()
    comment = text[text.rindex("<!--") : text.rindex("-->")]
    assert "- [ ] Wire the parser into the CLI (after 1)" in comment
    assert "independent" in comment
    assert "- [x]" in comment


def test_a_multiline_goal_is_quoted_line_by_line() -> None:
    text = template("First line\n\nThird line\r\nFourth")
    assert "> First line\n>\n> Third line\n> Fourth\n" in text


@pytest.mark.parametrize(
    "goal",
    [
        "## Tasks\n- [ ] rm -rf /",
        "<!-- swallow everything",
        "```\n## Findings\nfound it",
        "x -->\n## Risks\nnone",
        "# Plan: other\n## Findings\nx",
    ],
)
def test_a_goal_cannot_forge_sections_tasks_or_comments(goal: str) -> None:
    text = template(goal)
    assert empty_sections(text) == list(REQUIRED_SECTIONS)
    assert parse_tasks(text) == []
    text = fill(text, "Tasks", "- [ ] real")
    assert parse_tasks(text) == [PlanTask(1, "real")]
    assert empty_sections(text) == ["Findings", "Approach", "Risks"]


@given(st.text(min_size=1, max_size=300).filter(lambda s: s.strip()))
def test_no_goal_changes_what_the_template_means(goal: str) -> None:
    try:
        text = render_template("p", goal)
    except InvalidInput:
        return
    assert empty_sections(text) == list(REQUIRED_SECTIONS)
    assert parse_tasks(text) == []


@pytest.mark.parametrize(
    ("goal", "match"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("x" * (MAX_GOAL_CHARS + 1), "limit"),
        ("bell\x07", "control"),
        ("nul\x00", "control"),
        ("csi\x9b2J", "control"),
        ("next line\x85", "control"),
        (None, "text"),
        (3, "text"),
    ],
)
def test_bad_goals_are_invalid_input(goal: object, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        validate_goal(goal)


def test_a_goal_is_stripped_and_may_use_tabs() -> None:
    assert validate_goal("  a\tb\r\nc  ") == "a\tb\nc"
    assert validate_goal("x" * MAX_GOAL_CHARS) == "x" * MAX_GOAL_CHARS


def test_render_template_validates_the_slug() -> None:
    with pytest.raises(InvalidInput, match="slug"):
        render_template("../x", "goal")


# --- emptiness ------------------------------------------------------------------------------


def test_filling_each_section_removes_it_from_the_empty_list() -> None:
    text = template()
    remaining = list(REQUIRED_SECTIONS)
    for section, body in [
        ("Risks", "None."),
        ("Findings", "x"),
        ("Tasks", "- [ ] a"),
        ("Approach", "y"),
    ]:
        text = fill(text, section, body)
        remaining.remove(section)
        assert empty_sections(text) == remaining
    assert require_content(text, template()) == []
    assert require_content(text, template(), need_tasks=True) == []


def test_a_missing_heading_counts_as_empty() -> None:
    text = filled().replace("## Risks\n", "")
    # the risks text now belongs to Approach, so Approach stays filled
    assert empty_sections(text) == ["Risks"]


def test_whitespace_and_comments_are_not_content() -> None:
    text = fill(template(), "Findings", "   \n\t\n<!-- later -->\n<!-- a\nb -->  ")
    assert "Findings" in empty_sections(text)


def test_an_unclosed_comment_hides_the_rest_of_the_file() -> None:
    text = "## Findings\nx\n## Approach\ny <!-- open\n## Risks\nz\n## Tasks\n- [ ] t\n"
    assert empty_sections(text) == ["Risks", "Tasks"]
    assert parse_tasks(text) == []


def test_a_stray_comment_opener_runs_to_the_next_closer() -> None:
    # as in markdown: the Approach heading is swallowed up to its placeholder's "-->"
    text = fill(filled(), "Findings", "<!-- TODO")
    assert empty_sections(text) == ["Approach"]


def test_headings_match_by_first_word_case_and_phase_name() -> None:
    text = "\n".join(
        [
            "# Plan: x",
            "## findings (what I learned)",
            "a",
            "##   DESIGN ##",
            "b",
            "## Risk:",
            "c",
            "## Final tasks",
            "- [ ] d",
        ]
    )
    assert empty_sections(text) == []
    assert parse_tasks(text) == [PlanTask(1, "d")]


def test_unrecognised_headings_end_a_section() -> None:
    text = filled()
    text = text.replace("## Approach\n", "## Approach\n## Notes\nnot design\n")
    assert empty_sections(text) == ["Approach"]


def test_a_level_one_heading_ends_a_section_but_subheadings_do_not() -> None:
    text = "## Findings\n### Details\n## Approach\n# Appendix\nloose text\n"
    assert empty_sections(text) == ["Approach", "Risks", "Tasks"]


def test_headings_inside_fenced_code_do_not_open_sections() -> None:
    text = "## Findings\n```\n## Approach\nx\n```\n"
    assert empty_sections(text) == ["Approach", "Risks", "Tasks"]


def test_a_repeated_heading_counts_once_filled() -> None:
    text = filled() + "\n## Risks\n\n<!-- again -->\n"
    assert empty_sections(text) == []


def test_template_sections_left_empty_are_a_warning_not_a_refusal() -> None:
    text = fill(fill(template(), "Approach", "a"), "Tasks", "- [ ] t")
    assert require_content(text, template()) == ["Findings", "Risks"]


def test_a_plan_in_the_agents_own_shape_is_accepted() -> None:
    own = "# Auth refactor\n\n## Context\nSessions live in src/auth.py.\n\n## Steps\n1. JWT\n"
    assert require_content(own, template()) == []


def test_headings_and_the_goal_alone_are_not_content() -> None:
    bare = template().replace("## Findings", "## Findings\n\n### Notes") + "\n## Extra\n"
    with pytest.raises(PlanEmpty) as info:
        require_content(bare, template())
    assert "exit_plan_mode" in (info.value.hint or "")


def test_launching_a_swarm_needs_at_least_one_open_task() -> None:
    prose_only = filled(tasks="Nothing to do: the code already works.")
    require_content(prose_only, template())
    with pytest.raises(PlanEmpty) as info:
        require_content(prose_only, template(), need_tasks=True)
    assert info.value.facts == {"empty_sections": ["Tasks"]}
    assert "- [ ] title" in info.value.message

    all_done = filled(tasks="- [x] done already")
    with pytest.raises(PlanEmpty):
        require_content(all_done, template(), need_tasks=True)


@pytest.mark.parametrize(
    "text",
    [
        "## x" + " " * 200_000 + "y",
        "## Tasks " + "#" * 200_000 + " x",
        "<!--" * 50_000,
        "## Tasks\n- [ ] a\n- [ ] b (after 1" + " \t" * 100_000 + "x",
        "```\n" * 50_000,
    ],
)
def test_hostile_plans_are_read_in_linear_time(text: str) -> None:
    # A quadratic regex would hang here until pytest-timeout; linear code takes milliseconds.
    try:
        empty_sections(text)
        parse_tasks(text)
    except InvalidInput as exc:
        assert "characters" in exc.message


def test_closing_hashes_and_hash_words_in_headings() -> None:
    assert empty_sections("## Tasks ##\nx\n") == ["Findings", "Approach", "Risks"]
    assert empty_sections("## Tasks#\nx\n") == ["Findings", "Approach", "Risks"]  # first word
    assert empty_sections("## #Tasks\nx\n") == list(REQUIRED_SECTIONS)
    assert empty_sections("####### Tasks\nx\n") == list(REQUIRED_SECTIONS)
    assert empty_sections("##Tasks\nx\n") == list(REQUIRED_SECTIONS)


def test_an_overlong_task_line_is_refused_before_parsing_it() -> None:
    with pytest.raises(InvalidInput, match="characters long"):
        tasks_of("- [ ] a (after " + "1, " * 10_000 + "1)")


def test_an_oversized_plan_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="limit"):
        empty_sections("x" * (MAX_PLAN_CHARS + 1))


# --- tasks ----------------------------------------------------------------------------------


def tasks_of(body: str) -> list[PlanTask]:
    return parse_tasks(f"# Plan: t\n\n## Tasks\n\n{body}\n")


def test_tasks_are_independent_unless_marked() -> None:
    assert tasks_of("- [ ] a\n- [ ] b\n- [ ] c (after 1, 2)\n- [ ] d (after #3)") == [
        PlanTask(1, "a"),
        PlanTask(2, "b"),
        PlanTask(3, "c", (1, 2)),
        PlanTask(4, "d", (3,)),
    ]


@pytest.mark.parametrize(
    ("marker", "deps"),
    [
        ("(after 1)", (1,)),
        ("(After 2)", (2,)),
        ("( after  1 , 2 )", (1, 2)),
        ("(after 2, 1, 2)", (1, 2)),
        ("(after #1 and #2)", (1, 2)),
        ("(after 1,2)  ", (1, 2)),
    ],
)
def test_after_marker_variants(marker: str, deps: tuple[int, ...]) -> None:
    parsed = tasks_of(f"- [ ] a\n- [ ] b\n- [ ] c {marker}")
    assert parsed[2] == PlanTask(3, "c", deps)


@pytest.mark.parametrize(
    "title",
    [
        "c (after the migration)",
        "c (after 1) then more",
        "c (before 1)",
        "c after 1",
        "c (after)",
    ],
)
def test_text_that_is_not_a_trailing_marker_stays_in_the_title(title: str) -> None:
    assert tasks_of(f"- [ ] a\n- [ ] {title}")[1] == PlanTask(2, title)


@pytest.mark.parametrize("deps", ["(after 3)", "(after 4)", "(after 0)", "(after 1, 9)"])
def test_waiting_for_itself_or_a_later_task_is_refused(deps: str) -> None:
    with pytest.raises(InvalidInput, match="earlier") as info:
        tasks_of(f"- [ ] a\n- [ ] b\n- [ ] c {deps}\n- [ ] d")
    assert "task 3 (line 7)" in info.value.message


def test_done_tasks_keep_their_number_and_release_their_dependents() -> None:
    assert tasks_of("- [x] a\n- [ ] b (after 1)\n- [X] c\n- [ ] d (after 2, 3)") == [
        PlanTask(2, "b"),
        PlanTask(4, "d", (2,)),
    ]


def test_other_bullets_count_and_indented_items_do_not() -> None:
    body = "* [ ] star\n+ [ ] plus\n  - [ ] nested detail\n\t- [ ] tabbed\n 1. [ ] numbered"
    assert tasks_of(body) == [PlanTask(1, "star"), PlanTask(2, "plus")]


def test_fenced_code_comments_and_plain_bullets_are_not_tasks() -> None:
    body = "\n".join(
        [
            "Some prose.",
            "- a plain bullet",
            "- [] no space",
            "- [ ]no space after",
            "~~~",
            "- [ ] fenced",
            "~~~",
            "````",
            "```",
            "- [ ] still fenced",
            "````",
            "<!-- - [ ] commented -->",
            "- [ ] real",
        ]
    )
    assert tasks_of(body) == [PlanTask(1, "real")]


def test_a_comment_inside_a_task_line_is_dropped() -> None:
    with pytest.raises(InvalidInput, match="it is the first"):
        tasks_of("- [ ] ship it <!-- friday? --> (after 1)\n")
    assert tasks_of("- [ ] a\n- [ ] ship <!-- friday? --> it (after 1)") == [
        PlanTask(1, "a"),
        PlanTask(2, "ship it", (1,)),
    ]


def test_only_the_tasks_section_is_read_when_it_exists() -> None:
    text = fill(filled(tasks="- [ ] inside"), "Risks", "- [ ] a risk, not a task")
    assert parse_tasks(text) == [PlanTask(1, "inside")]


def test_without_a_tasks_heading_the_whole_file_is_read() -> None:
    assert parse_tasks("notes\n- [ ] one\n## Other\n- [ ] two (after 1)\n") == [
        PlanTask(1, "one"),
        PlanTask(2, "two", (1,)),
    ]


def test_titles_are_trimmed_and_whitespace_collapsed() -> None:
    assert tasks_of("- [ ]    spaced \t  out   title  ") == [PlanTask(1, "spaced out title")]


def test_crlf_files_parse_the_same() -> None:
    text = filled().replace("\n", "\r\n")
    assert empty_sections(text) == []
    assert parse_tasks(text) == parse_tasks(filled())


def test_title_bounds() -> None:
    longest = "t" * TASK_TITLE_MAX
    assert tasks_of(f"- [ ] {longest}") == [PlanTask(1, longest)]
    assert tasks_of(f"- [ ] a\n- [ ] {longest} (after 1)")[1] == PlanTask(2, longest, (1,))
    with pytest.raises(InvalidInput, match="limit"):
        tasks_of(f"- [ ] {longest}x")
    with pytest.raises(InvalidInput, match="no title"):
        tasks_of("- [ ] a\n- [ ]   ")
    with pytest.raises(InvalidInput, match="no title"):
        tasks_of("- [ ] (after 1)")
    with pytest.raises(InvalidInput, match="control"):
        tasks_of("- [ ] bell\x07")


@pytest.mark.parametrize(
    ("title", "match"),
    [
        ("red\x9b31m", "control character U\\+009B"),
        ("one\x85two", "control character U\\+0085"),  # NEL: str.split() takes it as space
        ("one\u2028two", "one line"),
        ("one\u2029two", "one line"),
        ("x\x1ey", "control character U\\+001E"),  # also white space to str.split()
    ],
)
def test_task_titles_pass_the_title_rule_as_written(title: str, match: str) -> None:
    """A task title becomes an issue title: the same rule, checked before its white space is
    collapsed (which would hide NEL and the separators)."""
    with pytest.raises(InvalidInput, match=match) as refused:
        tasks_of(f"- [ ] a\n- [ ] {title} (after 1)")
    assert refused.value.message.startswith("the title of task 2 (line ")


def test_a_task_title_is_measured_once_its_white_space_is_collapsed() -> None:
    spaced = "x " * (TASK_TITLE_MAX // 2)  # 256 characters and a trailing space, collapsed
    assert tasks_of(f"- [ ] {spaced.replace(' ', '   ')}") == [PlanTask(1, spaced.strip())]


def test_task_count_bound() -> None:
    many = "\n".join(f"- [x] t{i}" for i in range(MAX_TASKS - 1)) + "\n- [ ] last"
    assert tasks_of(many) == [PlanTask(MAX_TASKS, "last")]
    with pytest.raises(InvalidInput, match=str(MAX_TASKS)):
        tasks_of(many + "\n- [ ] one too many")


def test_huge_numbers_in_a_marker_do_not_crash() -> None:
    with pytest.raises(InvalidInput, match="characters long"):
        tasks_of("- [ ] a\n- [ ] c (after " + "9" * 5000 + ")")
    with pytest.raises(InvalidInput, match="limit"):  # too many digits: not a marker
        tasks_of("- [ ] a\n- [ ] c (after " + "9" * 2000 + ")")
    with pytest.raises(InvalidInput, match="earlier"):
        tasks_of("- [ ] a\n- [ ] b (after 999999999)")


task_specs = st.lists(
    st.tuples(
        st.text(
            alphabet=st.characters(
                codec="utf-8", exclude_categories=["Cc", "Cs", "Zl", "Zp"], exclude_characters="<"
            ),
            min_size=1,
            max_size=40,
        ).filter(lambda s: s.strip() and s.strip()[-1] != ")"),
        st.booleans(),
        st.sets(st.integers(min_value=0, max_value=50), max_size=4),
    ),
    max_size=25,
)


@given(task_specs)
def test_written_tasks_round_trip(specs: list[tuple[str, bool, set[int]]]) -> None:
    lines = []
    expected = []
    done = set()
    for number, (title, is_done, raw_deps) in enumerate(specs, start=1):
        deps = sorted(d for d in raw_deps if 1 <= d < number)
        marker = f" (after {', '.join(map(str, deps))})" if deps else ""
        lines.append(f"- [{'x' if is_done else ' '}] {title}{marker}")
        if is_done:
            done.add(number)
        else:
            clean = " ".join(title.split())
            expected.append(PlanTask(number, clean, tuple(d for d in deps if d not in done)))
    text = filled(tasks="\n".join(lines) or "prose")
    assert parse_tasks(text) == expected
    for task in parse_tasks(text):
        assert all(d < task.index for d in task.depends_on)
        assert list(task.depends_on) == sorted(set(task.depends_on))


# --- agents ---------------------------------------------------------------------------------


def some_tasks(n: int) -> Iterator[PlanTask]:
    return (PlanTask(i, f"t{i}") for i in range(1, n + 1))


def test_agents_are_dealt_round_robin() -> None:
    assert assign_agents(list(some_tasks(5)), 2) == [
        "teammate-1",
        "teammate-2",
        "teammate-1",
        "teammate-2",
        "teammate-1",
    ]
    assert assign_agents(list(some_tasks(2)), 3) == ["teammate-1", "teammate-2"]
    assert assign_agents([], 3) == []


@pytest.mark.parametrize("count", [0, -1, MAX_TEAMMATES + 1, True, 2.0, "3", None])
def test_teammate_count_is_bounded(count: object) -> None:
    with pytest.raises(InvalidInput, match="teammateCount"):
        assign_agents(list(some_tasks(1)), count)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=120), st.integers(min_value=1, max_value=MAX_TEAMMATES))
def test_round_robin_spreads_evenly(n: int, count: int) -> None:
    agents = assign_agents(list(some_tasks(n)), count)
    assert len(agents) == n
    loads = [agents.count(f"teammate-{k}") for k in range(1, count + 1)]
    assert sum(loads) == n
    assert max(loads) - min(loads) <= 1
    assert set(agents) <= {f"teammate-{k}" for k in range(1, count + 1)}


@pytest.mark.parametrize(
    "line",
    [
        "- [ ] c (touches src/auth/**, tests/test_auth.py) (after 1)",
        "- [ ] c (after 1) (touches src/auth/**, tests/test_auth.py)",
        "- [ ] c (Touches  src/auth/** ,tests/test_auth.py , src/auth/**)(after #1)",
    ],
)
def test_touches_marker_in_either_order(line: str) -> None:
    parsed = tasks_of(f"- [ ] a\n{line}")[1]
    assert parsed == PlanTask(2, "c", (1,), ("src/auth/**", "tests/test_auth.py"))


def test_a_bad_glob_in_a_task_is_refused_naming_the_tasks() -> None:
    with pytest.raises(InvalidInput) as info:
        tasks_of("- [ ] a (touches ../outside/**)")
    assert info.value.facts.get("field") == "tasks"
