"""The issue-priority server's advance_workflow and get_workflow_status (contract B,
profile ``issue-priority``) for the issues this server's run ids hold."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from workq.domain.workflow import JUSTIFICATION_MAX, WorkflowPhase
from workq.plan_schemas import WorkflowChange, WorkflowStatus
from workq.server.params import Description, Flag, Number, Title
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import clip, ok, when, worded

Target = Literal[
    "research", "branch", "implementation", "testing", "commit", "pr", "review", "abandoned"
]
Justification = Annotated[
    str,
    Field(max_length=JUSTIFICATION_MAX, description="Required to skip phases or the tests"),
]


class WorkflowAdvanced(BaseModel):
    model_config = ConfigDict(frozen=True)

    success: bool = True
    workflow: WorkflowChange


class WorkflowStatuses(BaseModel):
    model_config = ConfigDict(frozen=True)

    success: bool = True
    workflows: list[WorkflowStatus]


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _status_text(item: WorkflowStatus) -> str:
    tests = {True: "passed", False: "failed", None: "-"}[item.tests_passed]
    lines = [
        f"#{item.issue_number} {item.current_phase.value}: {clip(item.title)}",
        f"  branch {item.branch_name or '-'} · tests {tests} · locked by {item.lock_holder}"
        f" for {_duration(item.lock_duration)} (since {when(item.lock_acquired_at)})",
    ]
    if item.phase_history:
        steps = ", ".join(
            f"{h.from_.value}->{h.to.value} {when(h.timestamp)}" for h in item.phase_history[-8:]
        )
        lines.append(f"  history: {steps}")
    return "\n".join(lines)


def _change_text(change: WorkflowChange) -> str:
    text = (
        f"Issue #{change.issue_number}: {change.previous_phase.value} -> "
        f"{change.current_phase.value}"
    )
    if change.skipped:
        skipped = ", ".join(p.value for p in change.skipped)
        text += f"\nSkipped: {skipped} ({clip(change.skip_justification or '')})"
    if change.tests_gate == "passed":
        text += "\nTests: passed"
    elif change.tests_gate == "justified":
        text += f"\nTests skipped: {clip(change.skip_justification or '')}"
    if change.branch_name and change.current_phase is not WorkflowPhase.ABANDONED:
        text += f"\nBranch: {change.branch_name}"
    if change.pr_title and change.current_phase in (WorkflowPhase.PR, WorkflowPhase.REVIEW):
        text += f"\nPR title: {clip(change.pr_title)}"
    if change.current_phase is WorkflowPhase.ABANDONED:
        text += "\nThe claim is still yours: give it up with issue_release"
    return text


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def advance_workflow(
        targetPhase: Target,
        issueNumber: Annotated[
            Number | None, Field(description="Default: the one issue this session holds")
        ] = None,
        skipJustification: Justification | None = None,
        testsPassed: Annotated[
            Flag | None, Field(description="Required to move from testing to commit")
        ] = None,
        prTitle: Title | None = None,
        prBody: Description | None = None,
    ) -> Annotated[CallToolResult, WorkflowAdvanced]:
        """Move a claimed issue's workflow: selection -> research -> branch ->
        implementation -> testing -> commit -> pr -> review, or to abandoned. Skipping
        needs skipJustification; testing -> commit needs testsPassed=true or
        skipJustification; testsPassed=true needs the quality gates passed on the issue's
        checkout (run now if not yet), unless the server trusts. Records the branch name
        and PR title/body; creates neither."""
        from workq.services.plans import workflow

        prefix = "Could not advance the workflow"
        if issueNumber is not None:
            prefix += f" of issue #{issueNumber}"
        with worded(prefix):
            change = workflow.advance(
                state.queue(),
                issueNumber,
                state.authority(),
                targetPhase,
                tests_passed=testsPassed,
                skip_justification=skipJustification,
                pr_title=prTitle,
                pr_body=prBody,
                here=Path.cwd(),
            )
        return ok(_change_text(change), WorkflowAdvanced(workflow=change))

    @reg.tool(READ_ONLY)
    def get_workflow_status(
        issueNumber: Annotated[
            Number | None, Field(description="Default: every issue this session holds")
        ] = None,
    ) -> Annotated[CallToolResult, WorkflowStatuses]:
        """Workflow phase, branch, tests, PR, lock duration and phase history of the issues
        this session holds."""
        from workq.services.plans import workflow

        prefix = "Could not read the workflow"
        if issueNumber is not None:
            prefix += f" of issue #{issueNumber}"
        with worded(prefix):
            found = workflow.status(state.queue(), issueNumber, state.authority())
        if not found:
            text = "This session holds no claimed issues"
        else:
            text = "\n".join(_status_text(item) for item in found)
        return ok(text, WorkflowStatuses(workflows=found))
