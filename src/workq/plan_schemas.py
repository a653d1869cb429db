"""Plan mode and workflow results that cross layers: the services return them, the server
and the CLI show them. Pydantic only: no database, no I/O (the server imports this module
at start, before any database code)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from workq.domain.plan import PlanPhase
from workq.domain.workflow import WorkflowPhase
from workq.schemas import Status

__all__ = [
    "Advanced",
    "Entered",
    "Exited",
    "PhaseChange",
    "Plan",
    "PlanDetail",
    "PlanIssue",
    "PlanStatus",
    "WorkflowChange",
    "WorkflowStatus",
    "shown",
]


def shown(path: str | Path) -> str:
    """A path as people read it: relative to the working directory when inside it."""
    absolute = Path(path)
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


# --- plans ---------------------------------------------------------------------------------


class PlanStatus(StrEnum):
    ACTIVE = "active"
    EXITED = "exited"
    ABANDONED = "abandoned"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Plan(_Model):
    id: str
    slug: str
    goal: str
    run_id: str = Field(description="The run id the plan belongs to")
    phase: PlanPhase
    status: PlanStatus
    path: str = Field(description="The plan file, absolute")
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None

    @property
    def shown_path(self) -> str:
        """The plan file as people read it (relative to the working directory if inside)."""
        return shown(self.path)


class PlanIssue(BaseModel):
    """An issue made from (or reused for) one task of a plan."""

    model_config = ConfigDict(frozen=True)

    task: int = Field(description="The task's number in the plan's checklist")
    number: int
    title: str
    agent: str
    status: Status
    waits_for: list[int] = Field(default_factory=list, description="Issue numbers it waits for")
    reused: bool = Field(default=False, description="An earlier launch of this slug made it")


class Entered(_Model):
    plan: Plan
    created_file: bool = Field(description="False: a file with this name existed and was kept")
    resumed: bool = Field(description="This run was already planning this slug")


class Advanced(_Model):
    plan: Plan
    previous: PlanPhase
    empty_sections: list[str] | None = Field(
        description="Sections of the plan file still empty; null when it cannot be read"
    )


class Exited(_Model):
    plan: Plan
    launched: list[PlanIssue] = Field(default_factory=list)
    teammate_count: int | None = None
    empty_sections: list[str] = Field(
        default_factory=list, description="Template sections left empty (a warning)"
    )


class PlanDetail(_Model):
    plan: Plan
    file_exists: bool
    empty_sections: list[str] | None = Field(
        description="Sections of the plan file still empty; null when it cannot be read"
    )
    issues: list[PlanIssue] = Field(default_factory=list, description="What it launched")


# --- workflows -----------------------------------------------------------------------------


class _Camel(BaseModel):
    """Contract B's field names (camelCase) on the wire; snake_case in Python."""

    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class PhaseChange(_Camel):
    from_: WorkflowPhase = Field(alias="from")
    to: WorkflowPhase
    timestamp: datetime


class WorkflowStatus(_Camel):
    issue_number: int
    title: str
    current_phase: WorkflowPhase
    branch_name: str | None
    tests_passed: bool | None
    skip_justification: str | None = Field(description="The last one given")
    pr_number: int | None
    pr_title: str | None
    pr_url: str | None = Field(default=None, description="The pull request submit_pr opened")
    lock_holder: str
    lock_acquired_at: datetime
    lock_duration: int = Field(description="Seconds since the claim was taken")
    phase_history: list[PhaseChange]


class WorkflowChange(_Camel):
    issue_number: int
    previous_phase: WorkflowPhase
    current_phase: WorkflowPhase
    branch_name: str | None = Field(description="Set from the branch phase on")
    tests_passed: bool | None
    skipped: list[WorkflowPhase] = Field(description="Phases passed over by this change")
    skip_justification: str | None
    tests_gate: Literal["passed", "justified"] | None = Field(
        description="How the move into commit was allowed"
    )
    pr_number: int | None
    pr_title: str | None = Field(description="Set from the pr phase on")
