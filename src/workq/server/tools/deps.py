"""Dependencies, named so they cannot be read backwards: ``blocker`` before ``blocked``."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import NUMBER_MAX, Issue
from workq.server.registry import Registry, writes
from workq.server.results import ok, worded

Blocker = Annotated[
    int, Field(strict=True, ge=1, le=NUMBER_MAX, description="The issue that must be done first")
]
Blocked = Annotated[
    int, Field(strict=True, ge=1, le=NUMBER_MAX, description="The issue that waits for it")
]


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def issue_depend(blocker: Blocker, blocked: Blocked) -> Annotated[CallToolResult, Issue]:
        """Make `blocked` wait until `blocker` is done. Cycles are refused."""
        from workq.services.queue import dependencies

        with worded(f"Could not make #{blocked} wait for #{blocker}"):
            issue = dependencies.depend(
                state.queue(), blocker=blocker, blocked=blocked, actor=state.run_id
            )
        text = f"Issue #{blocked} now waits for #{blocker} ({issue.open_blockers} not done)"
        if issue.claimed_by and issue.open_blockers:
            text += (
                f"; {issue.claimed_by} keeps its claim but cannot complete it until then "
                "(its next claim or heartbeat says so)"
            )
        return ok(text, issue)

    @reg.tool(writes(idempotent=True))
    def issue_undepend(blocker: Blocker, blocked: Blocked) -> Annotated[CallToolResult, Issue]:
        """Stop `blocked` waiting for `blocker`."""
        from workq.services.queue import dependencies

        with worded(f"Could not remove the dependency of #{blocked} on #{blocker}"):
            issue = dependencies.undepend(
                state.queue(), blocker=blocker, blocked=blocked, actor=state.run_id
            )
        text = f"Issue #{blocked} no longer waits for #{blocker} ({issue.open_blockers} not done)"
        return ok(text, issue)
