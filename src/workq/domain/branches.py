"""Branch names of issue worktrees: ``{type}/{number}-{slug}`` (contract E's rule), and the
issue number read back from a branch name (``agit/{number}-...`` accepted too)."""

from __future__ import annotations

import re

from workq.domain.workflow import branch_name

_ISSUE_BRANCH = re.compile(r"(?:[a-z]+)/([1-9][0-9]{0,8})-[a-z0-9][a-z0-9-]*")


def issue_branch(issue_type: str, number: int, title: str) -> str:
    """``bug/12-fix-the-login`` for issue #12 of type bug titled "Fix the login"."""
    return f"{issue_type}/{branch_name(number, title)}"


def issue_number(branch: str) -> int | None:
    """The issue a branch named by :func:`issue_branch` (or ``agit/...``) is for."""
    found = _ISSUE_BRANCH.fullmatch(branch)
    return int(found.group(1)) if found else None


def folder_name(branch: str) -> str:
    """The directory a branch's worktree lives in, under the worktree folder: one path
    component, ``[A-Za-z0-9._-]`` only, never ``.`` or ``..``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", branch).strip(".-") or "worktree"
    return name[:120]
