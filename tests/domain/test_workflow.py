"""Seed 000's workflow phases: the validation matrix, the tests gate, skips, branch names."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workq.domain.workflow import (
    BRANCH_MAX,
    JUSTIFICATION_MAX,
    PHASE_ORDER,
    TransitionCheck,
    WorkflowPhase,
    at_or_after,
    branch_name,
    check_transition,
    next_phase,
    parse_phase,
)
from workq.errors import InvalidInput, InvalidTransition

P = WorkflowPhase
ALL = list(WorkflowPhase)
ORDER = [
    "selection",
    "research",
    "branch",
    "implementation",
    "testing",
    "commit",
    "pr",
    "review",
]
# Seed 000's Phase Validation Matrix, row by row ("Any -> abandoned" is expanded below).
SEED_ROWS = {
    ("selection", "research"): "none",
    ("research", "branch"): "none",
    ("branch", "implementation"): "none",
    ("implementation", "testing"): "none",
    ("testing", "commit"): "testsPassed=true OR skipJustification",
    ("commit", "pr"): "none",
    ("pr", "review"): "none",
}
TESTS_VALUES = [None, False, True]
JUSTIFICATIONS = [None, "", "   ", "hotfix, tests run in CI"]


def expected_outcome(src: str, dst: str, tests: bool | None, justification: str | None) -> str:
    """The rules written out from the seed: "ok" or the refusal reason."""
    justified = bool(justification and justification.strip())
    if src == "abandoned":
        return "invalid_transition"
    if dst == "abandoned":
        return "ok"
    i, j = ORDER.index(src), ORDER.index(dst)
    if j <= i:
        return "invalid_transition"
    if j - i > 1 and not justified:
        return "invalid_transition"
    if i < ORDER.index("commit") <= j and tests is not True and not justified:
        return "tests_required"
    return "ok"


def outcome(src: WorkflowPhase, dst: WorkflowPhase, tests: bool | None, just: str | None) -> str:
    try:
        check_transition(src, dst, tests_passed=tests, skip_justification=just)
    except InvalidTransition as exc:
        assert exc.code == "INVALID_TRANSITION"
        assert exc.message.startswith(f"Cannot advance from {src.value} to {dst.value}")
        assert exc.facts["from_phase"] == src.value
        assert exc.facts["to_phase"] == dst.value
        assert exc.hint
        return str(exc.facts["reason"])
    return "ok"


def test_the_phase_order_is_the_seeds() -> None:
    assert [p.value for p in PHASE_ORDER] == ORDER
    assert [p.value for p in WorkflowPhase] == [*ORDER, "abandoned"]


@pytest.mark.parametrize(
    ("src", "dst", "tests", "just"),
    list(itertools.product(ALL, ALL, TESTS_VALUES, JUSTIFICATIONS)),
    ids=lambda v: repr(v),
)
def test_every_pair_with_every_argument_follows_the_matrix(
    src: WorkflowPhase, dst: WorkflowPhase, tests: bool | None, just: str | None
) -> None:
    assert outcome(src, dst, tests, just) == expected_outcome(src.value, dst.value, tests, just)


def test_without_arguments_exactly_the_seeds_plain_rows_are_allowed() -> None:
    allowed = {
        (src.value, dst.value)
        for src, dst in itertools.product(ALL, ALL)
        if outcome(src, dst, None, None) == "ok"
    }
    plain = {pair for pair, need in SEED_ROWS.items() if need == "none"}
    to_abandoned = {(p, "abandoned") for p in ORDER}
    assert allowed == plain | to_abandoned


def test_testing_to_commit_needs_tests_passed_or_a_justification() -> None:
    assert outcome(P.TESTING, P.COMMIT, None, None) == "tests_required"
    assert outcome(P.TESTING, P.COMMIT, False, None) == "tests_required"
    assert outcome(P.TESTING, P.COMMIT, False, "  ") == "tests_required"
    passed = check_transition(P.TESTING, P.COMMIT, tests_passed=True, skip_justification=None)
    assert passed.tests_gate == "passed"
    assert passed.tests_passed is True
    justified = check_transition(
        P.TESTING, P.COMMIT, tests_passed=False, skip_justification="  flaky CI, ran locally "
    )
    assert justified.tests_gate == "justified"
    assert justified.justification == "flaky CI, ran locally"
    assert justified.tests_passed is False
    assert not justified.is_skip


def test_the_tests_refusal_uses_the_seed_wording_and_reason() -> None:
    with pytest.raises(InvalidTransition) as info:
        check_transition("testing", "commit", tests_passed=None, skip_justification=None)
    err = info.value
    assert err.message == "Cannot advance from testing to commit: tests must pass first"
    assert err.facts == {"reason": "tests_required", "from_phase": "testing", "to_phase": "commit"}
    assert "testsPassed" in (err.hint or "")
    assert err.to_dict()["code"] == "INVALID_TRANSITION"


def test_an_invalid_transition_uses_the_seed_message() -> None:
    with pytest.raises(InvalidTransition) as info:
        check_transition("pr", "research", tests_passed=None, skip_justification=None)
    assert info.value.message == "Cannot advance from pr to research"
    assert info.value.facts["reason"] == "invalid_transition"
    assert "review" in (info.value.hint or "")


def test_skipping_needs_a_justification_and_names_the_skipped_phases() -> None:
    with pytest.raises(InvalidTransition) as info:
        check_transition("research", "testing", tests_passed=None, skip_justification=None)
    assert info.value.facts["reason"] == "invalid_transition"
    assert info.value.facts["skipped"] == ["branch", "implementation"]
    assert "skipJustification" in (info.value.hint or "")

    check = check_transition("research", "testing", tests_passed=None, skip_justification="docs")
    assert check.skipped == (P.BRANCH, P.IMPLEMENTATION)
    assert check.is_skip
    assert check.justification == "docs"
    assert check.tests_gate is None


def test_a_justified_skip_past_commit_also_covers_the_tests_gate() -> None:
    check = check_transition("selection", "review", tests_passed=None, skip_justification="typo")
    assert check.skipped == tuple(PHASE_ORDER[1:-1])
    assert check.tests_gate == "justified"
    check = check_transition("implementation", "pr", tests_passed=True, skip_justification="x")
    assert check.tests_gate == "passed"
    # tests_passed alone does not justify skipping phases
    assert outcome(P.IMPLEMENTATION, P.PR, True, None) == "invalid_transition"


def test_moves_after_commit_ignore_the_tests_gate() -> None:
    check = check_transition("commit", "pr", tests_passed=False, skip_justification=None)
    assert check.tests_gate is None
    assert check.tests_passed is False


def test_any_phase_may_be_abandoned_and_abandoned_is_final() -> None:
    for phase in PHASE_ORDER:
        check = check_transition(phase, "abandoned", tests_passed=None, skip_justification=None)
        assert check.abandons
        assert check.skipped == ()
        assert check.tests_gate is None
    for target in ALL:
        with pytest.raises(InvalidTransition) as info:
            check_transition("abandoned", target, tests_passed=True, skip_justification="please")
        assert "final" in (info.value.hint or "")


def test_staying_put_or_going_back_to_selection_is_refused() -> None:
    for phase in ALL:
        assert outcome(phase, phase, True, "why") == "invalid_transition"
        assert outcome(phase, P.SELECTION, True, "why") == "invalid_transition"


def test_the_result_records_the_move() -> None:
    check = check_transition(P.BRANCH, P.IMPLEMENTATION, tests_passed=None, skip_justification="")
    assert check == TransitionCheck(P.BRANCH, P.IMPLEMENTATION, (), None, None, None)
    assert not check.is_skip
    assert not check.abandons


def test_phases_may_be_given_as_text_in_any_case() -> None:
    check = check_transition(" Research ", "BRANCH", tests_passed=None, skip_justification=None)
    assert (check.previous, check.current) == (P.RESEARCH, P.BRANCH)


@pytest.mark.parametrize("bad", ["", "done", "re search", "selection\x00", "ABANDONED!"])
def test_an_unknown_phase_is_invalid_input(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_transition(bad, "research", tests_passed=None, skip_justification=None)
    with pytest.raises(InvalidInput):
        check_transition("selection", bad, tests_passed=None, skip_justification=None)


def test_parse_phase_rejects_non_text() -> None:
    with pytest.raises(InvalidInput, match="unknown workflow phase"):
        parse_phase(3)
    assert parse_phase("Pr") is P.PR


def test_bad_argument_types_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="testsPassed"):
        check_transition("testing", "commit", tests_passed="yes", skip_justification=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="testsPassed"):
        check_transition("testing", "commit", tests_passed=1, skip_justification=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="skipJustification"):
        check_transition("testing", "commit", tests_passed=None, skip_justification=42)  # type: ignore[arg-type]


def test_a_justification_is_bounded() -> None:
    ok = "x" * JUSTIFICATION_MAX
    check = check_transition("testing", "commit", tests_passed=None, skip_justification=ok)
    assert check.justification == ok
    with pytest.raises(InvalidInput, match="limit"):
        check_transition("testing", "commit", tests_passed=None, skip_justification=ok + "x")


def test_next_phase_and_at_or_after() -> None:
    assert [next_phase(p) for p in PHASE_ORDER] == [*PHASE_ORDER[1:], None]
    assert next_phase(P.ABANDONED) is None
    assert at_or_after(P.BRANCH, P.BRANCH)
    assert at_or_after(P.REVIEW, P.PR)
    assert not at_or_after(P.RESEARCH, P.BRANCH)
    assert not at_or_after(P.ABANDONED, P.SELECTION)
    assert not at_or_after(P.REVIEW, P.ABANDONED)


# --- property tests over random sequences ---------------------------------------------------

attempts = st.lists(
    st.tuples(
        st.sampled_from(ALL),
        st.sampled_from(TESTS_VALUES),
        st.sampled_from(JUSTIFICATIONS),
    ),
    max_size=40,
)


@given(attempts)
def test_accepted_runs_only_move_forward_and_stop_at_abandoned(
    steps: list[tuple[WorkflowPhase, bool | None, str | None]],
) -> None:
    phase = P.SELECTION
    history = [phase]
    for target, tests, just in steps:
        try:
            check = check_transition(phase, target, tests_passed=tests, skip_justification=just)
        except InvalidTransition as exc:
            assert exc.facts["reason"] in {"invalid_transition", "tests_required"}
            assert expected_outcome(phase.value, target.value, tests, just) != "ok"
            continue
        assert expected_outcome(phase.value, target.value, tests, just) == "ok"
        assert check.previous is phase
        assert phase is not P.ABANDONED, "nothing leaves abandoned"
        if target is not P.ABANDONED:
            assert PHASE_ORDER.index(target) > PHASE_ORDER.index(phase)
            gap = PHASE_ORDER.index(target) - PHASE_ORDER.index(phase) - 1
            assert len(check.skipped) == gap
            assert (gap > 0) <= (check.justification is not None)
        crossed = at_or_after(target, P.COMMIT) and not at_or_after(phase, P.COMMIT)
        assert (check.tests_gate is not None) == crossed
        if check.tests_gate == "justified":
            assert check.justification is not None
        phase = target
        history.append(phase)
    # the accepted phases, abandoned aside, are strictly increasing
    positions = [PHASE_ORDER.index(p) for p in history if p is not P.ABANDONED]
    assert positions == sorted(set(positions))
    assert history.count(P.ABANDONED) <= 1
    if P.ABANDONED in history:
        assert history[-1] is P.ABANDONED


@given(st.lists(st.sampled_from(PHASE_ORDER[1:]), max_size=20))
def test_stepping_one_phase_at_a_time_with_tests_passed_always_works(
    targets: list[WorkflowPhase],
) -> None:
    phase = P.SELECTION
    for _ in targets:
        following = next_phase(phase)
        if following is None:
            break
        check_transition(phase, following, tests_passed=True, skip_justification=None)
        phase = following
    assert phase is PHASE_ORDER[min(len(targets), len(PHASE_ORDER) - 1)]


# --- branch names ---------------------------------------------------------------------------

BRANCH_RE = re.compile(r"[1-9][0-9]*-[a-z0-9]+(?:-[a-z0-9]+)*")


@pytest.mark.parametrize(
    ("number", "title", "expected"),
    [
        (42, "Add JWT refresh tokens", "42-add-jwt-refresh-tokens"),
        (7, "  Fix: crash on  empty input!! ", "7-fix-crash-on-empty-input"),
        (3, "Don't lose the lease", "3-dont-lose-the-lease"),
        (9, "Café au lait naïve résumé", "9-cafe-au-lait-naive-resume"),
        (5, "日本語のタイトル", "5-issue"),
        (5, "", "5-issue"),
        (5, "---", "5-issue"),
        (12, "feat/ui: ../../etc/passwd", "12-feat-ui-etc-passwd"),
        (1, "v2.0 release.lock", "1-v2-0-release-lock"),
        (8, "snake_case and CamelCase", "8-snake-case-and-camelcase"),
    ],
)
def test_branch_name_examples(number: int, title: str, expected: str) -> None:
    assert branch_name(number, title) == expected


def test_branch_name_cuts_at_a_word_boundary() -> None:
    title = "implement the thing that does many many things across the code base"
    name = branch_name(123, title)
    assert len(name) <= BRANCH_MAX
    assert name == "123-implement-the-thing-that-does-many-many-things-across"
    assert title.replace(" ", "-").startswith(name.removeprefix("123-"))


def test_branch_name_cuts_a_single_long_word() -> None:
    name = branch_name(1, "x" * 500)
    assert name == "1-" + "x" * (BRANCH_MAX - 2)


@pytest.mark.parametrize("number", [0, -1, True, 1.5, "3", None])
def test_branch_name_needs_a_positive_integer(number: object) -> None:
    with pytest.raises(InvalidInput):
        branch_name(number, "title")  # type: ignore[arg-type]


def test_branch_name_refuses_a_number_that_leaves_no_room() -> None:
    assert branch_name(2**31 - 1, "x").startswith("2147483647-")
    with pytest.raises(InvalidInput):
        branch_name(10**60, "title")


def test_branch_name_needs_a_text_title() -> None:
    with pytest.raises(InvalidInput):
        branch_name(1, None)  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=2**31 - 1), st.text(max_size=300))
def test_branch_names_are_always_safe_and_bounded(number: int, title: str) -> None:
    name = branch_name(number, title)
    assert BRANCH_RE.fullmatch(name), name
    assert len(name) <= BRANCH_MAX
    assert name.startswith(f"{number}-")
    assert name.isascii()
    assert branch_name(number, title) == name


@pytest.mark.parametrize("bad", ["ok\x9b2J", "ok\x1b[2J", "trailing next line\x85", "nul\x00"])
def test_a_justification_holds_no_control_characters(bad: str) -> None:
    with pytest.raises(InvalidInput, match="control character"):
        check_transition("testing", "commit", tests_passed=None, skip_justification=bad)
