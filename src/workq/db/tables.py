"""The models' tables, typed as Core tables for the statements of the services."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple, cast

from sqlalchemy import Table

from workq.db.models import (
    AgentRow,
    CommentRow,
    CounterRow,
    DependencyRow,
    EventRow,
    GateRunRow,
    GitHubCommentRow,
    GitHubLinkRow,
    GitHubMirrorRow,
    GitHubOutboxRow,
    GitHubPullRow,
    IssueBranchRow,
    IssueRow,
    LabelRow,
    PlanIssueRow,
    PlanRow,
    RepositoryRow,
    ReservationRow,
    TouchRow,
    WorkflowRow,
    WorktreeRow,
)

issues = cast(Table, IssueRow.__table__)
labels = cast(Table, LabelRow.__table__)
dependencies = cast(Table, DependencyRow.__table__)
comments = cast(Table, CommentRow.__table__)
events = cast(Table, EventRow.__table__)
counters = cast(Table, CounterRow.__table__)

# The GitHub mirror (migration 0004_outbox).
github_mirror = cast(Table, GitHubMirrorRow.__table__)
github_outbox = cast(Table, GitHubOutboxRow.__table__)
github_links = cast(Table, GitHubLinkRow.__table__)
github_comments = cast(Table, GitHubCommentRow.__table__)

# Plan mode and workflow phases (migration 0005_plans).
plans = cast(Table, PlanRow.__table__)
plan_issues = cast(Table, PlanIssueRow.__table__)
workflows = cast(Table, WorkflowRow.__table__)

# Pull requests opened for issues (migration 0007_github_pulls).
github_pulls = cast(Table, GitHubPullRow.__table__)

# Agent workspaces (migration 0008_agit).
repositories = cast(Table, RepositoryRow.__table__)
worktrees = cast(Table, WorktreeRow.__table__)
agents = cast(Table, AgentRow.__table__)
# File reservations (migration 0009_reserve_touches).
touches = cast(Table, TouchRow.__table__)
reservations = cast(Table, ReservationRow.__table__)
# The branch of an issue's work (migration 0011_gitflow_issue_branches).
issue_branches = cast(Table, IssueBranchRow.__table__)


class IssueRecord(NamedTuple):
    """A row of ``issues``, every column in table order (``select(issues)``)."""

    id: str
    number: int
    title: str
    description: str
    status: str
    priority: int
    issue_type: str
    agent: str
    is_blocked: bool
    blocked_reason: str | None
    open_blockers: int
    claimed_by: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    fence: int
    repository: str | None


# Quality gate runs, the evidence of the tests gate (migration 0010_gates).
gate_runs = cast(Table, GateRunRow.__table__)
