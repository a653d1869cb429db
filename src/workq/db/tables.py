"""The schema's tables, for the statements of the services, and typed records of their rows."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from workq.db.models import (
    agents,
    comments,
    counters,
    dependencies,
    events,
    gate_runs,
    github_comments,
    github_links,
    github_mirror,
    github_outbox,
    github_pulls,
    issue_branches,
    issues,
    labels,
    landings,
    notices,
    notify_sinks,
    plan_issues,
    plans,
    policies,
    repositories,
    reservations,
    run_bindings,
    tasks,
    touches,
    workflows,
    worktrees,
)

__all__ = [
    "IssueRecord",
    "agents",
    "comments",
    "counters",
    "dependencies",
    "events",
    "gate_runs",
    "github_comments",
    "github_links",
    "github_mirror",
    "github_outbox",
    "github_pulls",
    "issue_branches",
    "issues",
    "labels",
    "landings",
    "notices",
    "notify_sinks",
    "plan_issues",
    "plans",
    "policies",
    "repositories",
    "reservations",
    "run_bindings",
    "tasks",
    "touches",
    "workflows",
    "worktrees",
]


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
