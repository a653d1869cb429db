"""The queue's issue tools (contract A): create, list, get, update, delete."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import DESCRIPTION_MAX, PAGE_DEFAULT, Issue
from workq.server.outputs import IssueList, ListedIssue
from workq.server.params import (
    Agent,
    Cursor,
    Description,
    Flag,
    Labels,
    Limit,
    Number,
    PriorityName,
    Repo,
    StatusName,
    Title,
    Touches,
    TypeName,
)
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.render import issue_text, list_text, page_footer
from workq.server.results import ok, worded

Notes = Annotated[str, Field(max_length=DESCRIPTION_MAX)]
Criteria = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=500)]], Field(max_length=50)
]


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def issue_create(
        title: Title,
        description: Description | None = None,
        priority: PriorityName = "medium",
        issue_type: TypeName = "task",
        agent: Agent | None = None,
        labels: Labels | None = None,
        touches: Touches | None = None,
        context: Annotated[Notes | None, Field(description="Background")] = None,
        acceptance_criteria: Criteria | None = None,
        technical_notes: Notes | None = None,
        repository: Repo | None = None,
    ) -> CallToolResult:
        """Create an issue. context, acceptance_criteria and technical_notes go into the
        description under their own headings."""
        from workq.services.queue import issues

        with worded("Could not create issue"):
            created = issues.create(
                state.queue(),
                title=title,
                description=description,
                priority=priority,
                issue_type=issue_type,
                agent=agent,
                labels=labels or (),
                touches=touches or (),
                actor=state.run_id,
                context=context,
                acceptance_criteria=acceptance_criteria,
                technical_notes=technical_notes,
                repository=repository,
            )
        text = f"Created issue #{created.number}: {created.title} (agent: {created.agent})"
        return ok(text, created.summary())

    @reg.tool(READ_ONLY)
    def issue_list(
        status: StatusName | None = None,
        priority: PriorityName | None = None,
        issue_type: TypeName | None = None,
        agent: Agent | None = None,
        label: Annotated[str | None, Field(max_length=64)] = None,
        include_description: Flag = False,
        limit: Limit = PAGE_DEFAULT,
        cursor: Cursor | None = None,
    ) -> Annotated[CallToolResult, IssueList]:
        """List issues by number, optionally filtered. Compact items; a page at a time."""
        from workq.services.queue import issues, listing

        q = state.queue()
        page = listing.list_issues(
            q,
            status=status,
            priority=priority,
            issue_type=issue_type,
            agent=agent,
            label=label,
            limit=limit,
            cursor=cursor,
        )
        items = [ListedIssue(**item.model_dump()) for item in page.items]
        if include_description:
            items = [
                item.model_copy(update={"description": issues.get(q, item.number).description})
                for item in items
            ]
        if not items:
            text = "No issues found"
        else:
            text = list_text(items)  # contract A's array; a further page is named below it
            text += page_footer("issue_list", len(items), page.next_cursor)
        listed = IssueList(items=items, has_more=page.has_more, next_cursor=page.next_cursor)
        # Compact items: no "description": null when descriptions were not asked for.
        return ok(text, listed.model_dump(mode="json", exclude_none=True))

    @reg.tool(READ_ONLY)
    def issue_get(number: Number) -> Annotated[CallToolResult, Issue]:
        """Get one issue in full: description, claim, blockers, labels."""
        from workq.services.sync import pulls
        from workq.services.workspaces import landings, worktrees

        q = state.queue()
        issue = worktrees.issue(q, number)
        pull = pulls.of_issue(q, number)
        landing = landings.get(q, number)
        if pull is None and landing is None:
            return ok(issue_text(issue.model_dump(mode="json")), issue)
        # The pull request submit_pr or the landing queue opened, and where the landing
        # stands: extra keys, so the output schema (and the default tools/list) stays.
        data = issue.model_dump(mode="json")
        if pull is not None:
            data["pull_request"] = {
                "number": pull.pr_number,
                "url": pull.url,
                "merged": pull.merged_at is not None,
            }
        if landing is not None:
            data["landing"] = landing.model_dump(
                mode="json",
                include={"state", "detail", "pr_number", "merge_sha", "head_sha", "rounds"},
            )
            if landing.failure is not None:  # refused: what to repair (checks, reviews)
                failure = landing.failure.model_dump(mode="json", exclude_defaults=True)
                data["landing"]["failure"] = failure
        return ok(issue_text(data), data)

    @reg.tool(writes(idempotent=True))
    def issue_update(
        number: Number,
        title: Title | None = None,
        description: Description | None = None,
        priority: PriorityName | None = None,
        issue_type: TypeName | None = None,
        agent: Agent | None = None,
        add_labels: Labels | None = None,
        remove_labels: Labels | None = None,
        touches: Touches | None = None,
        repository: Repo | None = None,
    ) -> CallToolResult:
        """Change an issue's fields; omitted fields stay as they are (touches: the whole
        list, [] clears it)."""
        from workq.services.queue import issues

        with worded(f"Could not update issue #{number}"):
            updated = issues.update_issue(
                state.queue(),
                number,
                title=title,
                description=description,
                priority=priority,
                issue_type=issue_type,
                agent=agent,
                add_labels=add_labels or (),
                remove_labels=remove_labels or (),
                touches=touches,
                repository=repository,
                by=state.authority(),
                actor=state.run_id,
            )
        return ok(f"Updated issue #{number}", updated.summary())

    @reg.tool(writes(idempotent=False, destructive=True))
    def issue_delete(number: Number) -> CallToolResult:
        """Delete an issue for good (cleanup and tests). Its history stays."""
        from workq.services.queue import issues

        with worded(f"Could not delete issue #{number}"):
            gone = issues.delete_issue(
                state.queue(), number, by=state.authority(), actor=state.run_id
            )
        return ok(f"Deleted issue #{number}", gone.summary())
