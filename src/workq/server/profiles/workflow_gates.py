"""The workflow server's run_quality_gates (contract E, profile ``workflow-server``): the
``coding`` toolset's issue_gates under the contract's name and arguments."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import GateReport
from workq.server.params import Number, RunId
from workq.server.registry import Registry, writes
from workq.server.tools.coding import FILES_MAX, File, GateRef, gates_answer


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def run_quality_gates(
        files: Annotated[
            list[File],
            Field(
                max_length=FILES_MAX,
                description="Paths relative to the checkout; [] = the whole checkout",
            ),
        ],
        include_tests: bool = True,
        gates: Annotated[list[GateRef] | None, Field(max_length=20)] = None,
        issue_number: Annotated[
            Number | None, Field(description="Default: the one issue this session holds")
        ] = None,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, GateReport]:
        """Run the repository's quality gates (workq.toml / pyproject [tool.workq.gates])
        on the issue's checkout. Stored as evidence: with files=[] on a clean tree, it is
        what testsPassed and merges need."""
        return gates_answer(
            state,
            issue_number,
            files,
            include_tests=include_tests,
            gates=gates,
            run_id=run_id,
        )
