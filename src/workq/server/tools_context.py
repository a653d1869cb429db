"""The workflow server's discovery tools (contract E, profile ``workflow-server``):
get_work_context and search_documentation. Both read only: the queue, the checkout's branch,
the repository's docs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from workq.schemas import DocResults, WorkContext
from workq.server.params import Flag
from workq.server.registry import Registry
from workq.server.results import ok

Scope = Literal[
    "all", "architecture", "coding_standards", "development", "reference", "implementation"
]

# Contract E declares both tools idempotent: said outright (MCP reads idempotentHint only on
# tools that write, but a client deciding on retries may look at it alone).
READ_ONLY_IDEMPOTENT = ToolAnnotations(
    read_only_hint=True, idempotent_hint=True, open_world_hint=False
)


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def get_work_context(
        include_closed_recent: Flag = False,
    ) -> Annotated[CallToolResult, WorkContext]:
        """Where you stand: the active issue (from the branch name, else your claim) with
        its acceptance criteria, your claims, next ready issues, blockers, your plan."""
        from workq.services import work_context

        found = work_context.gather(
            state.queue(),
            run_id=state.run_id,
            holders=state.holders(),
            branch=work_context.checkout_branch(Path.cwd()),
            include_closed_recent=include_closed_recent,
        )
        return ok(work_context.text(found), found)

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def search_documentation(
        query: Annotated[str, Field(min_length=1, max_length=500)],
        scope: Scope = "all",
    ) -> Annotated[CallToolResult, DocResults]:
        """Ranked full-text search (bm25) over the repository's Markdown docs: top 10
        files with title, snippet, line and relevance_score (1 = best hit)."""
        from workq.services import docs_index

        found = docs_index.search(Path.cwd(), query, scope, state.settings.cache_folder)
        return ok(docs_index.text(found, query), found)
