"""The answers of the GitHub tools (contract C's typed results, and submit_pr's).

Plain pydantic models with no I/O, so the MCP server can declare the tools' output schemas
without loading the HTTP client until a GitHub tool is called.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

DIFF_DEFAULT_MAX = 100_000


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True)


class PullCreated(_Result):
    pr_number: int
    url: str
    state: str
    draft: bool
    head: str
    base: str


class IssueItem(_Result):
    number: int
    title: str
    state: str
    labels: list[str]
    url: str
    comments: int
    updated_at: datetime


class IssueList(_Result):
    issues: list[IssueItem]
    count: int
    has_more: bool


class IssueDetail(_Result):
    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    labels: list[str]
    assignees: list[str]
    author: str | None
    comments: int
    url: str
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None


class Check(_Result):
    name: str
    kind: Literal["check_run", "status"]
    status: str
    conclusion: str | None
    url: str | None


class Review(_Result):
    user: str | None
    state: str
    submitted_at: datetime | None


class PullStatus(_Result):
    pr_number: int
    url: str
    state: str
    draft: bool
    merged: bool
    mergeable: bool | None
    mergeable_state: str
    not_mergeable_because: list[str]
    checks: list[Check]
    checks_passed: int
    checks_failed: int
    checks_pending: int
    reviews: list[Review]
    approvals: int
    changes_requested: int


class PullDiff(_Result):
    pr_number: int
    diff: str
    size: int
    truncated: bool
    warning: str | None


class LabelsAdded(_Result):
    issue_number: int
    labels: list[str]
    created: list[str]


class IssueClosed(_Result):
    issue_number: int
    state: str
    already_closed: bool
    comment_url: str | None


class Submitted(_Result):
    pr_number: int
    pr_url: str
    issue_number: int
    branch: str
    base: str
    fixes: int | None  # the GitHub twin the pull request closes
    labels: list[str]
    reused: bool  # an open pull request of this branch already existed
