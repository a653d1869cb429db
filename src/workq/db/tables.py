"""The models' tables, typed as Core tables for the statements of the services."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table

from workq.db.models import (
    CommentRow,
    CounterRow,
    DependencyRow,
    EventRow,
    GitHubCommentRow,
    GitHubLinkRow,
    GitHubMirrorRow,
    GitHubOutboxRow,
    IssueRow,
    LabelRow,
    PlanIssueRow,
    PlanRow,
    WorkflowRow,
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
