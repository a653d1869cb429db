"""agit's shapes (contract D): a task's id and status, the arguments' types, and each tool's
answer."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from workq.domain.names import REPOSITORY_NAME_MAX
from workq.schemas import RUN_ID_MAX, Issue, LandingStatus, Status

RepoName = Annotated[
    str, Field(min_length=1, max_length=REPOSITORY_NAME_MAX, description="Repository name")
]
TaskId = Annotated[str, Field(min_length=1, max_length=32, description="Task id: t-<number>")]
WorktreeId = Annotated[str, Field(min_length=1, max_length=64, description="Worktree id")]
AgentId = Annotated[str, Field(min_length=1, max_length=RUN_ID_MAX, description="Agent id")]

_TASK = re.compile(r"(?:t-|#)?([1-9][0-9]{0,8})")


def task_id(number: int) -> str:
    return f"t-{number}"


def task_number(value: str) -> int | None:
    found = _TASK.fullmatch(value.strip())
    return int(found.group(1)) if found else None


def task_status(issue: Issue) -> str:
    """agit's task status of an issue."""
    if issue.status == Status.DONE:
        return "completed"
    if issue.is_blocked:
        return "failed"
    return "in_progress" if issue.status == Status.IN_PROGRESS else "pending"


class RepoItem(BaseModel):
    name: str
    path: str
    default_branch: str
    remote_url: str | None
    worktree_count: int
    task_count: int


class Repos(BaseModel):
    repos: list[RepoItem]


class WorktreeItem(BaseModel):
    id: str
    branch: str
    status: str
    agent: str | None
    task: str | None
    path: str
    # The task's id (``task`` is its title, as the contract has it): what claim, complete
    # and merge take, with no other call to find it.
    task_id: str | None = None


class TaskItem(BaseModel):
    id: str
    description: str
    status: str
    agent: str | None
    created_at: datetime
    # For a pending task: whether a claim would take it now (not waiting on unfinished
    # tasks, no paths reserved by another holder).
    claimable: bool | None = None


class RepoStatus(BaseModel):
    name: str
    path: str
    default_branch: str
    remote_url: str | None
    worktrees: list[WorktreeItem]
    tasks: list[TaskItem]
    conflicts: list[dict[str, Any]]


class Spawned(BaseModel):
    worktree_id: str
    path: str
    branch: str
    task_id: str


class Removed(BaseModel):
    removed: bool
    worktree_id: str


class Tasks(BaseModel):
    tasks: list[TaskItem]


class ClaimedTask(BaseModel):
    claimed: bool
    task_id: str
    agent_id: str
    path: str | None = None
    branch: str | None = None
    worktree_id: str | None = None  # what agit_merge_worktree and agit_remove_worktree take
    # The claim as issue_claim answers it, beside the contract's keys.
    number: int | None = None
    fence: int | None = None
    lease_expires_at: datetime | None = None


class CompletedTask(BaseModel):
    completed: bool
    task_id: str


class Merged(BaseModel):
    merged: bool
    branch: str
    into: str
    worktree_cleaned: bool
    commit: str | None = None
    already_merged: bool = False
    note: str | None = None
    landing: SkipJsonSchema[LandingStatus | None] = None  # through a pull request


class Registered(BaseModel):
    agent_id: str
    name: str
    type: str


class Beat(BaseModel):
    ok: bool
    agent_id: str
    renewed: int = 0
