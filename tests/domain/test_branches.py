"""Branch names of issue worktrees, and the folder a branch's worktree goes in."""

from __future__ import annotations

import pytest

from workq.domain.branches import folder_name, issue_branch, issue_number


def test_issue_branch_is_type_number_slug() -> None:
    assert issue_branch("bug", 12, "Fix the login page!") == "bug/12-fix-the-login-page"
    assert issue_branch("feature", 7, "Café au lait") == "feature/7-cafe-au-lait"


@pytest.mark.parametrize(
    ("branch", "number"),
    [
        ("bug/12-fix-the-login-page", 12),
        ("agit/3-fix-auth", 3),
        ("feature/7-x", 7),
        ("main", None),
        ("bug/0-zero", None),
        ("12-no-type", None),
        ("bug/12", None),
    ],
)
def test_issue_number_reads_the_branch_back(branch: str, number: int | None) -> None:
    assert issue_number(branch) == number


@pytest.mark.parametrize(
    "branch", ["../../etc", "/abs/path", "..", ".", "a/../b", "x\x00y", "", "-rf"]
)
def test_folder_name_is_one_safe_component(branch: str) -> None:
    name = folder_name(branch)
    assert name not in ("", ".", "..")
    assert "/" not in name and "\x00" not in name
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    assert not name.startswith((".", "-"))
