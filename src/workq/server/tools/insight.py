"""Read-only views: the backlog with priority scores, full-text search, queue statistics."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import PAGE_DEFAULT, Backlog, IssueType, SearchPage, Stats
from workq.server.params import Cursor, Limit, StatusName, Types
from workq.server.registry import READ_ONLY, Registry
from workq.server.render import page_footer
from workq.server.results import clip, ok

BACKLOG_DEFAULT = 20


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY)
    def issue_backlog(
        include_types: Types | None = None,
        exclude_types: Types | None = None,
        limit: Annotated[int, Field(strict=True, ge=1, le=100)] = BACKLOG_DEFAULT,
    ) -> Annotated[CallToolResult, Backlog]:
        """Issues not done, best first, with priority score, age in days and lock holder."""
        from workq.services.queue import reports

        found = reports.backlog(
            state.queue(),
            include_types=[IssueType(t) for t in include_types or ()],
            exclude_types=[IssueType(t) for t in exclude_types or ()],
            limit=limit,
        )
        lines = [
            f"#{i.number} score {i.priority_score:g} {i.priority.value} {i.issue_type.value}"
            f" {i.age_in_days:g}d: {clip(i.title)}"
            + (f" (locked by {i.locked_by})" if i.is_locked else "")
            + (" (blocked)" if i.is_blocked else "")
            for i in found.backlog
        ]
        if not lines:
            return ok("The backlog is empty", found)
        if found.total > len(lines):
            lines.append(f"Showing {len(lines)} of {found.total}; raise limit to see more")
        return ok("\n".join(lines), found)

    @reg.tool(READ_ONLY)
    def issue_search(
        query: Annotated[str, Field(min_length=1, max_length=500, description="Words to find")],
        status: StatusName | None = None,
        limit: Limit = PAGE_DEFAULT,
        cursor: Cursor | None = None,
    ) -> Annotated[CallToolResult, SearchPage]:
        """Full-text search over titles and descriptions (every word, as a prefix), best
        match first."""
        from workq.services.queue import search

        page = search.search(state.queue(), query, status=status, limit=limit, cursor=cursor)
        if not page.items:
            return ok(f"No issues match {query!r}", page)
        text = "\n".join(
            f"#{h.number} [{h.status.value}] {clip(h.title)}: {clip(h.snippet, 160)}"
            for h in page.items
        )
        return ok(text + page_footer("issue_search", len(page.items), page.next_cursor), page)

    @reg.tool(READ_ONLY)
    def queue_stats() -> Annotated[CallToolResult, Stats]:
        """Counts: by status and priority, ready, blocked, claimed, stale claims."""
        from workq.services.queue import reports

        stats = reports.stats(state.queue())
        text = (
            f"{stats.total} issues: "
            + ", ".join(f"{n} {s}" for s, n in stats.by_status.items())
            + f"; ready {stats.ready}, blocked {stats.blocked}, claimed {stats.claimed}"
            + f", stale claims {stats.stale_claims}"
        )
        return ok(text, stats)
