"""Output models of the tools that return something the shared schemas do not describe."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

from workq.schemas import (
    Comment,
    Event,
    IssueListItem,
    IssueType,
    NotReady,
    Priority,
    ReadyIssue,
)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


# A field left out of the answer while unset: it is never null on the wire, so its schema
# has no null branch (28 bytes of every agent's context per field).
Unset = SkipJsonSchema[None]


def _unset(value: object) -> bool:
    return value is None


# issue_ready's answer: the ready issue's fields flat, as its text shows them (absent when
# nothing is ready), then the same issue under ``issue`` (null when nothing is ready), as
# earlier releases answered; its schema says only "an object or null" (the flat fields
# describe it), which keeps the default toolsets' tools/list within its budget.
class Ready(_Out):
    number: int | Unset = Field(default=None, exclude_if=_unset)
    title: str | Unset = Field(default=None, exclude_if=_unset)
    description: str | Unset = Field(default=None, exclude_if=_unset)
    priority: Priority | Unset = Field(default=None, exclude_if=_unset)
    issue_type: IssueType | Unset = Field(default=None, exclude_if=_unset)
    agent: str | Unset = Field(default=None, exclude_if=_unset)
    created_at: datetime | Unset = Field(default=None, exclude_if=_unset)
    issue: Annotated[
        ReadyIssue | None,
        WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "null"}]}),
    ] = Field(description="null when nothing is ready")
    # Only with explain=true.
    not_ready: list[NotReady] | Unset = Field(default=None, exclude_if=_unset)

    @classmethod
    def of(cls, issue: ReadyIssue | None, not_ready: list[NotReady] | None = None) -> Ready:
        flat = dict(issue) if issue is not None else {}
        return cls(**flat, issue=issue, not_ready=not_ready)


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
