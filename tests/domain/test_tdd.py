"""Seed 004's rules, pure: TDD-001 (what a test file is), TDD-002 (branch names), TDD-003
(the commit message), comment prefixes and acceptance criteria."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workq.domain import tdd
from workq.domain.checklists import checkbox_items
from workq.errors import InvalidInput, RuleViolation


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_app.py",
        "src/pkg/tests/helpers.py",
        "test_app.py",
        "pkg/app_test.py",
        "web/src/button.test.tsx",
        "web/src/button.spec.js",
        "__tests__/thing.js",
        "cmd/main_test.go",
        "tests/fixtures/data.json",
        "conftest.py",
    ],
)
def test_test_files(path: str) -> None:
    assert tdd.is_test_file(path)


@pytest.mark.parametrize(
    "path",
    ["src/app.py", "README.md", "testing.py", "src/contest.py", "web/src/button.tsx", "latest.py"],
)
def test_other_files(path: str) -> None:
    assert not tdd.is_test_file(path)


def test_a_red_commit_names_the_files_that_are_not_tests() -> None:
    tdd.red_only_tests(["tests/test_a.py", "b_test.py"])
    with pytest.raises(RuleViolation) as caught:
        tdd.red_only_tests(["tests/test_a.py", "src/a.py", "README.md"])
    assert caught.value.code == "ERR_RULE_VIOLATION"
    assert caught.value.facts["rule"] == "TDD-001"
    assert caught.value.facts["files"] == ["README.md", "src/a.py"]


@pytest.mark.parametrize(
    ("kind", "name"),
    [("feature", "Upper"), ("feature", "with space"), ("feature", "-lead"), ("hotfix", "x")],
)
def test_tdd_002_refuses_bad_branch_names(kind: str, name: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        tdd.feature_branch(kind, name)
    assert caught.value.facts["rule"] == "TDD-002"


def test_tdd_002_accepts_kebab_names() -> None:
    assert tdd.feature_branch("fix", "config-schemas-week1") == "fix/config-schemas-week1"


def test_the_messages_of_the_phases() -> None:
    red = tdd.commit_message("red", "SizePlan DTO", ["covers rounding", "covers limits"], "0/2")
    assert red == (
        "test: add failing tests for SizePlan DTO\n\n"
        "- covers rounding\n- covers limits\n\n"
        "Status: RED (0/2 tests)\n"
    )
    green = tdd.commit_message("green", "SizePlan DTO", test_count="2/2", quality_gates="5/5")
    assert green.splitlines()[0] == "feat: implement SizePlan DTO"
    assert green.endswith("Status: GREEN (2/2 tests)\nQuality gates: 5/5\n")
    assert tdd.commit_message("refactor", "x").startswith("refactor: refactor x")
    assert tdd.commit_message("docs", "x") == "docs: document x\n"
    for_issue = tdd.commit_message("docs", "x", issue=(12, "Fix  the\nlogin"))
    assert for_issue == "docs: document x (#12)\n\nIssue: #12 Fix the login\n"
    # The green phase of a bug is a fix; a header with no room for the number goes without.
    bug = tdd.commit_message("green", "the login", issue=(12, "Login"), issue_type="bug")
    assert bug.splitlines()[0] == "fix: implement the login (#12)"
    assert tdd.commit_message("red", "x", issue=(12, "L"), issue_type="bug").startswith("test:")
    long = tdd.commit_message("green", "y" * 80, issue=(12, "Long"))
    assert long.splitlines()[0] == "feat: implement " + "y" * 80
    assert long.endswith("Issue: #12 Long\n")


def test_tdd_003_refuses_what_is_not_a_conventional_commit() -> None:
    for message in ("no type here", "feat:missing space", "feat: x\nbody without gap", "x" * 80):
        with pytest.raises(RuleViolation) as caught:
            tdd.check_conventional(message)
        assert caught.value.facts["rule"] == "TDD-003"
    tdd.check_conventional("fix(parser)!: handle empty input\n\nbody")
    with pytest.raises(RuleViolation):  # a header over 100 characters
        tdd.commit_message("green", "y" * 95)


@given(st.text(max_size=120))
def test_a_message_is_conventional_or_refused(component: str) -> None:
    try:
        message = tdd.commit_message("green", component)
    except (InvalidInput, RuleViolation):
        return
    tdd.check_conventional(message)
    assert "\n" not in message.splitlines()[0]


def test_comment_prefixes() -> None:
    assert tdd.comment_body("halfway", "progress") == "**📝 Progress Update**\n\nhalfway"
    assert tdd.comment_body("why?", "question").startswith("**❓ Question**")
    assert tdd.comment_body("stuck", "blocker").startswith("**🚫 Blocker**")
    assert tdd.comment_body("fixed", "resolution").startswith("**✅ Resolution**")
    assert tdd.comment_body("plain", None) == "plain"


def test_acceptance_criteria_are_the_checkbox_lines() -> None:
    body = (
        "Intro\n\n## Acceptance Criteria\n- [ ] parses empty input\n* [x] keeps order\n"
        "  - [ ] nested one\n- not a box\n```\n- [ ] inside code\n```\n- [X] last\n"
    )
    assert checkbox_items(body) == [
        "parses empty input",
        "keeps order",
        "nested one",
        "last",
    ]
