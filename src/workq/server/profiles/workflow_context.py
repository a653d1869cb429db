"""The workflow server's discovery tools (contract E, profile ``workflow-server``):
get_work_context and search_documentation, the ``coding`` toolset's work_context and
docs_search under the contract's names."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult

from workq.schemas import DocResults, WorkContext
from workq.server.params import Flag
from workq.server.registry import Registry
from workq.server.tools.coding import (
    READ_ONLY_IDEMPOTENT,
    Query,
    Scope,
    context_answer,
    docs_answer,
)


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def get_work_context(
        include_closed_recent: Flag = False,
    ) -> Annotated[CallToolResult, WorkContext]:
        """Where you stand: the active issue (from the branch name, else your claim) with
        its acceptance criteria, your claims, next ready issues, blockers, your plan."""
        return context_answer(state, include_closed_recent)

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def search_documentation(
        query: Query, scope: Scope = "all"
    ) -> Annotated[CallToolResult, DocResults]:
        """Ranked full-text search (bm25) over the repository's docs (.md, .rst, .txt): top 10
        files with title, snippet, line and relevance_score (1 = best hit)."""
        return docs_answer(state, query, scope)
