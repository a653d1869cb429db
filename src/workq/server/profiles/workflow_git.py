"""The workflow server's git steps (contract E, profile ``workflow-server``) by their own
names and shapes: a feature branch, an issue started on its branch, TDD phase commits, the
merge into the default branch, and comments with its prefixes. The server's checkout is the
git work tree ``workq serve`` runs in; an issue with a worktree is worked on there instead."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from workq.schemas import (
    COMMENT_MAX,
    NUMBER_MAX,
    BranchCreated,
    BranchLinked,
    MergedToMain,
    TddCommit,
    WorkStarted,
)
from workq.server.params import Number
from workq.server.registry import Registry, writes
from workq.server.results import ok

BranchType = Literal["feature", "fix", "refactor", "docs"]
Phase = Literal["red", "green", "refactor", "docs"]
CommentType = Literal["progress", "question", "blocker", "resolution"]
Short = Annotated[str, Field(min_length=1, max_length=40)]
Which = Annotated[
    int | None,
    Field(strict=True, ge=1, le=NUMBER_MAX, description="The issue, when you hold several"),
]
# Room for the prefix a comment type adds.
BODY_MAX = COMMENT_MAX - 64


class CommentAdded(BaseModel):
    comment_id: int
    issue_number: int
    body: str


def _where() -> Path:
    """The server's checkout: the work tree ``workq serve`` was started in."""
    return Path.cwd()


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def create_feature_branch(
        branch_type: BranchType,
        name: Annotated[
            str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9-]+$", description="kebab")
        ],
    ) -> Annotated[CallToolResult, BranchCreated]:
        """Create {branch_type}/{name} from the default branch and switch the server's
        checkout to it (which must be clean)."""
        from workq.services.workspaces import gitflow

        made = gitflow.create_feature_branch(
            state.queue(), _where(), branch_type, name, actor=state.run_id
        )
        return ok(f"Created {made.branch_name} from {made.created_from}", made)

    @reg.tool(writes(idempotent=True))
    def link_issue_to_branch(
        issue_number: Number, move_to_in_progress: bool = True
    ) -> Annotated[CallToolResult, BranchLinked]:
        """Link an open issue to the current (non-default) branch; move_to_in_progress
        claims it for you."""
        from workq.services.workspaces import gitflow

        by = state.authority()
        linked = gitflow.link_issue_to_branch(
            state.queue(),
            _where(),
            issue_number,
            by=by,
            move_to_in_progress=move_to_in_progress,
        )
        if move_to_in_progress and by.acts_as is not None:
            state.claimed_with(by.acts_as)
        return ok(f"Linked issue #{issue_number} to {linked.branch_name}", linked)

    @reg.tool(writes(idempotent=False))
    def start_work_on_issue(
        issue_number: Number,
        branch_type: BranchType = "feature",
        worktree: Annotated[
            bool | None, Field(strict=True, description="Own worktree (default: repo's setting)")
        ] = None,
    ) -> Annotated[CallToolResult, WorkStarted]:
        """Claim an issue, put it on branch {branch_type}/{number}-{slug} and link them;
        returns its acceptance criteria and the path to work in."""
        from workq.services.workspaces import gitflow

        by = state.authority()
        started = gitflow.start_work_on_issue(
            state.queue(),
            _where(),
            issue_number,
            by=by,
            branch_type=branch_type,
            worktree=worktree,
        )
        if by.acts_as is not None:
            state.claimed_with(by.acts_as)
        again = " (resumed)" if started.resumed else ""
        return ok(f"Working on issue #{issue_number} on {started.branch_name}{again}", started)

    @reg.tool(writes(idempotent=False))
    def commit_tdd_phase(
        phase: Phase,
        component: Annotated[str, Field(min_length=1, max_length=100)],
        details: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=500)]] | None,
            Field(max_length=30),
        ] = None,
        test_count: Short | None = None,
        quality_gates: Short | None = None,
        issue_number: Which = None,
    ) -> Annotated[CallToolResult, TddCommit]:
        """Commit every change as a TDD phase (red=test:, green=feat:, refactor, docs) in
        Conventional Commits form; a red commit may hold tests only (TDD-001)."""
        from workq.services.workspaces import gitflow

        done = gitflow.commit_tdd_phase(
            state.queue(),
            _where(),
            phase,
            component,
            by=state.authority(),
            actor=state.run_id,
            details=details or (),
            test_count=test_count,
            quality_gates=quality_gates,
            number=issue_number,
        )
        return ok(f"Committed {done.commit_hash[:12]}: {done.commit_message.splitlines()[0]}", done)

    @reg.tool(writes(idempotent=False, destructive=True))
    def merge_to_main(
        merge_strategy: Literal["no-ff", "squash"] = "no-ff",
        delete_branch: bool = True,
        issue_number: Which = None,
    ) -> Annotated[CallToolResult, MergedToMain]:
        """Merge the issue's branch into the default branch once its checkout is clean and
        the quality gates pass, and complete the issue."""
        from workq.services.workspaces import to_main

        done = to_main.merge_to_main(
            state.queue(),
            _where(),
            by=state.authority(),
            actor=state.run_id,
            strategy=merge_strategy,
            delete_branch=delete_branch,
            number=issue_number,
            lease_seconds=state.settings.merge_lease_seconds,
        )
        said = "Already merged" if done.already_merged else "Merged"
        note = f" ({done.note})" if done.note else ""
        return ok(
            f"{said} {done.merged_branch} into {done.target_branch} at {done.commit_hash[:12]}; "
            f"issue #{done.issue_number} done{note}",
            done,
        )

    @reg.tool(writes(idempotent=False))
    def add_issue_comment(
        issue_number: Number,
        body: Annotated[str, Field(min_length=1, max_length=BODY_MAX, description="Markdown")],
        comment_type: CommentType | None = None,
    ) -> Annotated[CallToolResult, CommentAdded]:
        """Comment on an issue; comment_type adds its prefix (e.g. [Progress])."""
        from workq.services.workspaces import gitflow

        added = gitflow.add_issue_comment(
            state.queue(), issue_number, body, comment_type, author=state.run_id
        )
        out = CommentAdded(comment_id=added.id, issue_number=issue_number, body=added.body)
        return ok(f"Commented on issue #{issue_number} (comment {added.id})", out)
