"""Output models of the tools that return something the shared schemas do not describe."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from workq.schemas import (
    Comment,
    Event,
    IssueListItem,
    NotReady,
    ReadyIssue,
)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


# A field left out of the answer while unset: it is never null on the wire, so its schema
# has no null branch (28 bytes of every agent's context per field).
Unset = SkipJsonSchema[None]


class Ready(_Out):
    issue: ReadyIssue | None = Field(description="null when nothing is ready")
    # Only with explain=true: an answer without it stays {"issue": ...}.
    not_ready: list[NotReady] | Unset = Field(default=None, exclude_if=lambda v: v is None)


class ListedIssue(IssueListItem):
    """issue_list's items leave unset fields out."""

    claimed_by: str | Unset = None
    blocked_reason: str | Unset = None
    waiting_on: list[int] | Unset = None
    description: str | Unset = None


class IssueList(_Out):
    items: list[ListedIssue]
    has_more: bool
    next_cursor: str | Unset = None


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
