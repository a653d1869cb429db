"""Output models of the tools that return something the shared schemas do not describe."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from workq.schemas import (
    Comment,
    Event,
    IssueListItem,
    NotReady,
    ReadyIssue,
)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Ready(_Out):
    issue: ReadyIssue | None = Field(description="null when nothing is ready")
    # Only with explain=true: an answer without it stays {"issue": ...}.
    not_ready: list[NotReady] | None = Field(default=None, exclude_if=lambda v: v is None)


class ListedIssue(IssueListItem):
    description: str | None = None


class IssueList(_Out):
    items: list[ListedIssue]
    has_more: bool
    next_cursor: str | None = None


class Waiting(_Out):
    number: int
    waits_on: list[int]


class Renewed(_Out):
    renewed: int = Field(description="How many claims had their lease extended")
    lease_expires_at: datetime
    waiting: list[Waiting] = Field(
        default_factory=list,
        description="Renewed claims that now wait on unfinished issues (not completable yet)",
    )


class History(_Out):
    events: list[Event]
    comments: list[Comment]
    has_more: bool = Field(description="More events: pass next_after_id as after_id")
    next_after_id: int | None = None
