"""Comments on issues and their audit history."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import Field

from workq.errors import NotFound
from workq.schemas import COMMENT_MAX, PAGE_MAX, Comment
from workq.server.outputs import History
from workq.server.params import Number, RunId
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import clip, ok, when, worded

Kind = Literal["note", "progress", "question", "blocker", "resolution"]
HISTORY_DEFAULT = 50


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def issue_comment(
        number: Number,
        body: Annotated[str, Field(min_length=1, max_length=COMMENT_MAX, description="Markdown")],
        kind: Kind = "note",
        run_id: Annotated[RunId, Field(description="Author; default: this server's run id")] = None,
    ) -> Annotated[CallToolResult, Comment]:
        """Add a comment to an issue: a note, progress, question, blocker or resolution."""
        from workq.services.queue import notes

        with worded(f"Could not comment on issue #{number}"):
            comment = notes.comment(
                state.queue(), number, body, kind=kind, author=state.authority(run_id).acts_as
            )
        return ok(f"Commented on issue #{number} ({comment.kind.value} {comment.id})", comment)

    @reg.tool(READ_ONLY)
    def issue_history(
        number: Number,
        limit: Annotated[int, Field(strict=True, ge=1, le=PAGE_MAX)] = HISTORY_DEFAULT,
        after_id: Annotated[int, Field(strict=True, ge=0, description="Events after this id")] = 0,
    ) -> Annotated[CallToolResult, History]:
        """What happened to an issue, oldest first (who, what, when), and its latest
        comments. Works for deleted issues too."""
        from workq.services.queue import notes

        q = state.queue()
        events = notes.history(q, number, limit=limit + 1, after_id=after_id)
        try:
            comments = notes.comments(q, number, limit=limit)
        except NotFound:  # a deleted issue has history but no comments
            comments = []
        has_more = len(events) > limit
        events = events[:limit]
        lines = [
            f"{when(e.created_at)} {e.kind}" + (f" by {e.actor}" if e.actor else "") for e in events
        ]
        lines += [
            f"{when(c.created_at)} {c.kind.value} comment"
            + (f" by {c.author}" if c.author else "")
            + f": {clip(c.body, 200)}"
            for c in comments
        ]
        next_after = events[-1].id if has_more else None
        if has_more:
            lines.append(f"More events: call issue_history again with after_id={next_after}")
        return ok(
            "\n".join(lines) or f"Issue #{number}: no events after {after_id}",
            History(events=events, comments=comments, has_more=has_more, next_after_id=next_after),
        )
